"""Input readers: turn the files evaluation harnesses write into tidy pandas tables.

Every reader returns frames in the public formats of :mod:`audit_hub.frame.core`:

* questions: ``question_id, question, options (list[str]), answer, answer_type, category,
  l2_category, group_id, hint`` (not yet validated);
* runs (long): ``question_id, model, arm, prediction, answer, hit[, hit_exact]`` where ``answer`` is
  the *model's extracted* answer (never the gold), plus ``source_file`` and ``source_row``
  (1-based data row in that file) so that validation errors name the file and the row.

Rules shared by all readers (kept here so they are the same everywhere):

* no reader decodes images (image columns are skipped while reading, or dropped at once) and no
  reader unpickles anything: a ``.pkl`` file is refused with :class:`~audit_hub.errors.InputError`;
* text files must be UTF-8 (a UTF-8 byte-order mark is accepted); otherwise the error names the
  byte offset and the line;
* question IDs are strings (VLMEvalKit's integer ``index`` 12 becomes ``"12"``);
* cell content is never evaluated: list-valued cells are parsed as JSON only.

Modules:

* :mod:`.fileio` -- file I/O: table files into DataFrames, JSON lines, UTF-8 checks, pickles refused;
* :mod:`.cells` -- column and cell helpers every format mapping shares (:class:`~.cells.ReadResult`);
* :mod:`.dispatch` -- which reader reads a file (questions files; run files, folders and globs);
* :mod:`.merge` -- several run files into one runs table;
* format mappings: :mod:`.generic` (any long table), :mod:`.vlmevalkit`, :mod:`.lmms_eval`,
  :mod:`.mathv`, :mod:`.hf` (Hub datasets and Hub-layout folders).
"""
