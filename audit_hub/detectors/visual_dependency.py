"""visual_dependency: questions that gain nothing from the image, against an item-matched null.

Per item, ``f`` = models correct with the image (full arm) and ``b`` = models correct blind, over
the *paired* models (those with runs in both arms, matched by name). Zero gain means ``f == b``. Some
zero-gain items are expected by chance (a question everybody finds hard is likely wrong both ways),
so the share is compared with an item-matched permutation null: the whole row of blind outcomes is
shuffled across items, which keeps the distribution of ``b`` and of ``f`` and breaks only the pairing.
The statistic depends only on the ``(M+1) x (M+1)`` table of ``(f, b)`` counts, so the null is sampled
as tables with fixed margins (:mod:`audit_hub.stats.nulls`), at a cost that does not grow with the items; on a
wide pool (many models, so many matched cells, on few items) permuting the items is cheaper and draws the same
law, and is used there (``summary["null_sampler"]``, ``summary["leave_one_model_out_null"]``). The null mean and
SD are exact closed forms.

Strata (``stratify``, default ``"auto"``). The shuffle is within strata: the effective option count
(options of an mc item, 2 for yes/no, open items apart) and, on yes/no items, the gold answer, so
the null is "blind outcomes are independent of the item given its stratum". Without strata, items
with fewer options (or a gold the models are biased towards) are right more often in both arms and
the global shuffle reads that as excess zero gain (docs/statistics.md). ``"none"`` is the paper's
single shuffle; its figure is reported in ``summary["unstratified"]`` next to the headline.
``summary["power"]`` gives the smallest share of blind-solvable items detected with 80% power.

Pool level. When no model has runs in both arms but both arms exist (e.g. MATH-Vision: eleven image
models, one text-only GPT-4 run), ``f`` and ``b`` are counts over each arm's own pool of ``Mf`` and
``Mb`` models and zero gain is equality of *shares*, compared exactly on counts: ``f * Mb == b * Mf``.
The table is ``(Mf+1) x (Mb+1)`` and the matched (zero-gain) cells are ``(i, j)`` with
``i * Mb == j * Mf``; the null works unchanged. ``summary["pool_level"]`` is True with a note.

Missing values. An item enters the statistic only when every model of the pool has a known
correctness (0/1) in both arms; other items are counted in ``n_excluded`` and get score 1 and
severity info. (Counting a missing answer as wrong would manufacture (0, 0) zero-gain items.)

Per-question severity (zero gain = ``f/Mf == b/Mb``):
  * high: zero gain and every blind model correct (``b == Mb``, needs >= 3 blind models; with fewer
    it is medium): solved without the image by the whole pool.
  * medium: zero gain and at least half the blind models correct.
  * low: zero gain with fewer than half correct blind, including (0, 0) where nobody solves the item
    either way (not evidence of leakage; the item may be too hard or mislabelled).
  * info: positive gain, negative gain (blind better than full; column ``_negative_gain``), excluded.
``is_visual_dependency_issue`` is True for medium and high. The score is 1 for non-zero gain and
``1 - (1/4 + 3/4 * b/Mb)`` for zero gain (0 at all-right-both-ways, 0.75 at (0, 0)).

Per category the test shuffles within the category (null mean from the category's own margins,
``null_mean``); ``null_mean_global`` is the mean under the benchmark-wide shuffle (category rows
against the global blind margin) for reference. Category p-values are Benjamini-Hochberg adjusted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import DetectorSkipped
from ..escape import md_inline
from ..fmt import fmt_num, fmt_p, isnum, num_labels, p_is, pct, pp
from ..frame.core import AuditFrame
from ..schema import check_correctness_field
from ..severity import severity_array
from ..stats.core import benjamini_hochberg, permutation_p_value, table_bootstrap, wilson_ci
from ..stats.coverage import coverage_left_out_units
from ..stats.nulls import (
    literal_is_cheaper,
    matched_pairs,
    matched_sum_moments,
    sample_matched_sum,
    shared_permutation_drops,
    shared_permutation_matches,
)
from .accounting import item_accounting
from .base import DetectorResult, summary_rows
from .strata import STRATIFY_DEFAULT, strata_codes

NAME = "visual_dependency"



# ---------------------------------------------------------------------------------------- helpers
def _pool(frame: AuditFrame) -> tuple[list[str], list[str], bool]:
    full, blind = frame.models_in("full"), frame.models_in("blind")
    if not full:
        raise DetectorSkipped("no runs with the image (full arm)")
    if not blind:
        raise DetectorSkipped("no blind (text-only) runs; run `benchaudit blind` or pass blind predictions")
    paired = frame.paired_models()
    if paired:
        return paired, paired, False
    return full, blind, True


class _Null:
    """Observed matched count, closed-form moments and permutation draws for grouped count tables.

    ``items``: ``(table, f, b, Mf, Mb)`` per item (its table's index and its counts). With them the draws come
    from permuting the items within their tables where that is clearly cheaper than the table sampler
    (:func:`~audit_hub.stats.nulls.literal_is_cheaper`: a wide pool on few items); both draw the same law.
    ``sampler`` says which ran."""

    def __init__(self, tables: np.ndarray, pairs: tuple[np.ndarray, np.ndarray], groups: np.ndarray,
                 n_groups: int, n_perm: int, rng: np.random.Generator, items: tuple | None = None):
        pi, pj = pairs
        r = tables.sum(axis=2)[:, pi]
        c = tables.sum(axis=1)[:, pj]
        n = tables.sum(axis=(1, 2))
        obs = tables[:, pi, pj].sum(axis=1)
        mean, var = matched_sum_moments(r, c, n)
        self.n = np.bincount(groups, weights=n, minlength=n_groups)
        self.observed = np.bincount(groups, weights=obs, minlength=n_groups)
        self.mean = np.bincount(groups, weights=mean, minlength=n_groups)
        self.var = np.bincount(groups, weights=var, minlength=n_groups)
        self.draws = np.zeros((n_groups, n_perm), dtype=np.int64)
        self.sampler = None
        if n_perm > 0:
            if items is not None and literal_is_cheaper(len(items[0]), int((n > 0).sum()), len(pi)):
                table, f, b, mf, mb = items
                per = shared_permutation_matches(table, lambda _d: (_zero_gain_target(f, mf, mb), b), 1, n_perm,
                                                 rng, per_stratum=True)[0]
                d = np.zeros((len(tables), n_perm), dtype=np.int64)
                d[: len(per)] = per
                self.sampler = "items"
            else:
                d = sample_matched_sum(r, c, n, n_perm, rng)
                self.sampler = "tables"
            np.add.at(self.draws, groups, d)

    def p_values(self) -> np.ndarray:
        return np.array([permutation_p_value(self.draws[g], self.observed[g]) if self.n[g] > 0 else np.nan
                         for g in range(len(self.n))])


#: how the permutation draws of a null were made, in words (``_Null.sampler``)
NULL_SAMPLERS = {"tables": "count tables with the margins fixed (sequential hypergeometric draws)",
                 "items": "the items permuted within strata (a wide pool: cheaper than the tables)"}


def _zero_gain_target(f: np.ndarray, mf: int, mb: int) -> np.ndarray:
    """Per item, the blind count that makes its gain zero (``b * mf == f * mb``), or -1 where no count does."""
    num = np.asarray(f, dtype=np.int64) * mb
    return np.where(num % mf == 0, num // mf, -1)


def _excess_stat(pairs, n_total, R: int, C: int):
    """The zero-gain excess (observed matched count minus its null mean, over ``n_total``) of bootstrap tables
    given as (b, S, K') counts of the cells ``cells`` (flat indices ``row * C + col`` of the (R, C) table): the
    row and column margins of the matched pairs are sums over those cells (integers, as over the full table)."""
    pi, pj = pairs
    P = len(pi)

    def margins(tabs: np.ndarray, cells: np.ndarray):
        """(r, c, n, obs) of the matched pairs: from the full table where every cell is there (a deep pool)."""
        if len(cells) == R * C:
            t = tabs.reshape(tabs.shape[0], tabs.shape[1], R, C)
            return t.sum(axis=3)[:, :, pi], t.sum(axis=2)[:, :, pj], t.sum(axis=(2, 3)), t[:, :, pi, pj].sum(axis=(1, 2))
        rows, cols = cells // C, cells % C
        row_k = np.full(R, -1)
        row_k[pi] = np.arange(P)
        col_k = np.full(C, -1)
        col_k[pj] = np.arange(P)
        rk, ck = row_k[rows], col_k[cols]
        return (pair_sums(tabs, rk), pair_sums(tabs, ck), tabs.sum(axis=2),
                tabs[:, :, (rk >= 0) & (rk == ck)].sum(axis=(1, 2)))

    def pair_sums(tabs: np.ndarray, key: np.ndarray) -> np.ndarray:
        """(b, S, P) sums of the cells whose row (column) is the k-th matched pair's; ``key``: k or -1."""
        out = np.zeros(tabs.shape[:2] + (P,), dtype=np.int64)
        sel = np.flatnonzero(key >= 0)
        if len(sel):
            o = sel[np.argsort(key[sel], kind="stable")]
            ks = key[o]
            st = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
            out[:, :, ks[st]] = np.add.reduceat(tabs[:, :, o], st, axis=2)
        return out

    def stat(tabs: np.ndarray, cells: np.ndarray) -> np.ndarray:  # (b, S, K'), (K',)
        r, c, n, obs = margins(tabs, cells)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, (r * c).sum(axis=2) / np.maximum(n, 1), 0.0).sum(axis=1)
        return (obs - mean) / n_total
    return stat


def _design_label_check(frame: AuditFrame, spec: str, idx: np.ndarray, gain: np.ndarray, cell: np.ndarray,
                        pairs, R: int, C: int, B: int, n_boot: int, rng, strata: np.ndarray | None = None,
                        n_strata: int = 1) -> dict:
    """AUC of the per-item gain against the designer's label, and the zero-gain excess per label value
    (:mod:`audit_hub.detectors.design_label`), its null within (label value x the headline's strata), as the
    per-category null is (``strata``: each item's stratum; before, the label value alone, so a yes/no benchmark's
    label values read -4.2 and -8.3 pp where the per-category table, stratified, read +0.0 pp)."""
    from ..errors import InputError
    from .design_label import auc_discrete, parse_design_label

    column, positive = parse_design_label(spec)
    if column not in frame.questions.columns:
        hint = ""
        if "=" in column and column.partition("=")[0].strip() in frame.questions.columns:
            hint = f" (the form is COLUMN:VALUE: --design-label {column.replace('=', ':', 1)})"
        raise InputError(f"--design-label: no question column {column!r}{hint}; columns: "
                         f"{[c for c in frame.questions.columns if c not in ('options',)]}", column=column)
    raw = frame.questions[column].astype(object).to_numpy()[idx]
    has = np.array([v is not None and not (isinstance(v, float) and np.isnan(v)) and str(v).strip() != ""
                    for v in raw], dtype=bool)
    lab = np.array([str(v).strip() for v in raw], dtype=object)
    values = sorted(set(lab[has].tolist()))
    if len(values) < 2:
        return {"column": column, "skipped": f"column {column!r} has {len(values)} distinct label value(s) "
                                              "among the audited items; need 2 or more"}
    if positive is None:
        positive = values[0]
    if positive not in values:
        raise InputError(f"--design-label: value {positive!r} not in column {column!r} (values: {values[:20]})",
                         column=column)
    code = np.full(len(idx), len(values), dtype=np.int64)
    for k, v in enumerate(values):
        code[has & (lab == v)] = k
    nl = len(values) + 1  # last group: unlabelled items
    st = np.zeros(len(idx), np.int64) if strata is None else np.asarray(strata, np.int64)
    ns = max(int(n_strata), 1)
    unit = code * ns + st  # (label value, stratum): the table each item's blind outcome is shuffled within
    ltabs = np.bincount(unit * (R * C) + cell, minlength=nl * ns * R * C).reshape(nl * ns, R, C)
    lnull = _Null(ltabs, pairs, np.arange(nl * ns) // ns, nl, B, rng,
                  items=(unit, cell // C, cell % C, R - 1, C - 1))
    lp = lnull.p_values() if B > 0 else np.full(nl, np.nan)
    per_value = {}
    for k, v in enumerate(values):
        n_v = int(lnull.n[k])
        z_v = int(lnull.observed[k])
        lo, hi = wilson_ci(z_v, n_v)
        nm = float(lnull.mean[k] / n_v) if n_v else None
        per_value[v] = {"n_items": n_v, "zero_gain_share": z_v / n_v if n_v else None, "share_ci": [float(lo), float(hi)],
                        "null_mean": nm, "excess": (z_v / n_v - nm) if n_v else None,
                        "p_value": None if np.isnan(lp[k]) else float(lp[k]),
                        "mean_gain": float(gain[code == k].mean()) if n_v else None}
    pos_i = code == values.index(positive)
    auc = auc_discrete(gain[pos_i], gain[has & ~pos_i], n_boot=n_boot, rng=rng)
    ex = {v: e["excess"] for v, e in per_value.items() if e["excess"] is not None}
    ratio = None
    if len(ex) == 2:
        a, b_ = (ex[v] for v in values[:2])
        ratio = {"numerator": values[1], "denominator": values[0],
                 "value": float(b_ / a) if a not in (0, None) else None}
    return {"column": column, "positive": positive, "values": values, "n_unlabelled": int((~has).sum()),
            "auc": auc, "per_value": per_value, "excess_ratio": ratio,
            "reading": "AUC > 0.5: items labelled the positive value gain more from the image than the rest; "
                       "0.5 (the chance line): the gain does not recover the designer's labels"}


def _cell_label(i: int, j: int, mf: int, mb: int) -> str:
    if i == mf and j == mb:
        return f"f={i},b={j} (all right both ways: blind-solvable)"
    if i == 0 and j == 0:
        return "f=0,b=0 (all wrong both ways: unsolved)"
    return f"f={i},b={j}"


# ---------------------------------------------------------------------------------------- detector
def _overall_test(tabs: np.ndarray, pairs, z_count: int, n_items: int, B: int, n_boot: int,
                  rng: np.random.Generator, items: tuple | None = None) -> tuple[dict, float | None, np.ndarray]:
    """The headline test: zero-gain share with its Wilson interval against the item-matched
    permutation null (mean, SD, excess with its table-bootstrap interval, permutation p). Returns the
    headline summary entries (in summary order), the z score and the B permuted zero-gain counts."""
    n_strata, R, C = tabs.shape
    overall = _Null(tabs, pairs, np.zeros(n_strata, dtype=np.int64), 1, B, rng, items=items)
    share = z_count / n_items
    s_lo, s_hi = wilson_ci(z_count, n_items)
    null_mean = float(overall.mean[0] / n_items)
    p_value = float(permutation_p_value(overall.draws[0], z_count)) if B > 0 else None
    zscore = float((z_count - overall.mean[0]) / np.sqrt(overall.var[0])) if overall.var[0] > 0 else None
    keep = tabs.reshape(n_strata, -1).sum(axis=1) > 0
    e_lo, e_hi, _ = table_bootstrap(tabs[keep].reshape(int(keep.sum()), -1), _excess_stat(pairs, n_items, R, C),
                                    n_boot=n_boot, seed=rng, sparse=True) if n_boot > 0 else (np.nan, np.nan, None)
    head = {"n_items": n_items, "zero_gain_share": share, "share_ci": [float(s_lo), float(s_hi)],
            "null_mean": null_mean, "null_sd": float(np.sqrt(overall.var[0]) / n_items),
            "excess": share - null_mean, "excess_ci": [float(e_lo), float(e_hi)], "p_value": p_value,
            "null_sampler": NULL_SAMPLERS.get(overall.sampler)}
    return head, zscore, overall.draws[0]


def _diagonal_cells(tabs: np.ndarray, pairs, mf: int, mb: int, n_items: int) -> list[dict]:
    """Observed and expected (independence within strata) counts of each zero-gain cell (f = b share)."""
    pi, pj = pairs
    obs_cells = tabs[:, pi, pj].sum(axis=0)
    n_s = tabs.sum(axis=(1, 2)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        exp_cells = np.where(n_s[:, None] > 0, tabs.sum(axis=2)[:, pi] * tabs.sum(axis=1)[:, pj]
                             / np.maximum(n_s, 1)[:, None], 0.0).sum(axis=0)
    cells = [{"f": int(i), "b": int(j), "label": _cell_label(int(i), int(j), mf, mb), "observed": int(o),
              "expected": float(e), "excess": float((o - e) / n_items)}
             for i, j, o, e in zip(pi, pj, obs_cells, exp_cells)]
    return cells


def _three_way(pos: np.ndarray, zero: np.ndarray, neg: np.ndarray, n: int) -> dict:
    """Counts, shares and Wilson intervals of positive, zero and negative gain."""
    out = {}
    for name, m in (("positive", pos), ("zero", zero), ("negative", neg)):
        k = int(m.sum())
        lo, hi = wilson_ci(k, n)
        out[name] = {"count": k, "share": k / n if n else None, "ci": [float(lo), float(hi)]}
    return out


def _category_units(frame: AuditFrame, cat_all: np.ndarray, strata_keys: list[str]):
    """Shuffle units for the per-category null: the category x the null's other strata (effective
    option count, yes/no gold). Returns each question's unit, each unit's category and the count."""
    nc_keys = [k for k in strata_keys if k != "category"]
    nc_code = strata_codes(frame, nc_keys)[0] if nc_keys else np.zeros(frame.n_questions, np.int64)
    unit_all = cat_all.astype(np.int64) * (int(nc_code.max()) + 1) + nc_code
    _, unit_all = np.unique(unit_all, return_inverse=True)
    n_units = int(unit_all.max()) + 1
    unit_cat = np.zeros(n_units, dtype=np.int64)
    unit_cat[unit_all] = cat_all
    return unit_all, unit_cat, n_units


def _per_category(per: _Null, tabs: np.ndarray, pairs, cat: np.ndarray, f: np.ndarray, pos: np.ndarray,
                  neg: np.ndarray, cat_labels: list[str], n_items: int, B: int) -> tuple[dict, list[dict]]:
    """Per category: zero-gain share against its own permutation null (BH-adjusted) and the global
    null, and the positive / negative gain shares (summary entries and table rows)."""
    pi, pj = pairs
    n_cat = len(cat_labels)
    R = tabs.shape[1]
    cat_p = per.p_values() if B > 0 else np.full(n_cat, np.nan)
    cat_p_adj = benjamini_hochberg(cat_p)
    glob_c = tabs.sum(axis=(0, 1))[pj].astype(np.float64)
    cat_r = np.bincount(cat * R + f, minlength=n_cat * R).reshape(n_cat, R)[:, pi].astype(np.float64)
    cnt_pos = np.bincount(cat, weights=pos, minlength=n_cat)
    cnt_neg = np.bincount(cat, weights=neg, minlength=n_cat)
    per_category: dict[str, dict] = {}
    rows = []
    for g, label in enumerate(cat_labels):
        n_g = int(per.n[g])
        if n_g == 0:
            per_category[label] = {"n_items": 0}
            continue
        z_g = int(per.observed[g])
        lo, hi = wilson_ci(z_g, n_g)
        nm = float(per.mean[g] / n_g)
        entry = {
            "n_items": n_g, "zero_gain_share": z_g / n_g, "share_ci": [float(lo), float(hi)],
            "null_mean": nm, "null_sd": float(np.sqrt(per.var[g]) / n_g),
            "null_mean_global": float((cat_r[g] * glob_c).sum() / n_items / n_g),
            "excess": z_g / n_g - nm,
            "p_value": None if np.isnan(cat_p[g]) else float(cat_p[g]),
            "p_adjusted": None if np.isnan(cat_p_adj[g]) else float(cat_p_adj[g]),
            "positive_gain_share": float(cnt_pos[g] / n_g), "negative_gain_share": float(cnt_neg[g] / n_g),
        }
        per_category[label] = entry
        rows.append({"category": label, "statistic": "zero_gain_share", "estimate": entry["zero_gain_share"],
                     "ci_low": lo, "ci_high": hi, "null_mean": nm, "excess": entry["excess"],
                     "p_value": cat_p[g], "p_adjusted": cat_p_adj[g], "n_items": n_g})
        for stat_name, k in (("positive_gain_share", cnt_pos[g]), ("negative_gain_share", cnt_neg[g])):
            lo2, hi2 = wilson_ci(k, n_g)
            rows.append({"category": label, "statistic": stat_name, "estimate": k / n_g, "ci_low": lo2,
                         "ci_high": hi2, "n_items": n_g})
    return per_category, rows


def _overall_rows(share, s_lo, s_hi, null_mean, excess, p_value, n_items: int, three_way: dict) -> list[dict]:
    """The "(all)" rows: zero-gain share against the null, positive and negative gain shares."""
    all_rows = [{"category": "(all)", "statistic": "zero_gain_share", "estimate": share, "ci_low": s_lo,
                 "ci_high": s_hi, "null_mean": null_mean, "excess": excess, "p_value": p_value,
                 "p_adjusted": p_value, "n_items": n_items}]
    for stat_name in ("positive", "negative"):
        t = three_way[stat_name]
        all_rows.append({"category": "(all)", "statistic": f"{stat_name}_gain_share", "estimate": t["share"],
                         "ci_low": t["ci"][0], "ci_high": t["ci"][1], "n_items": n_items})
    return all_rows


def _leave_one_model_out(full, blind, idx, f, b, strata, n_strata, mf_names, mb_names, pool_level, n_items,
                         n_questions, B, rng) -> tuple[list[dict], str | None]:
    """The zero-gain test with each model left out in turn (same items; both arms for a paired model,
    its own arm at pool level), with the excess over its own null; and the sampler its p-values used.

    The nulls are the headline's (blind counts permuted across items within strata). They are drawn by the
    table sampler (:func:`~audit_hub.stats.nulls.sample_matched_sum`, cost ~ strata x matched pairs per
    permutation and model) or, where that is clearly dearer (:func:`~audit_hub.stats.nulls.literal_is_cheaper`: a
    wide pool, many models on few items), by permuting the items themselves, one set of ``B`` permutations shared
    by every left-out model (:func:`~audit_hub.stats.nulls.shared_permutation_matches`, cost ~ items). Both draw
    the same law; on 5,000 items x 150 models the loop took 15 s by the first and about 2 s by the second."""
    mf, mb = len(mf_names), len(mb_names)
    lomo: list[dict] = []
    all_items = n_items == n_questions
    drops = []
    if not pool_level and mf >= 2:
        drops = [(name, "both", j) for j, name in enumerate(mf_names)]
    elif pool_level:
        drops = ([(name, "full", j) for j, name in enumerate(mf_names)] if mf >= 2 else []) + \
                ([(name, "blind", j) for j, name in enumerate(mb_names)] if mb >= 2 else [])
    if not drops:
        return lomo, None
    # (models, items) contiguous 0/1 rows: one column per drop is a contiguous read
    full_k = np.ascontiguousarray(((full if all_items else full[idx]) == 1).T).view(np.int8)
    blind_k = np.ascontiguousarray(((blind if all_items else blind[idx]) == 1).T).view(np.int8)

    def sizes(arm: str) -> tuple[int, int]:
        """(Mf, Mb) with a model of ``arm`` left out."""
        return mf - (arm in ("both", "full")), mb - (arm in ("both", "blind"))

    n_tables = int((np.bincount(strata, minlength=n_strata) > 0).sum())
    literal = B > 0 and literal_is_cheaper(n_items, n_tables, len(matched_pairs(mf + 1, mb + 1)[0]), len(drops))
    draws = None
    if literal and all(arm == "both" for _n, arm, _j in drops):  # paired: f - b moves by at most one per drop
        js = [j for _n, _arm, j in drops]
        draws = shared_permutation_drops(strata, f, b, full_k[js], blind_k[js], B, rng)
    elif literal:
        def pairing(d: int) -> tuple[np.ndarray, np.ndarray]:
            """Drop ``d``'s (zero-gain target, blind count) per item, its model left out (int32 updates)."""
            _name, arm, j = drops[d]
            fd = f.astype(np.int32) - (full_k[j] if arm in ("both", "full") else 0)
            bd = b.astype(np.int32) - (blind_k[j] if arm in ("both", "blind") else 0)
            return _zero_gain_target(fd, *sizes(arm)), bd
        draws = shared_permutation_matches(strata, pairing, len(drops), B, rng)
    # the cell index with model j dropped is (cell of the full pool) - (j's contribution): an incremental update
    # of f and b per drop, in int32 (the counts are the same integers)
    cell_base: dict[tuple[int, int], np.ndarray] = {}
    for d, (name, arm, j) in enumerate(drops):
        mfd, mbd = sizes(arm)
        Rd, Cd = mfd + 1, mbd + 1
        if (Rd, Cd) not in cell_base:
            cell_base[(Rd, Cd)] = (strata * (Rd * Cd) + f * Cd + b).astype(np.int32)
        cd = cell_base[(Rd, Cd)]
        if arm in ("both", "full"):
            cd = cd - full_k[j].astype(np.int32) * Cd
        if arm in ("both", "blind"):
            cd = cd - blind_k[j]
        pr = matched_pairs(Rd, Cd)
        td = np.bincount(cd, minlength=n_strata * Rd * Cd).reshape(n_strata, Rd, Cd)
        nd = _Null(td, pr, np.zeros(n_strata, dtype=np.int64), 1, 0 if literal else B, rng)
        zd = int(nd.observed[0])
        lo, hi = wilson_ci(zd, n_items)
        pd_ = float(permutation_p_value(draws[d] if literal else nd.draws[0], zd)) if B > 0 else None
        lomo.append({"dropped_model": name, "arm": arm, "n_models_full": mfd, "n_models_blind": mbd,
                     "n_items": n_items, "zero_gain_share": zd / n_items, "share_ci": [float(lo), float(hi)],
                     "null_mean": float(nd.mean[0] / n_items), "null_sd": float(np.sqrt(nd.var[0]) / n_items),
                     "excess": zd / n_items - float(nd.mean[0] / n_items), "p_value": pd_})
    sampler = None if B <= 0 else (
        f"the items permuted within strata, {B} permutations shared by every left-out model" if literal else
        f"{B} tables with the margins fixed, per left-out model (sequential hypergeometric draws)")
    return lomo, sampler


def _fragility(lomo: list[dict], p_value, excess: float, alpha: float) -> tuple[bool | None, str]:
    """Whether leaving one model out changes the conclusion (significance at alpha or the sign of the
    excess), and which models do it."""
    fragile, reason = None, ""
    if not lomo:
        return fragile, reason
    sig = p_value is not None and p_value <= alpha
    changed = [r["dropped_model"] for r in lomo
               if r["p_value"] is not None and (r["p_value"] <= alpha) != sig]
    flipped = [r["dropped_model"] for r in lomo if np.sign(r["excess"]) * np.sign(excess) < 0]
    vanished = [r["dropped_model"] for r in lomo if abs(r["excess"]) < 1e-12 and abs(excess) >= 1e-12]
    fragile = bool(changed or flipped or vanished)
    parts = []
    if changed:
        parts.append(f"significance at alpha={alpha:g} "
                     + ("lost" if sig else "gained") + " without " + ", ".join(changed))
    if flipped:
        parts.append("sign of the excess flips without " + ", ".join(flipped))
    if vanished:
        parts.append("the excess is zero without " + ", ".join(vanished))
    reason = "; ".join(parts)
    return fragile, reason


def _per_question(frame: AuditFrame, idx, known, f, b, b_all, zero, neg, mf: int, mb: int):
    """The per-question table (counts right with and without the image, gain, zero / negative gain,
    severity: zero gain, worse when most or all blind models are right) and the severity ranks."""
    Q = frame.n_questions
    fq = np.full(Q, -1, dtype=np.int16)
    bq = np.full(Q, -1, dtype=np.int16)
    fq[idx], bq[idx] = f, b
    gain = np.full(Q, np.nan)
    gain[idx] = f / mf - b / mb
    zq = np.zeros(Q, dtype=bool)
    zq[idx] = zero
    negq = np.zeros(Q, dtype=bool)
    negq[idx] = neg
    bshare = np.where(known, b_all / mb, 0.0)
    rank = np.zeros(Q, dtype=np.int64)
    rank[zq] = 1
    rank[zq & (bshare >= 0.5)] = 2
    rank[zq & (b_all == mb) & known] = 3 if mb >= 3 else 2
    score = np.where(zq, 1.0 - (0.25 + 0.75 * bshare), 1.0)
    per_question = pd.DataFrame({
        "question_id": frame.question_id_column(),
        f"{NAME}_score": score,
        f"is_{NAME}_issue": rank >= 2,
        f"{NAME}_severity": severity_array(rank),
        f"{NAME}_f": fq,
        f"{NAME}_b": bq,
        f"{NAME}_mf": np.int16(mf),
        f"{NAME}_mb": np.int16(mb),
        f"{NAME}_m": np.int16(mf),
        f"{NAME}_gain": gain,
        f"{NAME}_zero_gain": zq,
        f"{NAME}_negative_gain": negq,
        f"{NAME}_excluded": ~known,
    })
    return per_question, rank


def null_statement(keys: list[str]) -> str:
    """The null hypothesis of the headline test, in words (card, docs and summary share it)."""
    parts = {"n_options": "effective option count (options of an mc item, 2 for yes/no, open items apart)",
             "gold": "gold answer of yes/no items", "category": "category"}
    given = " x ".join(parts[k] for k in keys) if keys else "nothing (one benchmark-wide shuffle, the paper's null)"
    return ("Blind outcomes are independent of the item given its stratum; strata: " + given + ". The full-arm "
            "counts may depend on the item in any way. A rejection means some items are answerable without "
            "the image beyond what the stratum explains (text-answerability) or that the models share a "
            "response bias the strata do not capture; it proves neither.")


def _unstratified(tabs, pairs, B, rng, n_items, z_count, alpha, p_strat, excess_strat, items=None) -> dict:
    """The paper's unstratified figure (one global shuffle) for comparison with the stratified headline."""
    t = tabs.sum(axis=0)[None]
    nl = _Null(t, pairs, np.zeros(1, np.int64), 1, B, rng,
               items=None if items is None else (np.zeros(len(items[0]), np.int64), *items[1:]))
    p = float(permutation_p_value(nl.draws[0], z_count)) if B > 0 else None
    mean = float(nl.mean[0] / n_items)
    exc = z_count / n_items - mean
    sig_s = p_strat is not None and p_strat <= alpha
    sig_u = p is not None and p <= alpha
    disagree = bool(sig_s != sig_u or (np.sign(exc) != np.sign(excess_strat) and abs(exc - excess_strat) > 0.005))
    return {"null_mean": mean, "null_sd": float(np.sqrt(nl.var[0]) / n_items), "excess": exc, "p_value": p,
            "z": float((z_count - nl.mean[0]) / np.sqrt(nl.var[0])) if nl.var[0] > 0 else None,
            "disagrees": disagree,
            "headline": "stratified",
            "why": ("the stratified null is the headline: items with fewer options or a yes/no gold that the "
                    "models are biased towards are right more often in both arms, which a benchmark-wide "
                    "shuffle reads as zero-gain excess (false positives well above alpha on such benchmarks); "
                    "within a stratum that structure is held fixed.")}


def _power_z(tabs: np.ndarray, pairs, share: float) -> float:
    """Expected z of the stratified test when ``share`` of every stratum's items is made blind-solvable
    (every model right with and without the image), starting from the null-expected tables."""
    pi, pj = pairs
    R, C = tabs.shape[1:]
    n = tabs.sum(axis=(1, 2)).astype(np.float64)
    r = tabs.sum(axis=2).astype(np.float64)
    c = tabs.sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        e0 = np.where(n[:, None, None] > 0, r[:, :, None] * c[:, None, :] / np.maximum(n, 1)[:, None, None], 0.0)
    alt = (1 - share) * e0
    alt[:, R - 1, C - 1] += share * n
    obs = alt[:, pi, pj].sum()
    mean, var = matched_sum_moments(alt.sum(axis=2)[:, pi], alt.sum(axis=1)[:, pj], n)
    v = var.sum()
    return float((obs - mean.sum()) / np.sqrt(v)) if v > 0 else 0.0


def power_summary(tabs: np.ndarray, pairs, alpha: float, target: float = 0.8) -> dict:
    """Smallest share of blind-solvable items the headline test detects with ``target`` power.

    Normal approximation to the permutation test: the planted share moves items into the all-right
    cell, the null moments are recomputed from the shifted margins (closed form), and the power is
    ``Phi(z_shift - z_alpha)``. Cost is independent of the number of items; checked against direct
    simulation in the tests."""
    from ..stats.core import norm_cdf, norm_isf

    za = float(norm_isf(alpha))

    def pw(s: float) -> float:
        return float(norm_cdf(_power_z(tabs, pairs, s) - za))

    lo, hi = 0.0, 0.5
    if pw(hi) < target:
        smallest = None
    else:
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if pw(mid) < target else (lo, mid)
        smallest = hi
    return {"target_power": target, "alpha": alpha, "min_detectable_share": smallest,
            "power_at": {f"{s:g}": pw(s) for s in (0.02, 0.05, 0.1)},
            "effect": "share of items every model answers correctly with and without the image",
            "method": "normal approximation to the stratified permutation test (closed-form null moments)"}


def _summary(*, head: dict, B: int, lomo: list, fragile, reason: str, z_count: int, n_excluded: int, rank, zscore,
             draws: np.ndarray, three_way: dict, cells: list, per_category: dict, pool_level: bool, mf_names,
             mb_names, field: str, params: dict, seed: int) -> dict:
    """The detector's summary: the headline test, leave-one-model-out, counts, the null draws, the
    three-way split, the diagonal decomposition, per category and the pools."""
    n_items = head["n_items"]
    mf, mb = len(mf_names), len(mb_names)
    note = ""
    if pool_level:
        note = (f"pool level: no model has runs in both arms, so f counts the {mf} full-arm models and b the {mb} "
                f"blind model{'s' if mb != 1 else ''}; zero gain is equal share (f*{mb} == b*{mf}). Pools differ, so the gain mixes "
                "model and image effects.")
    summary = {
        **head,
        "n_permutations": B,
        "leave_one_model_out": lomo,
        "fragile": fragile,
        "fragile_reason": reason,
        "n_zero_gain": z_count,
        "n_excluded": int(n_excluded),
        "n_flagged": int((rank >= 2).sum()),
        "n_high": int((rank == 3).sum()),
        "z": zscore,
        "null_permutation_mean": float(draws.mean() / n_items) if B > 0 else None,
        "null_permutation_sd": float(draws.std() / n_items) if B > 0 else None,
        # the B permuted zero-gain shares themselves (for the report's null-distribution figure)
        "null_distribution": (draws / n_items).round(8).tolist() if B > 0 else [],
        "three_way": three_way,
        "diagonal_decomposition": {c["label"]: c["excess"] for c in cells},
        "diagonal_cells": cells,
        "per_category": per_category,
        "pool_level": pool_level,
        "models_full": list(mf_names),
        "models_blind": list(mb_names),
        "n_models": mf,
        "field": field,
        "note": note,
        "params": params,
        "seed": seed,
    }
    return summary


def coverage_left_out(full: np.ndarray, blind: np.ndarray, pool_level: bool) -> tuple[list[int], list[int], int]:
    """The models to leave out of the test for covering few items (:func:`~audit_hub.stats.coverage.
    coverage_left_out_units`): (full-arm columns, blind-arm columns, items known after). The units are the paired
    models (a model's two runs together) or, at pool level, each arm's models (each arm keeps one)."""
    if full.min(initial=0) >= 0 and blind.min(initial=0) >= 0:  # every item known (a scan, no temporary)
        return [], [], int(len(full))
    uf, ub = full < 0, blind < 0
    if not pool_level:
        gone, n = coverage_left_out_units(uf | ub)
        return gone, gone, n
    nf = uf.shape[1]
    gone, n = coverage_left_out_units(np.concatenate([uf, ub], axis=1),
                                      np.r_[np.zeros(nf, np.int64), np.ones(ub.shape[1], np.int64)])
    return [j for j in gone if j < nf], [j - nf for j in gone if j >= nf], n


def _paired_correctness(frame: AuditFrame, field: str):
    """The model pool of each arm (names, pool level), their (Q, M) correctness matrices, the items known for
    every model in both arms and the models left out for covering few items (:func:`coverage_left_out`: name,
    arm, items known); skipped when fewer than 2 such items exist."""
    check_correctness_field(field)
    mf_names, mb_names, pool_level = _pool(frame)
    full = frame.correctness("full", field, mf_names)
    blind = frame.correctness("blind", field, mb_names)
    if not (full >= 0).any() or not (blind >= 0).any():
        raise DetectorSkipped(f"no correctness values in field {field!r} for both arms")
    gone_f, gone_b, _ = coverage_left_out(full, blind, pool_level)
    left_out = []
    if gone_f or gone_b:
        left_out = ([{"model": mf_names[j], "arm": "full" if pool_level else "both",
                      "items_known": int((full[:, j] >= 0).sum() if pool_level
                                         else ((full[:, j] >= 0) & (blind[:, j] >= 0)).sum())} for j in gone_f]
                    + ([{"model": mb_names[j], "arm": "blind", "items_known": int((blind[:, j] >= 0).sum())}
                        for j in gone_b] if pool_level else []))
        kf = [j for j in range(len(mf_names)) if j not in gone_f]
        kb = [j for j in range(len(mb_names)) if j not in gone_b]
        full, blind = full[:, kf], blind[:, kb]
        mf_names, mb_names = [mf_names[j] for j in kf], [mb_names[j] for j in kb]
    known = (full >= 0).all(axis=1) & (blind >= 0).all(axis=1)
    if int(known.sum()) < 2:
        raise DetectorSkipped(f"fewer than 2 items have {field!r} correctness for every model in both arms")
    return mf_names, mb_names, pool_level, full, blind, known, left_out


def _statistics(tabs: np.ndarray, pairs, strata_keys, B2: int, rng: np.random.Generator, n_items: int,
                z_count: int, alpha: float, p_value, excess, power: bool, items: tuple | None = None) -> dict:
    """The stratified null in words, the paper's unstratified figure (when there are strata), power."""
    n_strata = tabs.shape[0]
    return {
        "stratify": strata_keys or None,
        "n_strata": int((tabs.reshape(n_strata, -1).sum(axis=1) > 0).sum()),
        "null_hypothesis": null_statement(strata_keys),
        "unstratified": _unstratified(tabs, pairs, B2, rng, n_items, z_count, alpha, p_value, excess, items)
        if n_strata > 1 else None,
        "power": power_summary(tabs, pairs, alpha) if power else None,
    }


def _excluded(Q: int, field: str, full: np.ndarray, known: np.ndarray) -> dict:
    return item_accounting(Q, [
        (f"{field} unknown for some model in the full arm", ~(full >= 0).all(axis=1)),
        (f"{field} unknown for some model in the blind arm", ~known)])["excluded"]


def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, n_permutations: int = 999,
        alpha: float = 0.05, stratify=STRATIFY_DEFAULT, n_boot: int = 1000, leave_one_out: bool = True,
        power: bool = True, design_label: str | None = None, secondary_permutations: bool = True) -> DetectorResult:
    """Zero-gain share vs the item-matched permutation null, per question, per category and per pool.

    ``secondary_permutations=False`` draws no permutations for the per-category and unstratified nulls
    (their closed-form means and SDs stay; their p-values are None); the headline test draws first, so
    its p-value does not change."""
    mf_names, mb_names, pool_level, full, blind, known, left_out = _paired_correctness(frame, field)
    n_items = int(known.sum())
    mf, mb = len(mf_names), len(mb_names)
    rng = np.random.default_rng(seed)
    B = int(n_permutations)

    f_all = (full == 1).sum(axis=1, dtype=np.int64)
    b_all = (blind == 1).sum(axis=1, dtype=np.int64)
    idx = np.flatnonzero(known)
    f, b = f_all[idx], b_all[idx]
    R, C = mf + 1, mb + 1
    pairs = matched_pairs(R, C)
    cell = f * C + b
    zero = f * mb == b * mf
    pos = f * mb > b * mf
    neg = f * mb < b * mf

    strata_all, strata_keys = strata_codes(frame, stratify)
    strata = strata_all[idx]
    n_strata = int(strata_all.max()) + 1 if len(strata_all) else 1
    cat_all, cat_labels = frame.category_codes("category")
    cat = cat_all[idx]
    n_cat = len(cat_labels)

    tabs = np.bincount(strata * (R * C) + cell, minlength=n_strata * R * C).reshape(n_strata, R, C)
    z_count = int(zero.sum())
    items = (strata, f, b, mf, mb)  # per item: the item-permutation samplers' inputs (wide pools)
    head, zscore, draws = _overall_test(tabs, pairs, z_count, n_items, B, n_boot, rng, items=items)
    p_value, excess = head["p_value"], head["excess"]
    cells = _diagonal_cells(tabs, pairs, mf, mb, n_items)
    three_way = _three_way(pos, zero, neg, n_items)
    unit_all, unit_cat, n_units = _category_units(frame, cat_all, strata_keys)
    utabs = np.bincount(unit_all[idx] * (R * C) + cell, minlength=n_units * R * C).reshape(n_units, R, C)
    B2 = B if secondary_permutations else 0
    per = _Null(utabs, pairs, unit_cat, n_cat, B2, rng, items=(unit_all[idx], *items[1:]))
    per_category, rows = _per_category(per, tabs, pairs, cat, f, pos, neg, cat_labels, n_items, B2)
    statistics = _statistics(tabs, pairs, strata_keys, B2, rng, n_items, z_count, alpha, p_value, excess, power,
                             items)
    all_rows = _overall_rows(head["zero_gain_share"], *head["share_ci"], head["null_mean"], excess, p_value,
                             n_items, three_way)
    table = summary_rows(NAME, all_rows + rows)
    table["arm"] = "full_vs_blind"
    table["field"] = field

    lomo, fragile, reason, lomo_sampler = [], None, "", None
    if leave_one_out:
        lomo, lomo_sampler = _leave_one_model_out(full, blind, idx, f, b, strata, n_strata, mf_names, mb_names, pool_level,
                                    n_items, frame.n_questions, B, rng)
        fragile, reason = _fragility(lomo, p_value, excess, alpha)

    Q = frame.n_questions
    per_question, rank = _per_question(frame, idx, known, f, b, b_all, zero, neg, mf, mb)

    params = {"field": field, "n_permutations": B, "alpha": alpha, "stratify": strata_keys or None,
              "n_boot": n_boot, "leave_one_out": leave_one_out}
    if not secondary_permutations:
        params["secondary_permutations"] = False
    summary = _summary(head=head, B=B, lomo=lomo, fragile=fragile, reason=reason, z_count=z_count,
                       n_excluded=Q - n_items, rank=rank, zscore=zscore, draws=draws, three_way=three_way,
                       cells=cells, per_category=per_category, pool_level=pool_level, mf_names=mf_names,
                       mb_names=mb_names, field=field, params=params, seed=seed)
    summary.update(statistics)
    summary["leave_one_model_out_null"] = lomo_sampler
    summary["models_left_out"] = left_out
    summary["excluded"] = _excluded(Q, field, full, known)
    summary["design_label"] = _design_label_check(frame, design_label, idx, f / mf - b / mb, cell, pairs, R, C, B,
                                                  n_boot, rng, strata=strata, n_strata=n_strata) if design_label else None
    return DetectorResult(name=NAME, per_question=per_question, summary=summary, table=table, params=params)


# ---------------------------------------------------------------------------------------- card notes
def headline_notes(vd: dict) -> list[str]:
    """Lines under the zero-gain table: the null in words, stratified vs unstratified, power."""
    out = []
    if not vd or vd.get("skipped"):
        return out
    gone = left_out_line(vd)
    if gone:
        out.append(f"**Models left out of this test for covering few items**: {md_inline(gone, 1500)}.")
    if vd.get("null_hypothesis"):
        drawn = (f" Its {vd.get('n_permutations')} permutations: {vd['null_sampler']}."
                 if vd.get("null_sampler") == NULL_SAMPLERS["items"] else "")
        out.append(f"**Null of the headline test** ({vd.get('n_strata', 1)} strata): {vd['null_hypothesis']}{drawn}")
    un = vd.get("unstratified")
    B = vd.get("n_permutations")
    if isinstance(un, dict):
        txt = (f"Unstratified (one benchmark-wide shuffle, the paper's number): null mean {pct(un.get('null_mean'))}, "
               f"excess {pp(un.get('excess'))}, p = {fmt_p(un.get('p_value'), B)}; stratified headline: excess "
               f"{pp(vd.get('excess'))}, p = {fmt_p(vd.get('p_value'), B)}.")
        if un.get("disagrees"):
            txt = "**The two nulls disagree.** " + txt + " The headline is the stratified test: " + str(un.get("why", ""))
        out.append(txt)
    pw = vd.get("power")
    if isinstance(pw, dict):
        md = pw.get("min_detectable_share")
        at = pw.get("power_at") or {}
        n, m = vd.get("n_items"), vd.get("n_models")
        lead = (f"**Power**: at {n:,} items and {m} full-arm models, the smallest share of blind-solvable items "
                f"(every model right with and without the image) detected with 80% power at alpha = "
                f"{pw.get('alpha')} is {pct(md)}" if md is not None else
                f"**Power**: at {n:,} items and {m} full-arm models, even 50% blind-solvable items are not detected "
                "with 80% power")
        out.append(lead + "; probability of detecting 2% / 5% / 10%: " +
                   " / ".join(f"{float(at[k]):.2f}" for k in ("0.02", "0.05", "0.1") if k in at) +
                   f" ({pw.get('method', '')}).")
    return out



# ---------------------------------------------------------------------------------------- judge dependence
def judge_dependence(frame: AuditFrame, result_hit: DetectorResult | None,
                     result_exact: DetectorResult | None) -> dict:
    """How much the zero-gain audit depends on the judge: judged (``hit``) vs exact-match arm.

    Returns per-category zero-gain shares under both fields and their difference, the largest
    absolute difference, whether the headline conclusion (p <= alpha) changes, and per (model, arm)
    the number of items scored both ways and how many disagree (``hit != hit_exact``), with the model
    that accounts for the largest part of the disagreement.
    """
    out: dict[str, Any] = {}
    if result_hit is not None and result_exact is not None:
        sh, se = result_hit.summary, result_exact.summary
        pc_h, pc_e = sh.get("per_category", {}), se.get("per_category", {})
        per_cat = {}
        for cat in sorted(set(pc_h) | set(pc_e)):
            a = pc_h.get(cat, {}).get("zero_gain_share")
            b = pc_e.get(cat, {}).get("zero_gain_share")
            per_cat[cat] = {"hit": a, "hit_exact": b,
                            "difference": (a - b) if a is not None and b is not None else None}
        diffs = [(abs(v["difference"]), k) for k, v in per_cat.items() if v["difference"] is not None]
        largest = max(diffs) if diffs else None
        alpha = float(sh.get("params", {}).get("alpha", 0.05))
        ph, pe = sh.get("p_value"), se.get("p_value")
        out.update({
            "per_category": per_cat,
            "largest_difference": None if largest is None else {"category": largest[1],
                                                                "difference": per_cat[largest[1]]["difference"]},
            "overall": {"hit": sh.get("zero_gain_share"), "hit_exact": se.get("zero_gain_share"),
                        "difference": sh.get("zero_gain_share", np.nan) - se.get("zero_gain_share", np.nan),
                        "excess_hit": sh.get("excess"), "excess_exact": se.get("excess"),
                        "p_hit": ph, "p_exact": pe},
            "conclusion_changes": (ph is not None and pe is not None and (ph <= alpha) != (pe <= alpha)),
        })
    # per (arm, model) from the cached dense matrices (a cell is -1 when the run is absent or unknown)
    nb = np.zeros(2 * frame.n_models, np.int64)
    nd = np.zeros(2 * frame.n_models, np.int64)
    for a, arm in enumerate(("full", "blind")):
        if not frame.has_arm(arm):
            continue
        h, e = frame.correctness(arm, "hit"), frame.correctness(arm, "hit_exact")
        sl = slice(a * frame.n_models, (a + 1) * frame.n_models)
        for lo in range(0, frame.n_questions, 1 << 18):
            hh, ee = h[lo:lo + (1 << 18)], e[lo:lo + (1 << 18)]
            both = (hh >= 0) & (ee >= 0)
            nb[sl] += both.sum(axis=0)
            nd[sl] += (both & (hh != ee)).sum(axis=0)
    total = int(nd.sum())
    per_model = [{"model": frame.models[k % frame.n_models], "arm": ("full", "blind")[k // frame.n_models],
                  "n_both": int(nb[k]), "n_disagree": int(nd[k]),
                  "share_disagree": float(nd[k] / nb[k]) if nb[k] else None,
                  "share_of_all_disagreement": float(nd[k] / total) if total else 0.0}
                 for k in range(2 * frame.n_models) if nb[k] > 0]
    out["per_model"] = per_model
    out["n_disagree"] = total
    if total:
        top = int(np.argmax(nd))
        out["top_model"] = {"model": frame.models[top % frame.n_models],
                            "arm": ("full", "blind")[top // frame.n_models],
                            "share_of_all_disagreement": float(nd[top] / total)}
    else:
        out["top_model"] = None
    return out


# ---------------------------------------------------------------------------------------- report phrases
def evidence_phrase(p: pd.DataFrame, label: str) -> pd.Series:
    """The report's evidence phrase for flagged rows ``p`` of the questions table."""
    return (label + " (" + num_labels(p[f"{NAME}_f"]) + "/" + num_labels(p[f"{NAME}_mf"]) + " right with it, "
            + num_labels(p[f"{NAME}_b"]) + "/" + num_labels(p[f"{NAME}_mb"]) + " right blind)")


def _cells(s: dict) -> list[dict]:
    cells = s.get("diagonal_cells")
    return [c for c in cells if isinstance(c, dict) and isnum(c.get("excess"))] if isinstance(cells, list) else []


def _cell_kind(c: dict, s: dict) -> str:
    lab = str(c.get("label", ""))
    if "blind-solvable" in lab:
        return "blind-solvable"
    if c.get("f") == 0 and c.get("b") == 0:
        return "unsolved"
    return "partly solved"


def excess_location(s: dict) -> str:
    """Where the zero-gain excess sits, in words: the diagonal cell that carries most of it, what that
    cell means, and the blind-solvable cell (the only cell that is evidence of text-answerability)."""
    cells = _cells(s)
    total = s.get("excess")
    if not cells or not isnum(total) or float(total) <= 0:
        return ""
    top = max(cells, key=lambda c: float(c["excess"]))
    kind = _cell_kind(top, s)
    solv = [c for c in cells if _cell_kind(c, s) == "blind-solvable"]
    share = float(top["excess"]) / float(total)
    # a cell can carry more than the whole excess where other zero-gain cells fall below their null
    how = ("more than all of it" if share > 1.05 else "all of it" if share >= 0.95 else "most of it" if share >= 0.5
           else f"{pct(share)} of it")
    where = {"unsolved": "items no model solves with or without the image, which is not evidence of "
                         "text-answerability",
             "blind-solvable": "items every model answers correctly without the image: text-answerability",
             "partly solved": "items some models solve equally often with and without the image"}[kind]
    txt = (f"Where the excess is: {how} ({pp(top['excess'])}: {fmt_num(top.get('observed'))} observed, "
           f"{fmt_num(top.get('expected'))} expected) sits in {where}")
    if share > 1.05:
        short = [c for c in cells if float(c["excess"]) < 0]
        txt += (f"; the other zero-gain cells fall short of their null by {pp(-sum(float(c['excess']) for c in short))[1:]}"
                if short else "")
    if kind != "blind-solvable" and solv:
        c = solv[0]
        txt += (f"; blind-solvable items add {pp(c['excess'])} ({fmt_num(c.get('observed'))} observed, "
                f"{fmt_num(c.get('expected'))} expected)")
    return txt + "."


def decomposition_line(s: dict) -> str:
    """The card's line under the headline table: the excess of each zero-gain cell with its counts."""
    cells = _cells(s)
    if not cells:
        return ""
    mf, mb = len(s.get("models_full") or []) or s.get("n_models"), len(s.get("models_blind") or []) or None
    rule = (f"f/{mf} = b/{mb}: the share of full-arm models right equals the share of blind models right"
            if s.get("pool_level") and mb else "f = b: as many models right with the image as without")
    parts = [f"{md_inline(c.get('label', '?'), 80)}: {pp(c['excess'])} ({fmt_num(c.get('observed'))} observed, "
             f"{fmt_num(c.get('expected'))} expected)" for c in cells[:8]]
    return f"Excess by zero-gain cell ({rule}): " + "; ".join(parts) + "."


def lede_line(s: dict) -> str:
    """The card's opening line on this detector's summary ``s``: the share, the null, the excess and
    where the excess sits."""
    loc = excess_location(s)
    return (f"{pct(s.get('zero_gain_share'))} of questions show zero aggregate accuracy gain from the image; "
            f"an item-matched permutation null accounts for {pct(s.get('null_mean'))}, leaving "
            f"{pp(s.get('excess'))} (p = {fmt_p(s.get('p_value'), s.get('n_permutations'))})."
            + (" " + loc if loc else ""))


def card_line(s: dict) -> str:
    """The card's check of designer intent (``--design-label``); empty when none was asked for (the
    headline itself has its own section)."""
    d = s.get("design_label")
    if not d:
        return ""
    if d.get("skipped"):
        return f"**Designer intent** ({md_inline(d.get('column'), 60)}): not checked: {md_inline(d['skipped'], 200)}."
    auc = d.get("auc") or {}
    ci_txt = ", ".join(f"{x:.2f}" for x in auc.get("ci") or [])
    per = "; ".join(f"{md_inline(k, 40)}: excess {pp(v.get('excess'))} over {v.get('n_items')} items"
                    for k, v in (d.get("per_value") or {}).items())
    ratio = (d.get("excess_ratio") or {}).get("value")
    txt = (f"**Designer intent** ({md_inline(d.get('column'), 60)} = {md_inline(d.get('positive'), 40)} vs the rest): "
           "does the per-item gain "
           f"from the image recover the designer's labels? AUC {auc.get('auc', float('nan')):.2f} "
           f"(95% CI {ci_txt or 'n/a'}; chance 0.50, Mann-Whitney {p_is(auc.get('p_value'))}); "
           f"zero-gain excess per label value: {per}")
    exs = [v.get("excess") for v in (d.get("per_value") or {}).values()]
    if ratio is not None and all(isnum(x) and float(x) > 0 for x in exs):  # a ratio of excesses reads only above 0
        txt += (f"; the excess on {md_inline(d['excess_ratio']['numerator'], 40)} items is {ratio:.1f}x that on "
                f"{md_inline(d['excess_ratio']['denominator'], 40)} items")
    return txt + ". An AUC near 0.5 means the detector does not recover what the designer labelled."


def left_out_line(s: dict) -> str | None:
    """The models this test left out for covering few items (:func:`coverage_left_out`), with what each covered
    and what the test kept, for the console and the card (model names are input text: escape where it lands);
    None when none was."""
    gone = s.get("models_left_out") or []
    if not gone:
        return None
    n_q = int(s.get("n_items") or 0) + int(s.get("n_excluded") or 0)
    arms = {"both": "both arms", "full": "full arm", "blind": "blind arm"}
    names = "; ".join(f"{g['model']} ({arms.get(g['arm'], g['arm'])}: {s.get('field', 'hit')} known on "
                      f"{int(g['items_known']):,} of {n_q:,} items)" for g in gone[:10])
    more = f"; and {len(gone) - 10:,} more" if len(gone) > 10 else ""
    return (f"{names}{more}: with them, fewer items would be known for every model; without them the test keeps "
            f"{int(s['n_items']):,} items")


def console_line(s: dict) -> str:
    """One line for the terminal after an audit."""
    loc = excess_location(s)
    gone = left_out_line(s)
    return (f"zero-gain share {pct(s.get('zero_gain_share'))} (null {pct(s.get('null_mean'))}, "
            f"excess {pp(s.get('excess'))}, p = {fmt_p(s.get('p_value'), s.get('n_permutations'))})"
            + (". " + loc.rstrip(".") if loc else "") + (". Left out of this test for covering few items: " + gone
                                                        if gone else ""))
