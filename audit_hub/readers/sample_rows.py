"""One scored sample per question -> a :class:`ReadResult`: what the harness-log readers (lm-eval,
inspect_ai, lighteval, OpenCompass) share once each has mapped its own records.

Each reader hands over, per question, a :class:`Sample`: the question ID, the model's answer text, the
harness's own verdict (0/1, or None when it gave none), the row of the file it came from, and the
question's fields (``question``, ``options``, ``answer`` = the gold, ``category``, ...). The runs table
and the questions table are then built here the same way for every harness; ``answer`` in the runs is
left empty so the audit frame extracts it with one parser for every harness."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..columns import arrow_strings
from ..errors import InputError
from ..escape import show_id
from .cells import ReadResult, constant_categorical
from .generic import normalise_questions


@dataclass
class Sample:
    question_id: str
    prediction: str | None
    hit: int | None
    row: int
    fields: dict[str, Any] = field(default_factory=dict)


def binary_verdict(v: Any) -> int | None | str:
    """A harness verdict as 0/1; None for a missing one; the string ``"non-binary"`` for anything else
    (partial credit, a score between 0 and 1, text)."""
    if v is None:
        return None
    if isinstance(v, bool | np.bool_):
        return int(bool(v))
    if isinstance(v, int | float | np.integer | np.floating):
        f = float(v)
        if f != f:
            return None
        return int(f) if f in (0.0, 1.0) else "non-binary"
    return "non-binary"


def result_from_samples(path: str, kind: str, samples: list[Sample], *, model: str, arm: str,
                        judge: str | None, info: dict, with_hit: bool = True,
                        answers: list[str | None] | None = None) -> ReadResult:
    """The runs (one row per sample) and questions (their fields) of one file's scored samples. ``answers``:
    the model's answers as the harness itself extracted them (one per sample); else left for the frame."""
    if not samples:
        raise InputError("the file has no samples", file=path)
    seen: dict[str, int] = {}
    for s in samples:
        if s.question_id in seen:
            raise InputError(f"duplicate sample for question {show_id(s.question_id)} (rows {seen[s.question_id]} "
                             f"and {s.row})", file=path, row=s.row, column="question_id")
        seen[s.question_id] = s.row
    n = len(samples)
    rows = np.asarray([s.row for s in samples], dtype=np.int64)
    runs = pd.DataFrame({
        "question_id": [s.question_id for s in samples],
        "model": constant_categorical(model, n),
        "arm": constant_categorical(arm, n),
        "prediction": arrow_strings([s.prediction for s in samples]),
        "answer": arrow_strings(answers if answers is not None else [None] * n),
    })
    if with_hit and any(s.hit is not None for s in samples):
        runs["hit"] = pd.array([s.hit for s in samples], dtype="Int8")
    runs["source_file"] = constant_categorical(path, n)
    runs["source_row"] = rows
    qrows = []
    for s in samples:
        r = {k: v for k, v in s.fields.items() if k not in ("question_id", "source_row")}
        r["question_id"] = s.question_id
        qrows.append(r)
    qdf = pd.DataFrame.from_records(qrows)
    qdf["source_row"] = rows
    questions = None
    if "answer" in qdf.columns and qdf["answer"].notna().any():
        questions = normalise_questions(qdf, path)
    judges = {model: judge} if judge and "hit" in runs.columns else {}
    task = info.get("task")
    return ReadResult(path=path, kind=kind, runs=runs, questions=questions, judges=judges, rows=n,
                      info={"model": model, **info}, benchmark=str(task) if task else None)
