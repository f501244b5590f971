"""fleiss_kappa_agreement (judge-free): how much the models agree with each other, beyond chance.

Raters are the full-arm models; categories are the answer codes of :meth:`AuditFrame.answer_codes`
(option index for mc, yes/no, value codes for numeric/free). Unparseable or missing answers are *not*
ratings: an item's rater count ``n_i`` is its number of parseable answers, so items have different
numbers of raters and the general form is used (statsmodels' ``fleiss_kappa`` asserts equal raters):

* per item ``P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))`` for items with ``n_i >= 2`` (others are
  not rated); ``P_bar`` = unweighted mean of ``P_i`` over rated items;
* ``p_j = sum_i n_ij / sum_i n_i`` (over rated items), ``P_e = sum_j p_j^2``;
* ``kappa = (P_bar - P_e) / (1 - P_e)``. With equal ``n_i`` this is exactly Fleiss (1971) /
  ``statsmodels.stats.inter_rater.fleiss_kappa(method="fleiss")``.
* Randolph's free-marginal kappa uses ``P_e = mean_i 1/K_i`` (``K_i`` = number of options, 2 for yes/no)
  over rated mc and yes/no items only (numeric/free items have no fixed number of categories); with a
  single ``K`` it equals ``fleiss_kappa(method="randolph")``.

Intervals: percentile bootstrap over items, stratified by category. Kappa depends on the items only
through sums (``#rated, sum P_i, sum n_i, sum_i n_ij``), so resampling works on a table of per-unit
sums: a unit is an item in categories with at most ``max_units`` rated items, and otherwise one of
``max_units`` random groups of that category's items (a random-group bootstrap: for independent items,
resampling many random groups reproduces the item-level variance). Replicates are then
``resampled unit counts (B x units) @ unit sums (units x stats)``. Answer codes beyond the
``max_boot_codes`` most frequent enter ``P_e`` at their observed value in every replicate (they are
rare; their share of ``P_e`` is in ``summary["p_e_fixed_part"]``).

Per item (never a per-item kappa): agreement ``P_i``, number of distinct answers, entropy normalised by
``log(min(n_i, K_i))`` (``K_i = n_i`` for numeric/free). Flag (medium): ``n_i >= 3`` and ``P_i <= P_e``
(agreement no better than chance; e.g. all answers different). Score: ``P_i`` (1.0 when not rated).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DetectorSkipped
from ..fmt import ci, fmt_num, isnum, num_labels
from ..frame.core import AuditFrame
from ..severity import severity_array
from .accounting import item_accounting
from .base import DetectorResult, summary_rows
from .consensus_error import answer_row_stats, closed_code_counts
from .strata import effective_option_count

NAME = "fleiss_kappa_agreement"

# columns of the per-unit sufficient-statistic table (followed by the tracked answer-code totals)
_N_RATED, _SUM_P, _SUM_N, _N_CLOSED, _SUM_P_CLOSED, _SUM_INVK = range(6)
_NFIX = 6


def _kappas(s: np.ndarray, fixed_pe: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Fleiss and Randolph kappas from sufficient-statistic rows (..., 6 + D)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        pbar = s[..., _SUM_P] / s[..., _N_RATED]
        pj = s[..., _NFIX:] / s[..., _SUM_N, None]
        pe = (pj * pj).sum(axis=-1) + fixed_pe
        k = np.where(pe < 1, (pbar - pe) / (1 - pe), np.nan)
        pbar_c = s[..., _SUM_P_CLOSED] / s[..., _N_CLOSED]
        pe_r = s[..., _SUM_INVK] / s[..., _N_CLOSED]
        kr = np.where(pe_r < 1, (pbar_c - pe_r) / (1 - pe_r), np.nan)
    return k, kr


def _code_totals(A: np.ndarray, rated: np.ndarray, crows: np.ndarray, ccounts: np.ndarray, orows: np.ndarray,
                 chunk: int) -> tuple[np.ndarray, int, int]:
    """Answer-code totals over the rated items (mc / yes-no items from the shared per-item code counts,
    the others row by row), the largest code and the number of closed-item code columns used."""
    max_code = int(A.max()) if A.size else -1
    totals = np.zeros(max_code + 2, np.float64)
    # mc / yes-no items: from the shared per-item code counts; the others (numeric/free) row by row
    cr = rated[crows]
    kc = min(ccounts.shape[1], max_code + 1)
    totals[:kc] += ccounts[cr][:, :kc].sum(axis=0)
    for s in range(0, len(orows), chunk):
        r_ = orows[s:s + chunk]
        a = A[r_[rated[r_]]]
        a = a[a >= 0]
        totals[: max_code + 1] += np.bincount(a, minlength=max_code + 1)[: max_code + 1]
    return totals, max_code, kc


def _bootstrap_units(rated: np.ndarray, cat: np.ndarray, C: int, max_units: int, rng: np.random.Generator,
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """Bootstrap units: each rated item, or random groups of items within categories larger than
    ``max_units``. Returns the unit of each item (-1 unrated), each unit's category and the count."""
    Q = len(rated)
    unit = np.full(Q, -1, np.int64)
    unit_cat = []
    next_u = 0
    for c in range(C):
        idx = np.flatnonzero(rated & (cat == c))
        if len(idx) == 0:
            continue
        if len(idx) <= max_units:
            unit[idx] = next_u + np.arange(len(idx))
            g = len(idx)
        else:
            unit[idx] = next_u + rng.integers(0, max_units, size=len(idx))
            g = max_units
        unit_cat.append(np.full(g, c, np.int64))
        next_u += g
    U = next_u
    unit_cat = np.concatenate(unit_cat) if unit_cat else np.zeros(0, np.int64)
    return unit, unit_cat, U


