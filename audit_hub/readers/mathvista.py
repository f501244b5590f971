"""MathVista (github.com/lupantech/MathVista) result files: ``results/<model>/output_<name>.json``.

Each file is one run of one model: a JSON object keyed by the problem ID (``pid``), each value the problem
as released (``question``, ``choices``, ``answer``, ``question_type`` = ``multi_choice`` | ``free_form``,
``answer_type`` = ``text`` | ``integer`` | ``float`` | ``list``, ``metadata`` with ``split``, ``task``,
``context``, ``source``) plus the run: ``response`` (the model's output), ``extraction`` (the answer its
GPT-4 extractor read from the response), ``prediction`` (the extraction normalised: on multiple-choice
problems one of the ``choices``) and ``true_false`` (MathVista's own verdict).

Mapping: question ID ``pid``; question ``question``; options ``choices`` (multiple choice only); gold
``answer`` (on multiple choice the option text: its letter, the first one where two choices have the same text,
as in ``pid`` 781 of testmini); answer type ``mc``,
``numeric`` (integer, float) or ``free`` (text, list); category ``metadata.task``, ``l2_category``
``metadata.context``; prediction ``response``; the model's answer: on multiple choice the letter of the
choice equal to ``prediction`` (none when it equals none), else ``prediction``; hit ``true_false``, recorded
as the judge ``MathVista evaluation (true_false)``; in a scored file a problem without ``true_false`` (its
evaluation stored none, e.g. after a refusal) is wrong, as ``evaluation/calculate_score.py`` counts it (its
accuracy is the share of ``true_false == True`` over every problem); a file with no verdict at all has
exact-match correctness only. Model: the file name without ``output_`` (``bard``,
``gpt4_2shot_code_use_ocr``, ``random_guess``); benchmark: ``MathVista_<split>`` (``MathVista_testmini``).

The repository's ``results/random/`` runs are baselines (``random_guess``, ``frequent_guess``) and its
``chatgpt``, ``claude`` and ``gpt4`` runs are text-only LLMs (some given captions or OCR text): read from
``--runs`` they go to the blind arm (:func:`text_only_run`, :mod:`audit_hub.readers.named_roles`). The leaderboard's
submission template (``output_testmini_template_for_leaderboard_submission.json``) is an example, not a
run: skipped in a folder, read when named. The ``scores_<name>.json`` beside each output file (its accuracies)
is a summary: skipped in a folder, refused when named.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import InputError
from ..escape import show_id
from ..schema import LETTERS
from .cells import ReadResult, cell_to_str, stem_of
from .fileio import json_head, load_json_document
from .sample_rows import Sample, binary_verdict, result_from_samples

KIND = "mathvista-output"
#: the repository's text-only LLM runs (``results/chatgpt/output_chatgpt.json``, ``claude/output_claude.json``,
#: ``gpt4/output_gpt4.json``: the paper's augmented-LLM baselines, ChatGPT, Claude-2 and GPT-4 given the question,
#: with captions and OCR text where their names say so, never the image), by model name exactly: read as blind-arm
#: runs like any run named as text-only (:mod:`audit_hub.readers.named_roles`; ``--runs-as-given`` keeps them)
TEXT_ONLY_RUNS = {m: "MathVista's text-only LLM runs (the paper's augmented-LLM baselines, no image)"
                  for m in ("chatgpt", "claude", "gpt4")}
#: their few-shot, program-of-thought, caption and OCR variants (``gpt4_2shot_solution_use_caption_ocr``); not
#: ``gpt4v`` (GPT-4V saw the image) nor any other name
_TEXT_ONLY_VARIANT = re.compile(r"^(chatgpt|claude|gpt4)_(\d+shot|zero|few|solution|code|cot|use|caption|ocr)"
                                r"[a-z0-9_]*$")


def text_only_run(model: str) -> str | None:
    """Why MathVista's run ``model`` is text-only (one of the repository's LLM runs or their variants), or None."""
    if model in TEXT_ONLY_RUNS:
        return TEXT_ONLY_RUNS[model]
    m = _TEXT_ONLY_VARIANT.match(model)
    return TEXT_ONLY_RUNS[m.group(1)] if m else None
JUDGE = "MathVista evaluation (true_false)"
_NUMERIC = ("integer", "float")


def is_output_file(path: str) -> bool:
    """A JSON object of MathVista problems (``pid``, ``question_type``, ``answer_type`` in its first record)."""
    h = json_head(path, 16384)
    return h.startswith(b"{") and b'"pid"' in h and b'"question_type"' in h and b'"answer_type"' in h


def is_scores_file(path: str) -> bool:
    """MathVista's ``scores_<name>.json`` (accuracies by type, task, ...: a summary of an output file)."""
    h = json_head(path)
    return (os.path.basename(path).startswith("scores_") and h.startswith(b"{") and b'"average"' in h
            and b'"accuracy"' in h)


