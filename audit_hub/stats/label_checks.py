"""Checks on the data itself before a label-error flag becomes a finding (the label-conflict detector).

**Identifiability per category** (:func:`identifiability`). A wrong gold can only be seen where the pool's
answers carry information about the gold. In each category the models are ranked on one random half of its
items by their kappa against their own *position-bias baseline* (``base_m = sum_j f_m(j) P_gold(j)``: the
accuracy of a model answering with its own letter frequencies ``f_m``, independently of the item), and the
best :data:`TOP_MODELS` are scored on the other half (and the halves swapped): ``h_i`` = how many of them give
the gold, ``e_i`` = its expectation under "answers independent of the gold given each model's letter
frequencies". ``z = sum (h - e) / sqrt(sum (h - e)^2)`` (item-level, so the models' correlation on an item is
kept), one-sided. A category is identifiable when ``p <= ALPHA / n_categories`` (Bonferroni) and the best
model's out-of-sample kappa over its baseline is at least :data:`KAPPA_MIN`: below that even the best model's
agreement with the gold is mostly its letter preference.

**Held-out-model predictive check** (:func:`predictive_check`). Leave one model (with its *family*: the
models whose answers agree with it on at least :data:`FAMILY_AGREEMENT` of the items both answered; and with their
blind runs, by name) out, fit
the label model on the rest, and look at the left-out model on the items the fit flags (as many as the
full fit flags among the checked items: its highest posteriors): if the flagged golds
are wrong, its agreement with the stated gold there is what the fit predicts (``P``: the posterior predictive
with the item's truth and difficulty drawn from their posterior given the others' answers), well below what
it would be if those golds were right and the items merely hard (``P0``: the same with the truth fixed at the
gold, so difficulty shared with the other models is accounted for). Pooled over the :data:`HELD_OUT`
strongest models (observed ``O``, its agreement elsewhere ``E``: same category, unflagged items, reported
beside). A *weak* model (kappa over its own position-bias baseline on the checked items below
:data:`KAPPA_MIN`, the identifiability rule's bar) is held out only when it is stronger than the pool's median
model (its accuracy above the median of the others' by ``z >= STRONGER_Z``, binomial SE): a model as weak as
the pool falls into the pool's traps with it (on MathVista's 8-model pool the four weak held-out models agreed
with the flagged golds less often than even wrong golds predict), so its answers cannot check the flags. It *supports* the flags when ``O`` is significantly below ``P0`` (``z = (P0 - O) / sqrt(sum
p0 (1 - p0)) >= Z_MIN``) and realises at least :data:`REALISED_MIN` of the predicted drop
(``(P0 - O) / (P0 - P)``). Flags the check does not support are a review order only. The same held-out fits
also check the wrong-gold *share* (``share_check``, :func:`_share_check`): every checked item weighted by the
fit's posterior that its gold is wrong, so the items the model counts in its estimate are the ones checked.
"""

from __future__ import annotations

import re

import numpy as np

from ..fmt import fmt_p_vs, num_vs
from .core import norm_cdf

TOP_MODELS = 3
ALPHA = 0.05
KAPPA_MIN = 0.2
MIN_ITEMS = 20
MAX_ITEMS_PER_CATEGORY = 20000
FAMILY_AGREEMENT = 0.85
FAMILY_MIN_BOTH = 30      # items on which two models are both wrong, for their wrong-answer agreement
# a family in the null's ``families`` regime: wrong-answer agreement this far above the pool's median pair (and
# above 0.2)
FAMILY_EXCESS = 0.15
HELD_OUT = 5
CHECK_ITEMS = 4000
Z_MIN = 2.0
REALISED_MIN = 0.5
MIN_CHECK_FLAGS = 5
STRONGER_Z = 2.0
STABLE_UNITS = 10
SHARE_ITEMS = 20000  # items of the family-robust wrong-gold share (a seeded draw above)


