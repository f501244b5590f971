"""answer_options_distribution (judge-free): is the gold letter position balanced?

Multiple-choice items only, stratified by their number of options ``K`` (a chi-square against a uniform
over the largest ``K`` would be invalid when ``K`` varies):

* per stratum ``K >= 2``: gold-position counts vs uniform ``n_K / K``; chi-square statistics and degrees
  of freedom (``K - 1``) are summed over strata. ``p_value`` is the chi-square tail when every expected
  count is >= 5, otherwise a seeded Monte Carlo p: ``n_mc`` multinomial draws per stratum under the
  uniform null, the summed statistic compared with the observed one, ``(1 + #{null >= obs}) / (n_mc + 1)``.
* Cohen's ``w = sqrt(chi2 / N)``.
* majority-letter baseline: predicting the most common gold letter of each stratum; its accuracy (Wilson
  CI) against chance ``mean(1/K)``.
* per model and arm: predicted-letter distribution vs the gold distribution of the same items (total
  variation distance, chi-square goodness of fit of the predictions against the gold shares).

``K`` is the item's *effective* option count (placeholder options such as ``nan``/empty excluded,
:mod:`audit_hub.detectors.placeholders`); items whose gold is a placeholder, or sits beyond the real options, are
left out of the test and counted in ``excluded``.

Per question: ``score = 1 - max(0, share of its gold position in its stratum - 1/K)`` and the evidence
columns. A position bias is a *benchmark-level* finding (``over_represented`` letters per stratum, with
Holm-adjusted one-sided binomial tests): it says nothing about any one item, so no item is flagged
(``is_answer_options_distribution_issue`` is False everywhere; the per-item list holds only items with
evidence about that item, and this detector has none). Works with zero runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DetectorSkipped
from ..fmt import fmt_num, p_is
from ..frame.core import AuditFrame
from ..schema import LETTERS
from ..severity import severity_array
from ..stats.core import benjamini_hochberg, holm, wilson_ci
from .accounting import item_accounting
from .base import DetectorResult, summary_rows

NAME = "answer_options_distribution"


def stratified_chi2(k_of_item: np.ndarray, pos: np.ndarray, *, n_mc: int = 9999, rng=None,
                    min_expected: float = 5.0) -> dict:
    """Chi-square of positions vs uniform, summed over strata of equal K (K >= 2).

    Returns chi2, dof, p_value, method ("asymptotic" or "monte_carlo"), n, and per-stratum counts.
    """
    from ..stats.core import chi2_sf

    rng = np.random.default_rng(0) if rng is None else rng
    strata = {}
    chi2 = 0.0
    dof = 0
    small = False
    n_tot = 0
    for K in np.flatnonzero(np.bincount(k_of_item)) if len(k_of_item) else []:
        if K < 2:
            continue
        sel = k_of_item == K
        cnt = np.bincount(pos[sel], minlength=K)[:K]
        n = int(cnt.sum())
        e = n / K
        c2 = float(((cnt - e) ** 2 / e).sum())
        strata[int(K)] = {"counts": cnt, "n": n, "chi2": c2}
        chi2 += c2
        dof += int(K) - 1
        n_tot += n
        small |= e < min_expected
    if dof == 0:
        return {"chi2": None, "dof": 0, "p_value": None, "method": None, "n": n_tot, "strata": strata}
    if not small:
        p = float(chi2_sf(chi2, dof))
        method = "asymptotic"
    else:
        null = np.zeros(n_mc)
        for K, s in strata.items():
            draws = rng.multinomial(s["n"], np.full(K, 1.0 / K), size=n_mc)
            e = s["n"] / K
            null += ((draws - e) ** 2 / e).sum(axis=1)
        p = float((1 + (null >= chi2 - 1e-9 * max(1.0, chi2)).sum()) / (n_mc + 1))
        method = "monte_carlo"
    return {"chi2": chi2, "dof": dof, "p_value": p, "method": method, "n": n_tot, "strata": strata}


def _majority_baseline(res: dict, mc: np.ndarray, K: np.ndarray, gold: np.ndarray, p: float | None,
                       alpha: float) -> tuple[int, np.ndarray, np.ndarray, dict]:
    """Per stratum of option count: the majority-letter baseline hits, each item's gold-position excess
    over 1/K, the items whose gold sits in an over-represented position (binomial, Holm; only when the
    overall test rejects) and the stratum summaries."""
    from ..stats.core import binom_sf

    Q = len(K)
    base_hits = 0
    excess = np.zeros(Q)
    flag = np.zeros(Q, bool)
    strata_out = {}
    for Kv, s in res["strata"].items():
        cnt = s["counts"]
        n = s["n"]
        base_hits += int(cnt.max())
        share = cnt / n
        bp = binom_sf(cnt - 1, n, 1.0 / Kv)
        bp_adj = holm(bp)
        sel = mc & (K == Kv)
        excess[sel] = np.maximum(0.0, share[gold[sel]] - 1.0 / Kv)
        over = (bp_adj < alpha) & (share > 1.0 / Kv)
        strata_out[str(Kv)] = {"n": n, "counts": {LETTERS[j]: int(cnt[j]) for j in range(Kv)},
                               "chi2": s["chi2"], "dof": Kv - 1,
                               "over_represented": [LETTERS[j] for j in np.flatnonzero(over)],
                               "binomial_p_holm": {LETTERS[j]: float(bp_adj[j]) for j in range(Kv)}}
    return base_hits, excess, flag, strata_out


def _letter_preferences(frame: AuditFrame, mc: np.ndarray, gold: np.ndarray, kmax: int) -> dict:
    """Per model and arm: predicted letters vs gold letters on the same items (counts, total variation,
    chi-square against the gold distribution, favourite letter)."""
    from ..stats.core import chi2_sf

    Q = frame.n_questions
    per_model: dict = {}
    for arm in ("full", "blind"):
        if not frame.has_arm(arm):
            continue
        models = frame.models_in(arm)
        A_all = frame.answer_codes(arm, models=models)
        # per model x letter counts, chunked over rows, one comparison per letter (no int64 index arrays)
        pred = np.zeros((len(models), kmax), np.int64)
        gcnt = np.zeros((len(models), kmax), np.int64)
        step = 1 << 18
        for lo in range(0, Q, step):
            sel = mc[lo:lo + step]
            A = A_all[lo:lo + step][sel]
            g = gold[lo:lo + step][sel]
            ok = (A >= 0) & (A < kmax)
            for j in range(kmax):
                pred[:, j] += (A == j).sum(axis=0)
                gj = g == j
                if gj.any():
                    gcnt[:, j] += ok[gj].sum(axis=0)
        for j, m in enumerate(models):
            n = int(pred[j].sum())
            if n == 0:
                continue
            ps, gs = pred[j] / n, gcnt[j] / n
            tv = float(0.5 * np.abs(ps - gs).sum())
            keep = gs > 0
            c2 = float(((pred[j][keep] - n * gs[keep]) ** 2 / (n * gs[keep])).sum())
            df_ = int(keep.sum()) - 1
            per_model.setdefault(m, {})[arm] = {
                "n": n, "predicted": {LETTERS[i]: int(pred[j][i]) for i in range(kmax)},
                "gold": {LETTERS[i]: int(gcnt[j][i]) for i in range(kmax)},
                "total_variation": tv, "chi2": c2, "dof": df_,
                "p_value": float(chi2_sf(c2, df_)) if df_ > 0 else None,
                "favourite_letter": LETTERS[int(np.argmax(pred[j]))],
            }
    return per_model


def _category_rows(frame: AuditFrame, mc: np.ndarray, K: np.ndarray, gold: np.ndarray, *, n_mc: int,
                   rng: np.random.Generator) -> list[dict]:
    """One gold-position chi-square row per category, BH-adjusted across categories."""
    codes, labels = frame.category_codes("category")
    cat_rows, cat_p = [], []
    for c, lab in enumerate(labels):
        sel = mc & (codes == c)
        r = stratified_chi2(K[sel], gold[sel], n_mc=n_mc, rng=rng)
        cat_p.append(np.nan if r["p_value"] is None else r["p_value"])
        cat_rows.append({"category": lab, "arm": None, "statistic": "gold_position_chi2", "estimate": r["chi2"],
                         "null_mean": float(r["dof"]),
                         "excess": (r["chi2"] - r["dof"]) if r["chi2"] is not None else None,
                         "p_value": r["p_value"], "n_items": int(r["n"])})
    padj = benjamini_hochberg(np.array(cat_p, dtype=np.float64))
    for row, pa_ in zip(cat_rows, padj):
        row["p_adjusted"] = None if np.isnan(pa_) else float(pa_)
    return cat_rows


def _eligible(frame: AuditFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Effective option counts (placeholders excluded), gold positions, the items the test uses and the
    accounting of the others."""
    from .placeholders import placeholder_table

    ph = placeholder_table(frame)
    K = ph["effective_k"].astype(np.int64)
    gold = frame.gold_index.astype(np.int64)
    is_mc = (frame.answer_type == "mc") & (gold >= 0)
    accounting = item_accounting(frame.n_questions, [
        ("not multiple choice", ~is_mc), ("placeholder gold", ph["gold_placeholder"]),
        ("fewer than 2 real options", K < 2), ("gold beyond the real options (placeholder before it)", gold >= K)])
    return K, gold, is_mc & ~ph["gold_placeholder"] & (K >= 2) & (gold < K), accounting


