"""The report's tables: the ``questions`` table (every detector's columns, the combined severity,
the rationale and the suggested action), the ``summary`` table and the ``runs`` table, and the
action rules.

Suggested actions (one per question, first matching rule wins; documented in the card too): each
detector registers the findings that trigger an action (``actions`` in
:mod:`audit_hub.detectors`, rule texts in :data:`audit_hub.detectors.ACTION_RULES`); the rules
apply in :data:`ACTION_ORDER` (``rewrite distractor``, ``relabel``, ``drop``), then ``review`` (any
other finding at medium or above), else ``keep``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import detectors
from ..detectors.base import SUMMARY_TABLE_COLUMNS
from ..schema import ARMS
from ..severity import LEVELS, RANK

ACTIONS: tuple[str, ...] = ("relabel", "rewrite distractor", "drop", "review", "keep")
ACTION_RULES = detectors.ACTION_RULES
#: Actions in the order their rules apply (first match wins); the detectors' triggers are registered.
ACTION_ORDER: tuple[str, ...] = ("rewrite distractor", "relabel", "drop", "review")


# ---------------------------------------------------------------------------------------------- helpers
def _id_array(s: pd.Series):
    """Question IDs as one Arrow string array (for a cheap equality check of 1M IDs)."""
    import pyarrow as pa

    arr = pa.array(s.astype(str), type=pa.large_string(), from_pandas=True)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _severity_rank(s: pd.Series) -> np.ndarray:
    """Severity label -> rank (unknown and missing -> 0); one lookup per distinct label."""
    codes, uniques = pd.factorize(s)
    table = np.array([RANK.get(u, 0) if isinstance(u, str) else 0 for u in uniques] + [0], dtype=np.int64)
    return table[codes]  # code -1 (missing) picks the trailing 0


def _phrase(name: str, pq: pd.DataFrame, flagged: np.ndarray, sev: pd.Series) -> pd.Series:
    """Short evidence phrase for the flagged rows of one detector (object Series aligned with ``pq``):
    the detector's ``evidence_phrase`` when it has one, else its registered label."""
    spec = detectors.get(name)
    p = pq.loc[flagged]
    phrase = getattr(spec.load(), "evidence_phrase", None)
    out = phrase(p, spec.label) if phrase is not None else pd.Series(spec.label, index=p.index, dtype=object)
    return out.astype(object) + " [" + sev.loc[flagged].astype(str) + "]"


