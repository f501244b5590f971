"""correctness_agreement: the profile of judged correctness across models, per question.

* Difficulty: the share of models correct, shrunk with the Jeffreys prior, ``(k + 1/2) / (n + 1)``,
  with its equal-tailed Jeffreys interval (``n`` = models with a known value on the item).
* Saturated items (every model correct, ``n >= 2``) do not discriminate between models (info);
  floor items (every model wrong) are too hard for the pool or mislabelled (low; read them with
  consensus_error).
* Item-rest correlation (only with >= 5 models): the point-biserial correlation across models between
  being right on this item and the model's accuracy on the *other* items (rest score, as a share so
  missing answers do not bias it). An item where weaker models are right and stronger ones wrong has
  a negative correlation; it is flagged (medium) when the one-sided t-test of ``r < 0``
  (``t = r sqrt((n-2)/(1-r^2))``, ``n-2`` df) gives p < alpha. Under a pool of equally able models
  with independent errors that test rejects at rate about ``alpha`` on items with any variation, which
  is what ``expected_flagged`` reports (an upper bound: models of unequal ability make item-rest
  correlations positive on average).
* Guttman inversions, only when the ranking of models is itself significant (Cochran's Q on the
  items every model answered, p < alpha): per item the pairs (stronger model wrong, weaker model
  right), normalised by the maximum ``k (n - k)``. 0.5 is what a random ranking gives. Evidence only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DetectorSkipped
from ..fmt import count, fmt_num, num_labels
from ..frame.core import AuditFrame
from ..schema import check_correctness_field
from ..severity import severity_array
from ..stats.core import cochrans_q, jeffreys_interval, t_cdf, wilson_ci
from .accounting import item_accounting
from .base import DetectorResult, summary_rows

NAME = "correctness_agreement"

MIN_MODELS_ITEM_REST = 5
_CHUNK = 200_000


def _item_rest(x: np.ndarray, w: np.ndarray, rest_num: np.ndarray, rest_den: np.ndarray) -> np.ndarray:
    """Pearson correlation per row between x (0/1) and the rest score, over the known cells.

    The rest score of model m on item i is ``y_im = (T_m - x_im) / (n_m - 1) = a_m - c_m x_im`` with
    ``a = T / (n - 1)``, ``c = 1 / (n - 1)``; so every sum the correlation needs is a matrix-vector
    product of the 0/1 matrices with a few model vectors (BLAS, chunked over rows).
    """
    out = np.full(x.shape[0], np.nan)
    ok_m = rest_den > 1
    a = np.where(ok_m, rest_num / np.maximum(rest_den - 1, 1), 0.0)
    c = np.where(ok_m, 1.0 / np.maximum(rest_den - 1, 1), 0.0)
    vx = np.stack([a, c, a * c, c * c], axis=1)            # for X @ .
    vw = np.stack([np.ones_like(a), a, a * a], axis=1)     # for W @ .
    okf = ok_m.astype(np.float64)
    for s in range(0, x.shape[0], _CHUNK):
        ws = (w[s:s + _CHUNK] & ok_m[None, :]).astype(np.float64)
        xs = (x[s:s + _CHUNK] & w[s:s + _CHUNK]).astype(np.float64) * okf[None, :]
        px = xs @ vx
        pw = ws @ vw
        sw, sx = pw[:, 0], xs.sum(axis=1)
        sy = pw[:, 1] - px[:, 1]
        sxy = px[:, 0] - px[:, 1]
        syy = pw[:, 2] - 2 * px[:, 2] + px[:, 3]
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = sxy - sx * sy / sw
            vxx = sx - sx * sx / sw
            vyy = syy - sy * sy / sw
            r = cov / np.sqrt(vxx * vyy)
        ok = (sw >= 2) & (vxx > 1e-9) & (vyy > 1e-12)
        out[s:s + _CHUNK] = np.where(ok, np.clip(r, -1.0, 1.0), np.nan)
    return out


def guttman_inversions(x: np.ndarray, known: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: pairs (stronger model wrong, weaker model right) and that count over ``k (n - k)``.

    ``order`` lists model columns from weakest to strongest. Unknown cells count on neither side.
    """
    inv = np.zeros(x.shape[0], dtype=np.int64)
    k = np.zeros(x.shape[0], dtype=np.int64)
    n = np.zeros(x.shape[0], dtype=np.int64)
    for s in range(0, x.shape[0], _CHUNK):
        xo, ko = x[s:s + _CHUNK][:, order], known[s:s + _CHUNK][:, order]
        xs = (xo == 1) & ko
        wrong = (xo != 1) & ko
        # wrong models stronger than column j: reverse cumulative sum excluding j
        wrong_after = np.cumsum(wrong[:, ::-1], axis=1, dtype=np.int16)[:, ::-1] - wrong
        inv[s:s + _CHUNK] = (xs * wrong_after).sum(axis=1, dtype=np.int64)
        k[s:s + _CHUNK] = xs.sum(axis=1, dtype=np.int64)
        n[s:s + _CHUNK] = ko.sum(axis=1, dtype=np.int64)
    mx = k * (n - k)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(mx > 0, inv / np.maximum(mx, 1), np.nan)
    return inv, share


