"""consensus_error (judge-free): items where the models agree on an answer that is not the gold.

Definitions (full arm, answer codes from :meth:`AuditFrame.answer_codes`, comparable within an item for
every answer type; unparseable/missing answers are left out):

* ``n_parseable``: models with a parseable full-arm answer.
* **unanimous non-gold**: ``n_parseable >= max(2, min_answered)`` (``min_answered`` defaults to the
  number of full-arm models minus one) and every parseable answer is the same non-gold code.
  Severity high; **critical** when the blind runs do not agree on that option (fewer than half of the
  parseable blind answers pick it: the models see something in the image that the gold contradicts)
  or when the chosen option's text equals the gold option's text after normalisation (a duplicate
  option, so the "error" is in the options).
* **majority non-gold**: a strict majority (more than half of the parseable answers; a 50/50 split is
  a tie, i.e. no majority) picks one non-gold code. Severity low and not flagged when not unanimous
  (with weak models a non-gold majority mostly reflects shared difficulty, not a wrong label).
  ``n_majority_non_gold`` counts every item with a non-gold strict majority of at least 2 parseable answers (unanimous ones included; one lone parseable answer is not a majority).
* **expected under independence** (the paper's figure, kept for comparison): if each model erred
  independently with its own error rate ``e_m`` and picked uniformly among the ``K - 1`` wrong options,
  an item with parseable answerers ``S`` is unanimous-wrong with probability
  ``prod_{m in S} e_m * (K-1)^(1-|S|)``, summed over eligible mc and yes/no items.
  ``p_value_independence`` is its Poisson upper tail. Real models share difficulty, so this count is
  exceeded on defect-free benchmarks (it is not a calibrated test).
* **headline test** (``p_value``, ``headline_test``): likelihood ratio of "no gold is wrong" under a
  latent-truth model (:mod:`audit_hub.stats.label_model`) that keeps each model's reliability per answer class
  (a yes/no response bias included), item difficulty (a random effect per arm) and attractive
  distractors (a mixture of one-attractor items and Dirichlet items), fitted by EM to the runs (blind arm
  included when present). False-positive rate on defect-free simulations with shared difficulty:
  ``benchmarks/label_errors.py`` (1,000 simulations per regime) and the tests (200).
* **posterior** ``p_gold_wrong`` per closed item (a placeholder gold, or a gold whose text another
  option repeats, enters as prior evidence with its own fitted rate: ``gold_evidence``); severity **high** (relabel; **critical** as above)
  needs ``p_gold_wrong >= 0.5``: evidence beyond what difficulty and attractive distractors explain. A
  unanimous non-gold answer the model explains is **medium** (review). Open (numeric / free) items have
  no option structure to model and keep the unanimity rule.
* ``gold_doubted``: posterior >= 0.5 in an identifiable category, supported by the held-out check or not (a
  finding only where it is: ``is_consensus_error_issue``); curation leaves the unsupported ones out of its draw.
* ``detection``: recall, precision and average precision of the posterior ranking on simulations of
  this pool (fitted model, same items and answer patterns) with 3% planted wrong golds;
  ``pool_too_weak`` when the estimated recall is below 0.5 ("no findings" then means little).

* ``stable``: a doubted gold is a finding only where it survives leaving out each family of models
  (:func:`~audit_hub.stats.label_checks.flag_stability`); one that rests on one family is a review (medium).

Per question: ``score = 1 - p_gold_wrong`` on closed items of identifiable categories (a continuous ranking,
defined whether or not any pool is unanimous), ``1 - eps`` (the prior) on closed items of categories the pool
cannot audit (its answers carry no evidence about the gold there); on open items ``1 - (share of parseable answers on the most chosen non-gold
code)``. Lower is more suspicious.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DetectorSkipped
from ..escape import md_inline
from ..fmt import ci, count, fmt_num, num_labels, p_is, pct, str_labels
from ..frame.core import AuditFrame
from ..schema import LETTERS
from ..severity import severity_array
from ..stats.core import benjamini_hochberg, wilson_ci
from .accounting import item_accounting
from .base import DetectorResult, summary_rows
from .strata import effective_option_count

NAME = "consensus_error"
MIN_MODEL_ITEMS = 20  # fewer closed items: no latent-truth model (unanimity rule only)
#: in the review order an item of a category the pool cannot audit sits at its prior log odds, moved by at most
#: this much toward its posterior (``tanh`` of the difference): it ranks after every item the answers doubt more
#: than the prior and before every item they confirm, and among its like in the order of the posterior
REVIEW_TIE_BREAK = 1e-3
EVIDENCE_LABELS = ("", "placeholder gold", "gold text repeated")  # prior evidence groups 0, 1, 2


def row_answer_stats(codes: np.ndarray, *, chunk: int = 200_000) -> dict[str, np.ndarray]:
    """Per-row statistics of a (Q, M) int code matrix (values < 0 are ignored).

    Returns arrays of shape (Q,): ``n`` valid entries, ``top_value`` (most frequent code, the smallest on
    ties; -1 when none), ``top_count``, ``top_tied`` (another code has the same count), ``sum_sq``
    (sum over codes of count^2), ``n_distinct`` and ``entropy`` (natural log). One row sort plus one
    pass over the M columns, chunked over rows to bound memory: O(Q M log M), no Python loop over rows.
    """
    codes = np.asarray(codes)
    Q, M = codes.shape
    out = {
        "n": np.zeros(Q, np.int32), "top_value": np.full(Q, -1, np.int64), "top_count": np.zeros(Q, np.int32),
        "top_tied": np.zeros(Q, bool), "sum_sq": np.zeros(Q, np.int64), "n_distinct": np.zeros(Q, np.int32),
        "entropy": np.zeros(Q, np.float64),
    }
    for s in range(0, Q, chunk):
        S = np.sort(codes[s:s + chunk], axis=1)
        R = S.shape[0]
        cur = np.zeros(R, np.int32)
        best = np.zeros(R, np.int32)
        bestv = np.full(R, -1, np.int64)
        tied = np.zeros(R, bool)
        ssq = np.zeros(R, np.int64)
        nd = np.zeros(R, np.int32)
        llog = np.zeros(R, np.float64)
        for j in range(M):
            v = S[:, j]
            valid = v >= 0
            same = (v == S[:, j - 1]) if j > 0 else np.zeros(R, bool)
            cur = np.where(valid, np.where(same, cur + 1, 1), 0).astype(np.int32)
            ssq += np.where(valid, 2 * cur - 1, 0)
            nd += valid & ~same
            end = valid & ((S[:, j + 1] != v) if j + 1 < M else True)
            if end.any():
                llog += np.where(end, cur * np.log(np.maximum(cur, 1)), 0.0)
                better = end & (cur > best)
                equal = end & (cur == best) & ~better
                tied = np.where(better, False, tied | equal)
                bestv = np.where(better, v, bestv)
                best = np.where(better, cur, best)
        n = (S >= 0).sum(axis=1).astype(np.int32)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = np.where(n > 0, np.log(np.maximum(n, 1)) - llog / np.maximum(n, 1), 0.0)
        sl = slice(s, s + R)
        out["n"][sl] = n
        out["top_value"][sl] = bestv
        out["top_count"][sl] = best
        out["top_tied"][sl] = tied
        out["sum_sq"][sl] = ssq
        out["n_distinct"][sl] = nd
        out["entropy"][sl] = np.maximum(ent, 0.0)
    return out


def _stats_from_counts(C: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`row_answer_stats` of rows given as per-code counts ``C`` (R, K), codes 0..K-1.

    Same values (and the same floating-point summation order for the entropy) as the sort-based
    version: codes are visited in ascending order there too."""
    R, K = C.shape
    n = C.sum(axis=1, dtype=np.int64).astype(np.int32)
    best = C.max(axis=1).astype(np.int32) if K else np.zeros(R, np.int32)
    top = np.where(best > 0, C.argmax(axis=1) if K else 0, -1).astype(np.int64)
    tied = (best > 0) & ((C == best[:, None]).sum(axis=1) > 1)
    ssq = np.zeros(R, np.int64)
    nd = np.zeros(R, np.int32)
    llog = np.zeros(R, np.float64)
    for j in range(K):
        cur = C[:, j].astype(np.int32)
        ssq += cur.astype(np.int64) * cur
        nd += cur > 0
        llog += np.where(cur > 0, cur * np.log(np.maximum(cur, 1)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = np.where(n > 0, np.log(np.maximum(n, 1)) - llog / np.maximum(n, 1), 0.0)
    return {"n": n, "top_value": top, "top_count": best, "top_tied": tied, "sum_sq": ssq, "n_distinct": nd,
            "entropy": np.maximum(ent, 0.0)}


def closed_code_counts(frame: AuditFrame, arm: str, models: list[str], *, chunk: int = 1 << 16
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, counts): the mc and yes/no items and, per item, how many models chose each answer code.

    Their codes are below ``K`` = the largest number of options (>= 2), so a one-hot count over K
    codes replaces the row sort (several times faster at 1e6 x 50). Cached in ``frame.cache`` per arm
    and model list: consensus_error and fleiss_kappa_agreement share it.
    """
    def compute():
        A = frame.answer_codes(arm, models=models)
        atype = frame.answer_type
        closed = (atype == "mc") | (atype == "yesno")
        K = max(int(frame.n_options.max()) if frame.n_questions else 0, 2)
        rows = np.flatnonzero(closed)
        counts = np.zeros((len(rows), K), np.int32)
        all_rows = len(rows) == frame.n_questions
        for lo in range(0, len(rows), chunk):
            a = A[lo:lo + chunk] if all_rows else A[rows[lo:lo + chunk]]
            for j in range(K):
                counts[lo:lo + chunk, j] = np.count_nonzero(a == j, axis=1)
        return rows, counts

    return frame.cached(("closed_code_counts", arm, tuple(models)), compute)


def answer_row_stats(frame: AuditFrame, arm: str, models: list[str], *, exclude_gold: bool = False,
                     chunk: int = 200_000) -> dict[str, np.ndarray]:
    """:func:`row_answer_stats` of the (Q, M) answer codes, optionally with gold answers left out
    (as if they were unparseable): counts for mc / yes-no items, the row sort for the others."""
    rows, counts = closed_code_counts(frame, arm, models)
    Q = frame.n_questions
    if exclude_gold and len(rows):
        gold = frame.gold_codes().astype(np.int64)[rows]
        counts = counts.copy()
        g_ok = (gold >= 0) & (gold < counts.shape[1])
        counts[np.flatnonzero(g_ok), gold[g_ok]] = 0
    st = _stats_from_counts(counts)
    if len(rows) == Q:
        return st
    out = {k: np.zeros(Q, v.dtype) for k, v in st.items()}
    out["top_value"][:] = -1
    for k, v in st.items():
        out[k][rows] = v
    other = np.setdiff1d(np.arange(Q), rows)
    A = frame.answer_codes(arm, models=models)[other]
    if exclude_gold:
        g = frame.gold_codes().astype(np.int64)[other]
        A = np.where((A == g[:, None]) & (g[:, None] >= 0), -1, A)
    so = row_answer_stats(A, chunk=chunk)
    for k, v in so.items():
        out[k][other] = v
    return out


def _code_labels(frame: AuditFrame, code: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Human label of answer codes for some items: letter (mc), yes/no, else the extracted answer text."""
    lab = np.full(len(items), "", dtype=object)
    if len(items) == 0:
        return lab
    atype = frame.answer_type[items]
    c = code[items]
    mc = (atype == "mc") & (c >= 0) & (c < 26)
    lab[mc] = np.array(list(LETTERS), dtype=object)[c[mc]]
    yn = (atype == "yesno") & (c >= 0)
    lab[yn] = np.where(c[yn] == 0, "yes", "no")
    other = np.flatnonzero(~mc & ~yn & (c >= 0))
    run_codes = frame.answer_code_vector()
    if len(other) and run_codes is not None and len(run_codes) == len(frame.runs):
        want = np.full(frame.n_questions, -2, np.int64)
        want[items[other]] = c[other]
        rq = frame.runs["q"].to_numpy()
        rows = np.flatnonzero(run_codes == want[rq])
        if len(rows):
            first_q, first_i = np.unique(rq[rows], return_index=True)
            texts = frame.runs["answer"].iloc[rows[first_i]].astype(object).to_numpy()
            pos = {int(qq): t for qq, t in zip(first_q, texts)}
            for k in other:
                lab[k] = str(pos.get(int(items[k]), ""))
    return lab


def _duplicates_gold(frame: AuditFrame, items: np.ndarray, code: np.ndarray) -> np.ndarray:
    """For mc items: is the chosen option's text the gold option's text after normalisation?"""
    out = np.zeros(len(items), bool)
    if len(items) == 0:
        return out
    from .text_norm import normalise_many

    opts = frame.questions["options"].to_numpy(dtype=object)
    gi = frame.gold_index
    atype = frame.answer_type  # a property that converts the column: read once, not per item
    sel = [k for k, i in enumerate(items) if atype[i] == "mc"
           and 0 <= code[i] < len(opts[i]) and 0 <= gi[i] < len(opts[i])]
    if not sel:
        return out
    a = [opts[items[k]][code[items[k]]] for k in sel]
    b = [opts[items[k]][gi[items[k]]] for k in sel]
    na, nb = normalise_many(a), normalise_many(b)
    pa_ = np.array([code[items[k]] for k in sel])
    pb_ = np.array([gi[items[k]] for k in sel])
    ok = (na.text == nb.text) & (na.n_chars > 0) & (na.bare_letter != pa_) & (nb.bare_letter != pb_)
    out[np.array(sel)] = ok
    return out


def _blind_agreement(frame: AuditFrame, cons: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per item: the share of parseable blind-arm answers that agree with the full-arm consensus (NaN
    without a consensus or blind answers) and the number of parseable blind answers."""
    blind_models = frame.models_in("blind") if frame.has_arm("blind") else []
    blind_share = np.full(frame.n_questions, np.nan)
    n_blind = np.zeros(frame.n_questions, np.int64)
    if blind_models:
        B = frame.answer_codes("blind", models=blind_models)
        n_blind = (B >= 0).sum(axis=1).astype(np.int64)
        agree = ((B == cons[:, None]) & (cons[:, None] >= 0)).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            blind_share = np.where((n_blind > 0) & (cons >= 0), agree / np.maximum(n_blind, 1), np.nan)
        del B
    return blind_models, blind_share, n_blind


def _expected_unanimous(frame: AuditFrame, parse: np.ndarray, is_gold: np.ndarray, n_p: np.ndarray,
                        eligible: np.ndarray, unanimous: np.ndarray, gold: np.ndarray):
    """The unanimous non-gold count expected if the models erred independently (closed items only, each
    model's error rate spread uniformly over the wrong options) and its Poisson p-value. Returns the
    per-model error rates, the items in the expectation, each item's probability, the expected and
    observed counts, the p-value and the number of eligible open items left out."""
    from ..stats.core import poisson_sf

    atype = frame.answer_type
    closed = (atype == "mc") | (atype == "yesno")
    k_opts = np.where(atype == "yesno", 2, effective_option_count(frame).astype(np.int64))
    wrong = parse & ~is_gold & closed[:, None]
    n_closed_parse = (parse & closed[:, None]).sum(axis=0)
    e = np.where(n_closed_parse > 0, wrong.sum(axis=0) / np.maximum(n_closed_parse, 1), np.nan)
    del wrong
    log_e = np.where(e > 0, np.log(np.where(e > 0, e, 1.0)), -1e6)
    log_e = np.where(np.isnan(e), 0.0, log_e)
    exp_sel = eligible & closed & (k_opts >= 2) & (gold >= 0)
    Q = frame.n_questions
    pe = np.empty(Q)
    for lo in range(0, Q, 1 << 17):  # chunked: no (Q, M) float64 copy
        pe[lo:lo + (1 << 17)] = parse[lo:lo + (1 << 17)].astype(np.float64) @ log_e
    logp = pe + (1 - n_p) * np.log(np.maximum(k_opts - 1, 1))
    p_item = np.where(exp_sel, np.exp(np.minimum(logp, 0.0)), 0.0)
    expected = float(p_item.sum())
    obs_closed = int((unanimous & exp_sel).sum())
    p_value = float(poisson_sf(obs_closed - 1, expected)) if expected > 0 else (1.0 if obs_closed == 0 else 0.0)
    n_open_excl = int((eligible & ~closed).sum())
    return e, exp_sel, p_item, expected, obs_closed, p_value, n_open_excl


def _table_rows(frame: AuditFrame, *, eligible: np.ndarray, unanimous: np.ndarray, majority: np.ndarray,
                exp_sel: np.ndarray, p_item: np.ndarray, n_p: np.ndarray, expected: float, obs_closed: int,
                p_value: float) -> list[dict]:
    """Unanimous and majority non-gold shares overall and per category (Wilson intervals; per-category
    Poisson p against the independence expectation, BH-adjusted)."""
    from ..stats.core import poisson_sf

    n_un, n_el = int(unanimous.sum()), int(eligible.sum())
    lo, hi = wilson_ci(n_un, n_el)
    codes, labs = frame.category_codes("category")
    C = len(labs)
    n_c = np.bincount(codes, weights=eligible, minlength=C)
    k_c = np.bincount(codes, weights=unanimous, minlength=C)
    nc_c = np.bincount(codes, weights=exp_sel, minlength=C)
    kc_c = np.bincount(codes, weights=unanimous & exp_sel, minlength=C)
    ex_c = np.bincount(codes, weights=p_item, minlength=C)
    m_c = np.bincount(codes, weights=majority & (n_p >= 2), minlength=C)
    nm_c = np.bincount(codes, weights=n_p >= 2, minlength=C)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_c = np.where(ex_c > 0, poisson_sf(kc_c - 1, np.maximum(ex_c, 1e-300)), np.where(kc_c > 0, 0.0, 1.0))
    p_c = np.where(nc_c > 0, p_c, np.nan)
    padj = benjamini_hochberg(p_c)
    rows = []
    lc, hc = wilson_ci(k_c, n_c)
    lm, hm = wilson_ci(m_c, nm_c)
    nm_all = int((n_p >= 2).sum())
    lma, hma = wilson_ci(int(majority.sum()), nm_all)
    null_all = expected / int(exp_sel.sum()) if exp_sel.any() else np.nan
    rows.append({"category": "(all)", "arm": "full", "statistic": "unanimous_non_gold_share",
                 "estimate": n_un / n_el if n_el else np.nan, "ci_low": float(lo), "ci_high": float(hi),
                 "null_mean": null_all, "excess": (obs_closed - expected) / exp_sel.sum() if exp_sel.any() else np.nan,
                 "p_value": p_value, "p_adjusted": p_value, "n_items": n_el})
    for j, lab in enumerate(labs):
        rows.append({"category": lab, "arm": "full", "statistic": "unanimous_non_gold_share",
                     "estimate": k_c[j] / n_c[j] if n_c[j] else np.nan, "ci_low": float(lc[j]),
                     "ci_high": float(hc[j]),
                     "null_mean": ex_c[j] / nc_c[j] if nc_c[j] else np.nan,
                     "excess": (kc_c[j] - ex_c[j]) / nc_c[j] if nc_c[j] else np.nan,
                     "p_value": float(p_c[j]), "p_adjusted": float(padj[j]), "n_items": int(n_c[j])})
    rows.append({"category": "(all)", "arm": "full", "statistic": "majority_non_gold_share",
                 "estimate": majority.sum() / nm_all if nm_all else np.nan, "ci_low": float(lma),
                 "ci_high": float(hma), "n_items": nm_all})
    for j, lab in enumerate(labs):
        rows.append({"category": lab, "arm": "full", "statistic": "majority_non_gold_share",
                     "estimate": m_c[j] / nm_c[j] if nm_c[j] else np.nan, "ci_low": float(lm[j]),
                     "ci_high": float(hm[j]), "n_items": int(nm_c[j])})
    return rows


def _count_summary(*, unanimous: np.ndarray, eligible: np.ndarray, majority: np.ndarray, plurality: np.ndarray,
                   sev: np.ndarray, blind_disagrees: np.ndarray, dup_gold: np.ndarray, exp_sel: np.ndarray,
                   expected: float, obs_closed: int, n_open_excl: int) -> dict:
    """The headline counts: unanimous non-gold (with its Wilson interval and the independence
    expectation), majority and plurality non-gold, critical, blind-disagreeing and gold-duplicating."""
    n_un = int(unanimous.sum())
    n_el = int(eligible.sum())
    lo, hi = wilson_ci(n_un, n_el)
    return {
        "n_unanimous_non_gold": n_un,
        "expected_under_independence": expected,
        "n_majority_non_gold": int(majority.sum()),
        "n_unanimous_non_gold_ci": [float(lo * n_el), float(hi * n_el)] if n_el else None,
        "unanimous_share": n_un / n_el if n_el else None,
        "unanimous_share_ci": [float(lo), float(hi)] if n_el else None,
        "n_eligible": n_el,
        "n_unanimous_closed": obs_closed,
        "n_eligible_closed": int(exp_sel.sum()),
        "n_open_items_excluded": n_open_excl,
        "ratio_to_expected": (obs_closed / expected) if expected > 0 else None,
        "n_majority_only": int((majority & ~unanimous).sum()),
        "n_plurality_non_gold": int(plurality.sum()),
        "n_critical": int((sev == 4).sum()),
        "n_blind_disagrees": int((unanimous & blind_disagrees).sum()),
        "n_duplicates_gold": int(dup_gold.sum()),
    }


def _label_data(frame: AuditFrame, models: list[str], blind_models: list[str], gold: np.ndarray):
    """The closed items (mc, yes/no with a gold among their options) as :class:`LabelData`."""
    from ..stats.label_model import LabelData, clean_codes

    atype = frame.answer_type
    k = np.where(atype == "yesno", 2, frame.n_options.astype(np.int64))
    rows = np.flatnonzero(((atype == "mc") | (atype == "yesno")) & (k >= 2) & (gold >= 0) & (gold < k))
    # int16 codes of the closed rows, taken chunk by chunk (no (rows, M) int32 copy per arm)
    arms = [clean_codes(frame.answer_codes("full", models=models), k[rows], rows)]
    if blind_models:
        arms.append(clean_codes(frame.answer_codes("blind", models=blind_models), k[rows], rows))
    return rows, LabelData(arms, k[rows], atype[rows] == "yesno", gold[rows], _gold_evidence(frame)[rows],
                           group=_item_groups(frame, rows, k[rows]))


#: closed items a (category, option count) cell needs for its own per-model reliability and position bias (50:
#: MathVista planted-on-informative AP 0.442 -> 0.541 over 100, BLINK unchanged 0.446, 200 pools BLINK: 0.178)
#: (smaller cells share the pooled class of their option count); at most MAX_GROUP_CELLS cells, the largest,
#: since every answer class adds a block to each likelihood evaluation
MIN_GROUP_ITEMS = 50
MAX_GROUP_CELLS = 24


def _item_groups(frame: AuditFrame, rows: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(len(rows),) label-model group of each closed item: 1 + its category's index where its (category,
    option count) cell has at least :data:`MIN_GROUP_ITEMS` closed items (the largest
    :data:`MAX_GROUP_CELLS` cells), 0 (pooled) otherwise."""
    codes, _ = frame.category_codes("category")
    c = np.asarray(codes, np.int64)[rows]
    if not len(c):
        return c
    cell = c * (int(k.max()) + 1) + k
    u, inv, n = np.unique(cell, return_inverse=True, return_counts=True)
    big = n >= MIN_GROUP_ITEMS
    if big.sum() > MAX_GROUP_CELLS:
        big &= n >= np.sort(n[big])[-MAX_GROUP_CELLS]
    return np.where(big[inv], c + 1, 0)


def _gold_evidence(frame: AuditFrame) -> np.ndarray:
    """(Q,) prior evidence group of each item's gold (its own wrong-gold rate in the label model):
    0 none, 1 the gold option is a placeholder text (nan, None, empty: unanswerable as released), 2 another
    option repeats the gold's text (:mod:`audit_hub.detectors.placeholders`)."""
    from .placeholders import gold_duplicated, placeholder_table

    ev = np.zeros(frame.n_questions, np.int64)
    if frame.n_questions:
        ev[gold_duplicated(frame)] = 2
        ev[placeholder_table(frame)["gold_placeholder"]] = 1
    return ev



#: the per-row entries of :func:`label_posterior` (aligned with its ``rows``)
_PER_ROW = ("p_wrong", "log_odds", "prior_log_odds", "top", "identifiable", "stable")


def label_posterior(frame: AuditFrame, *, seed: int = 0, use_blind: bool = True, recall_sims: int = 2,
                    fit_items: int = 20000, label_iters: int = 4, check: bool = True) -> dict:
    """Posterior that each closed item's gold is wrong, the likelihood-ratio test, the identifiability of
    each category, the held-out-model predictive check (``check``) and the detection estimate at this pool
    (see :mod:`audit_hub.stats.label_model` and :mod:`audit_hub.stats.label_checks`). Computed on the frame in its
    canonical order (:meth:`AuditFrame.canonical`: the seeded fits, checks and planted runs do not depend on the
    order of the input's rows or models), the per-item entries returned in this frame's order."""
    canon, order = frame.canonical()
    out = _label_posterior(canon, seed=seed, use_blind=use_blind, recall_sims=recall_sims, fit_items=fit_items,
                           label_iters=label_iters, check=check)
    if canon is frame or not len(out["rows"]):
        return out
    rows = order[out["rows"]]
    back = np.argsort(rows, kind="stable")
    out["rows"] = rows[back]
    for key in _PER_ROW:
        v = out.get(key)
        if isinstance(v, np.ndarray) and len(v) == len(back):
            out[key] = v[back]
    return out


def _label_posterior(frame: AuditFrame, *, seed: int, use_blind: bool, recall_sims: int, fit_items: int,
                     label_iters: int, check: bool) -> dict:
    from ..stats import label_checks as lc
    from ..stats import label_model as lm

    models = frame.models_in("full")
    blind_models = frame.models_in("blind") if (use_blind and frame.has_arm("blind")) else []
    gold = frame.gold_codes().astype(np.int64)
    rows, data = _label_data(frame, models, blind_models, gold)
    out = {"rows": rows[:0], "p_wrong": np.zeros(0), "log_odds": np.zeros(0), "prior_log_odds": np.zeros(0), "top": np.zeros(0, np.int64), "test": None, "params": None,
           "detection": None, "identifiable": np.zeros(0, bool), "identifiability": {}, "check": None,
           "wrong_gold_rate": None, "wrong_gold_rate_checked": None}
    if len(rows) < MIN_MODEL_ITEMS:
        return out
    out["rows"] = rows
    params, test = lm.fit_and_test(data, seed=seed, fit_items=fit_items, n_iter=label_iters)
    post, ll = lm.posterior(data, params)
    p_wrong = 1.0 - post[np.arange(len(rows)), data.gold]
    log_odds = lm.log_odds_wrong(data, params, ll)
    alt = post.copy()
    alt[np.arange(len(rows)), data.gold] = -1
    ev = {lab.replace(" ", "_"): (float(x) if x is not None else None) for lab, x in
          zip(EVIDENCE_LABELS[1:], list(params.eps_evidence if params.eps_evidence is not None else []) + [None] * 2)}
    eps_i = np.clip(lm.item_eps(data, params), 1e-300, 1.0 - 1e-16)
    out.update(p_wrong=p_wrong, log_odds=log_odds, prior_log_odds=np.log(eps_i) - np.log1p(-eps_i),
               top=alt.argmax(axis=1), test=test,
               params=params.as_dict() | {"blind_arm_used": bool(blind_models), "n_items_fit": int(min(len(rows), fit_items)),
                                          "eps_evidence": ev,
                                          "n_evidence_items": {lab.replace(" ", "_"): int((data.evidence == g).sum())
                                                               for g, lab in enumerate(EVIDENCE_LABELS) if g}})
    codes, labels = frame.category_codes("category")
    cat = np.asarray(codes, np.int64)[rows]
    ident = lc.identifiability(data.arms[0], data.gold, data.k, cat, [str(x) for x in labels], seed=seed)
    for row in ident.values():  # positions in the full arm's model list -> the models' names
        if row.get("best_models"):
            row["best_models"] = [str(models[i]) for i in row["best_models"]]
    ok_cat = np.array([ident.get(str(lab), {}).get("identifiable", False) for lab in labels], bool)
    identifiable = ok_cat[cat] if len(ok_cat) else np.zeros(len(rows), bool)
    out.update(identifiable=identifiable, identifiability=ident)
    # the wrong-gold share where the pool can tell the gold: ML estimate with its profile-likelihood interval
    idx = np.flatnonzero(identifiable)
    out["wrong_gold_rate"] = (lm.wrong_gold_rate(ll[idx], data.k[idx], data.gold[idx]) | {
        "counts": "closed items (mc, yes/no) of the categories that pass the identifiability test"}) if len(idx) else None
    if check:
        def fit_predict(d, answers):
            return lm.held_out_prediction(d, lm.fit(d, n_iter=2, seed=seed), answers)

        names, blind_names = [str(m) for m in models], [str(m) for m in blind_models]
        doubted = identifiable & (p_wrong >= 0.5)
        out["check"] = lc.predictive_check(data, identifiable, cat, fit_predict, seed=seed, names=names,
                                           blind_names=blind_names, flagged=doubted)
        stab = lc.flag_stability(data, params, doubted, names=names, blind_names=blind_names,
                                  share_items=identifiable, seed=seed)
        out["stable"] = stab.pop("stable")
        robust = stab.pop("family_robust_share")
        if robust is not None and out["wrong_gold_rate"] is not None:
            out["wrong_gold_rate"]["family_robust"] = robust
        out["check"]["stability"] = stab
        for u in out["check"]["units"] + stab["units"]:
            u["model"] = str(models[u["model"]])
            u["family"] = [str(models[x]) for x in u["family"]]
        out["wrong_gold_rate_checked"] = checked_wrong_gold_rate(out["wrong_gold_rate"], out["check"])
    if recall_sims > 0:  # planted wrong golds on the items whose category the pool can audit
        dd = data if identifiable.all() or not identifiable.any() else data.subset(np.flatnonzero(identifiable))
        out["detection"] = lm.detection_estimate(dd, params, n_reps=recall_sims, seed=seed)
    # the test is only as good as the model's fit: a difficulty spread at the edge of the grid, or a pool
    # whose simulated recall is below one half, means the null cannot be trusted on this pool
    why = []
    if params.sigma and params.sigma[0] >= lm.SIGMA_MAX - 1e-9:
        why.append("the item-difficulty spread reached the model's bound (the pool is near chance)")
    if out["detection"] and (out["detection"]["recall"] or 0) < 0.5:
        why.append("the pool is too weak: simulated recall below 0.5")
    out["test"] = out["test"] | {"interpretable": not why, "not_interpretable_because": "; ".join(why)}
    return out


def checked_wrong_gold_rate(wg: dict | None, chk: dict | None, z: float = 1.96) -> dict | None:
    """The label model's wrong-gold share calibrated by the held-out-model check: on the items the held-out fits
    doubt, the left-out models' agreement with the gold drops from ``P0`` (golds right, items hard) by ``P0 - O``
    where the fits predict ``P0 - P``; ``w = (P0 - O) / (P0 - P)`` (``realised_share``) is the share of the wrong
    golds the model counts that the held-out answers confirm (method of moments: ``O = P0 - w (P0 - P)``). The
    figures are the check's ``share_check`` (every checked item weighted by the fit's posterior that its gold is
    wrong: the share the model estimates is what is checked); where the fits expect too few wrong golds for it,
    the flagged items' figures. The estimate is the model's maximum-likelihood share times ``w`` clipped to [0, 1] (the check removes what the held-out answers contradict; it is not read as finding more than the model
    does), its interval the model's interval times ``w``'s (``(P0 - O +- z sd(O)) / (P0 - P)``, clipped).
    Assumes the share of the model's wrong golds that are real does not depend on how strongly the model
    doubts them. None without a model estimate; the model's own figure (``realised_share`` None) when the check
    had nothing to check. Where the pool has families of models, ``wg["family_robust"]`` (the share with each item's
    evidence the smallest over leaving out each family, :func:`~audit_hub.stats.label_checks.flag_stability`) is a
    second check: a real wrong gold passes both, so the estimate and each end of its interval are the smaller of
    the two (``estimate_from`` names which)."""
    if not wg or wg.get("estimate") is None:
        return None
    base = {"model_estimate": wg["estimate"], "model_ci": wg["ci"], "n_items": wg.get("n_items"),
            "method": ("the label model's maximum-likelihood share times the share of its predicted drop in "
                       "held-out agreement that the left-out models realise on the items their fits doubt, "
                       "weighted by the posterior that the gold is wrong")}
    src = (chk or {}).get("share_check") or chk
    if not src or src.get("realised_share") is None or src.get("sd_observed_agreement") is None:
        out = base | {"estimate": wg["estimate"], "ci": wg["ci"], "realised_share": None, "realised_share_ci": None,
                      "note": "the held-out check had nothing to check: the label model's estimate"}
    else:
        drop = float(src["predicted_if_gold_right"]) - float(src["predicted_agreement"])
        seen = float(src["predicted_if_gold_right"]) - float(src["observed_agreement"])
        sd = float(src["sd_observed_agreement"])
        if drop <= 1e-9:
            w = lo = hi = 0.0
        else:
            w, lo, hi = (float(np.clip(x / drop, 0.0, 1.0)) for x in (seen, seen - z * sd, seen + z * sd))
        out = base | {"estimate": wg["estimate"] * w, "ci": [wg["ci"][0] * lo, wg["ci"][1] * hi],
                      "realised_share": w, "realised_share_ci": [lo, hi],
                      "checked_on": "posterior-weighted items" if src is not chk else "flagged items"}
    rob = wg.get("family_robust")
    if rob and rob.get("estimate") is not None:
        # the wrong golds that no single family of models carries (label_checks.flag_stability): a real wrong gold
        # passes both checks, so the share is at most the smaller of the two (and so is each end of its interval)
        out |= {"family_robust_estimate": rob["estimate"], "family_robust_ci": rob["ci"],
                "held_out_estimate": out["estimate"], "held_out_ci": list(out["ci"]),
                "estimate_from": "held-out check" if out["estimate"] <= rob["estimate"] else "family-robust share"}
        out["ci"] = [min(out["ci"][0], rob["ci"][0]), min(out["ci"][1], rob["ci"][1])]
        out["estimate"] = min(out["estimate"], rob["estimate"])
    return out


def _label_evidence(frame: AuditFrame, *, cons: np.ndarray, unanimous: np.ndarray, majority: np.ndarray,
                    blind_disagrees: np.ndarray, seed: int, use_blind: bool, recall_sims: int, label_iters: int,
                    check: bool = True):
    """Posterior that each closed item's gold is wrong and the severity it implies. Relabel (high /
    critical) needs evidence beyond difficulty and attractive distractors: posterior >= 0.5 on closed
    items; open items have no option structure to model and keep the unanimity rule, except in a category
    whose closed items fail the identifiability test (review only there); a unanimous non-gold answer the
    model explains is medium (review)."""
    Q = frame.n_questions
    lab = label_posterior(frame, seed=seed, use_blind=use_blind, recall_sims=recall_sims, label_iters=label_iters,
                          check=check)
    p_wrong = np.full(Q, np.nan)
    p_wrong[lab["rows"]] = lab["p_wrong"]
    log_odds = np.full(Q, np.nan)
    log_odds[lab["rows"]] = lab["log_odds"]
    modelled = ~np.isnan(p_wrong)
    identifiable = np.zeros(Q, bool)
    identifiable[lab["rows"]] = lab["identifiable"]
    # the review order: where the category fails the identifiability test the answers carry no evidence about
    # the gold, so the item keeps its prior odds (the stated gold's fitted wrong rate) instead of leading the
    # order on a posterior that reads the pool's shared errors as wrong golds
    # (ties among them broken by the posterior, within REVIEW_TIE_BREAK of the prior log odds: a category that
    # fails the test may still carry a little evidence, e.g. MATH-V's, all 16 categories near chance)
    review_log_odds = np.full(Q, np.nan)
    pl = lab["prior_log_odds"]
    review_log_odds[lab["rows"]] = np.where(lab["identifiable"], lab["log_odds"],
                                            pl + REVIEW_TIE_BREAK * np.tanh(lab["log_odds"] - pl))
    raw_suspect = modelled & (p_wrong >= 0.5)
    # no flag where the category is not identifiable; a flag is a finding only where the held-out check
    # supports it (not run: calibration simulations, which score the headline test only)
    suspect = raw_suspect & identifiable
    chk = lab["check"]
    supported = (chk is None and not check) or bool(chk and chk.get("supported"))
    # a finding survives leaving out each family of models (label_checks.flag_stability): a flag that one
    # family alone carries is that family's shared error as much as the gold's
    stable = np.ones(Q, bool)
    if lab.get("stable") is not None:
        stable[lab["rows"]] = lab["stable"]
    if suspect.any():  # the model's most likely true answer, where the gold is suspect and no majority names one
        best = np.full(Q, -1, np.int64)
        best[lab["rows"]] = lab["top"]
        cons = np.where(suspect & (cons < 0), best, cons)
    cand = np.flatnonzero((unanimous | suspect) & (cons >= 0))
    dup_gold = np.zeros(Q, bool)
    dup_gold[cand] = _duplicates_gold(frame, cand, cons)
    # open items keep the unanimity rule, but not in a category whose closed items show the pool's answers
    # carry no information about the gold (the same identifiability rule; categories with no closed items
    # to test keep the rule)
    codes, labels = frame.category_codes("category")
    ident = lab.get("identifiability") or {}
    cat_ok = np.array([bool(ident[str(x)].get("identifiable")) if str(x) in ident else True for x in labels], bool)
    open_ok = cat_ok[np.asarray(codes, np.int64)] if len(cat_ok) else np.ones(Q, bool)
    strong = np.where(modelled, suspect & supported & stable, unanimous & open_ok)
    # a suspect gold the check could not test is worth a look (medium); one the held-out models contradict
    # (the check ran and failed) is a weak, pool-dependent signal (low): a review order, not a finding
    failed = bool(chk) and chk.get("supported") is False
    review = unanimous | (suspect & (not supported) & (not failed)) | (suspect & supported & ~stable)
    sev = np.where(strong, np.where(blind_disagrees | dup_gold, 4, 3),
                   np.where(review, 2, np.where(majority | suspect, 1, 0)))
    # P(gold right) from the log odds: no saturation at 0, so the ranking has no ties
    score_closed = 1.0 / (1.0 + np.exp(np.clip(np.nan_to_num(review_log_odds), -700, 700)))
    return {"lab": lab, "p_wrong": p_wrong, "log_odds": log_odds, "modelled": modelled, "suspect": suspect,
            "cons": cons, "dup_gold": dup_gold, "sev": sev, "score_closed": score_closed, "supported": supported,
            "raw_suspect": raw_suspect, "identifiable": identifiable, "stable": stable,
            "open_not_identifiable": ~modelled & unanimous & ~open_ok}


def _label_summary(ev: dict, unanimous: np.ndarray, p_indep: float) -> dict:
    """Summary entries of the latent-truth model (headline test, posterior counts, detection)."""
    lab, test = ev["lab"], ev["lab"]["test"]
    det = lab["detection"]
    return {
        "p_value": test["p_value"] if test and test.get("interpretable") else None,
        "p_value_independence": p_indep,
        "independence_note": ("expected count if model errors were independent (the paper's figure): real pools "
                              "share item difficulty, so it is exceeded on defect-free benchmarks and is not a "
                              "calibrated test; the headline test is the likelihood ratio"),
        "headline_test": (test | {"null_hypothesis": (
            "no gold label is wrong (eps = 0) under a model that keeps each model's reliability per answer "
            "class, item difficulty (random effect per arm) and attractive distractors (one-attractor / "
            "Dirichlet mixture), fitted to the runs")}) if test else None,
        "label_model": lab["params"],
        "n_items_modelled": int(ev["modelled"].sum()),
        "n_posterior_gold_wrong": int(ev["suspect"].sum()),
        "n_posterior_gold_wrong_unsupported": int((ev["suspect"] & ~ev["supported"]).sum()),
        # doubted golds that rest on one family of models (label_checks.flag_stability): a review order only
        "n_posterior_gold_wrong_unstable": int((ev["suspect"] & ~ev["stable"]).sum()),
        "n_posterior_gold_wrong_not_identifiable": int((ev["raw_suspect"] & ~ev["identifiable"]).sum()),
        "n_items_identifiable": int(ev["identifiable"].sum()),
        "n_open_unanimous_not_identifiable": int(ev["open_not_identifiable"].sum()),
        # the wrong-gold estimate is identified only where the pool can tell the gold
        "expected_wrong_gold": float(np.nansum(np.where(ev["identifiable"], ev["p_wrong"], 0.0))),
        # ... as a share of the items it is summed over (the closed items of identifiable categories)
        "expected_wrong_gold_share": (float(np.nansum(np.where(ev["identifiable"], ev["p_wrong"], 0.0)))
                                      / max(int(ev["identifiable"].sum()), 1)),
        "wrong_gold_share": lab.get("wrong_gold_rate"),
        # ... calibrated by the held-out-model check (the reported estimate when the check ran)
        "wrong_gold_share_checked": lab.get("wrong_gold_rate_checked"),
        "identifiability": lab["identifiability"],
        "categories_not_identifiable": {c: r.get("reason", "") for c, r in lab["identifiability"].items()
                                        if not r.get("identifiable")},
        "predictive_check": lab["check"],
        "flags_supported": bool(ev["supported"]),
        "detection": det,
        "pool_too_weak": (det["recall"] is not None and det["recall"] < 0.5) if det else None,
        "n_unanimous_explained": int((unanimous & ev["modelled"] & ~ev["suspect"]).sum()),
    }


def _per_question(frame: AuditFrame, ev: dict, *, n_p: np.ndarray, top_n: np.ndarray, n_gold: np.ndarray,
                  unanimous: np.ndarray, n_blind: np.ndarray, blind_share: np.ndarray) -> pd.DataFrame:
    """The per-question table: score (posterior on closed items, else the non-gold share), severity and
    the evidence columns."""
    cons, sev = ev["cons"], ev["sev"]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n_p > 0, top_n / np.maximum(n_p, 1), 0.0)
        gold_share = np.where(n_p > 0, n_gold / np.maximum(n_p, 1), np.nan)
    labels = np.full(frame.n_questions, "", dtype=object)
    lab_items = np.flatnonzero(cons >= 0)
    labels[lab_items] = _code_labels(frame, cons, lab_items)
    return pd.DataFrame({
        "question_id": frame.question_id_column(),
        f"{NAME}_score": np.where(ev["modelled"], ev["score_closed"], 1.0 - share),
        f"is_{NAME}_issue": sev >= 3,
        f"{NAME}_severity": severity_array(sev),
        f"{NAME}_n_parseable": n_p,
        # the option index (yes/no: 0 yes, 1 no) of a closed item's consensus; -1 for none and for an open item,
        # whose code is a value number that follows the order the rows came in (its text: consensus_answer)
        f"{NAME}_consensus_code": np.where(np.isin(frame.answer_type, ("mc", "yesno")), cons, -1),
        f"{NAME}_consensus_answer": labels,
        f"{NAME}_consensus_share": share,
        f"{NAME}_gold_share": gold_share,
        f"{NAME}_unanimous": unanimous,
        f"{NAME}_n_blind_parseable": n_blind,
        f"{NAME}_blind_agreement": blind_share,
        f"{NAME}_duplicates_gold": ev["dup_gold"],
        f"{NAME}_p_gold_wrong": ev["p_wrong"],
        f"{NAME}_log_odds_gold_wrong": ev["log_odds"],
        f"{NAME}_gold_evidence": np.array(EVIDENCE_LABELS, dtype=object)[_gold_evidence(frame)],
        f"{NAME}_gold_doubted": ev["suspect"],
    })


def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, min_answered: int | None = None,
        blind_agree_share: float = 0.5, recall_sims: int = 2, use_blind: bool = True,
        label_iters: int = 4, check: bool = True) -> DetectorResult:
    """Rank items by the posterior that the gold is wrong; flag what difficulty and attractive
    distractors do not explain (see the module docstring). ``field`` unused."""
    models = frame.models_in("full")
    if len(models) < 2:
        raise DetectorSkipped(f"needs full-arm answers from at least 2 models (found {len(models)})")
    Q, M = frame.n_questions, len(models)
    A = frame.answer_codes("full", models=models)
    gold = frame.gold_codes().astype(np.int64)
    thr = max(2, (M - 1) if min_answered is None else int(min_answered))
    parse = A >= 0
    n_p = parse.sum(axis=1).astype(np.int64)
    ran = frame.models_per_item("full")  # models = every full-arm model
    # by default "all but one of the models": of those that ran the item, where a run stopped early or covered a
    # subset (a model that never saw the item cannot count against it); with complete runs, M - 1 on every item
    item_thr = np.maximum(2, ran - 1) if min_answered is None and (ran < M).any() else thr
    is_gold = (A == gold[:, None]) & (gold[:, None] >= 0)
    n_gold = is_gold.sum(axis=1).astype(np.int64)
    rs = answer_row_stats(frame, "full", models, exclude_gold=True)
    top, top_n, top_tied = rs["top_value"], rs["top_count"].astype(np.int64), rs["top_tied"]
    eligible = n_p >= item_thr
    unanimous = eligible & (top_n == n_p) & (n_p > 0) & (gold >= 0)
    majority = (n_p >= 2) & (2 * top_n > n_p) & (gold >= 0)
    plurality = (n_p >= 2) & (top_n > n_gold) & ~top_tied & (gold >= 0)
    cons = np.where(majority, top, -1)

    blind_models, blind_share, n_blind = _blind_agreement(frame, cons)
    blind_disagrees = ~np.isnan(blind_share) & (blind_share < blind_agree_share)

    ev = _label_evidence(frame, cons=cons, unanimous=unanimous, majority=majority, blind_disagrees=blind_disagrees,
                         seed=seed, use_blind=use_blind, recall_sims=recall_sims, label_iters=label_iters,
                         check=check)
    cons, dup_gold, sev = ev["cons"], ev["dup_gold"], ev["sev"]
    flagged = sev >= 3
    e, exp_sel, p_item, expected, obs_closed, p_value, n_open_excl = _expected_unanimous(
        frame, parse, is_gold, n_p, eligible, unanimous, gold)
    per_question = _per_question(frame, ev, n_p=n_p, top_n=top_n, n_gold=n_gold, unanimous=unanimous,
                                 n_blind=n_blind, blind_share=blind_share)
    summary = {
        **_count_summary(unanimous=unanimous, eligible=eligible, majority=majority, plurality=plurality, sev=sev,
                         blind_disagrees=blind_disagrees, dup_gold=dup_gold, exp_sel=exp_sel, expected=expected,
                         obs_closed=obs_closed, n_open_excl=n_open_excl),
        **_label_summary(ev, unanimous, p_value),
        # every closed item with a usable gold is in the label model, however many models parsed on it; the
        # minimum of parseable answers is the unanimity rule's (open items, and closed ones without a model)
        **item_accounting(Q, [("gold unusable", gold < 0),
                              ("items outside the label model ("
                               + ("open answers" if not (~ev["modelled"] & np.isin(frame.answer_type, ("mc", "yesno"))).any() else
                                  "open answers, and closed ones: it did not run") + ") with "
                               + (f"fewer than {thr} parseable answers, the unanimity rule's minimum"
                                  if np.isscalar(item_thr) else
                                  "fewer parseable answers than all but one of the models that ran the item, the "
                                  "unanimity rule's minimum"),
                               ~ev["modelled"] & ~eligible)]),
        "n_flagged": int(flagged.sum()),
        "model_error_rates": {m: (None if np.isnan(x) else float(x)) for m, x in zip(models, e)},
        "n_models": M,
        "blind_models": list(blind_models),
        "notes": ([f"{n_open_excl} eligible numeric/free item(s) are excluded from the expectation "
                   "(no fixed number of options)."] if n_open_excl else []),
        "min_answered_per_item": None if np.isscalar(item_thr) else (
            f"all but one of the models that ran the item (at least 2): {int((ran < M).sum()):,} item(s) were not run "
            f"by every one of the {M} models"),
        "params": {"min_answered": thr, "blind_agree_share": blind_agree_share, "recall_sims": recall_sims,
                   "use_blind": use_blind, "label_iters": label_iters,
                   "check": check},
        "seed": seed,
    }

    rows = _table_rows(frame, eligible=eligible, unanimous=unanimous, majority=majority, exp_sel=exp_sel,
                       p_item=p_item, n_p=n_p, expected=expected, obs_closed=obs_closed, p_value=p_value)
    test = ev["lab"]["test"]
    if test:
        rows.insert(1, {"category": "(all)", "arm": "full", "statistic": "gold_wrong_rate", "estimate": test["eps_hat"],
                        "null_mean": 0.0, "excess": test["eps_hat"], "p_value": summary["p_value"],
                        "p_adjusted": summary["p_value"], "n_items": int(ev["modelled"].sum())})
    table = summary_rows(NAME, rows)
    return DetectorResult(name=NAME, per_question=per_question, summary=summary, table=table,
                          params=summary["params"])


# ---------------------------------------------------------------------------------------- report phrases
def evidence_phrase(p: pd.DataFrame, label: str) -> pd.Series:
    """The report's evidence phrase for flagged rows ``p`` of the questions table (with ``answer``)."""
    npv = pd.to_numeric(p[f"{NAME}_n_parseable"], errors="coerce")
    k = (pd.to_numeric(p[f"{NAME}_consensus_share"], errors="coerce") * npv).round()
    is_all = p[f"{NAME}_unanimous"].fillna(False).astype(bool).to_numpy()
    who = ("all " + num_labels(npv) + " parseable models").where(
        is_all, num_labels(k) + " of " + num_labels(npv) + " parseable models")
    who = who.where(~(is_all & (npv == 2).to_numpy()), "both parseable models")  # not "all 2 parseable models"
    out = label + ": " + who + " chose " + str_labels(p[f"{NAME}_consensus_answer"])
    out = out + " (gold " + str_labels(p["answer"]) + ")"
    bv = pd.to_numeric(p[f"{NAME}_blind_agreement"], errors="coerce")
    out = out.where(~(bv < 0.5).to_numpy(), out + "; blind runs disagree")
    out = out.where(~(bv >= 0.5).to_numpy(), out + "; blind runs agree")
    dup = p[f"{NAME}_duplicates_gold"].fillna(False).astype(bool).to_numpy()
    return out.where(~dup, out + "; chosen option duplicates the gold text")


def _notes(ce: dict) -> list[str]:
    """Lines on the label-error headline test, the posterior ranking and the pool's detection power."""
    out = []
    if not ce or ce.get("skipped"):
        return out
    ht = ce.get("headline_test")
    n_closed = ce.get("n_eligible_closed") or 0
    if n_closed and not ce.get("n_items_modelled"):
        out.append(f"**No label model**: {count(n_closed, 'closed item')} (multiple-choice or yes/no), fewer than "
                   f"the {MIN_MODEL_ITEMS} the latent-truth model needs, so none of its checks ran (posterior, "
                   "identifiability, held-out models): a unanimous non-gold answer there is flagged by the paper's "
                   "unanimity rule alone, however few models answered.")
    if isinstance(ht, dict) and not ht.get("interpretable", True):
        out.append(f"**{NAME} headline test not reported**: {ht.get('not_interpretable_because', '')}. "
                   "The likelihood-ratio test of 'no gold label is wrong' assumes the latent-truth model fits the "
                   "pool; here it does not, so its p-value would reflect misfit, not label errors. "
                   f"{_has(ce.get('n_posterior_gold_wrong', 0), 'item')} posterior >= 0.5 that the gold is wrong.")
    elif isinstance(ht, dict):
        out.append(f"**{NAME} headline test**: likelihood ratio of 'no gold label is wrong', "
                   f"{p_is(ht.get('p_value'))}, estimated wrong-gold rate {pct(ht.get('eps_hat'))}; "
                   f"{count(ce.get('n_posterior_gold_wrong', 0), 'item')} with posterior >= 0.5 that the gold is "
                   f"wrong ({count(ce.get('n_flagged', 0), 'finding')} in all, flagged relabel: see the checks below), "
                   f"{count(ce.get('n_unanimous_explained', 0), 'unanimous non-gold item')} that item "
                   f"difficulty and attractive distractors explain (review). Null: {ht.get('null_hypothesis', '')}. "
                   f"The independence count above is the paper's figure: real pools share difficulty, so it is "
                   f"exceeded on defect-free benchmarks ({p_is(ce.get('p_value_independence'))}).")
    det = ce.get("detection")
    if isinstance(det, dict) and det.get("recall") is not None:
        txt = (f"**Can this pool find wrong golds?** On simulations of this pool (fitted model, {fmt_num(det.get('n_items'))} "
               f"items, {100 * det.get('error_rate', 0):.0f}% planted wrong golds, {det.get('n_reps')} runs) the "
               f"posterior flags {pct(det.get('recall'), 0)} of them (recall"
               + (f"; 95% Wilson interval {ci(det['recall_ci'], 'pct', det.get('recall'))} over the "
                  f"{fmt_num(det.get('n_planted'))} planted" if det.get("recall_ci") else "")
               + f") with precision {pct(det.get('precision'), 0)}"
               + (f" ({ci(det['precision_ci'], 'pct', det.get('precision'))} over the {fmt_num(det.get('n_flagged'))} "
                  f"flagged)" if det.get("precision_ci") else "")
               + f"; average precision of the ranking {float(det.get('average_precision') or 0):.2f}.")
        if ce.get("pool_too_weak"):
            txt += (" **The pool is too weak to detect label errors**: 'no findings' here says little about the "
                    "labels; the ranking (`consensus_error_score`) is still the best order to review items in.")
        out.append(txt)
    wg = ce.get("wrong_gold_share")
    wc = ce.get("wrong_gold_share_checked")
    if isinstance(wc, dict) and wc.get("realised_share") is not None:
        rs = wc.get("realised_share_ci") or [None, None]
        drop = ("the share of its predicted drop in agreement with the gold that held-out models realise on "
                + ("the items their fits doubt, weighted by that doubt" if wc.get("checked_on") != "flagged items"
                   else "the flagged items")
                + f" ({float(wc['realised_share']):.2f}, 95% {float(rs[0]):.2f} to {float(rs[1]):.2f})")
        head = (f"**Estimated wrong-gold share** of the {fmt_num(wc.get('n_items'))} closed item(s) in categories this pool "
                f"can audit: {pct(wc['estimate'], 1)} (95% interval {pct(wc['ci'][0], 1)} to {pct(wc['ci'][1], 1)}): ")
        if wc.get("family_robust_estimate") is not None:
            out.append(head + f"the smaller of two checks of the label model's maximum-likelihood "
                       f"{pct(wc['model_estimate'], 1)}: times {drop}, {pct(wc['held_out_estimate'], 1)}; counting only "
                       f"the evidence that no single family of models carries, {pct(wc['family_robust_estimate'], 1)} "
                       f"({pct(wc['family_robust_ci'][0], 1)} to {pct(wc['family_robust_ci'][1], 1)}).")
        else:
            out.append(head + f"the label model's maximum-likelihood {pct(wc['model_estimate'], 1)} times {drop}.")
    elif isinstance(wg, dict) and wg.get("estimate") is not None:
        chk = ce.get("predictive_check") or {}
        out.append(f"**Estimated wrong-gold share** of the {fmt_num(wg.get('n_items'))} closed item(s) in categories this pool "
                   f"can audit: {pct(wg['estimate'], 1)} (95% profile-likelihood interval {pct(wg['ci'][0], 1)} to "
                   f"{pct(wg['ci'][1], 1)}; maximum likelihood under the fitted label model, so conditional on it"
                   + ("; the held-out-model check does not support this pool's flags, so neither this estimate"
                      if chk.get("supported") is False else "") + ").")
    out.extend(_check_notes(ce))
    return out


def _check_notes(ce: dict) -> list[str]:
    """The card lines of the identifiability rule (one per category the pool cannot audit) and of the
    held-out-model predictive check (beside the simulated recall)."""
    out = []
    bad = ce.get("categories_not_identifiable") or {}
    if bad:
        lines = "; ".join(f"**{md_inline(c)}**: {r}" for c, r in bad.items())
        out.append(f"**Categories that cannot be audited for label errors with this pool** (no item of them is "
                   f"flagged; the answers do not tell the gold there): {lines}.")
    chk = ce.get("predictive_check")
    if not isinstance(chk, dict):
        return out
    from ..stats import label_checks as lc

    n_raw = ce.get("n_posterior_gold_wrong", 0)
    weaker = chk.get("too_weak_to_hold_out") or []
    skipped = (f" ({count(chk.get('n_held_out', 0), 'model')} held out; {count(len(weaker), 'other')} not, being weak (kappa over "
               f"their position-bias baseline < {lc.KAPPA_MIN:g}) and no stronger than the pool's median model: a "
               f"model as weak as the pool errs with it)" if weaker else "")
    if chk.get("supported") is True:
        st = chk.get("stability") or {}
        n_unstable = int(ce.get("n_posterior_gold_wrong_unstable") or 0)
        carriers = "; ".join(f"{md_inline(', '.join(u['family']))}: {u['n_flags_it_carries']}"
                             for u in st.get("units") or [] if u.get("n_flags_it_carries"))
        tail = (f": the {count(n_raw, 'flag')} {'is' if n_raw == 1 else 'are'} reported as findings." if not n_unstable else
                f". {n_raw - n_unstable} of the {count(n_raw, 'flag')} {'is' if n_raw - n_unstable == 1 else 'are'} "
                f"reported as findings; {n_unstable} {'rests' if n_unstable == 1 else 'rest'} on one "
                f"family of models (without its answers the fitted posterior falls below 0.5; {carriers}) and are a "
                f"review order only.")
        out.append(f"**Held-out-model check passed**: models left out of the fit agree with the gold on "
                   f"{pct(chk.get('observed_agreement'), 0)} of the items their fits flag, as predicted if those golds "
                   f"are wrong ({pct(chk.get('predicted_agreement'), 0)}; {pct(chk.get('predicted_if_gold_right'), 0)} "
                   f"if right but hard; elsewhere {pct(chk.get('agreement_elsewhere'), 0)}){skipped}{tail}")
    elif n_raw:
        verdict = "failed" if chk.get("supported") is False else "could not run"
        out.append(f"**Held-out-model check {verdict}**: {chk.get('reason', '')}{skipped}. The {count(n_raw, 'item')} "
                   f"with posterior >= 0.5 that the gold is wrong {'is' if n_raw == 1 else 'are'} a review order only "
                   f"(`consensus_error_score`), not findings.")
    return out



def _unanimity_scope(s: dict) -> tuple[str, str] | None:
    """(N items, T of the M models): the unanimity rule's denominator, where it is not every item; else None."""
    n_el, thr, m = s.get("n_eligible"), (s.get("params") or {}).get("min_answered"), s.get("n_models")
    total = (s.get("n_items") or 0) + sum(int(v) for v in (s.get("excluded") or {}).values())
    if n_el is None or thr is None or m is None or n_el >= total:
        return None
    if s.get("min_answered_per_item"):
        return (f"{fmt_num(n_el)} items", f"all but one of the models that ran them ({fmt_num(thr)} of the "
                f"{fmt_num(m)} models where all ran)")
    return f"{fmt_num(n_el)} items", f"at least {fmt_num(thr)} of the {fmt_num(m)} models"


def _has(n, noun: str) -> str:
    """``1 item has`` / ``3 items have``."""
    return f"{count(n, noun)} {'has' if int(n) == 1 else 'have'}"


def card_line(s: dict) -> str:
    """The card's one-line finding on this detector's summary ``s``."""
    txt = (f"**{NAME}**: {count(s.get('n_unanimous_non_gold') or 0, 'question')} on which every model that answered "
           f"parseably chose the same non-gold option")
    scope = _unanimity_scope(s)
    if s.get("n_unanimous_non_gold_ci"):
        txt += f" (95% Wilson interval {ci(s.get('n_unanimous_non_gold_ci'), 'num')} questions)"
    if scope:
        txt += f" among the {scope[0]} {scope[1]} answered parseably (the rule needs that many)"
    txt += f"; {fmt_num(s.get('expected_under_independence'))} expected if model errors were independent"
    txt += _closed_part(s)
    txt += f"; {fmt_num(s.get('n_majority_non_gold'))} with a strict non-gold majority (of at least 2 parseable answers)."
    return " ".join([txt, *_notes(s)])


def _closed_part(s: dict) -> str:
    """The observed count the expectation is comparable with, where the unanimous items include open answers the
    expectation does not cover (MathVista: 3 unanimous, 2 of them multiple-choice, against 3.98 expected on the
    multiple-choice items)."""
    n, closed = s.get("n_unanimous_non_gold") or 0, s.get("n_unanimous_closed")
    if closed is None or closed == n:
        return ""
    return (f" on the multiple-choice and yes/no items only, where {fmt_num(closed)} of the {fmt_num(n)} "
            f"{'is' if closed == 1 else 'are'}")


def lede_line(s: dict) -> str:
    """The card's opening line on this detector's summary ``s``."""
    scope = _unanimity_scope(s)
    of = f" of the {scope[0]} that {scope[1]} answered parseably" if scope else ""
    n = s.get('n_unanimous_non_gold') or 0
    return (f"{count(n, 'question')}{of} {'has' if n == 1 else 'have'} a unanimous non-gold "
            f"answer ({fmt_num(s.get('expected_under_independence'))} expected under independent errors"
            f"{_closed_part(s)}).")


def console_line(s: dict) -> str:
    """One line for the terminal after an audit."""
    n = s.get("n_unanimous_non_gold")
    return (f"unanimous non-gold consensus: {fmt_num(n)} item{'' if n == 1 else 's'} "
            f"(expected under independence {fmt_num(s.get('expected_under_independence'))})")
