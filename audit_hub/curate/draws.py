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


def difficulty_strata(right: np.ndarray, known: np.ndarray, cat: np.ndarray, allowed: np.ndarray,
                      bins: int = 5) -> np.ndarray:
    """(Q,) stratum codes: category x the item's pass-rate quantile bin among the models of ``right`` (bin
    edges from the ``allowed`` items); an item nobody answered counts as pass rate 0.5."""
    kn = known.sum(axis=1)
    p = np.where(kn > 0, (right * known).sum(axis=1) / np.maximum(kn, 1), 0.5)
    edges = np.quantile(p[allowed], np.linspace(0, 1, bins + 1)[1:-1])
    strata = cat.astype(np.int64) * (bins + 1) + np.searchsorted(edges, p, side="right")
    return np.unique(strata, return_inverse=True)[1]


def stratified_balanced_draw(right: np.ndarray, known: np.ndarray, cat: np.ndarray, allowed: np.ndarray, size: int,
                             seed_key, *, stretch: float = 1.0) -> np.ndarray:
    """(Q,) bool: a category x difficulty stratified draw of ``size`` items among ``allowed`` (seed key
    ``[*seed_key, 37]``), then balanced on the models of ``right`` (:func:`balanced_draw`, ``[*seed_key, 47]``)."""
    allowed = np.asarray(allowed, dtype=bool)
    strata = difficulty_strata(right, known, cat, allowed)
    start = random_draws(strata, allowed, size, 1, (*seed_key, 37))[0] > 0
    return balanced_draw(right, known, cat, start, (*seed_key, 47), stretch=stretch, allowed=allowed)


def balanced_draw(right: np.ndarray, known: np.ndarray, cat: np.ndarray, start: np.ndarray, seed_key, *,
                  stretch: float = 1.0, iters: int | None = None, allowed: np.ndarray | None = None) -> np.ndarray:
    """A draw that keeps the selecting models' accuracies: ``start`` (a (Q,) bool mask, e.g. a stratified
    random draw) improved by swaps within a category (so the category allocation stays) that bring every
    model's accuracy on the draw towards ``mean + stretch * (its whole-pool accuracy - mean)``.

    A monotone map of the whole-pool accuracies, so the target keeps their order; ``stretch`` slightly above 1
    keeps the SD of model accuracies above the pool's. An unknown cell counts as the item's mean over the
    models that answered it. Each step takes a random item of the draw and the item outside it (same category)
    (and in ``allowed``, default every item) whose swap lowers the squared distance to the target most, if any
    does; the target is the accuracy on the whole pool, whatever ``allowed`` is; ``iters`` steps (default
    ``20 M + 200``). The draw is chosen from the selecting models' answers only, so a model outside them meets
    it as a draw balanced on covariates of its own answers (their correctness vectors): the part of its
    accuracy error those explain shrinks, the rest is that of a random draw (a balanced sampling design)."""
    m = np.asarray(start, dtype=bool).copy()
    n = int(m.sum())
    Q, M = right.shape
    if n == 0 or n >= Q or M == 0:
        return m
    kn = known.sum(axis=1, keepdims=True)
    item_mean = np.where(kn > 0, (right * known).sum(axis=1, keepdims=True) / np.maximum(kn, 1), 0.5)
    z = np.where(known > 0, right, item_mean).astype(np.float64)
    full = z.mean(axis=0)
    goal = (full.mean() + stretch * (full - full.mean())) * n
    d = z[m].sum(axis=0) - goal
    cost = float(d @ d)
    ok = np.ones(Q, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    members = {int(g): np.flatnonzero((cat == g) & ok) for g in np.unique(cat[m])}
    zz = np.einsum("ij,ij->i", z, z)
    rng = np.random.default_rng(list(seed_key))
    steps = int(iters if iters is not None else 20 * M + 200)
    picks = rng.random(steps)
    inside = np.flatnonzero(m)
    patience, idle = 3 * M + 50, 0
    for s in range(steps):
        if idle >= patience:  # no swap helped in the last ``patience`` tries: converged
            break
        idle += 1
        pos = int(picks[s] * len(inside))
        a = int(inside[pos])
        pool = members[int(cat[a])]
        outs = pool[~m[pool]]
        if len(outs) == 0:
            continue
        v = d - z[a]
        # |v + z_b|^2 = |v|^2 + 2 v.z_b + |z_b|^2 for every candidate b at once
        sc = float(v @ v) + 2.0 * (z[outs] @ v) + zz[outs]
        j = int(np.argmin(sc))
        if sc[j] < cost - 1e-12:
            b_ = int(outs[j])
            m[a], m[b_] = False, True
            inside[pos] = b_
            d = v + z[b_]
            cost = float(d @ d)
            idle = 0
    return m
