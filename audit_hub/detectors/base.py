"""The contract every detector follows.

A detector is a module ``audit_hub/detectors/<name>.py``, registered in
``audit_hub/detectors/__init__.py`` (metadata: :class:`audit_hub.detectors.registry.DetectorSpec`),
exposing::

    NAME: str                 # its registered name
    def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, <its parameters>) -> DetectorResult

and, optionally, report phrases: ``evidence_phrase(rows, label) -> Series`` (flagged rows of the
questions table), ``card_line(summary) -> str``, ``lede_line(summary) -> str`` and
``console_line(summary) -> str``.

``run`` is a pure function of the frame (no I/O, no printing). When the inputs cannot support it
(one model only, no blind arm, no option texts) it raises :class:`audit_hub.errors.DetectorSkipped`
with the reason; the audit lists the reason and the other detectors still run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SUMMARY_TABLE_COLUMNS = (
    "detector", "category", "arm", "field", "statistic", "estimate", "ci_low", "ci_high",
    "null_mean", "excess", "p_value", "p_adjusted", "n_items",
)

NUMERIC_COLUMNS = ("estimate", "ci_low", "ci_high", "null_mean", "excess", "p_value", "p_adjusted", "n_items")


@dataclass
class DetectorResult:
    """What a detector returns.

    per_question: one row per question of the frame, in question-code order, with columns
        ``question_id``, ``<name>_score`` (float in [0, 1]; lower = more suspicious),
        ``is_<name>_issue`` (bool), ``<name>_severity`` (one of audit_hub.severity.LEVELS) and
        evidence columns prefixed ``<name>_`` (ints, floats, short strings only).
    summary: JSON-serialisable dict of headline estimates (with 95% intervals, nulls and p-values
        where they apply), the parameters used (``params``) and the seeds.
    table: long table, one row per (category x arm/field x statistic), columns
        SUMMARY_TABLE_COLUMNS; category "(all)" holds the overall rows. p_adjusted is
        Benjamini-Hochberg across categories within one statistic.
    """

    name: str
    per_question: pd.DataFrame
    summary: dict
    table: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(SUMMARY_TABLE_COLUMNS)))
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_result_columns(self.name, self.per_question)

    def issues(self) -> pd.DataFrame:
        """Rows flagged by this detector."""
        return self.per_question[self.per_question[f"is_{self.name}_issue"]]


def summary_rows(detector: str, rows: list[dict]) -> pd.DataFrame:
    """Build a table with the standard columns from partial dicts (missing keys -> NaN/None)."""
    if not rows:
        df = pd.DataFrame({"detector": pd.Series([], dtype=object)})
        df["detector"] = detector
        for c in SUMMARY_TABLE_COLUMNS[1:]:
            df[c] = np.zeros(0, np.float64) if c in NUMERIC_COLUMNS else None
        return df
    cols: dict[str, object] = {}  # one column at a time from plain lists (same dtype inference as a frame of rows)
    for c in SUMMARY_TABLE_COLUMNS:
        if c == "detector":
            cols[c] = [detector] * len(rows)
        elif c in NUMERIC_COLUMNS:  # plain float64 (detectors may hand over 0-d numpy arrays or None)
            cols[c] = np.array([np.nan if (v := r.get(c)) is None else float(v) for r in rows], dtype=np.float64)
        else:
            cols[c] = [r.get(c) for r in rows]
    return pd.DataFrame(cols)


class ResultContractError(ValueError):
    """A detector result does not carry the columns its contract (and its registration) promise."""


def check_result_columns(name: str, pq: pd.DataFrame) -> None:
    """Check the per-question columns of detector ``name``: ``question_id``, ``<name>_score`` (floats in
    [0, 1]), ``is_<name>_issue`` (bool), ``<name>_severity`` (a level of :mod:`audit_hub.severity`)
    and, for a registered detector, exactly the evidence columns it declares."""
    from ..severity import LEVELS
    from . import registry

    def fail(msg: str) -> None:
        raise ResultContractError(f"detector {name!r}: {msg}")

    score, issue, sev = f"{name}_score", f"is_{name}_issue", f"{name}_severity"
    missing = [c for c in ("question_id", score, issue, sev) if c not in pq.columns]
    if missing:
        fail(f"per_question lacks column(s) {missing}")
    s = pq[score]
    if s.dtype.kind != "f":
        fail(f"{score} must be float, got {s.dtype}")
    v = s.to_numpy()
    if ((v < 0) | (v > 1)).any():
        fail(f"{score} must lie in [0, 1]; got values from {np.nanmin(v)} to {np.nanmax(v)}")
    if pq[issue].dtype != bool:
        fail(f"{issue} must be bool, got {pq[issue].dtype}")
    bad = set(pq[sev].astype(object).unique()) - set(LEVELS)
    if bad:
        fail(f"{sev} holds values outside {LEVELS}: {sorted(map(str, bad))}")
    if name in registry.names():
        declared = set(registry.get(name).evidence_columns)
        found = {c for c in pq.columns if c.startswith(f"{name}_")} - {score, sev}
        if found != declared:
            fail(f"evidence columns differ from the registration: missing {sorted(declared - found)}, "
                 f"undeclared {sorted(found - declared)}")
