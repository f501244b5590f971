"""Pieces shared by the local runner and the served backend: the result type, the questions reader,
the exact-match hit of a parsed answer and the progress bar. Light at import."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError


@dataclass
class BlindResult:
    """What a process returns: the summary (all processes) and the merged table (main process)."""

    summary: dict
    table: Any = None
    out: Path | None = None
    url: str | None = None
    extra: dict = field(default_factory=dict)


def parse_max_memory(spec: str) -> dict:
    """``"0=70GiB,1=70GiB,cpu=200GiB"`` -> ``{0: "70GiB", 1: "70GiB", "cpu": "200GiB"}``."""
    out: dict = {}
    for part in spec.split(","):
        if "=" not in part:
            raise InputError(f"--max-memory expects DEVICE=SIZE[,DEVICE=SIZE...] (e.g. 0=70GiB,cpu=200GiB), "
                             f"got {spec!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        if not re.fullmatch(r"\d+(\.\d+)?\s*([KMGT]i?B)?", v, flags=re.IGNORECASE):
            raise InputError(f"--max-memory: {v!r} is not a size such as 70GiB")
        if k.isdigit():
            out[int(k)] = v
        elif k in ("cpu", "disk", "mps"):
            out[k] = v
        else:
            raise InputError(f"--max-memory: device {k!r} must be a GPU index, cpu or disk")
    return out


def load_question_table(spec: str, column_map: dict[str, str] | None = None):
    """Questions through the core reader, validated by :class:`AuditFrame` (images are ignored)."""
    from ..frame.core import AuditFrame

    try:
        from ..readers.ingest import load_questions
    except ImportError:  # pragma: no cover - only while the core reader is missing
        load_questions = None
    if load_questions is not None:
        q = load_questions(spec, column_map=column_map)
        if not hasattr(q, "columns") and hasattr(q, "questions"):
            q = q.questions
    else:  # pragma: no cover
        import pandas as pd

        if spec.endswith(".parquet"):
            q = pd.read_parquet(spec)
        elif spec.endswith((".jsonl", ".json")):
            q = pd.read_json(spec, lines=spec.endswith(".jsonl"))
        else:
            raise InputError("cannot read questions without audit_hub.readers.ingest", file=spec)
        if column_map:
            q = q.rename(columns={v: k for k, v in column_map.items()})
    return AuditFrame.from_tables(q, questions_source=spec).questions


@dataclass
class QuestionLists:
    """The question columns a blind run reads, as plain lists, and each question's rendered prompt."""

    qid: list[str]
    atype: list[str]
    options: list[list[str]]
    gold: list[str]
    prompts: list[str]

    @classmethod
    def from_table(cls, questions, builder) -> QuestionLists:
        """``builder`` renders one prompt (``prompt.PromptBuilder``)."""
        qid = questions["question_id"].astype(str).tolist()
        atype = questions["answer_type"].tolist()
        options = [list(o) for o in questions["options"].tolist()]
        prompts = [builder.render(questions["question"].iat[i], options[i], atype[i], questions["hint"].iat[i],
                                  question_id=qid[i]) for i in range(len(questions))]
        return cls(qid, atype, options, questions["answer"].astype(str).tolist(), prompts)


def exact_hit(extracted, gold: str, answer_type: str) -> bool | None:
    from ..answers import score_exact

    v = score_exact(extracted, gold, answer_type)
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    try:
        iv = int(v)
    except (TypeError, ValueError):
        return None
    return None if iv < 0 else bool(iv)


class Progress:
    """rich progress bar on the main process, with questions per second."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        self.t0 = time.perf_counter()
        self.done = 0
        if enabled and total > 0:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[qps]} q/s"), TimeRemainingColumn(),
                                console=Console(stderr=True), transient=False)
            self.task = self.bar.add_task(label, total=total, qps="-")
            self.bar.start()

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            dt = max(time.perf_counter() - self.t0, 1e-9)
            self.bar.update(self.task, advance=n, qps=f"{self.done / dt:.1f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
