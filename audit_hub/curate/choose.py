"""The default selection, chosen by inner cross-validation over the selecting models.

A selection that maximises discrimination can trade away exactly what a curated benchmark promises to keep:
the ranking of models it never saw. So the default (``method="auto"``) does not trust one item score. It
builds several candidate selections of the same size and keeps a default draw unless another ranks *inner
held-out* models clearly better:

* the default: ``stratified_balanced`` (:func:`.draws.balanced_draw`): a category x difficulty stratified draw,
  then swaps within a category until every selecting model's accuracy on it is its whole-pool accuracy
  stretched by :data:`BALANCE_STRETCH` about their mean (the order kept, the SD of model accuracies slightly
  above the pool's): a balanced sampling design, so a held-out model's accuracy error shrinks by the part of
  it the selecting models' answers explain;
* the other candidates: ``stratified_difficulty`` (a random draw stratified by category and by the item's
  pass-rate quintile among the selecting models), ``stratified_discriminating`` (the same draw among the items
  whose item-rest point-biserial is positive), ``random_best`` (the best of ``n_draws`` stratified random draws
  by Spearman rho on the selecting models), ``kmeans_anchors`` (tinyBenchmarks-style anchors,
  :func:`.baselines.kmeans_anchors`), ``irt_information`` and ``point_biserial`` (:mod:`.select`), each on the
  items left by the stages (variant ``stages``) and on the items left by the anomaly stage alone (``anomaly``;
  without that stage, on the whole pool: ``none``); with no final selection the stage output itself
  (``stages/all``) competes with the whole-pool candidates at its size;
* inner cross-validation: the selecting models are split into ``k`` inner folds, ``repeats`` times (seeded);
  each candidate is built from the inner training models and scored by Kendall tau over the model pairs with
  an inner held-out model (:func:`heldout_pair_tau`), per inner fold;
* the reference: stratified random subsets of the same size from the whole pool (``n_draws`` draws, the
  same in every inner fold);
* the rule: the default stays unless another candidate is clearly better: its margin over the default,
  paired over the inner folds, exceeds :data:`REPLACE_SE` standard errors of the difference, its margin over
  random exceeds one, and its SD of the selecting models' accuracies is at least the whole pool's; among
  those, candidates within one standard error (at least ``tolerance``) of the best inner figure tie and the
  tie goes to the most discriminative, then to the candidate order. The statement says which and why.

The stages are re-run on each inner fold's training models (``variants_for``): flags computed with every
selecting model would have seen the inner held-out models, and a stage that removes the items only a
held-out model solves (the floor items of the others) or fails (their saturated items) shifts exactly
that model's score.
"""

from __future__ import annotations

import numpy as np

from . import baselines as bl
from .draws import random_draws
from .measures import spearman, weighted_accuracy
from .select import select

CANDIDATE_METHODS = ("stratified_balanced", "stratified_difficulty", "stratified_discriminating", "random_best", "kmeans_anchors", "irt_information", "point_biserial")
EXPLICIT_METHODS = ("point_biserial", "irt_information", "kmeans_anchors", "stratified_balanced", "stratified_difficulty",
                    "stratified_discriminating", "random_best", "random")
DIFFICULTY_BINS = 5
# the selection when no candidate beats random in inner CV: one stratified random draw (category x pass-rate
# quintile). Not ``random_best``: the best of 50 draws by rho on the selecting models is chosen on exactly the
# models whose order it then keeps; on MATH-V (11 models, leave-one-model-out) it displaced the left-out
# model by 1.50 ranks against 0.60 for plain random draws (docs/curate.md)
FALLBACK_METHOD = "stratified_balanced"
FALLBACK_TRIES = 20
# the balanced draw's target: each selecting model's whole-pool accuracy stretched by this factor about their
# mean (a monotone map: the order is the pool's; the SD of model accuracies 5% above the pool's)
BALANCE_STRETCH = 1.05
# another candidate replaces the default draw only when its inner-CV margin over it exceeds this many standard
# errors of the paired difference: a one-sided bound for each of about a dozen candidates compared with the
# default at once (2 standard errors let one of them through by chance in about a quarter of the choices; on
# BLINK seed 4 two outer folds took such a candidate and ranked the held-out models below random's mean)
REPLACE_SE = 3.0


