"""MATH-Vision (github.com/mathllm/MATH-V) layout.

* ``data/test.jsonl`` / ``data/testmini.jsonl``: ``id, question, options, answer, solution, level,
  subject, image``. Category = ``subject``; ``l2_category`` = ``"level N"``. ``answer_type``: ``mc``
  when ``options`` is non-empty, else ``numeric`` when the gold parses as a number, else ``free``.
  Many options are bare letters ``['A'..'E']`` (the real options are drawn in the image): they are
  kept as they are (see :func:`audit_hub.readers.options_are_bare_letters`).
* ``outputs/**/<Model>.jsonl``: ``id, model, response, model_answer, correct``. prediction =
  ``response``; answer = ``model_answer`` (MATH-V's normalised text; a single letter becomes the
  upper-case option letter); hit = ``correct``. The model name is the file stem (e.g.
  ``GPT4-CoT (Text Only)``) unless a ``model`` override is given.

MATH-V has no same-model blind run: its text-only run is GPT-4 (``GPT4-CoT (Text Only).jsonl``),
while the image runs are other models. Passing that file as the blind arm therefore gives a
pool-level comparison; to pair it explicitly with a full-arm run, give both the same name with the
``model`` override.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..columns import arrow_strings
from ..errors import InputError
from ..schema import is_null
from .cells import ReadResult, cell_to_str, constant_categorical, stem_of
from .fileio import iter_json_lines

_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
QUESTION_KEYS = frozenset({"id", "question", "options", "answer", "level", "subject"})
OUTPUT_KEYS = frozenset({"id", "response", "correct"})


def is_mathv_questions_record(rec: dict) -> bool:
    return QUESTION_KEYS.issubset(rec)


def is_mathv_output_record(rec: dict) -> bool:
    return OUTPUT_KEYS.issubset(rec) and "doc" not in rec


def _answer_type(options: list[str], gold: str) -> str:
    if options:
        return "mc"
    return "numeric" if _NUM.match(gold.replace(",", "").strip()) else "free"


def read_questions(path: str) -> pd.DataFrame:
    """``data/test.jsonl`` -> public question table (+ ``source_file``, ``source_row``)."""
    rows = []
    for lineno, rec in iter_json_lines(path):
        missing = [k for k in ("id", "question", "answer") if k not in rec]
        if missing:
            raise InputError(f"missing key {missing[0]!r}", file=path, row=lineno, column=missing[0])
        opts = rec.get("options") or []
        if not isinstance(opts, list):
            raise InputError("options must be a JSON list", file=path, row=lineno, column="options")
        options = [str(o) for o in opts]
        gold = cell_to_str(rec["answer"])
        if gold is None:
            raise InputError("gold answer is empty", file=path, row=lineno, column="answer")
        gold = gold.strip()
        level = rec.get("level")
        rows.append({
            "question_id": cell_to_str(rec["id"]),
            "question": rec.get("question") or "",
            "options": options,
            "answer": gold.upper() if options and len(gold) == 1 else gold,
            "answer_type": _answer_type(options, gold),
            "category": cell_to_str(rec.get("subject")),
            "l2_category": None if is_null(level) else f"level {cell_to_str(level)}",
            "group_id": None,
            "hint": None,
            "source_file": path,
            "source_row": lineno,
        })
    if not rows:
        raise InputError("the file has no questions", file=path)
    out = pd.DataFrame(rows)
    for c in ("question_id", "question", "answer", "answer_type", "category", "l2_category", "group_id", "hint"):
        out[c] = pd.Series(out[c].tolist(), dtype=object)
    return out


def read_outputs(path: str, *, arm: str = "full", model: str | None = None,
                 questions: pd.DataFrame | None = None) -> ReadResult:
    """One MATH-V output file -> runs. ``questions`` (optional) limits letter mapping to mc items."""
    ids, preds, answers, hits, lines = [], [], [], [], []
    for lineno, rec in iter_json_lines(path):
        for k in ("id", "response", "correct"):
            if k not in rec:
                raise InputError(f"missing key {k!r}", file=path, row=lineno, column=k)
        ids.append(cell_to_str(rec["id"]))
        preds.append(cell_to_str(rec.get("response")))
        answers.append(cell_to_str(rec.get("model_answer")))
        c = rec.get("correct")
        if is_null(c):
            hits.append(None)
        elif isinstance(c, (bool, int, float)) and float(c) in (0.0, 1.0):
            hits.append(int(c))
        else:
            raise InputError(f"correct must be true/false, got {c!r}", file=path, row=lineno, column="correct")
        lines.append(lineno)
    if not ids:
        raise InputError("the file has no outputs", file=path)
    mc_ids = None
    if questions is not None and "answer_type" in questions.columns:
        mc_ids = set(questions.loc[questions["answer_type"].astype(str) == "mc", "question_id"].astype(str))
    for i, a in enumerate(answers):
        if a is not None and len(a.strip()) == 1 and a.strip().isalpha() and a.strip().upper() in "ABCDEFGHIJ":
            if mc_ids is None or ids[i] in mc_ids:
                answers[i] = a.strip().upper()
    n = len(ids)
    name = model or stem_of(path)
    runs = pd.DataFrame({
        "question_id": ids,
        "model": constant_categorical(name, n),
        "arm": constant_categorical(arm, n),
        "prediction": arrow_strings(preds),
        "answer": arrow_strings(answers),
        "hit": pd.array(hits, dtype="Int8"),
        "source_file": constant_categorical(path, n),
        "source_row": np.asarray(lines, dtype=np.int64),
    })
    return ReadResult(path=path, kind="mathv-output", runs=runs, judges={name: "mathv-rule-match"}, rows=n,
                      info={"model": name})


def restore_non_mc_answers(results: list[ReadResult], questions: pd.DataFrame) -> None:
    """MATH-V outputs read before the questions were known: a single-letter answer becomes an option
    letter only for ``mc`` questions; for the other items restore MATH-V's lower-case text (in place)."""
    if "answer_type" not in questions.columns:
        return
    mc_ids = set(questions.loc[questions["answer_type"].astype(str) == "mc", "question_id"].astype(str))
    for r in results:
        if r.kind == "mathv-output" and r.runs is not None:
            ans = r.runs["answer"].astype(object)
            qid = r.runs["question_id"].astype(str)
            single = ans.notna() & (ans.astype(str).str.len() == 1) & ~qid.isin(mc_ids)
            if single.any():
                r.runs.loc[single, "answer"] = ans[single].astype(str).str.lower()
