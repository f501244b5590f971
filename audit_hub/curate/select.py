"""The optional final selection: reach a target size while preserving rankings.

Items left after the stages are ranked by a per-item score computed on the *selecting* models only:

* ``point_biserial``: the item-rest point-biserial correlation (how well being right on the item tracks
  the model's accuracy on the other items; DatBench's per-item discrimination);
* ``irt_information``: the Fisher information of a 2PL fitted to the selecting models, summed over
  their abilities (tinyBenchmarks / metabench's criterion);

and the top ``target`` items are kept, subject to a category floor: every category keeps at least
``floor_share`` of its proportional share of the target (``floor_share * target * n_c / n`` rounded
down, at least one item, capped by what it has), so no capability dimension disappears. When the floors
alone exceed the target, the best-scoring floor items win. Ties break by question code.

``max_rank_loss`` picks the size instead (with ``method="auto"`` from stratified random subsets of the
candidates, the floor the chosen selection must beat in its own inner cross-validation): the smallest size on a geometric grid whose ranking loss
``1 - Spearman rho`` is at most ``X`` in an inner k-fold over the selecting models (scores from the
inner training models, rho on the inner held-out models against their accuracy on the whole pool).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from .measures import point_biserial, spearman, weighted_accuracy

METHODS = ("point_biserial", "irt_information")


def item_scores(method: str, right: np.ndarray, known: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Per-item selection score (higher = keep first); NaN outside ``candidates``."""
    out = np.full(right.shape[0], np.nan)
    idx = np.flatnonzero(candidates)
    if len(idx) == 0:
        return out
    if method == "point_biserial":
        out[idx] = point_biserial(right[idx], known[idx])
    elif method == "irt_information":
        from .irt import fit_2pl

        m = fit_2pl(right[idx], known[idx])
        out[idx] = m.information(m.theta)
    else:
        raise InputError(f"unknown selection method {method!r}; use one of {', '.join(METHODS)}")
    return out


def select_top(scores: np.ndarray, candidates: np.ndarray, categories: np.ndarray, target: int,
               floor_share: float, *, with_floor: bool = False):
    """Boolean mask of the selected items: category floors first, then the best scores overall.
    With ``with_floor`` also the mask of items kept by their category's floor."""
    cand = np.flatnonzero(candidates)
    target = int(min(max(target, 0), len(cand)))
    keep = np.zeros(len(scores), dtype=bool)
    if target == 0:
        return (keep, keep.copy()) if with_floor else keep
    sc = np.where(np.isfinite(scores[cand]), scores[cand], -np.inf)
    order = cand[np.lexsort((cand, -sc))]  # best first, ties by question code
    cats = categories[order]
    G = int(categories.max()) + 1 if len(categories) else 1
    n_c = np.bincount(categories[cand], minlength=G)
    floors = np.floor(floor_share * target * n_c / max(len(cand), 1)).astype(np.int64)
    floors = np.minimum(np.maximum(floors, (n_c > 0) & (floor_share > 0)), n_c)
    # rank of each item within its category (in score order)
    first = np.zeros(len(order), dtype=np.int64)
    srt = np.argsort(cats, kind="stable")
    cs = cats[srt]
    start = np.r_[0, np.flatnonzero(cs[1:] != cs[:-1]) + 1]
    pos = np.arange(len(cs)) - np.repeat(start, np.diff(np.r_[start, len(cs)]))
    first[srt] = pos
    floor_pick = first < floors[cats]
    if floor_pick.sum() > target:  # floors alone exceed the target: best floor items win
        floor_pick &= np.cumsum(floor_pick) <= target
    keep[order[floor_pick]] = True
    rest = order[~floor_pick]
    need = target - int(keep.sum())
    keep[rest[:need]] = True
    if with_floor:
        floor_mask = np.zeros(len(scores), dtype=bool)  # kept only because of the floor
        floor_mask[order[floor_pick & (np.arange(len(order)) >= target)]] = True
        return keep, floor_mask
    return keep


def select(method: str, right: np.ndarray, known: np.ndarray, candidates: np.ndarray, categories: np.ndarray,
           target: int, floor_share: float) -> tuple[np.ndarray, np.ndarray]:
    """(selected mask, scores) for a fixed target size."""
    scores = item_scores(method, right, known, candidates)
    return select_top(scores, candidates, categories, target, floor_share), scores


def size_for_rank_loss(method: str, right: np.ndarray, known: np.ndarray, candidates: np.ndarray,
                       categories: np.ndarray, max_loss: float, floor_share: float, *, k: int = 3,
                       seed: int = 0, min_size: int = 50) -> tuple[int, list[dict]]:
    """Smallest size whose inner-cross-validated ranking loss is <= ``max_loss``; returns (size, trace)."""
    M = right.shape[1]
    n = int(candidates.sum())
    if M < 4:
        raise InputError("--max-rank-loss needs at least 4 models to cross-validate the ranking loss")
    rng = np.random.default_rng(seed)
    folds = np.array_split(rng.permutation(M), min(k, M // 2))
    full = weighted_accuracy(np.ones((1, right.shape[0])), right, known)[0]
    sizes = []
    s = n
    while s >= min_size:
        sizes.append(int(s))
        s = int(math.floor(s * 0.85))
    if not sizes:
        sizes = [n]
    scores = []
    for te in folds:
        tr = np.setdiff1d(np.arange(M), te)
        scores.append((te, None if method == "random" else item_scores(method, right[:, tr], known[:, tr], candidates)))
    trace = []
    best = sizes[0]
    for size in sizes:
        rhos = []
        for te, sc in scores:
            if sc is None:  # stratified random subsets of the candidates (method "auto": the floor it must beat)
                from .draws import random_draws

                draws = random_draws(categories, candidates, size, 20, (seed, 41, size))
                cur = weighted_accuracy(draws, right[:, te], known[:, te])
                rhos.append(float(np.nanmean(spearman(cur, np.broadcast_to(full[te], cur.shape)))))
                continue
            mask = select_top(sc, candidates, categories, size, floor_share)
            cur = weighted_accuracy(mask[None, :].astype(np.float64), right[:, te], known[:, te])[0]
            rhos.append(float(spearman(cur, full[te])))
        loss = 1.0 - float(np.nanmean(rhos))
        trace.append({"size": size, "inner_rho_mean": float(np.nanmean(rhos)), "rank_loss": loss})
        if loss <= max_loss:
            best = size
        else:
            break
    return best, trace