def _freq(A: np.ndarray, kmax: int) -> np.ndarray:
    """(M, kmax) share of the items on which each model answered each position (unparsed: none)."""
    n = max(len(A), 1)
    return np.stack([(A == j).sum(axis=0) for j in range(kmax)], axis=1) / n


def identifiability(A: np.ndarray, gold: np.ndarray, k: np.ndarray, cat: np.ndarray, labels: list[str],
                    seed: int = 0) -> dict:
    """Per category: can the pool's answers (``A`` (Q, M) codes, -1 unparsed) tell the gold? See the module
    docstring. ``cat``: (Q,) category index into ``labels``. Returns {label: {...}} with ``identifiable`` and a
    one-line ``reason`` where not."""
    rng = np.random.default_rng([seed, 41])
    M = A.shape[1]
    kmax = int(k.max()) if len(k) else 2
    present = [c for c in range(len(labels)) if (cat == c).any()]
    n_cat = max(len(present), 1)
    out = {}
    for c in present:
        idx = np.flatnonzero(cat == c)
        if len(idx) > MAX_ITEMS_PER_CATEGORY:
            idx = np.sort(rng.choice(idx, MAX_ITEMS_PER_CATEGORY, replace=False))
        n = len(idx)
        row = {"n_items": int((cat == c).sum()), "identifiable": False}
        if n < MIN_ITEMS or M < 1:
            row["reason"] = f"too few multiple-choice or yes/no items to tell ({n} < {MIN_ITEMS})"
            out[labels[c]] = row
            continue
        Ac, g = A[idx], gold[idx]
        half = rng.permutation(n) < n // 2
        D = V = 0.0
        acc_b = base_b = w_b = 0.0
        best_names = []
        for pick, ev in ((half, ~half), (~half, half)):
            Ap, gp, Ae, ge = Ac[pick], g[pick], Ac[ev], g[ev]
            pg = np.bincount(gp, minlength=kmax)[:kmax] / max(len(gp), 1)
            acc = (Ap == gp[:, None]).mean(axis=0)
            base = _freq(Ap, kmax) @ pg
            kap = (acc - base) / np.maximum(1 - base, 1e-9)
            top = np.argsort(-kap, kind="stable")[:TOP_MODELS]
            fe = _freq(Ae[:, top], kmax)                          # (T, kmax) on the evaluation half
            h = (Ae[:, top] == ge[:, None]).sum(axis=1)
            e = fe[:, ge].sum(axis=0)
            D += float((h - e).sum())
            V += float(((h - e) ** 2).sum())
            b = top[0]
            pe = np.bincount(ge, minlength=kmax)[:kmax] / max(len(ge), 1)
            acc_b += float((Ae[:, b] == ge).sum())
            base_b += float(_freq(Ae[:, [b]], kmax)[0] @ pe) * len(ge)
            w_b += len(ge)
            best_names.append(int(b))
        z = D / np.sqrt(V) if V > 0 else 0.0
        p = float(1.0 - norm_cdf(z))
        acc1, base1 = acc_b / w_b, base_b / w_b
        kap1 = (acc1 - base1) / max(1 - base1, 1e-9)
        ok = p <= ALPHA / n_cat and kap1 >= KAPPA_MIN
        row.update({"identifiable": bool(ok), "p_value": p, "z": float(z), "best_models": best_names,
                    "best_accuracy_out_of_sample": acc1, "position_baseline": base1, "kappa_out_of_sample": kap1})
        if not ok:
            row["reason"] = _not_identifiable_reason(p, n_cat, acc1, base1, kap1)
        out[labels[c]] = row
    return out


