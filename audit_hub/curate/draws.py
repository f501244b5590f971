"""Stratified random item draws (one owner: the random-subset baseline, the candidates of the automatic
choice and the size search all draw through here)."""

from __future__ import annotations

import numpy as np


def stratified_random(categories: np.ndarray, size: int, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """(n_draws, Q) float masks: ``size`` items per draw, allocated to categories by largest remainder."""
    from ..tst.prune import largest_remainder

    Q = len(categories)
    G = int(categories.max()) + 1 if Q else 0
    n_c = np.bincount(categories, minlength=G)
    alloc = largest_remainder(int(size), {str(g): int(n_c[g]) for g in range(G)})
    out = np.zeros((n_draws, Q), dtype=np.float64)
    keys = rng.random((n_draws, Q))
    for g in range(G):
        members = np.flatnonzero(categories == g)
        k = alloc[str(g)]
        if k == 0 or len(members) == 0:
            continue
        part = np.argpartition(keys[:, members], k - 1, axis=1)[:, :k] if k < len(members) else \
            np.broadcast_to(np.arange(len(members)), (n_draws, len(members)))
        rows = np.repeat(np.arange(n_draws), part.shape[1])
        out[rows, members[part.ravel()]] = 1.0
    return out



def random_draws(cat: np.ndarray, allowed: np.ndarray, size: int, n_draws: int, seed_key) -> np.ndarray:
    """(n_draws, Q) 0/1 stratified random draws of ``size`` items among ``allowed`` (by category)."""
    idx = np.flatnonzero(allowed)
    out = np.zeros((n_draws, len(allowed)), dtype=np.float64)
    if len(idx) == 0 or size <= 0:
        return out
    sub = stratified_random(cat[idx], int(min(size, len(idx))), n_draws, np.random.default_rng(list(seed_key)))
    out[:, idx] = sub
    return out
