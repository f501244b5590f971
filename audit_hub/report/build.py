"""Assemble the report folder: the ``questions``, ``summary`` and ``runs`` configs, and ``write_report``.

The folder has exactly the layout ``datasets.push_to_hub`` writes (``README.md`` with ``configs`` and
``dataset_info`` YAML, ``data/<config>-NNNNN-of-MMMMM.parquet``), plus ``summary.json``,
``manifest.json`` and ``figures/``. It is written inside :func:`audit_hub.io_utils.atomic_dir`, so a
failed or killed audit never leaves a partial folder behind.

Suggested actions (one per question, first matching rule wins; documented in the card too):

1. ``rewrite distractor``: ``distractor_similarity`` flags the item at medium or above (two options
   are identical or near-identical after normalisation), or ``consensus_error`` reports that the
   option every model chose duplicates the gold text. The label is probably right; the options are not.
2. ``relabel``: ``consensus_error`` at high or above (every model that answered parseably chose the
   same non-gold option): the gold label is the first suspect.
3. ``drop``: ``visual_dependency`` at high or above (solved without the image by every model, with no
   gain from the image): on a vision benchmark the item does not measure vision.
4. ``review``: any other finding at medium or above.
5. ``keep``: nothing above low.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..detectors.base import SUMMARY_TABLE_COLUMNS
from ..severity import LEVELS, RANK

ACTIONS: tuple[str, ...] = ("relabel", "rewrite distractor", "drop", "review", "keep")
ACTION_RULES: dict[str, str] = {
    "rewrite distractor": "distractor_similarity at medium or above (identical or near-identical options), or "
                          "the consensus option duplicates the gold text; the options need fixing, not the label",
    "relabel": "consensus_error at high or above: every model that answered parseably chose the same non-gold "
               "option, so the gold label is the first suspect",
    "drop": "visual_dependency at high or above: every model solves it without the image and gains nothing from "
            "it, so on a vision benchmark the item does not measure vision",
    "review": "any other finding at medium or above",
    "keep": "no finding above low",
}
DETECTOR_LABELS: dict[str, str] = {
    "visual_dependency": "no gain from the image",
    "consensus_error": "consensus error",
    "fleiss_kappa_agreement": "low inter-model agreement",
    "correctness_agreement": "anomalous correctness profile",
    "answer_options_distribution": "gold in an over-represented position",
    "distractor_similarity": "duplicate options",
}
CONFIGS: tuple[str, ...] = ("questions", "summary", "runs")
# Target in-memory size of one Parquet shard (datasets.push_to_hub uses 500 MB on disk).
SHARD_BYTES = 256 * 1024 * 1024


# ---------------------------------------------------------------------------------------------- helpers
def _col(df: pd.DataFrame, *names: str) -> pd.Series | None:
    """The first existing column among ``names`` (detectors name evidence slightly differently)."""
    for n in names:
        if n in df.columns:
            return df[n]
    return None


def _fmt_num(s: pd.Series) -> pd.Series:
    """Integers without decimals, other numbers with two; missing as '?'."""
    x = pd.to_numeric(s, errors="coerce")
    out = x.map(lambda v: "?" if pd.isna(v) else (f"{int(v)}" if float(v).is_integer() else f"{v:.2f}"))
    return out.astype(object)


def _str(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), "?").astype(str)


def _severity_rank(s: pd.Series) -> np.ndarray:
    return s.astype(object).map(RANK).fillna(0).to_numpy(dtype=np.int64)


def _phrase(name: str, pq: pd.DataFrame, flagged: np.ndarray, sev: pd.Series) -> pd.Series:
    """Short evidence phrase for the flagged rows of one detector (object Series aligned with ``pq``)."""
    p = pq.loc[flagged]
    label = DETECTOR_LABELS.get(name, name.replace("_", " "))
    out = pd.Series(label, index=p.index, dtype=object)
    if name == "visual_dependency":
        f, b = _col(p, f"{name}_f"), _col(p, f"{name}_b")
        mf = _col(p, f"{name}_mf", f"{name}_m_full", f"{name}_m")
        mb = _col(p, f"{name}_mb", f"{name}_m_blind", f"{name}_m")
        if f is not None and b is not None and mf is not None and mb is not None:
            out = (label + " (" + _fmt_num(f) + "/" + _fmt_num(mf) + " right with it, " + _fmt_num(b) + "/"
                   + _fmt_num(mb) + " right blind)")
    elif name == "consensus_error":
        letter = _col(p, f"{name}_consensus_answer", f"{name}_consensus_letter", f"{name}_consensus")
        n_parse = _col(p, f"{name}_n_parseable")
        share = _col(p, f"{name}_consensus_share")
        unan = _col(p, f"{name}_unanimous")
        gold = _col(p, f"{name}_gold", f"{name}_gold_letter")
        if gold is None and "answer" in pq.columns:
            gold = p["answer"]
        if letter is not None:
            who = "models"
            if n_parse is not None:
                npv = pd.to_numeric(n_parse, errors="coerce")
                who = "all " + _fmt_num(npv) + " parseable models"
                if share is not None:
                    k = (pd.to_numeric(share, errors="coerce") * npv).round()
                    part = _fmt_num(k) + " of " + _fmt_num(npv) + " parseable models"
                    is_all = (k == npv).to_numpy() if unan is None else unan.fillna(False).astype(bool).to_numpy()
                    who = who.where(is_all, part)
            out = label + ": " + who + " chose " + _str(letter)
            if gold is not None:
                out = out + " (gold " + _str(gold) + ")"
        blind = _col(p, f"{name}_blind_agreement", f"{name}_blind_agrees")
        if blind is not None:
            bv = pd.to_numeric(blind, errors="coerce")
            out = out.where(~(bv < 0.5).to_numpy(), out + "; blind runs disagree")
            out = out.where(~(bv >= 0.5).to_numpy(), out + "; blind runs agree")
        dup = _col(p, f"{name}_duplicates_gold", f"{name}_dup_gold", f"{name}_chosen_duplicates_gold")
        if dup is not None:
            out = out.where(~dup.fillna(False).astype(bool).to_numpy(), out + "; chosen option duplicates the gold text")
    elif name == "distractor_similarity":
        pair = _col(p, f"{name}_pair", f"{name}_pair_letters", f"{name}_letters")
        tier = _col(p, f"{name}_tier", f"{name}_kind")
        sim = _col(p, f"{name}_similarity", f"{name}_max_similarity")
        head = label if tier is None else _str(tier).str.replace("_", " ", regex=False) + " options"
        out = head
        if pair is not None:
            out = out + " " + _str(pair)
        if sim is not None:
            out = out + " (similarity " + _fmt_num(sim) + ")"
        gold_inv = _col(p, f"{name}_involves_gold", f"{name}_gold_involved")
        if gold_inv is not None:
            out = out.where(~gold_inv.fillna(False).astype(bool).to_numpy(), out + ", one of them gold")
    elif name == "fleiss_kappa_agreement":
        agree = _col(p, f"{name}_agreement", f"{name}_p_i")
        nd = _col(p, f"{name}_n_distinct")
        if agree is not None:
            out = label + " (pairwise agreement " + _fmt_num(agree) + ")"
        if nd is not None:
            out = out + ", " + _fmt_num(nd) + " distinct answers"
    elif name == "correctness_agreement":
        irc = _col(p, f"{name}_item_rest", f"{name}_item_rest_corr", f"{name}_item_rest_correlation")
        if irc is not None:
            out = label + " (item-rest correlation " + _fmt_num(irc) + ")"
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
    qids = base["question_id"].astype(str).to_numpy()
    parts = [base]
    names = list(result.results)
    n = len(base)
    ranks = np.zeros(n, dtype=np.int64)
    n_flags = np.zeros(n, dtype=np.int64)
    flagged_by = pd.Series([""] * n, dtype=object)
    rationale = pd.Series([""] * n, dtype=object)
    sev_by: dict[str, np.ndarray] = {}
    for name in names:
        pq = result.results[name].per_question.reset_index(drop=True)
        if len(pq) != n or not np.array_equal(pq["question_id"].astype(str).to_numpy(), qids):
            raise ValueError(f"detector {name} returned per_question rows that do not follow the frame's questions")
        cols = [c for c in pq.columns if c != "question_id"]
        parts.append(pq[cols])
        sev_col = f"{name}_severity"
        flag_col = f"is_{name}_issue"
        sev = pq[sev_col].astype(object) if sev_col in pq else pd.Series(["info"] * n, dtype=object)
        r = _severity_rank(sev)
        sev_by[name] = r
        flag = pq[flag_col].fillna(False).astype(bool).to_numpy() if flag_col in pq else r > 0
        ranks = np.maximum(ranks, np.where(flag | (r > 0), r, 0))
        n_flags += flag
        if flag.any():
            ph = _phrase(name, pd.concat([base[["answer"]], pq], axis=1), flag, sev)
            sep = np.where(rationale.loc[flag].str.len().to_numpy() > 0, "; ", "")
            rationale.loc[flag] = rationale.loc[flag] + sep + ph
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
    """Apply :data:`ACTION_RULES` in order (vectorised; first matching rule wins)."""
    n = len(overall)
    zero = np.zeros(n, dtype=np.int64)
    ds = sev_by.get("distractor_similarity", zero)
    ce = sev_by.get("consensus_error", zero)
    vd = sev_by.get("visual_dependency", zero)
    dup_gold = np.zeros(n, dtype=bool)
    if "consensus_error" in results:
        pq = results["consensus_error"].per_question
        c = _col(pq, "consensus_error_duplicates_gold", "consensus_error_dup_gold",
                 "consensus_error_chosen_duplicates_gold")
        if c is not None:
            dup_gold = c.fillna(False).astype(bool).to_numpy()
    conds = [
        (ds >= RANK["medium"]) | (dup_gold & (ce >= RANK["medium"])),
        ce >= RANK["high"],
        vd >= RANK["high"],
        overall >= RANK["medium"],
    ]
    return np.select(conds, ["rewrite distractor", "relabel", "drop", "review"], default="keep").astype(object)


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


def build_runs_table(result: Any) -> pd.DataFrame:
    """The aligned runs (public long format), so the audit can be recomputed from the report alone."""
    return result.frame.runs_table()


# ---------------------------------------------------------------------------------------------- writing
def _arrow_table(df: pd.DataFrame):
    """DataFrame -> Arrow table with plain ``string`` types and no pandas metadata (portable schema)."""
    import pyarrow as pa

    t = pa.Table.from_pandas(df, preserve_index=False)
    fields = []
    for f in t.schema:
        typ = f.type
        if pa.types.is_large_string(typ):
            typ = pa.string()
        elif pa.types.is_large_list(typ) and pa.types.is_large_string(typ.value_type):
            typ = pa.list_(pa.string())
        elif (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and pa.types.is_large_string(typ.value_type):
            typ = pa.list_(pa.string())
        elif pa.types.is_null(typ):
            typ = pa.string()
        elif pa.types.is_dictionary(typ):
            typ = pa.string()
        fields.append(pa.field(f.name, typ))
    return t.cast(pa.schema(fields))


def write_config(folder: Path, name: str, df: pd.DataFrame, shard_bytes: int = SHARD_BYTES) -> list[str]:
    """Write one config as ``data/<name>-NNNNN-of-MMMMM.parquet`` shards; return the relative paths."""
    import pyarrow.parquet as pq

    table = _arrow_table(df)
    n_shards = max(1, math.ceil(table.nbytes / shard_bytes)) if table.num_rows else 1
    n_shards = min(n_shards, max(1, table.num_rows))
    rows = math.ceil(table.num_rows / n_shards) if table.num_rows else 0
    (folder / "data").mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(n_shards):
        rel = f"data/{name}-{s:05d}-of-{n_shards:05d}.parquet"
        pq.write_table(table.slice(s * rows, rows) if rows else table, folder / rel, compression="zstd")
        paths.append(rel)
    return paths


def write_report(result: Any, out_dir: str | os.PathLike, *, command_line: list[str], inputs: list[dict],
                 figures: bool = True, shard_bytes: int = SHARD_BYTES, _hook=None) -> Path:
    """Write the whole report folder atomically and return its path.

    ``inputs``: one dict per input file (``path``, ``kind``, optional ``sha256``, ``bytes``, ``rows``,
    ``revision``/``resolved_commit`` for Hub inputs); missing hashes are computed here.
    ``_hook`` is for tests: called with the temporary folder just before it is moved into place.
    """
    from ..io_utils import atomic_dir, dump_json
    from .card import render_card
    from .manifest import build_manifest

    started = time.time()
    target = Path(out_dir)
    questions = build_questions_table(result)
    summary_df = build_summary_table(result)
    runs = build_runs_table(result)
    with atomic_dir(target, command="audit", inputs=[r.get("path") for r in inputs or []]) as tmp:
        files = {
            "questions": write_config(tmp, "questions", questions, shard_bytes),
            "summary": write_config(tmp, "summary", summary_df, shard_bytes),
            "runs": write_config(tmp, "runs", runs, shard_bytes),
        }
        figs: dict[str, str] = {}
        if figures:
            from .figures import make_figures

            figs = make_figures(result, questions, tmp / "figures", summary_df)
        (tmp / "summary.json").write_text(dump_json(result.summary), encoding="utf-8")
        card = render_card(result, questions, summary_df, files=files, figures=figs, folder=tmp)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        manifest = build_manifest(result, command_line=command_line, inputs=inputs, folder=tmp,
                                  started_at=started, finished_at=time.time())
        (tmp / "manifest.json").write_text(dump_json(manifest), encoding="utf-8")
        if _hook is not None:
            _hook(tmp)
    return target.resolve()


def judge_disagreement_counts(frame: Any) -> dict[str, np.ndarray]:
    """Per (arm, model) key ``arm * n_models + model``: rows scored both ways (``n_both``), rows where
    the judge and exact matching disagree (``n_dis``), all rows (``n_all``) and unparseable rows
    (``unparsed``). Used by the card's judge-dependence table and by its figure."""
    r = frame.runs
    h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()
    both = (h >= 0) & (e >= 0)
    key = r["arm"].to_numpy().astype(np.int64) * frame.n_models + r["m"].to_numpy().astype(np.int64)
    size = 2 * frame.n_models
    return {"n_both": np.bincount(key[both], minlength=size),
            "n_dis": np.bincount(key[both & (h != e)], minlength=size),
            "n_all": np.bincount(key, minlength=size),
            "unparsed": np.bincount(key[r["answer"].isna().to_numpy()], minlength=size)}

