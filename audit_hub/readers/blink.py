"""BLINK (github.com/zeyofu/BLINK_Benchmark) saved outputs: ``eval/saved_outputs/<model>/<Subtask>.json``.

Each file is one model on one subtask: ``{"val": [{"idx", "answer", "full_prediction", "prediction"}, ...]}``
(the concatenated-image variants also hold ``"test"``). ``idx`` is ``val_<Subtask>_<n>``; ``answer`` the gold
choice and ``prediction`` the choice BLINK's ``multiple_choice.py`` read from the model's output, both as
``"(A)"``; ``"(Z)"`` means no choice was found. BLINK's ``evaluate.py`` counts a prediction right when it
equals the gold.

Mapping: question ID ``idx``; category the subtask; options their letters, as many as the subtask has
(:data:`OPTIONS`, the BLINK paper's Table 1: the repository holds no question or option texts, which are in
the Hugging Face dataset ``BLINK-Benchmark/BLINK``), so the question text says the item and where its text
is; gold the letter of ``answer``; prediction ``full_prediction``; the model's answer the letter of
``prediction`` (none for ``"(Z)"`` or a letter beyond the subtask's options); hit ``prediction == answer``,
recorded as the judge ``BLINK evaluate.py (prediction == answer)``. Model: the ``<model>`` folder.
Benchmark: ``BLINK_val``; the "concatenate images" variants (a folder named so, files ``*_concat.json``)
order some items' options differently, so their golds differ from the plain runs' on 129 items: they are the
benchmark ``BLINK_val_concat``, audited on their own. Only the ``val`` split is read (BLINK's test golds
are not released). The combined files beside them (:func:`combined_file`: test predictions without golds,
the merged val predictions, the answer key) are skipped in a folder and refused when named.
"""

from __future__ import annotations

import os
import re

from ..errors import InputError
from ..escape import show_id
from ..schema import LETTERS
from .cells import ReadResult, cell_to_str
from .fileio import json_head, load_json_document
from .sample_rows import Sample, result_from_samples

KIND = "blink-output"
JUDGE = "BLINK evaluate.py (prediction == answer)"
SPLIT = "val"
#: options per subtask (the BLINK paper's Table 1; the golds and the strong models' answers agree)
OPTIONS = {"Art_Style": 2, "Counting": 4, "Forensic_Detection": 4, "Functional_Correspondence": 4,
           "IQ_Test": 4, "Jigsaw": 2, "Multi-view_Reasoning": 2, "Object_Localization": 2,
           "Relative_Depth": 2, "Relative_Reflectance": 3, "Semantic_Correspondence": 4,
           "Spatial_Relation": 2, "Visual_Correspondence": 4, "Visual_Similarity": 2}
_IDX = re.compile(r"^(val|test)_(.+)_(\d+)$")


def is_output_file(path: str) -> bool:
    h = json_head(path)
    return h.startswith(b"{") and b'"val"' in h and b'"idx"' in h and b'"prediction"' in h \
        and b'"val_' in h


def combined_file(path: str) -> str | None:
    """What one of BLINK's combined files is (``{"<split>_<Subtask>_<n>": "(A)", ...}``, no model outputs), or
    None: ``eval/saved_test_predictions/<model>.json`` (test predictions: the test golds are not released),
    ``eval/saved_val_predictions/<model>.json`` (the val choices of ``saved_outputs``, merged) or
    ``eval/val_answers.json`` (the val golds, which ``saved_outputs`` carry too)."""
    h = json_head(path)
    if not (h.startswith(b"{") and re.match(rb'\{\s*"(val|test)_[A-Za-z_-]+_\d+"\s*:\s*"\(', h)):
        return None
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if folder == "saved_test_predictions":
        return "BLINK's test predictions hold no golds (the test answers are not released)"
    if folder == "saved_val_predictions":
        return "BLINK's merged val predictions hold only the chosen letters"
    if os.path.basename(path) == "val_answers.json":
        return "BLINK's val answer key (the saved_outputs files carry the golds)"
    return None


def choice_letter(s) -> str | None:
    """The letter of ``"(B)"`` (also ``"(B) the third image"``); None for ``"(Z)"`` (no choice found) or text."""
    t = str(s or "").strip()
    return t[1] if len(t) >= 3 and t[0] == "(" and t[2] == ")" and t[1] in LETTERS and t[1] != "Z" else None


def is_concat(path: str) -> bool:
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return "concatenate" in folder.lower() or os.path.basename(path).endswith("_concat.json")


def read_outputs(path: str, *, arm: str = "full", model: str | None = None) -> ReadResult:
    """One BLINK saved-output file (one model, one subtask) -> runs and questions (val split)."""
    obj = load_json_document(path)
    recs = obj.get(SPLIT) if isinstance(obj, dict) else None
    if not isinstance(recs, list) or not recs:
        raise InputError(f"not a BLINK saved-output file (expected an object with a {SPLIT!r} list)", file=path)
    samples: list[Sample] = []
    answers: list[str | None] = []
    for row, r in enumerate(recs, start=1):
        if not isinstance(r, dict):
            raise InputError("a record is not an object", file=path, row=row)
        for col in ("idx", "answer", "prediction"):
            if col not in r:
                raise InputError(f"missing key {col!r}", file=path, row=row, column=col)
        idx = str(r["idx"])
        m = _IDX.match(idx)
        if m is None or m.group(2) not in OPTIONS:
            raise InputError(f"idx {show_id(idx)} is not val_<subtask>_<n> of a BLINK subtask "
                             f"({', '.join(OPTIONS)})", file=path, row=row, column="idx")
        task, k = m.group(2), OPTIONS[m.group(2)]
        gold = choice_letter(r["answer"])
        if gold is None or LETTERS.index(gold) >= k:
            raise InputError(f"gold {r['answer']!r} of {show_id(idx)} is not one of ({LETTERS[:k]})", file=path,
                             row=row, column="answer")
        a = choice_letter(r["prediction"])
        answers.append(a if a is not None and LETTERS.index(a) < k else None)
        fields = {"question": f"BLINK {task} item {m.group(3)} (question text not in the source)",
                  "options": list(LETTERS[:k]), "answer": gold, "answer_type": "mc", "category": task}
        samples.append(Sample(idx, cell_to_str(r.get("full_prediction")), int(r["prediction"] == r["answer"]),
                              row, fields))
    name = model or os.path.basename(os.path.dirname(os.path.abspath(path))) or "model"
    info = {"task": f"BLINK_{SPLIT}_concat" if is_concat(path) else f"BLINK_{SPLIT}", "harness": "BLINK",
            "harness_version": "not recorded in BLINK's output files"}
    # the answers: BLINK's own choice extraction, as letters
    return result_from_samples(path, KIND, samples, model=name, arm=arm, judge=JUDGE, info=info, answers=answers)