# ---------------------------------------------------------------------------------------------- tables
def build_questions_table(result: Any) -> pd.DataFrame:
    """One row per question: the question itself, every detector's output, and the combined verdict.

    Columns: the public question columns (so the audit can be recomputed from the report), every
    detector's ``per_question`` columns (primary correctness field), ``<name>_score_exact_match`` /
    ``is_<name>_issue_exact_match`` for judge-dependent detectors re-run on exact match, the TsT
    columns when present, then ``n_flags``, ``flagged_by``, ``severity`` (maximum over detectors,
    levels from :mod:`audit_hub.severity`), ``rationale`` and ``suggested_action`` (rules in
    :data:`ACTION_RULES`).
    """
    frame = result.frame
    base = frame.questions_table().reset_index(drop=True)
    base["n_options"] = frame.questions["n_options"].to_numpy().astype(np.int64)
    qids = _id_array(base["question_id"])
    parts = [base]
    names = list(result.results)
    n = len(base)
    ranks = np.zeros(n, dtype=np.int64)
    n_flags = np.zeros(n, dtype=np.int64)
    flagged_by = pd.Series([""] * n, dtype=object)
    rationale = pd.Series([""] * n, dtype=object)
    sev_by: dict[str, np.ndarray] = {}
    # a detector whose flags the calibration's defect-free simulations explain adds at most its cap
    fvn = (getattr(result, "summary", None) or {}).get("flags_vs_null") or {}
    caps = {n: RANK[c["capped_at"]] for n, c in fvn.items() if c.get("capped_at")}
    for name in names:
        pq = result.results[name].per_question.reset_index(drop=True)
        if len(pq) != n or not _id_array(pq["question_id"]).equals(qids):
            raise ValueError(f"detector {name} returned per_question rows that do not follow the frame's questions")
        cols = [c for c in pq.columns if c != "question_id"]
        parts.append(pq[cols])
        sev_col = f"{name}_severity"
        flag_col = f"is_{name}_issue"
        sev = pq[sev_col].astype(object) if sev_col in pq else pd.Series(["info"] * n, dtype=object)
        r = _severity_rank(sev)
        if name in caps:
            r = np.minimum(r, caps[name])
        scope = (fvn.get(name) or {}).get("chance_categories") or {}
        if scope.get("capped_at") and name not in caps:  # only the flags in the categories answered at chance
            r = np.where(frame.in_categories(scope["categories"]), np.minimum(r, RANK[scope["capped_at"]]), r)
        sev_by[name] = r
        flag = pq[flag_col].fillna(False).astype(bool).to_numpy() if flag_col in pq else r > 0
        ranks = np.maximum(ranks, np.where(flag | (r > 0), r, 0))
        n_flags += flag
        # the rows this detector raises to medium or above without flagging them (a review item, e.g. a unanimous
        # non-gold answer the label model explains): their severity needs its reason too, not "no finding"
        review = ~flag & (r >= RANK["medium"])
        for rows, kind in ((flag, ""), (review, "; not flagged: a review item")):
            if not rows.any():
                continue
            ph = _phrase(name, pd.concat([base[["answer"]], pq], axis=1), rows, sev)
            if kind:
                ph = ph.str.slice(0, -1) + kind + "]"
            sep = np.where(rationale.loc[rows].str.len().to_numpy() > 0, "; ", "")
            rationale.loc[rows] = rationale.loc[rows] + sep + ph
        if flag.any():
            sepf = np.where(flagged_by.loc[flag].str.len().to_numpy() > 0, ",", "")
            flagged_by.loc[flag] = flagged_by.loc[flag] + sepf + name
    for name, alt in result.alt_results.items():
        pq = alt.per_question.reset_index(drop=True)
        keep = {}
        if f"{name}_score" in pq:
            keep[f"{name}_score_exact_match"] = pq[f"{name}_score"].to_numpy()
        if f"is_{name}_issue" in pq:
            keep[f"is_{name}_issue_exact_match"] = pq[f"is_{name}_issue"].fillna(False).astype(bool).to_numpy()
        if keep:
            parts.append(pd.DataFrame(keep))
    tst = getattr(result, "tst", None)
    if tst is not None and getattr(tst, "per_question", None) is not None:
        tpq = tst.per_question.reset_index(drop=True)
        if "question_id" in tpq and len(tpq) == n:
            parts.append(tpq[[c for c in tpq.columns if c != "question_id"]])
    out = pd.concat(parts, axis=1)
    severity = np.array(LEVELS, dtype=object)[ranks]
    rationale = rationale.where(rationale.str.len() > 0, "no finding")
    out["n_flags"] = n_flags
    out["flagged_by"] = flagged_by.to_numpy()
    out["severity"] = severity
    out["rationale"] = rationale.to_numpy()
    out["suggested_action"] = suggested_actions(sev_by, ranks, result.results)
    return out


def suggested_actions(sev_by: dict[str, np.ndarray], overall: np.ndarray, results: dict) -> np.ndarray:
    """Apply the action rules in :data:`ACTION_ORDER` (vectorised; first matching rule wins).

    A detector's registered trigger fires where its severity reaches the trigger's level (and its
    evidence column is true, for a trigger with a column); ``review`` is any finding at medium or above.
    """
    n = len(overall)
    conds = {a: np.zeros(n, dtype=bool) for a in ACTION_ORDER}
    for spec in detectors.specs():
        rank = sev_by.get(spec.name)
        for t in spec.actions:
            if rank is None:
                continue
            hit = rank >= RANK[t.min_level]
            if t.column is not None:
                res = results.get(spec.name)
                hit &= (res.per_question[t.column].fillna(False).astype(bool).to_numpy()
                        if res is not None and t.column in res.per_question else False)
            conds[t.action] |= hit
    conds["review"] |= overall >= RANK["medium"]
    return np.select([conds[a] for a in ACTION_ORDER], list(ACTION_ORDER), default="keep").astype(object)


def _to_float(v: Any) -> float:
    """A float from numbers, 0-d arrays, numpy scalars, None/NA/strings (-> nan)."""
    if v is None or v is pd.NA:
        return np.nan
    if isinstance(v, np.ndarray):
        v = v.item() if v.size == 1 else np.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


