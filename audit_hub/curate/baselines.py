"""Selections to compare curation with, each at the curated set's size and from the same selecting models.

* ``random_subset``: stratified by category (largest-remainder allocation of the size over categories),
  ``n_draws`` seeded draws (a distribution, not one draw).
* ``lime_pass_count``: LIME-style pass-count filter: drop items every selecting model passes or fails,
  keep those whose pass count is closest to half the models (ties by question code).
* ``kmeans_anchors``: tinyBenchmarks-style anchors: k-means (at most 500 clusters) on the items'
  correctness vectors over the selecting models (reduced to at most 4 principal components), items
  nearest each centroid (several per cluster, in proportion to its size), scored with cluster-size weights.
* ``point_biserial``: the top item-rest point-biserial items of the whole pool (no stages), with the
  same category floor as the curated selection.
* ``ibp``: Iterative Bias Pruning (TsT work) down to the same size, through its public entry point
  :func:`audit_hub.tst.iterative_bias_pruning`. Text only, so one selection serves every split.
"""

from __future__ import annotations

import numpy as np

from .draws import stratified_random  # noqa: F401  (re-exported: the random-subset baseline's draws)
from .measures import point_biserial
from .select import select_top


def lime_pass_count(right: np.ndarray, known: np.ndarray, size: int) -> np.ndarray:
    kc = known.sum(axis=1)
    share = np.where(kc > 0, right.sum(axis=1) / np.maximum(kc, 1), np.nan)
    ok = np.isfinite(share) & (share > 0) & (share < 1)
    key = np.where(ok, np.abs(share - 0.5), np.inf)
    order = np.lexsort((np.arange(len(key)), key))
    mask = np.zeros(len(key), dtype=np.float64)
    take = order[: int(min(size, ok.sum()))]
    mask[take] = 1.0
    return mask


def kmeans_anchors(right: np.ndarray, known: np.ndarray, size: int, seed: int, *, dims: int = 4,
                   max_iter: int = 5, max_clusters: int = 500) -> np.ndarray:
    """Weights (Q,) of ``size`` anchor items from k-means on the correctness vectors (reduced by SVD to at
    most ``dims`` components) with at most ``max_clusters`` clusters (a bigger anchor set takes several
    items per cluster, nearest its centroid first); see :func:`audit_hub.curate.irt.kmeans_anchor_weights`."""
    from .irt import kmeans_anchor_weights

    Q, M = right.shape
    z = np.where(known > 0, right, 0.5)
    z = z - z.mean(axis=0, keepdims=True)
    r = int(min(dims, M))
    u, s, _ = np.linalg.svd(z, full_matrices=False)
    return kmeans_anchor_weights(u[:, :r] * s[:r], size, seed, max_iter=max_iter, max_clusters=max_clusters)


def top_point_biserial(right: np.ndarray, known: np.ndarray, categories: np.ndarray, size: int,
                       floor_share: float) -> np.ndarray:
    sc = point_biserial(right, known)
    return select_top(sc, np.ones(len(sc), dtype=bool), categories, size, floor_share).astype(np.float64)


def ibp_mask(frame, size: int, seed: int, *, iterations: int = 3, tst_kwargs: dict | None = None) -> tuple[np.ndarray, dict]:
    """Keep mask of Iterative Bias Pruning down to ``size`` items (budget = n - size, ``iterations`` steps)."""
    from ..tst import iterative_bias_pruning

    budget = int(frame.n_questions - size)
    if budget <= 0:
        return np.ones(frame.n_questions, dtype=np.float64), {"note": "nothing to remove"}
    kw = {"k": 3, "repeats": 1, "n_estimators": 25}
    kw.update(tst_kwargs or {})
    res = iterative_bias_pruning(frame, budget=budget, step=max(1, -(-budget // iterations)), random_seeds=0,
                                 random_tst_seeds=0, seed=seed, tst_kwargs=kw)
    keep = np.asarray(res.keep_mask, dtype=np.float64)
    return keep, {"stop_reasons": res.stop_reasons, "n_removed": int(len(res.removed)), "tst": kw,
                  "iterations": iterations}