def is_template(path: str) -> bool:
    """MathVista's leaderboard submission template (an example file, not a model's run)."""
    name = os.path.basename(path).lower()
    return "template" in name and "leaderboard" in name


def model_name(path: str) -> str:
    stem = stem_of(path)
    return stem[len("output_"):] if stem.startswith("output_") and len(stem) > len("output_") else stem


def _verdict(v: Any, path: str, row: int, pid: str) -> int | None:
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):  # some releases store "True"/"False"
        return int(v.strip().lower() == "true")
    out = binary_verdict(v)
    if out == "non-binary":
        raise InputError(f"problem {show_id(pid)}: true_false is {v!r}, not true/false", file=path, row=row,
                         column="true_false")
    return out


def read_outputs(path: str, *, arm: str = "full", model: str | None = None) -> ReadResult:
    """One MathVista ``output_*.json`` -> runs (one row per problem) and questions."""
    obj = load_json_document(path)
    if not isinstance(obj, dict) or not obj:
        raise InputError("not a MathVista output file (expected an object of problems keyed by pid)", file=path)
    samples: list[Sample] = []
    answers: list[str | None] = []
    splits: set[str] = set()
    for row, (key, r) in enumerate(obj.items(), start=1):
        if not isinstance(r, dict):
            raise InputError(f"problem {show_id(str(key))} is not an object", file=path, row=row)
        for col in ("question_type", "answer"):
            if col not in r:
                raise InputError(f"problem {show_id(str(key))} has no {col!r}", file=path, row=row, column=col)
        pid = cell_to_str(r.get("pid")) or str(key)
        mc = r["question_type"] == "multi_choice"
        choices = [cell_to_str(c) for c in (r.get("choices") or [])] if mc else []
        if mc and not choices:
            raise InputError(f"problem {show_id(pid)} is multiple choice with no choices", file=path, row=row,
                             column="choices")
        md = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
        if md.get("split"):
            splits.add(str(md["split"]))
        gold = cell_to_str(r["answer"])
        if mc and gold in choices:  # the first equal choice: MathVista repeats a choice's text at times
            gold = LETTERS[choices.index(gold)]
        fields = {"question": cell_to_str(r.get("question")), "options": choices, "answer": gold,
                  "answer_type": "mc" if mc else ("numeric" if r.get("answer_type") in _NUMERIC else "free"),
                  "category": cell_to_str(md.get("task")), "l2_category": cell_to_str(md.get("context"))}
        pred = cell_to_str(r.get("prediction"))
        if mc:
            answers.append(LETTERS[choices.index(pred)] if pred in choices else None)
        else:
            answers.append(pred)
        samples.append(Sample(pid, cell_to_str(r.get("response")), _verdict(r.get("true_false"), path, row, pid),
                              row, fields))
    if any(s.hit is not None for s in samples):  # scored: MathVista's score counts a problem without a verdict wrong
        for s in samples:
            s.hit = 0 if s.hit is None else s.hit
    if all(s.prediction is None for s in samples) and all(a is None for a in answers):
        raise InputError("the MathVista file has no responses or predictions (a problems file, not a run)", file=path)
    split = sorted(splits)[0] if len(splits) == 1 else None
    info = {"task": f"MathVista_{split}" if split else "MathVista", "harness": "MathVista",
            "harness_version": "not recorded in MathVista's output files"}
    name = model or model_name(path)
    why = text_only_run(name)
    if why:  # the repository's text-only LLM runs: the blind arm (readers.named_roles)
        info["text_only_run"] = why
    # the answers: MathVista's own extraction, a choice as its letter
    return result_from_samples(path, KIND, samples, model=name, arm=arm, judge=JUDGE, info=info, answers=answers)