def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, n_mc: int = 9999, alpha: float = 0.05,
        per_category: bool = True) -> DetectorResult:
    """Gold-position balance, majority-letter baseline and per-model letter preferences.

    ``per_category=False`` leaves out the per-category chi-square rows (their Monte Carlo p-values are
    most of the cost on small benchmarks); the headline test is computed first and does not change."""
    K, gold, mc, accounting = _eligible(frame)
    if not mc.any():
        raise DetectorSkipped("no multiple-choice questions with 2 or more options")
    rng = np.random.default_rng(seed)
    kmax = int(K[mc].max())
    res = stratified_chi2(K[mc], gold[mc], n_mc=n_mc, rng=rng)
    N = res["n"]
    chi2, dof, p = res["chi2"], res["dof"], res["p_value"]
    w = float(np.sqrt(chi2 / N)) if chi2 is not None and N else None
    gold_counts = np.bincount(gold[mc], minlength=kmax)
    gold_position_counts = {LETTERS[j]: int(gold_counts[j]) for j in range(kmax)}

    base_hits, excess, flag, strata_out = _majority_baseline(res, mc, K, gold, p, alpha)
    chance = float((1.0 / K[mc]).mean())
    base_acc = base_hits / N if N else None
    blo, bhi = wilson_ci(base_hits, N)
    sev = np.where(flag, 1, 0)

    per_model = _letter_preferences(frame, mc, gold, kmax)

    per_question = pd.DataFrame({
        "question_id": frame.question_id_column(),
        f"{NAME}_score": 1.0 - excess,
        f"is_{NAME}_issue": flag,
        f"{NAME}_severity": severity_array(sev),
        f"{NAME}_gold_letter": np.where(mc, np.array(list(LETTERS), dtype=object)[np.clip(gold, 0, 25)], ""),
        f"{NAME}_n_options": K,
        f"{NAME}_position_excess": excess,
    })
    summary = {
        "gold_position_counts": gold_position_counts,
        "chi2": chi2,
        "dof": dof,
        "p_value": p,
        "p_method": res["method"],
        "cohens_w": w,
        "n_items": int(N),
        "excluded": accounting["excluded"],
        "majority_letter_baseline": base_acc,
        "majority_letter_baseline_ci": [float(blo), float(bhi)] if N else None,
        "chance_accuracy": chance,
        "baseline_excess": (base_acc - chance) if base_acc is not None else None,
        "strata": strata_out,
        "per_model": per_model,
        "n_flagged": int(flag.sum()),
        "params": {"n_mc": n_mc, "alpha": alpha},
        "seed": seed,
    }

    # ---- per-category table
    codes, labels = frame.category_codes("category")
    rows = [{"category": "(all)", "arm": None, "statistic": "gold_position_chi2", "estimate": chi2,
             "null_mean": float(dof), "excess": (chi2 - dof) if chi2 is not None else None,
             "p_value": p, "p_adjusted": p, "n_items": int(N)},
            {"category": "(all)", "arm": None, "statistic": "majority_letter_baseline", "estimate": base_acc,
             "ci_low": float(blo), "ci_high": float(bhi), "null_mean": chance,
             "excess": (base_acc - chance) if base_acc is not None else None, "n_items": int(N)}]
    cat_rows = _category_rows(frame, mc, K, gold, n_mc=n_mc, rng=rng) if per_category else []
    table = summary_rows(NAME, rows + cat_rows)
    return DetectorResult(name=NAME, per_question=per_question, summary=summary, table=table,
                          params=summary["params"])


# ---------------------------------------------------------------------------------------- report phrases
def card_line(s: dict) -> str:
    """The card's one-line finding on this detector's summary ``s``."""
    counts = s.get("gold_position_counts") or {}
    hist = ", ".join(f"{k}: {fmt_num(v)}" for k, v in counts.items()) if isinstance(counts, dict) else ""
    how = (" (Monte Carlo p, 9,999 draws under uniform gold positions: some strata expect fewer than 5 per cell, "
           "where the chi-square tail is not valid)" if s.get("p_method") == "monte_carlo" else "")
    return (f"**{NAME}**: gold positions {hist}; chi-square "
            f"{fmt_num(s.get('chi2'))} on {fmt_num(s.get('dof'))} df, {p_is(s.get('p_value'))}{how}"
            " (stratified by number of options).")