def _unit_stats(A, unit, U, D, rated, p_i, n, closed, inv_k, crows, ccounts, orows, code_map, kc, chunk):
    """(U, _NFIX + D) sufficient statistics per unit: rated items, sums of agreement and raters, closed
    items and their agreement and 1/K, then the counts of the D tracked answer codes."""
    ustats = np.zeros((U, _NFIX + D), np.float64)
    ur = unit[rated]
    ustats[:, _N_RATED] = np.bincount(ur, minlength=U)
    ustats[:, _SUM_P] = np.bincount(ur, weights=p_i[rated], minlength=U)
    ustats[:, _SUM_N] = np.bincount(ur, weights=n[rated], minlength=U)
    ustats[:, _N_CLOSED] = np.bincount(ur, weights=closed[rated], minlength=U)
    ustats[:, _SUM_P_CLOSED] = np.bincount(ur, weights=np.where(closed, p_i, 0.0)[rated], minlength=U)
    ustats[:, _SUM_INVK] = np.bincount(ur, weights=inv_k[rated], minlength=U)
    if D:
        flat = np.zeros(U * D, np.float64)
        uc = unit[crows]
        okc = uc >= 0
        for j in range(kc):
            if code_map[j] >= 0:
                flat += np.bincount(uc[okc] * D + code_map[j], weights=ccounts[okc, j], minlength=U * D)
        for s in range(0, len(orows), chunk):
            r_ = orows[s:s + chunk]
            a = A[r_]
            u = unit[r_]
            d = np.where(a >= 0, code_map[np.maximum(a, 0)], -1)
            ok = (d >= 0) & (u[:, None] >= 0)
            idx = (u[:, None] * D + d)[ok]
            flat += np.bincount(idx, minlength=U * D)
        ustats[:, _NFIX:] = flat.reshape(U, D)
    return ustats


def _fixed_part_by_category(A, rated, cat, C, untracked, cat_sum, fixed_all, max_code) -> np.ndarray:
    """Per category, the chance-agreement part of the untracked codes, held at its observed value."""
    fixed_cat = np.zeros(C)
    if untracked[: max_code + 1].any() and fixed_all > 0:
        for c in range(C):
            sel = rated & (cat == c)
            a = A[sel]
            a = a[(a >= 0)]
            a = a[untracked[a]]
            if len(a) and cat_sum[c, _SUM_N] > 0:
                cnt = np.bincount(a)
                fixed_cat[c] = float(((cnt / cat_sum[c, _SUM_N]) ** 2).sum())
    return fixed_cat