def _float_column(s: pd.Series) -> np.ndarray:
    if s.dtype.kind in "fiub":
        return s.to_numpy(dtype=np.float64)
    return np.array([_to_float(v) for v in s.tolist()], dtype=np.float64)


def build_summary_table(result: Any) -> pd.DataFrame:
    """One row per detector x category x arm/field x statistic: estimates, intervals, nulls, p-values.

    The judge-dependent detectors' exact-match re-runs are included (their ``field`` is
    ``hit_exact``); ``primary`` marks the rows of the correctness field the headline uses.
    """
    tables = []
    for res, primary in [(r, True) for r in result.results.values()] + [(r, False) for r in result.alt_results.values()]:
        t = res.table
        if t is None or len(t) == 0:
            continue
        t = t.copy()
        for c in SUMMARY_TABLE_COLUMNS:
            if c not in t.columns:
                t[c] = None
        t = t[list(SUMMARY_TABLE_COLUMNS)]
        t["detector"] = t["detector"].fillna(res.name)
        if not primary:
            t["field"] = t["field"].fillna("hit_exact")
        t["primary"] = primary
        tables.append(t)
    if not tables:
        df = pd.DataFrame({c: pd.Series([], dtype=object) for c in SUMMARY_TABLE_COLUMNS})
        df["primary"] = pd.Series([], dtype=bool)
    else:
        df = pd.concat(tables, ignore_index=True)
    for c in ("detector", "category", "arm", "field", "statistic"):
        df[c] = df[c].astype(object).where(df[c].notna(), None).map(lambda v: None if v is None else str(v))
    for c in ("estimate", "ci_low", "ci_high", "null_mean", "excess", "p_value", "p_adjusted"):
        df[c] = _float_column(df[c])
    df["n_items"] = pd.array([None if np.isnan(v) else int(v) for v in _float_column(df["n_items"])], dtype="Int64")
    df["primary"] = df["primary"].astype(bool)
    return df.reset_index(drop=True)


def build_runs_table(result: Any):
    """The aligned runs (public long format), so the audit can be recomputed from the report alone.

    An Arrow table with dictionary-encoded ``question_id``/``model``/``arm`` built from the frame's
    integer codes (no Python object per run row; see :mod:`audit_hub.report.runs_arrow`)."""
    from .runs_arrow import runs_arrow_table

    return runs_arrow_table(result.frame)


# ---------------------------------------------------------------------------------------------- writing


def judge_disagreement_counts(frame: Any) -> dict[str, np.ndarray]:
    """Per (arm, model) key ``arm * n_models + model``: rows scored both ways (``n_both``), rows where
    the judge and exact matching disagree (``n_dis``), all rows (``n_all``) and unparseable rows
    (``unparsed``). Used by the card's judge-dependence table and by its figure.

    One bincount over (key, both, disagree, unparsed) in chunks of 4M rows (no 100M-row int64
    temporaries), cached on the frame for the second caller."""
    import pyarrow as pa
    import pyarrow.compute as pc

    r = frame.runs
    cached = frame.cache.get("judge_counts")
    if cached is not None and cached[0] is r:
        return cached[1]
    h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()
    arm, mod = r["arm"].to_numpy(), r["m"].to_numpy()
    ans = getattr(r["answer"].array, "_pa_array", None)
    if isinstance(ans, (pa.Array, pa.ChunkedArray)):
        unp = pc.is_null(ans).to_numpy(zero_copy_only=False)
    else:
        unp = r["answer"].isna().to_numpy()
    size = len(ARMS) * frame.n_models
    cnt = np.zeros(size * 8, np.int64)
    step = 1 << 22
    for lo in range(0, len(r), step):
        sl = slice(lo, lo + step)
        both = (h[sl] >= 0) & (e[sl] >= 0)
        key = arm[sl].astype(np.int32) * frame.n_models + mod[sl]
        c = ((key * 2 + both) * 2 + (both & (h[sl] != e[sl]))) * 2 + unp[sl]
        cnt += np.bincount(c, minlength=size * 8)
    cnt = cnt.reshape(size, 2, 2, 2)
    out = {"n_both": cnt[:, 1].sum(axis=(1, 2)), "n_dis": cnt[:, 1, 1].sum(axis=1),
           "n_all": cnt.sum(axis=(1, 2, 3)), "unparsed": cnt[..., 1].sum(axis=(1, 2))}
    frame.cache["judge_counts"] = (r, out)
    return out