def _not_identifiable_reason(p: float, n_cat: int, acc: float, base: float, kappa: float) -> str:
    """Why a category fails :func:`identifiability`, naming each bar it misses with its figure. The p-value is
    given Bonferroni-adjusted (times the categories), the figure the rule compares with ``ALPHA``: a raw p of
    0.0032 printed as 0.003 beside 'do not beat' read as significant."""
    bar = ALPHA / n_cat
    figures = f"best {100 * acc:.0f}% vs baseline {100 * base:.0f}%"
    weak = f"kappa over the baseline {num_vs(kappa, KAPPA_MIN)} < {KAPPA_MIN}"
    if p > bar:
        over = (f"Bonferroni-adjusted p = {fmt_p_vs(min(1.0, p * n_cat), ALPHA)} over {n_cat} categories, above "
                f"{ALPHA}" if n_cat > 1 else f"p = {fmt_p_vs(p, ALPHA)}, above {ALPHA}")
        return (f"the best models do not beat their position-bias baseline significantly out of sample ({figures}, "
                f"{over}" + (f"; {weak}" if kappa < KAPPA_MIN and acc > base else "") + ")")
    return f"the best models barely beat their position-bias baseline out of sample ({figures}, {weak})"


def wrong_answer_agreement(A: np.ndarray, gold: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, M) excess agreement of two models' wrong answers and (M, M) the number of items both got wrong, on the
    items given (mc items with at least 3 options): ``x = (a - e) / (1 - e)`` with ``a`` the share of those items on
    which they chose the same wrong option and ``e`` its value if wrong answers were uniform (the mean of
    1 / (K - 1))."""
    M = A.shape[1]
    valid = (A >= 0) & (A < k[:, None])
    wrong = (valid & (A != gold[:, None])).astype(np.float64)
    inv = 1.0 / np.maximum(k - 1, 1)
    N = wrong.T @ wrong
    E = (wrong * inv[:, None]).T @ wrong
    same = np.zeros((M, M))
    for m in range(M):
        same[m] = ((A == A[:, [m]]) * wrong * wrong[:, [m]]).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = same / N
        e = E / N
        x = (a - e) / np.maximum(1 - e, 1e-9)
    return np.where(N > 0, x, np.nan), N


def family_links(A: np.ndarray, gold: np.ndarray | None = None, k: np.ndarray | None = None,
                 mc: np.ndarray | None = None) -> dict:
    """Which pairs of models are one *family* (fine-tunes of one base, one model under two prompts, releases that
    share training data): the one definition of the held-out check and flag stability (:func:`families`: the first
    rule only) and of the null's ``families`` regime (both rules). Two models are linked when

    * their answers agree on at least :data:`FAMILY_AGREEMENT` of the items both answered (near-duplicates), or
    * given ``gold``: their *wrong* answers agree beyond the pool's typical pair (:func:`wrong_answer_agreement` on
      the mc items with at least 3 options, over at least :data:`FAMILY_MIN_BOTH` items both got wrong): more than
      :data:`FAMILY_EXCESS` above the median pair's excess agreement, and above 0.2. A renamed fine-tune agrees
      with its base on far fewer than 85% of the items where their accuracies differ, yet picks the same wrong
      option: on MATH-V ShareGPT4V-13B and LLaVA-v1.5-13B agree on 57% of their common wrong answers beyond
      chance (the pool's median pair: 12%).

    Why the second rule does not make the families a fit leaves out: a wrong gold makes every model that knows the
    answer "wrong" with the same option, so the label errors the check looks for link the strong models. On the
    simulated mixed pool (three models at 88-92%, five at 30-40%) with 3% planted wrong golds it linked the three
    strong models, leaving one out took the others with it, and the recall of the planted wrong golds fell from 0.72
    to 0.06 (``tests/test_label_regimes.py``). In the null, which has no wrong golds, it only shapes which errors are
    drawn together.

    ``A``: (Q, M) answer codes (-1 unparseable); ``gold``, ``k`` (option counts), ``mc`` (the mc items; None: all):
    (Q,) (without ``gold`` only the first rule applies). Returns ``adjacency`` ((M, M) bool, symmetric, no diagonal), the wrong-answer excess agreement
    ``excess`` and its counts ``n_both_wrong`` ((M, M); NaN / 0 where not computed), ``comparable`` (the pairs with
    enough common wrong answers) and the pool ``median``."""
    M = A.shape[1]
    both = (A >= 0).astype(np.float32)
    nb = both.T @ both
    same = np.zeros((M, M))
    for j in range(M):
        same[j] = ((A == A[:, [j]]) & (A >= 0)).sum(axis=0)
    adj = same / np.maximum(nb, 1) >= FAMILY_AGREEMENT
    X, N, med = np.full((M, M), np.nan), np.zeros((M, M)), None
    off = np.zeros((M, M), bool)
    if gold is not None and k is not None:
        three = (np.asarray(k) >= 3) & (np.asarray(gold) >= 0)
        if mc is not None:
            three &= np.asarray(mc, bool)
        if three.any():
            X, N = wrong_answer_agreement(A[three], np.asarray(gold)[three], np.asarray(k)[three])
        off = (N >= FAMILY_MIN_BOTH) & np.isfinite(X) & ~np.eye(M, dtype=bool)
        if off.any():
            med = float(np.median(X[off]))
            adj |= off & (X > max(med + FAMILY_EXCESS, 0.2))
    np.fill_diagonal(adj, False)
    return {"adjacency": adj, "excess": X, "n_both_wrong": N, "median": med, "comparable": off}


def families(A: np.ndarray) -> list[list[int]]:
    """For each model, itself and the models whose answers agree with it on at least :data:`FAMILY_AGREEMENT` of
    the items both answered (:func:`family_links`' first rule): the family that leaves a fit with it."""
    adj = family_links(A)["adjacency"]
    return [[j] + [int(v) for v in np.flatnonzero(adj[j])] for j in range(A.shape[1])]


def family_components(adj: np.ndarray) -> list[list[int]]:
    """Connected components (size >= 2) of a family adjacency (:func:`family_links`): a partition of the linked
    models, for the null's ``families`` regime."""
    M = len(adj)
    seen = np.zeros(M, bool)
    out = []
    for m in range(M):
        if seen[m]:
            continue
        comp, todo = [], [m]
        seen[m] = True
        while todo:
            v = todo.pop()
            comp.append(v)
            for w in np.flatnonzero(adj[v] & ~seen):
                seen[w] = True
                todo.append(int(w))
        if len(comp) >= 2:
            out.append(sorted(comp))
    return out


def _family_units(order, fam: list[list[int]], M: int):
    """``(u, family, keep)`` for each model ``u`` of ``order`` that no earlier unit's family covered: its family
    (``fam[u]``, itself included) and the other models (``keep``, at least 2), for leave-one-family-out fits."""
    done: set[int] = set()
    for u in order:
        if int(u) in done:
            continue
        f = fam[int(u)]
        done.update(f)
        keep = np.setdiff1d(np.arange(M), f)
        if len(keep) >= 2:
            yield int(u), f, keep


def _blind_keep(family: list[int], names, blind_names) -> np.ndarray | None:
    """The blind-arm models to keep when ``family`` (full-arm indices into ``names``) leaves: those whose name is not
    a member's (a model's blind run carries its name). None without names (the blind arm is kept whole)."""
    if names is None or blind_names is None:
        return None
    members = {str(names[j]) for j in family}
    return np.array([i for i, b in enumerate(blind_names) if str(b) not in members], np.int64)


def _without_full_models(d, keep: np.ndarray, keep_blind: np.ndarray | None = None):
    """``d`` (a :class:`~audit_hub.stats.label_model.LabelData`) with only the full-arm models ``keep`` (and, given
    ``keep_blind``, only those blind-arm models)."""
    rest = list(d.arms[1:])
    if keep_blind is not None and rest:  # no blind model left: no blind arm
        rest = ([rest[0][:, keep_blind]] if len(keep_blind) else []) + rest[1:]
    return type(d)([d.arms[0][:, keep]] + rest, d.k, d.is_yn, d.gold, d.evidence, d.group, d.class_keys)


def _without_model_params(params, keep: np.ndarray, keep_blind: np.ndarray | None = None):
    """``params`` (:class:`~audit_hub.stats.label_model.LabelParams`) for the arms :func:`_without_full_models`
    leaves: the full arm's models ``keep`` and the blind arm's ``keep_blind`` (the arm gone when none is left)."""
    from .label_model import LabelParams

    n = len(params.ability)
    sel: list = [keep] + [slice(None)] * (n - 1)
    drop = set()
    if keep_blind is not None and n > 1:
        sel[1] = keep_blind
        if not len(keep_blind):
            drop.add(1)

    def per_arm(xs, pick):
        return [pick(x, sel[i]) for i, x in enumerate(xs) if i not in drop]

    return LabelParams(ability=per_arm(params.ability, lambda a, k: a[k]),
                       sigma=[x for i, x in enumerate(params.sigma) if i not in drop], alpha=params.alpha,
                       eps=params.eps, pref=per_arm(params.pref, lambda p, k: p[k] if p is not None else None),
                       pi_attractor=params.pi_attractor, share_w=params.share_w, eps_evidence=params.eps_evidence)


def name_families(names) -> list[list[int]]:
    """Groups (2 or more, not the whole pool) of models whose names share their leading letters
    (``InternVL2-8B`` and ``InternVL2-Llama3-76B``: ``internvl``; ``gpt-4o`` and ``gpt-4o-mini``: ``gpt``): releases
    of one vendor or base model, which share training data and so errors."""
    groups: dict[str, list[int]] = {}
    for j, m in enumerate(names):
        pf = re.match(r"[a-z]*", str(m).lower()).group()
        if pf:
            groups.setdefault(pf, []).append(j)
    return [g for g in groups.values() if 2 <= len(g) < len(names)]


def flag_stability(data, params, flagged: np.ndarray, n_units: int = STABLE_UNITS, names=None, *,
                   blind_names=None, share_items: np.ndarray | None = None, seed: int = 0,
                   max_items: int = CHECK_ITEMS, share_max: int = SHARE_ITEMS) -> dict:
    """Leave-one-family-out sensitivity of the flags and of the wrong-gold share (the paper's leave-one-model-out
    reading, applied per item to correlated models): for each *family* of at least two models (:func:`families`:
    answers that agree on :data:`FAMILY_AGREEMENT` of the items, or :func:`name_families` of ``names``: releases of
    one vendor or base), at most ``n_units`` of them in order of their best member's agreement with the stated
    gold, each item's evidence against its gold (``log r``, :func:`~audit_hub.stats.label_model.log_ratio_wrong`)
    is recomputed from the *same fitted parameters* without that family's answers (no refit, so the change is
    that family's evidence alone, not refit noise).

    * A flag is *stable* when its posterior stays >= 0.5 without each family: it does not rest on one family
      answering against the gold (on VisOnlyQA, 11 flags on synthetic items whose golds are right by construction
      rested on three InternVL2 models sharing an error). Single models are not left out: on a pool with three
      strong models a wrong gold rests on two of them whenever the third errs, and the simulated recall of the
      findings fell from 0.72 to 0.56.
    * ``family_robust_share``: the maximum-likelihood wrong-gold share
      (:func:`~audit_hub.stats.label_model.rate_from_log_ratio`) of the ``share_items`` (a seeded draw of at most
      ``share_max``) with each item's ``log r`` its smallest over the families left out (and the full pool): the
      wrong golds that no single family's answers carry. None when no family is found.

    A family's blind (text-only) runs leave with it: the blind-arm models of ``data`` (named ``blind_names``) whose
    name is a member's. ``flagged``, ``share_items``: (Q,) bool over ``data``'s items. Returns ``stable`` ((Q,)
    bool, False off the flags), ``family_robust_share`` and one row per family left out (its strongest model's
    index, its members, the flags it alone carries)."""
    from .label_model import log_ratio_wrong, posterior, rate_from_log_ratio

    flag_rows = np.flatnonzero(flagged)
    stable = np.zeros(len(flagged), bool)
    out = {"stable": stable, "units": [], "n_flagged": int(len(flag_rows)), "n_stable": int(len(flag_rows)),
           "family_robust_share": None,
           "method": ("the posterior of each flag recomputed from the fitted parameters without each family of "
                      "models (answers that agree on most items, or one name prefix): stable when it stays >= 0.5 "
                      "every time")}
    stable[flag_rows] = True
    A = data.arms[0]
    M = A.shape[1]
    if M < 3:
        return out
    rng = np.random.default_rng([seed, 47])
    share_rows = np.flatnonzero(share_items) if share_items is not None else flag_rows[:0]
    if len(share_rows) > share_max:
        share_rows = np.sort(rng.choice(share_rows, share_max, replace=False))
    rows = np.union1d(flag_rows, share_rows)
    if not len(rows):
        return out
    is_flag, in_share = np.isin(rows, flag_rows), np.isin(rows, share_rows)
    sub = data.subset(rows)
    acc = (A == data.gold[:, None]).mean(axis=0)
    # answer agreement on at most CHECK_ITEMS items (a seeded draw): the families, not every item, are needed
    pick = np.sort(rng.choice(len(A), max_items, replace=False)) if len(A) > max_items else slice(None)
    fam = families(A[pick])
    for g in name_families(names) if names is not None else []:
        for j in g:
            fam[j] = sorted(set(fam[j]) | set(g))
    units = [x for x in _family_units(np.argsort(-acc, kind="stable"), fam, M) if len(x[1]) >= 2][:n_units]
    if not units:  # no family of two models or more: nothing to leave out
        return out
    _, ll = posterior(sub, params)
    lr_min = log_ratio_wrong(ll, sub.k, sub.gold)
    keep_all = np.ones(len(rows), bool)
    for u, f, keep in units:
        kb = _blind_keep(f, names, blind_names) if len(data.arms) > 1 else None  # its blind runs leave with it
        d = _without_full_models(sub, keep, kb)
        p2 = _without_model_params(params, keep, kb)
        post, ll2 = posterior(d, p2)
        still = 1.0 - post[np.arange(len(rows)), d.gold] >= 0.5
        keep_all &= still | ~is_flag
        lr_min = np.minimum(lr_min, log_ratio_wrong(ll2, d.k, d.gold))
        out["units"].append({"model": int(u), "family": [int(x) for x in f],
                             "n_flags_it_carries": int((~still & is_flag).sum())})
    stable[rows[is_flag & ~keep_all]] = False
    out["n_stable"] = int((is_flag & keep_all).sum())
    if out["units"] and in_share.any():
        out["family_robust_share"] = rate_from_log_ratio(lr_min[in_share]) | {
            "method": ("maximum likelihood with each item's evidence against its gold the smallest over leaving out "
                       "each family of models (parameters held at the fit)")}
    return out


def _share_check(sw: np.ndarray) -> dict | None:
    """The held-out check of the wrong-gold *share* (:func:`predictive_check`, ``share_check``): every checked
    item weighted by the held-out fit's posterior that its gold is wrong, ``w_i = p_i`` (the fit's expected
    count of wrong golds is ``sum w``), pooled over the held-out models. If the fit's wrong golds are real the
    weighted agreement is ``P = sum w pred / sum w``; if every gold is right, ``P0 = sum w pred0 / sum w``;
    observed ``O = sum w hit / sum w``, sd ``sqrt(sum w^2 pred0 (1 - pred0)) / sum w`` (binomial, golds right).
    ``realised_share = (P0 - O) / (P0 - P)``: the share of the predicted drop that the held-out answers show.
    Unlike the flag check it reads every item the model doubts, in proportion to its doubt, so it checks the
    share the model estimates (about ``sum w`` items), not only the few items past the flag threshold. None
    when the fits expect fewer than :data:`MIN_CHECK_FLAGS` wrong golds among the checked items."""
    W, Ob, P, P0, V = (float(x) for x in sw)
    if W < MIN_CHECK_FLAGS:
        return None
    drop = (P0 - P) / W
    return {"expected_wrong_checked": W, "observed_agreement": Ob / W, "predicted_agreement": P / W,
            "predicted_if_gold_right": P0 / W, "sd_observed_agreement": float(np.sqrt(V)) / W,
            "realised_share": float((P0 - Ob) / (P0 - P)) if drop > 1e-9 else 0.0,
            "method": "every checked item weighted by the held-out fit's posterior that its gold is wrong"}


def predictive_check(data, identifiable_item: np.ndarray, cat: np.ndarray, fit_predict, *, seed: int = 0,
                     held_out: int = HELD_OUT, max_items: int = CHECK_ITEMS, flagged: np.ndarray | None = None,
                     names=None, blind_names=None) -> dict:
    """The held-out-model check of the module docstring on :class:`~audit_hub.stats.label_model.LabelData`
    ``data`` (the full arm first). ``identifiable_item``: (Q,) items whose category passed
    :func:`identifiability` (only they can be flagged); ``cat``: (Q,) category index; ``fit_predict(d,
    answers)``: fit on ``d`` and return :func:`~audit_hub.stats.label_model.held_out_prediction` for the
    left-out model's ``answers``. Returns the pooled figures, the verdict (``supported``: True / False; None
    when there is nothing to check) and one row per held-out model (its index into the full arm).
    ``flagged``: (Q,) the full fit's flags; each held-out fit then flags as many of the checked items (its
    highest posteriors, at least those >= 0.5), so a fit on fewer models is not judged on fewer flags."""
    rng = np.random.default_rng([seed, 43])
    A = data.arms[0]
    M = A.shape[1]
    out = {"supported": None, "n_held_out": 0, "units": [], "observed_agreement": None,
           "predicted_agreement": None, "predicted_if_gold_right": None, "agreement_elsewhere": None,
           "z": None, "realised_share": None, "n_flagged_checked": 0,
           "method": ("leave each of the strongest models (with its family) out, fit on the rest, compare its "
                      "agreement with the gold on the items the fit flags with the fit's prediction")}
    if M < 3 or not identifiable_item.any():
        out["reason"] = "fewer than 3 models" if M < 3 else "no category is identifiable"
        return out
    rows = np.flatnonzero(identifiable_item)
    if len(rows) > max_items:
        rows = np.sort(rng.choice(rows, max_items, replace=False))
    sub = data.subset(rows)
    n_target = int(np.asarray(flagged)[rows].sum()) if flagged is not None else 0
    As, gs, cs = sub.arms[0], sub.gold, cat[rows]
    acc = (As == gs[:, None]).mean(axis=0)
    kmax = int(sub.k.max()) if len(sub.k) else 2
    base = _freq(As, kmax) @ (np.bincount(gs, minlength=kmax)[:kmax] / max(len(gs), 1))
    kap = (acc - base) / np.maximum(1 - base, 1e-9)
    fam = families(As)
    order = np.argsort(-acc, kind="stable")
    Obs = E = P = P0 = V = 0.0
    sw = np.zeros(5)  # the share check: sums of w, w o, w pred, w pred0, w^2 pred0 (1 - pred0) (w: p_wrong)
    n_flag = 0
    n_rows = len(rows)
    weaker: list[dict] = []
    n_cat = int(cat.max()) + 1 if len(cat) else 1
    for u, f, keep in _family_units(order, fam, M):
        if len(out["units"]) >= held_out:
            break
        # a weak model no stronger than the pool's median model falls into the pool's traps with it: its
        # agreement with the gold there says nothing about the gold that the pool's answers did not
        med = float(np.median(acc[keep]))
        se = float(np.sqrt(max(acc[u] * (1 - acc[u]), 1e-12) / max(n_rows, 1)))
        if kap[u] < KAPPA_MIN and (acc[u] - med) / se < STRONGER_Z:
            weaker.append({"model": int(u), "accuracy": float(acc[u]), "median_of_rest": med,
                           "kappa_over_position_baseline": float(kap[u])})
            continue
        # the held-out model's blind (text-only) run leaves the fit with it (by name, given the names)
        d = _without_full_models(sub, keep, _blind_keep(f, names, blind_names) if len(sub.arms) > 1 else None)
        pr = fit_predict(d, As[:, u])
        pw = np.asarray(pr["p_wrong"])
        answered = As[:, u] >= 0
        top = np.zeros(len(pw), bool)
        if n_target:
            top[np.argsort(-pw, kind="stable")[:n_target]] = True
        flag = ((pw >= 0.5) | top) & answered
        hit = As[:, u] == gs
        # agreement elsewhere: the held-out model's rate on unflagged items of the same category
        n_c = np.bincount(cs, weights=~flag & answered, minlength=n_cat)
        h_c = np.bincount(cs, weights=hit & ~flag, minlength=n_cat)
        e = np.where(n_c > 0, (h_c + 0.5) / (n_c + 1.0), acc[u])[cs][flag]
        pred, pred0 = np.asarray(pr["pred"])[flag], np.asarray(pr["pred_if_right"])[flag]
        o = hit[flag]
        wt = np.where(answered, pw, 0.0)
        p_all, p0_all = np.asarray(pr["pred"]), np.asarray(pr["pred_if_right"])
        sw += [wt.sum(), wt @ hit, wt @ p_all, wt @ p0_all, (wt * wt) @ (p0_all * (1 - p0_all))]
        Obs, E, P, P0 = Obs + float(o.sum()), E + float(e.sum()), P + float(pred.sum()), P0 + float(pred0.sum())
        V += float((pred0 * (1 - pred0)).sum())
        n_flag += int(flag.sum())
        out["units"].append({"model": int(u), "family": [int(x) for x in f], "n_flagged": int(flag.sum()),
                             "agreement_on_flagged": float(o.mean()) if flag.any() else None,
                             "predicted_on_flagged": float(pred.mean()) if flag.any() else None,
                             "predicted_if_gold_right": float(pred0.mean()) if flag.any() else None,
                             "agreement_elsewhere": float(e.mean()) if flag.any() else None})
    out["n_held_out"] = len(out["units"])
    out["n_flagged_checked"] = n_flag
    out["too_weak_to_hold_out"] = weaker
    out["share_check"] = _share_check(sw)
    if not out["units"]:
        out["reason"] = (f"every model is weak (kappa over its position-bias baseline < {KAPPA_MIN:g}) and no "
                         f"stronger than the pool's median model (accuracy above the others' median by z >= "
                         f"{STRONGER_Z:g}): a held-out model as weak as the pool errs with it, so its answers cannot "
                         "check the flags")
        return out
    if n_flag < MIN_CHECK_FLAGS:
        out["reason"] = f"the held-out fits flag {n_flag} item{'s' if n_flag != 1 else ''} (< {MIN_CHECK_FLAGS}): nothing to check"
        return out
    z = (P0 - Obs) / np.sqrt(V) if V > 0 else 0.0
    realised = (P0 - Obs) / (P0 - P) if P0 - P > 1e-9 else 0.0
    ok = z >= Z_MIN and realised >= REALISED_MIN
    out.update({"observed_agreement": Obs / n_flag, "predicted_agreement": P / n_flag,
                "predicted_if_gold_right": P0 / n_flag, "agreement_elsewhere": E / n_flag,
                "z": float(z), "realised_share": float(realised), "supported": bool(ok),
                "sd_observed_agreement": float(np.sqrt(V) / n_flag)})
    if not ok:
        out["reason"] = (f"left-out models agree with the gold on {100 * Obs / n_flag:.0f}% of the items their fits "
                         f"flag: the fits predict {100 * P / n_flag:.0f}% if those golds are wrong and "
                         f"{100 * P0 / n_flag:.0f}% if they are right but hard (elsewhere {100 * E / n_flag:.0f}%); "
                         f"realised {realised:.2f} of the predicted drop (z = {z:.1f})")
    return out