def _untracked_chance_parts(A, rated, cat, C, tracked, p_j, ustats, unit_cat, max_code):
    """The chance-agreement part of the untracked codes, held at its observed value overall and per
    category, and the per-category observed sums of the unit statistics."""
    untracked = np.ones(max_code + 2, bool)
    untracked[tracked] = False
    fixed_all = float((p_j[untracked] ** 2).sum())
    cat_sum = np.zeros((C, ustats.shape[1]))
    np.add.at(cat_sum, unit_cat, ustats)
    return fixed_all, cat_sum, _fixed_part_by_category(A, rated, cat, C, untracked, cat_sum, fixed_all, max_code)


def _stratified_bootstrap(ustats: np.ndarray, unit_cat: np.ndarray, C: int, n_boot: int,
                          rng: np.random.Generator) -> np.ndarray:
    """(n_boot, C, stats) bootstrap replicates of the per-category sums, units resampled within each
    category (250 replicates at a time). A replicate's weights are the counts of ``n`` draws of the category's
    ``n`` units with replacement (multinomial, equal probabilities), counted from the draws themselves:
    numpy's multinomial takes one binomial per unit, about 7x slower at 2,000 units."""
    reps_cat = np.zeros((n_boot, C, ustats.shape[1]))
    for c in range(C):
        us = np.flatnonzero(unit_cat == c)
        n = len(us)
        if n == 0:
            continue
        for b0 in range(0, n_boot, 250):
            b = min(250, n_boot - b0)
            draws = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
            w = np.bincount(draws.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
            reps_cat[b0:b0 + b, c] = w @ ustats[us]
    return reps_cat


def _closed_items(frame: AuditFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mc / yes-no items with 2+ options, each item's number of options and 1/K (0 for open items)."""
    atype = frame.answer_type
    closed = (atype == "mc") | (atype == "yesno")
    k_i = np.where(atype == "yesno", 2, effective_option_count(frame).astype(np.int64))
    closed &= k_i >= 2
    return closed, k_i, np.where(closed, 1.0 / np.maximum(k_i, 1), 0.0)


def _overall_kappas(p_i: np.ndarray, rated: np.ndarray, closed: np.ndarray, inv_k: np.ndarray, p_j: np.ndarray):
    """Code shares ``p_j``, chance agreement P_e, mean observed agreement, Fleiss kappa, and Randolph's
    free-marginal P_e and kappa on the rated closed items (NaN without any)."""
    p_e = float((p_j * p_j).sum())
    p_bar = float(np.nanmean(p_i[rated]))
    kappa = (p_bar - p_e) / (1 - p_e) if p_e < 1 else float("nan")
    cl_r = closed & rated
    if cl_r.any():
        pe_r = float(inv_k[cl_r].mean())
        kappa_r = (float(p_i[cl_r].mean()) - pe_r) / (1 - pe_r)
    else:
        pe_r, kappa_r = float("nan"), float("nan")
    return p_j, p_e, p_bar, kappa, pe_r, kappa_r


def _tracked_codes(totals: np.ndarray, max_code: int, max_boot_codes: int,
                   texts: tuple[int, tuple[str, ...]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The most frequent answer codes the bootstrap tracks, and code -> tracked column (-1 untracked). Equal counts
    go by the code's value (``texts``: :meth:`AuditFrame.answer_value_texts`), not by its number, which follows the
    order the rows came in (the metamorphic review: shuffled runs moved a kappa interval's last digits)."""
    nz = np.flatnonzero(totals > 0)
    if texts is not None:
        kmax, values = texts
        key = np.array([f"\x00{c:05d}" if c < kmax else (values[c - kmax] if c - kmax < len(values) else f"\x01{c}")
                        for c in nz.tolist()], dtype=object)
        tracked = nz[np.lexsort((key, -totals[nz]))[:max_boot_codes]]
    else:
        tracked = nz[np.argsort(-totals[nz], kind="stable")[:max_boot_codes]]
    code_map = np.full(max_code + 2, -1, np.int64)
    code_map[tracked] = np.arange(len(tracked))
    return tracked, code_map


def _percentile_ci(r: np.ndarray, alpha: float) -> list:
    """Percentile interval of bootstrap replicates (NaN replicates dropped; [None, None] without any)."""
    r = r[~np.isnan(r)]
    return [float(x) for x in np.quantile(r, [alpha / 2, 1 - alpha / 2])] if len(r) else [None, None]


def _normalised_entropy(entropy: np.ndarray, closed: np.ndarray, n: np.ndarray, k_i: np.ndarray) -> np.ndarray:
    """Answer entropy per item divided by its maximum (log of the options or raters, whichever fewer)."""
    K_eff = np.where(closed, np.minimum(n, k_i), n)
    with np.errstate(invalid="ignore", divide="ignore"):
        ent_norm = np.where(K_eff >= 2, entropy / np.log(np.maximum(K_eff, 2)), 0.0)
    return np.clip(ent_norm, 0.0, 1.0)


def _overall_rows(kappa, kappa_ci, kappa_r, kappa_r_ci, n_rated: int, n_closed_rated: int) -> list[dict]:
    """The "(all)" rows: Fleiss kappa over the rated items, Randolph kappa over the rated closed items."""
    return [
        {"category": "(all)", "arm": "full", "statistic": "fleiss_kappa", "estimate": kappa,
         "ci_low": kappa_ci[0], "ci_high": kappa_ci[1], "null_mean": 0.0, "n_items": n_rated},
        {"category": "(all)", "arm": "full", "statistic": "randolph_kappa", "estimate": kappa_r,
         "ci_low": kappa_r_ci[0], "ci_high": kappa_r_ci[1], "null_mean": 0.0, "n_items": n_closed_rated},
    ]


def _category_rows(labels, k_cat, kr_cat, rk_cat, rkr_cat, n_cat_rated, cat_sum, alpha) -> tuple[dict, list[dict]]:
    """Per category: Fleiss and Randolph kappa with bootstrap intervals (summary entries and table rows)."""
    per_category: dict = {}
    cat_rows: list[dict] = []
    for c, lab in enumerate(labels):
        kc, krc = _percentile_ci(rk_cat[:, c], alpha), _percentile_ci(rkr_cat[:, c], alpha)
        n_c = int(n_cat_rated[c])
        per_category[lab] = {"kappa": None if np.isnan(k_cat[c]) else float(k_cat[c]), "kappa_ci": kc,
                             "randolph_kappa": None if np.isnan(kr_cat[c]) else float(kr_cat[c]),
                             "randolph_kappa_ci": krc, "n_items": n_c}
        cat_rows.append({"category": lab, "arm": "full", "statistic": "fleiss_kappa", "estimate": k_cat[c],
                     "ci_low": kc[0], "ci_high": kc[1], "null_mean": 0.0, "n_items": n_c})
        cat_rows.append({"category": lab, "arm": "full", "statistic": "randolph_kappa", "estimate": kr_cat[c],
                     "ci_low": krc[0], "ci_high": krc[1], "null_mean": 0.0,
                     "n_items": int(cat_sum[c, _N_CLOSED])})
    return per_category, cat_rows


def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, n_boot: int = 1000, max_units: int = 2000,
        max_boot_codes: int = 64, alpha: float = 0.05, chunk: int = 200_000) -> DetectorResult:
    """Overall and per-category Fleiss/Randolph kappa with bootstrap CIs, per-item agreement."""
    models = frame.models_in("full")
    if len(models) < 2:
        raise DetectorSkipped(f"needs full-arm answers from at least 2 models (found {len(models)})")
    rng = np.random.default_rng(seed)
    Q, M = frame.n_questions, len(models)
    A = frame.answer_codes("full", models=models)
    rs = answer_row_stats(frame, "full", models, chunk=chunk)
    n = rs["n"].astype(np.int64)
    rated = n >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        p_i = np.where(rated, (rs["sum_sq"] - n) / (n * (n - 1)).clip(min=1), np.nan)
    closed, k_i, inv_k = _closed_items(frame)
    crows, ccounts = closed_code_counts(frame, "full", models)
    orows = np.setdiff1d(np.arange(Q), crows) if len(crows) < Q else np.zeros(0, np.int64)
    totals, max_code, kc = _code_totals(A, rated, crows, ccounts, orows, chunk)
    n_rated = int(rated.sum())
    if n_rated == 0:
        raise DetectorSkipped("no item has parseable answers from 2 or more models")
    p_j, p_e, p_bar, kappa, pe_r, kappa_r = _overall_kappas(p_i, rated, closed, inv_k, totals / float(n[rated].sum()))
    tracked, code_map = _tracked_codes(totals, max_code, max_boot_codes, frame.answer_value_texts())
    D = len(tracked)
    cat, labels = frame.category_codes("category")
    C = len(labels)
    n_cat_rated = np.bincount(cat[rated], minlength=C)
    unit, unit_cat, U = _bootstrap_units(rated, cat, C, max_units, rng)
    ustats = _unit_stats(A, unit, U, D, rated, p_i, n, closed, inv_k, crows, ccounts, orows, code_map, kc, chunk)
    fixed_all, cat_sum, fixed_cat = _untracked_chance_parts(A, rated, cat, C, tracked, p_j, ustats, unit_cat,
                                                            max_code)
    k_cat, kr_cat = _kappas(cat_sum, fixed_cat)
    reps_cat = _stratified_bootstrap(ustats, unit_cat, C, n_boot, rng)
    rk_all, rkr_all = _kappas(reps_cat.sum(axis=1), fixed_all)
    rk_cat, rkr_cat = _kappas(reps_cat, fixed_cat[None, :])
    kappa_ci, kappa_r_ci = _percentile_ci(rk_all, alpha), _percentile_ci(rkr_all, alpha)
    ent_norm = _normalised_entropy(rs["entropy"], closed, n, k_i)
    flag = rated & (n >= 3) & (p_i <= p_e + 1e-12)
    sev = np.where(flag, 2, 0)
    per_question = pd.DataFrame({
        "question_id": frame.question_id_column(),
        f"{NAME}_score": np.where(rated, p_i, 1.0),
        f"is_{NAME}_issue": flag,
        f"{NAME}_severity": severity_array(sev),
        f"{NAME}_agreement": p_i,
        f"{NAME}_n_raters": n,
        f"{NAME}_n_distinct": rs["n_distinct"].astype(np.int64),
        f"{NAME}_entropy": ent_norm,
    })

    per_category, cat_rows = _category_rows(labels, k_cat, kr_cat, rk_cat, rkr_cat, n_cat_rated, cat_sum, alpha)
    table = summary_rows(NAME, _overall_rows(kappa, kappa_ci, kappa_r, kappa_r_ci, n_rated,
                                             int((closed & rated).sum())) + cat_rows)
    summary = {
        "kappa": float(kappa),
        "kappa_ci": kappa_ci,
        "randolph_kappa": None if np.isnan(kappa_r) else float(kappa_r),
        "randolph_kappa_ci": kappa_r_ci,
        "p_bar": p_bar,
        "p_e": p_e,
        "p_e_randolph": None if np.isnan(pe_r) else pe_r,
        "p_e_fixed_part": fixed_all,
        "n_items_rated": n_rated,
        "n_items": n_rated,
        "excluded": item_accounting(Q, [("fewer than 2 models answered parseably", ~rated)])["excluded"],
        "n_raters_max": M,
        "mean_raters": float(n[rated].mean()),
        "per_category": per_category,
        "p_value": None,
        "n_flagged": int(flag.sum()),
        "bootstrap": {"n_boot": n_boot, "n_units": U, "max_units": max_units, "tracked_codes": D,
                      "method": "percentile, stratified by category, random-group units for large categories"},
        "params": {"n_boot": n_boot, "max_units": max_units, "max_boot_codes": max_boot_codes, "alpha": alpha},
        "seed": seed,
    }
    return DetectorResult(name=NAME, per_question=per_question, summary=summary, table=table,
                          params=summary["params"])


# ---------------------------------------------------------------------------------------- report phrases
def evidence_phrase(p: pd.DataFrame, label: str) -> pd.Series:
    """The report's evidence phrase for flagged rows ``p`` of the questions table."""
    return (label + " (pairwise agreement " + num_labels(p[f"{NAME}_agreement"]) + ")" + ", "
            + num_labels(p[f"{NAME}_n_distinct"]) + " distinct answers")


def card_line(s: dict) -> str:
    """The card's one-line finding on this detector's summary ``s``."""
    txt = f"**{NAME}**: Fleiss kappa {fmt_num(s.get('kappa'))} (95% CI {ci(s.get('kappa_ci'), 'plain', s.get('kappa'))})"
    if isnum(s.get("randolph_kappa")):
        txt += f"; Randolph free-marginal kappa {fmt_num(s.get('randolph_kappa'))}"
    return txt + "."