def _acc(mask: np.ndarray, right: np.ndarray, known: np.ndarray) -> np.ndarray:
    return weighted_accuracy(np.asarray(mask, dtype=np.float64)[None, :], right, known)[0]


def build(method: str, right: np.ndarray, known: np.ndarray, allowed: np.ndarray, cat: np.ndarray, size: int,
          floor_share: float, seed: int, *, full_acc: np.ndarray | None = None,
          draws: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(mask, per-item scores or None) of one candidate selection built from the models in ``right``.

    ``full_acc``: those models' accuracy on the whole pool (``random_best`` ranks its draws by rho against
    it); ``draws``: the stratified draws among ``allowed`` (``random_best`` / ``random``)."""
    allowed = np.asarray(allowed, dtype=bool)
    size = int(min(size, allowed.sum()))
    if method == "all" or size >= allowed.sum():
        return allowed.copy(), None
    if method in ("point_biserial", "irt_information"):
        return select(method, right, known, allowed, cat, size, floor_share)
    if method == "kmeans_anchors":
        idx = np.flatnonzero(allowed)
        w = bl.kmeans_anchors(right[idx], known[idx], size, seed)
        mask = np.zeros(len(allowed), dtype=bool)
        mask[idx[w > 0]] = True
        return mask, None
    if method == "stratified_discriminating":
        from .measures import point_biserial

        pb = point_biserial(right, known)
        keep = allowed & np.isfinite(pb) & (pb > 0)
        if keep.sum() < size:  # too few: the best of the rest fill up
            order = np.flatnonzero(allowed & ~keep)[np.argsort(-np.nan_to_num(pb[allowed & ~keep], nan=-2.0),
                                                               kind="stable")]
            keep = keep.copy()
            keep[order[: size - int(keep.sum())]] = True
        return build("stratified_difficulty", right, known, keep, cat, size, floor_share, seed)
    if method == "stratified_balanced":
        from .draws import stratified_balanced_draw

        return stratified_balanced_draw(right, known, cat, allowed, size, (seed,), stretch=BALANCE_STRETCH), None
    if method == "stratified_difficulty":
        from .draws import difficulty_strata

        strata = difficulty_strata(right, known, cat, allowed, DIFFICULTY_BINS)
        return random_draws(strata, allowed, size, 1, (seed, 37))[0] > 0, None
    if draws is None:
        draws = random_draws(cat, allowed, size, 50, (seed, 23))
    if method == "random":
        return draws[0] > 0, None
    if method == "random_best":
        acc = weighted_accuracy(draws, right, known)
        ref = full_acc if full_acc is not None else _acc(np.ones(len(allowed)), right, known)
        rho = np.nan_to_num(spearman(acc, np.broadcast_to(ref, acc.shape)), nan=-2.0)
        sd = np.nan_to_num(np.nanstd(acc, axis=1), nan=0.0)
        best = int(np.lexsort((np.arange(len(rho)), -sd, -rho))[0])
        return draws[best] > 0, None
    raise ValueError(f"unknown candidate method {method!r}")


def candidates(variants: dict[str, np.ndarray], size: int, selected: bool,
               methods: tuple[str, ...] = CANDIDATE_METHODS) -> list[tuple[str, str]]:
    """(variant, method) pairs: every method on every variant; without a final selection the stage output
    (``stages/all``) instead of selecting within it."""
    out = []
    for v in variants:
        if v == "stages" and not selected:
            out.append(("stages", "all"))
            continue
        out += [(v, m) for m in methods]
    return out


def heldout_pair_tau(cur: np.ndarray, full: np.ndarray, test: np.ndarray, *, test_only: bool = False) -> np.ndarray:
    """Kendall tau (tau-a) over the model pairs that involve at least one held-out model: the share of those
    pairs ordered alike by ``cur`` (accuracy on the selection, every model of the inner split) and ``full``
    (accuracy on the whole pool) minus the share ordered oppositely. Vectorised over leading axes of ``cur``.
    With three or four held-out models per inner fold a Spearman over them moves in steps of 0.2 or more;
    the pairs with the inner training models place each held-out model among all of them. Those pairs favour a
    selection fitted to the training models' order (their side of the pair is in-sample), so with
    ``test_only`` (used when every inner fold holds at least 4 models) only held-out pairs count."""
    cur = np.asarray(cur, dtype=np.float64)
    M = cur.shape[-1]
    is_te = np.zeros(M, dtype=bool)
    is_te[test] = True
    iu = np.triu_indices(M, 1)
    use = (is_te[iu[0]] & is_te[iu[1]]) if test_only else (is_te[iu[0]] | is_te[iu[1]])
    i, j = iu[0][use], iu[1][use]
    dc = np.sign(cur[..., i] - cur[..., j])
    df = np.sign(full[i] - full[j])
    with np.errstate(invalid="ignore"):
        return np.nanmean(dc * df, axis=-1) if len(i) else np.full(cur.shape[:-1], np.nan)


def inner_folds(n_models: int, k: int, seed: int) -> list[np.ndarray]:
    if n_models < 4:
        return []
    k = int(min(k, n_models // 2))
    return [np.sort(te) for te in np.array_split(np.random.default_rng([seed, 29]).permutation(n_models), k)]


def choose(right: np.ndarray, known: np.ndarray, cat: np.ndarray, variants: dict[str, np.ndarray], size: int,
           floor_share: float, seed: int, *, selected: bool = True, methods: tuple[str, ...] = CANDIDATE_METHODS,
           k: int = 3, n_draws: int = 50, tolerance: float = 0.01, variants_for=None, repeats: int = 2,
           margin_se: float = REPLACE_SE) -> dict:
    """Choose the selection among the candidates by inner cross-validation over the models of ``right``.

    ``variants``: name -> allowed-items mask (``stages``: the items the stages kept; ``none``: every item).
    ``variants_for(train)``: the same masks with the stages re-run on the inner training models ``train``
    (column indices of ``right``); without it the inner folds reuse ``variants`` (the stage flags then saw the
    inner held-out models: a stage that removes what only they solve looks harmless).
    ``repeats``: the inner ``k``-fold split is drawn this many times (seeds ``seed``, ``seed + 1000``, ...)
    while an inner fold holds fewer than 6 models, once otherwise;
    ``margin_se``: how many standard errors (of the paired difference over the inner folds) a candidate must
    beat the default draw by to replace it.
    Returns the chosen candidate's mask and scores, and every candidate's inner figures."""
    Q, M = right.shape
    full = _acc(np.ones(Q), right, known)
    every = np.ones(Q, dtype=bool)
    dv_name = next((x for x in ("none", "anomaly") if x in variants), next(iter(variants)))
    cands = candidates(variants, size, selected, methods)
    default = (dv_name, FALLBACK_METHOD)
    if default not in cands:
        cands = [default, *cands]
    draws = {v: random_draws(cat, a, size, n_draws, (seed, 23, i)) for i, (v, a) in enumerate(variants.items())}
    ref_draws = draws["none"] if "none" in variants else random_draws(cat, every, size, n_draws, (seed, 23, 9))
    first = inner_folds(M, k, seed)
    # the repeat splits only while an inner fold holds fewer than 6 models (the pipeline's own minimum for a
    # fold-level figure): with more, one split's folds are informative and a second doubles the cost
    repeats = max(1, int(repeats)) if first and min(len(te) for te in first) < 6 else 1
    folds = [te for r in range(repeats) for te in (first if r == 0 else inner_folds(M, k, seed + 1000 * r))]
    test_only = bool(folds) and min(len(te) for te in folds) >= 4
    rows = {c: [] for c in cands}
    random_ref = []
    acc_r = weighted_accuracy(ref_draws, right, known)
    for te in folds:
        tr = np.setdiff1d(np.arange(M), te)
        r_tr, k_tr = right[:, tr], known[:, tr]
        inner_v = variants_for(tr) if variants_for is not None else variants
        random_ref.append(float(np.nanmean(heldout_pair_tau(acc_r, full, te, test_only=test_only))))
        for v, m in cands:
            dv = draws[v] if inner_v is variants else None
            mask, _ = build(m, r_tr, k_tr, inner_v[v], cat, size, floor_share, seed + 1 + len(random_ref),
                            full_acc=full[tr], draws=dv)
            acc = _acc(mask, right, known)
            rows[(v, m)].append((float(heldout_pair_tau(acc, full, te, test_only=test_only)),
                                 float(spearman(acc[te], full[te])) if len(te) >= 3 else None))
    final = {}
    table = []
    for v, m in cands:
        mask, scores = build(m, right, known, variants[v], cat, size, floor_share, seed, full_acc=full, draws=draws[v])
        final[(v, m)] = (mask, scores)
        acc = _acc(mask, right, known)
        taus = np.array([t for t, _ in rows[(v, m)]], dtype=np.float64)
        rhos = [r for _, r in rows[(v, m)]]
        table.append({"candidate": f"{v}/{m}", "variant": v, "method": m, "n_items": int(mask.sum()),
                      "inner_tau_mean": float(np.nanmean(taus)) if np.isfinite(taus).any() else None,
                      "inner_tau_per_fold": [float(t) for t in taus],
                      "inner_spearman_per_fold": rhos,
                      "sd_selecting_models": float(np.nanstd(acc, ddof=1)) if np.isfinite(acc).sum() > 1 else None})
    ref = float(np.nanmean(random_ref)) if random_ref else None
    base = next(t for t in table if (t["variant"], t["method"]) == default)

    def paired(t: dict, against: list[float]) -> tuple[float | None, float]:
        d = np.array(t["inner_tau_per_fold"], dtype=np.float64) - np.array(against, dtype=np.float64)
        d = d[np.isfinite(d)]
        return (float(d.mean()) if len(d) else None), (float(np.std(d, ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0)

    for t in table:  # paired over the inner folds: the margin over random, and over the default draw
        t["margin_over_random"], t["margin_se"] = paired(t, random_ref)
        t["margin_over_default"], t["margin_over_default_se"] = paired(t, base["inner_tau_per_fold"])
    sd_full = float(np.nanstd(full, ddof=1)) if np.isfinite(full).sum() > 1 else None
    # a candidate replaces the default draw only when it is clearly better in inner CV: its margin over the
    # default exceeds ``margin_se`` standard errors of the paired difference (and over random, one), and it
    # keeps the whole pool's SD. Without that guard the choice followed the inner folds' noise: on BLINK seed 1
    # k-means anchors won two outer folds on noisy inner margins and ranked the held-out models at rho 0.79
    # against 0.89 for random subsets (docs/curate.md)
    eligible = [t for t in table if t is not base and t["margin_over_default"] is not None
                and t["margin_over_default"] > margin_se * t["margin_over_default_se"] + 1e-12
                and t["margin_over_random"] is not None and t["margin_over_random"] > t["margin_se"] + 1e-12
                and (sd_full is None or (t["sd_selecting_models"] or 0.0) >= sd_full - 1e-12)]
    sd_rule = False
    if eligible:
        top = max(eligible, key=lambda t: t["inner_tau_mean"])
        best = top["inner_tau_mean"]
        per = np.array(top["inner_tau_per_fold"], dtype=np.float64)
        per = per[np.isfinite(per)]
        se = float(np.std(per, ddof=1) / np.sqrt(len(per))) if len(per) > 1 else 0.0
        tolerance = max(tolerance, se)
        tied = [t for t in eligible if t["inner_tau_mean"] >= best - tolerance - 1e-9]
        pick = max(tied, key=lambda t: (t["sd_selecting_models"] or 0.0, -table.index(t)))
        statement = (f"chosen by inner cross-validation ({len(folds)} inner folds: {repeats} x {k}-fold) over {M} "
                     f"models: {pick['candidate']} (inner held-out pair tau {pick['inner_tau_mean']:.3f} vs "
                     f"{base['inner_tau_mean']:.3f} for the default balanced draw and {ref:.3f} for random subsets of "
                     f"the same size; it beats the default by more than {margin_se:g} standard errors of the paired "
                     f"difference and keeps the whole pool's SD of model accuracies; candidates within {tolerance:.3f} "
                     f"of the best go to the larger SD)")
        mask, scores = final[(pick["variant"], pick["method"])]
    else:
        pick = base
        # the SD constraint on the default: the first of up to FALLBACK_TRIES balanced draws (seeds seed,
        # seed+1, ...) whose SD of model accuracies is at least the whole pool's, else the largest SD
        best_fb = None
        for i in range(FALLBACK_TRIES):
            m_i = final[default][0] if i == 0 else build(FALLBACK_METHOD, right, known, variants[dv_name], cat, size,
                                                        floor_share, seed + i, full_acc=full)[0]
            sd_i = float(np.nanstd(_acc(m_i, right, known), ddof=1))
            if best_fb is None or sd_i > best_fb[1]:
                best_fb = (m_i, sd_i, i)
            if sd_full is None or sd_i >= sd_full:
                break
        sd_rule = best_fb[2] > 0
        mask, scores = best_fb[0], None
        why = ("too few models to cross-validate (fewer than 4)" if not folds else
               f"no candidate beat the default draw in inner cross-validation ({len(folds)} inner folds: {repeats} x "
               f"{k}-fold) by more than {margin_se:g} standard errors of the paired difference (default: inner "
               f"held-out pair tau {base['inner_tau_mean']:.3f}; random subsets: {ref:.3f})")
        left = int(np.asarray(variants[dv_name]).sum())
        statement = (f"{why}: the default is used, {pick['candidate']}: the target size ({size:,}) is not below the "
                     f"{left:,} items its stages leave, so all of them are kept (no draw)") if size >= left else (
                     f"{why}: the default is used, {pick['candidate']}: a random draw stratified by category and "
                     f"difficulty, balanced so that each selecting model's accuracy on it is its whole-pool accuracy "
                     f"stretched by {BALANCE_STRETCH:g} about their mean (the order kept, the SD slightly above the "
                     f"pool's); draw {best_fb[2] + 1} of up to {FALLBACK_TRIES}, SD of model accuracies "
                     f"{best_fb[1]:.4f} vs the pool's {sd_full if sd_full is not None else float('nan'):.4f}"
                     + ("" if sd_full is None or best_fb[1] >= sd_full else " (none reached it: the largest SD)"))
    beats = bool(pick.get("margin_over_random") is not None and pick["margin_over_random"] > pick["margin_se"])
    return {"mask": mask, "scores": scores, "variant": pick["variant"], "method": pick["method"],
            "candidate": pick["candidate"], "beats_random_inner": beats, "random_inner_tau": ref,
            "default_candidate": base["candidate"], "replaced_default": pick is not base,
            "sd_full": sd_full, "sd_constraint_applied": sd_rule,
            "inner_folds": len(folds), "inner_repeats": int(repeats), "inner_pairs": "held-out pairs only" if test_only
            else "pairs with at least one held-out model", "candidates": table, "statement": statement,
            "tolerance": tolerance, "replace_margin_se": margin_se}