def _item_rest_test(right: np.ndarray, known: np.ndarray, tot: np.ndarray, cnt: np.ndarray, n: np.ndarray, *,
                    alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Item-rest correlation per question, its one-sided p for a negative correlation, which items
    were tested (enough models) and which are significantly negative (negative discrimination)."""
    Q, M = right.shape
    item_rest = np.full(Q, np.nan)
    p_neg = np.full(Q, np.nan)
    tested = np.zeros(Q, dtype=bool)
    if M >= MIN_MODELS_ITEM_REST:
        item_rest = _item_rest(right, known, tot.astype(np.float64), cnt.astype(np.float64))
        # rest scores need n_m - 1 > 0; the matrix form ignores models with a single known item
        tested = ~np.isnan(item_rest) & (n >= MIN_MODELS_ITEM_REST)
        r = np.where(tested, item_rest, 0.0)
        dfree = np.maximum(n - 2, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = r * np.sqrt(dfree / np.maximum(1 - r * r, 1e-12))
        p_neg = np.where(tested, t_cdf(t, dfree), np.nan)
    negative = tested & (item_rest < 0) & (p_neg < alpha)
    return item_rest, p_neg, tested, negative


def _guttman(x: np.ndarray, known: np.ndarray, acc: np.ndarray, ranking_sig: bool, q_p: float | None,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Models ordered weakest first and, with a significant ranking only, each item's Guttman
    inversions and their share; otherwise the reason they were not computed."""
    Q = x.shape[0]
    order = np.argsort(np.nan_to_num(acc, nan=-1.0), kind="stable")
    if ranking_sig:
        inv, inv_share = guttman_inversions(x, known, order)
        guttman_reason = ""
    else:
        inv = np.full(Q, -1, dtype=np.int64)
        inv_share = np.full(Q, np.nan)
        guttman_reason = ("model ranking not significant (Cochran's Q p = "
                          f"{q_p:.3g})" if q_p is not None else "fewer than 2 items answered by every model")
    return order, inv, inv_share, guttman_reason


def _per_category(frame: AuditFrame, k: np.ndarray, n: np.ndarray, saturated: np.ndarray, floor: np.ndarray,
                  tested: np.ndarray, negative: np.ndarray, field: str) -> tuple[dict, pd.DataFrame, int]:
    """Per category (and overall): saturated, floor and negative-discrimination shares with Wilson
    intervals and the mean share correct; returns the per-category summary, the table and the number
    of items with any known correctness."""
    cat, labels = frame.category_codes("category")
    G = len(labels)
    has = n > 0
    n_g = np.bincount(cat, weights=has, minlength=G)
    sat_g = np.bincount(cat, weights=saturated, minlength=G)
    flo_g = np.bincount(cat, weights=floor, minlength=G)
    pc_g = np.bincount(cat, weights=np.where(has, k / np.maximum(n, 1), 0.0), minlength=G)
    tst_g = np.bincount(cat, weights=tested, minlength=G)
    neg_g = np.bincount(cat, weights=negative, minlength=G)
    per_category = {}
    rows = []
    n_all = int(has.sum())
    for g, label in [(-1, "(all)")] + list(enumerate(labels)):
        if g < 0:
            ng, sg, fg, pg, tg, eg = n_all, saturated.sum(), floor.sum(), pc_g.sum(), tested.sum(), negative.sum()
        else:
            ng, sg, fg, pg, tg, eg = n_g[g], sat_g[g], flo_g[g], pc_g[g], tst_g[g], neg_g[g]
        ng = int(ng)
        if g >= 0:
            per_category[label] = {"n_items": ng, "n_saturated": int(sg), "n_floor": int(fg),
                                   "mean_share_correct": float(pg / ng) if ng else None,
                                   "n_item_rest_tested": int(tg), "n_negative_discrimination": int(eg)}
        if ng == 0:
            continue
        for stat_name, kk, nn in (("saturated_share", sg, ng), ("floor_share", fg, ng),
                                  ("negative_discrimination_share", eg, tg)):
            if nn == 0:
                continue
            lo, hi = wilson_ci(kk, nn)
            rows.append({"category": label, "statistic": stat_name, "estimate": kk / nn, "ci_low": lo,
                         "ci_high": hi, "n_items": int(nn)})
        rows.append({"category": label, "statistic": "mean_share_correct", "estimate": pg / ng, "n_items": ng})
    table = summary_rows(NAME, rows)
    table["arm"] = "full"
    table["field"] = field
    return per_category, table, n_all


def _share_correct_interval(k: np.ndarray, n: np.ndarray, M: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jeffreys mean and 95% interval of each item's share correct, computed on the (few) distinct
    (k, n) pairs and broadcast back."""
    pair, inv_pair = np.unique(k * (M + 1) + n, return_inverse=True)
    pm, pl, ph = jeffreys_interval(pair // (M + 1), pair % (M + 1))
    return pm[inv_pair], pl[inv_pair], ph[inv_pair]


def _model_ranking(right: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                                 tuple[float | None, int, float | None]]:
    """Per model: right and known counts and accuracy; the items every model answered; Cochran's Q
    test of equal accuracies on them (``(None, M - 1, None)`` with fewer than two such items)."""
    M = right.shape[1]
    tot = right.sum(axis=0, dtype=np.int64)
    cnt = known.sum(axis=0, dtype=np.int64)
    acc = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    complete = known.all(axis=1)
    q = cochrans_q(right[complete]) if complete.sum() >= 2 else (None, M - 1, None)
    return tot, cnt, acc, complete, q


def _severity(saturated: np.ndarray, floor: np.ndarray, negative: np.ndarray, tested: np.ndarray,
              p_neg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Severity rank (floor: low; negative discrimination: medium), the note and the score per item."""
    rank = np.zeros(len(saturated), dtype=np.int64)
    rank[floor] = 1
    rank[negative] = 2
    note = np.full(len(saturated), "", dtype=object)
    note[saturated] = "saturated: every model correct, does not discriminate between models"
    note[floor] = "floor: every model wrong (too hard for this pool, or a wrong gold; see consensus_error)"
    note[negative] = "negative discrimination: weaker models right where stronger ones fail"
    score = np.where(tested, np.nan_to_num(p_neg, nan=1.0), 1.0)
    score = np.where(floor, np.minimum(score, 0.75), score)
    return rank, note, score


def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, alpha: float = 0.05) -> DetectorResult:
    """Difficulty, saturation, item-rest discrimination and Guttman inversions per question."""
    check_correctness_field(field)
    models = frame.models_in("full")
    if len(models) < 2:
        raise DetectorSkipped("needs correctness of at least two models with the image")
    x = frame.correctness("full", field, models)
    known = x >= 0
    if not known.any():
        raise DetectorSkipped(f"no correctness values in field {field!r}")
    right = x == 1
    M = len(models)
    k = right.sum(axis=1, dtype=np.int64)
    n = known.sum(axis=1, dtype=np.int64)
    p_mean, p_lo, p_hi = _share_correct_interval(k, n, M)
    saturated = (n >= 2) & (k == n)
    floor = (n >= 2) & (k == 0)
    tot, cnt, acc, complete, (q_stat, q_df, q_p) = _model_ranking(right, known)
    ranking_sig = q_p is not None and q_p < alpha
    item_rest, p_neg, tested, negative = _item_rest_test(right, known, tot, cnt, n, alpha=alpha)
    order, inv, inv_share, guttman_reason = _guttman(x, known, acc, ranking_sig, q_p)
    rank, note, score = _severity(saturated, floor, negative, tested, p_neg)
    per_question = pd.DataFrame({
        "question_id": frame.question_id_column(),
        f"{NAME}_score": np.clip(score, 0.0, 1.0),
        f"is_{NAME}_issue": rank >= 2,
        f"{NAME}_severity": severity_array(rank),
        f"{NAME}_n_correct": k.astype(np.int32),
        f"{NAME}_n_models": n.astype(np.int32),
        f"{NAME}_p_correct": p_mean,
        f"{NAME}_p_correct_low": p_lo,
        f"{NAME}_p_correct_high": p_hi,
        f"{NAME}_saturated": saturated,
        f"{NAME}_floor": floor,
        f"{NAME}_item_rest": item_rest,
        f"{NAME}_item_rest_p": p_neg,
        f"{NAME}_guttman_inversions": inv,
        f"{NAME}_guttman_share": inv_share,
        f"{NAME}_note": note,
    })

    has = n > 0
    per_category, table, n_all = _per_category(frame, k, n, saturated, floor, tested, negative, field)

    n_sat, n_floor = int(saturated.sum()), int(floor.sum())
    s_lo, s_hi = wilson_ci(n_sat, n_all)
    f_lo, f_hi = wilson_ci(n_floor, n_all)
    params = {"field": field, "alpha": alpha, "min_models_item_rest": MIN_MODELS_ITEM_REST}
    summary = {
        "excluded": item_accounting(frame.n_questions, [("no correctness value from any model", ~has)])["excluded"],
        "n_saturated": n_sat,
        "n_floor": n_floor,
        "n_items": n_all,
        "saturated_share": n_sat / n_all if n_all else None,
        "saturated_ci": [float(s_lo), float(s_hi)],
        "floor_share": n_floor / n_all if n_all else None,
        "floor_ci": [float(f_lo), float(f_hi)],
        "n_models": M,
        "mean_share_correct": float((k[has] / n[has]).mean()) if n_all else None,
        "item_rest": {"computed": M >= MIN_MODELS_ITEM_REST, "n_tested": int(tested.sum()),
                      "mean": float(np.nanmean(item_rest[tested])) if tested.any() else None,
                      "n_negative": int((tested & (item_rest < 0)).sum()),
                      "n_flagged": int(negative.sum())},
        "model_ranking": {"test": "cochran_q", "q": q_stat, "df": int(q_df), "p_value": q_p,
                          "significant": bool(ranking_sig), "n_items_used": int(complete.sum()),
                          "accuracy": {m: (None if np.isnan(a) else float(a)) for m, a in zip(models, acc)}},
        "guttman": {"computed": bool(ranking_sig), "reason": guttman_reason,
                    "mean_share": float(np.nanmean(inv_share)) if ranking_sig and np.isfinite(inv_share).any() else None,
                    "order_weakest_first": [models[i] for i in order]},
        "per_category": per_category,
        "p_value": None,
        "n_flagged": int(negative.sum()),
        "expected_flagged": float(alpha * tested.sum()),
        "field": field,
        "params": params,
        "seed": seed,
    }
    return DetectorResult(name=NAME, per_question=per_question, summary=summary, table=table, params=params)


# ---------------------------------------------------------------------------------------- report phrases
def evidence_phrase(p: pd.DataFrame, label: str) -> pd.Series:
    """The report's evidence phrase for flagged rows ``p`` of the questions table."""
    return label + " (item-rest correlation " + num_labels(p[f"{NAME}_item_rest"]) + ")"


def card_line(s: dict) -> str:
    """The card's one-line finding on this detector's summary ``s``."""
    return (f"**{NAME}**: {count(s.get('n_saturated') or 0, 'question')} every model gets "
            f"right (saturated), {fmt_num(s.get('n_floor'))} every model gets wrong (floor).")
