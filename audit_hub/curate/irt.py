"""A two-parameter logistic (2PL) item response model, fitted by penalised joint maximum likelihood.

``P(model m right on item i) = sigmoid(a_i theta_m + d_i)`` (difficulty ``b_i = -d_i / a_i``). Priors (as
L2 penalties): ``theta ~ N(0, 1)``, ``a ~ N(1, 0.75^2)`` with ``a >= 0.05``, ``d ~ N(0, 3^2)``; after every
sweep the abilities are standardised (mean 0, SD 1) and the item parameters rescaled so the likelihood is
unchanged. Each sweep is one Newton step per model (1-D) and one per item (2-D, closed-form 2x2 inverse),
vectorised over all models / items from one evaluation of the probabilities: O(Q M) per sweep, no
Python loop over items.

Score estimation. A new model answers only ``n`` anchor items; its ability is the MAP estimate from those
answers. Two designs, each with its own ``n`` anchors:

* the estimator this package reports (``mae_points``): **p-IRT on information anchors** (metabench-style:
  the items most informative across the fitting models' ability range, :func:`information_anchors`);
* the reference, tinyBenchmarks' **gp-IRT** (Maia Polo et al., 2024): anchors nearest the centroids of a
  k-means clustering of the items' IRT parameters, weighted by cluster size, and

* ``anchor``: the cluster-weighted accuracy on the anchors;
* ``p-IRT``: observed answers on the anchors plus the 2PL probabilities on every other item, averaged;
* ``gp-IRT``: ``lambda * p-IRT + (1 - lambda) * anchor``; ``lambda`` is validated on models outside
  the fit (half of the fitting models, see :func:`choose_lambda`), as tinyBenchmarks validates it on
  training models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

A_PRIOR, A_SD, D_SD, A_MIN = 1.0, 0.75, 3.0, 0.05


def _sig(z: np.ndarray) -> np.ndarray:
    z = np.clip(z, -30, 30, out=z if z.flags.writeable else None)
    np.negative(z, out=z)
    np.exp(z, out=z)
    z += 1.0
    return np.reciprocal(z, out=z)


@dataclass
class Irt2PL:
    a: np.ndarray        # (Q,) discrimination
    d: np.ndarray        # (Q,) intercept
    theta: np.ndarray    # (M,) abilities of the fitting models
    n_iter: int
    converged: bool
    final_change: float = 0.0

    def prob(self, theta: np.ndarray) -> np.ndarray:
        """(Q, len(theta)) probabilities."""
        return _sig(self.a[:, None] * np.asarray(theta, dtype=np.float64)[None, :] + self.d[:, None])

    def information(self, theta: np.ndarray) -> np.ndarray:
        """Per item: Fisher information summed over the abilities ``theta``."""
        p = self.prob(theta)
        return (self.a[:, None] ** 2 * p * (1 - p)).sum(axis=1)


def fit_2pl(right: np.ndarray, known: np.ndarray, *, n_iter: int = 200, tol: float = 1e-4) -> Irt2PL:
    """Penalised JML fit of a 2PL to a (Q, M) 0/1 matrix with a known-cell mask.

    Each sweep updates the items given the abilities (one 2-D Newton step per item), re-evaluates the
    probabilities, updates the abilities given the items (one 1-D Newton step per model), then standardises
    the abilities (mean 0, SD 1; item parameters rescaled so the likelihood is unchanged). Converged when the
    largest change of any standardised parameter over a sweep is below ``tol``. (Updating both blocks from
    one evaluation, as a Jacobi sweep, lets the Newton step and the standardisation undo each other: the
    iterates settle while the per-step change never falls below ``tol``, and on some pools items oscillate.)
    ``final_change`` records the last sweep's change, so a fit that did not converge says by how much."""
    x = np.asarray(right, dtype=np.float32)
    k = np.asarray(known, dtype=np.float32)
    x = x * k
    Q, M = x.shape
    acc = x.sum(axis=0) / np.maximum(k.sum(axis=0), 1)
    theta = ((acc - acc.mean()) / (acc.std() + 1e-9)).astype(np.float32)
    pm = np.clip((x.sum(axis=1) + 0.5) / (k.sum(axis=1) + 1.0), 0.02, 0.98)
    d = np.log(pm / (1 - pm)).astype(np.float32)
    a = np.full(Q, A_PRIOR, dtype=np.float32)
    converged = False
    change = float("inf")
    it = 0
    while it < n_iter:
        it += 1
        a0, d0, t0 = a, d, theta
        a, d, da, dd = _item_newton_step(x, k, a, d, theta)
        p = _sig(a[:, None] * theta[None, :] + d[:, None])
        g = a @ (x - k * p) - theta
        h = (a * a) @ (k * p * (1 - p)) + 1.0
        theta = (theta + np.clip(g / h, -1.0, 1.0)).astype(np.float32)
        mu, sd = theta.mean(), theta.std()
        if sd > 1e-9:
            theta = (theta - mu) / sd
            d = d + a * mu
            a = a * sd
        change = max(float(np.max(np.abs(a - a0))), float(np.max(np.abs(d - d0))), float(np.max(np.abs(theta - t0))))
        if change < tol:
            converged = True
            break
    a, d = _items_given(x, k, a, d, theta)
    return Irt2PL(a=a.astype(np.float64), d=d.astype(np.float64), theta=theta.astype(np.float64), n_iter=it,
                  converged=converged, final_change=change)


def _item_newton_step(x: np.ndarray, k: np.ndarray, a: np.ndarray, d: np.ndarray, theta: np.ndarray):
    """One damped Newton step of every item's (a, d) on the penalised log-likelihood given the abilities;
    returns the new (a, d) and the raw steps (da, dd)."""
    p = _sig(a[:, None] * theta[None, :] + d[:, None])
    r = x - k * p
    w = k * p * (1 - p)
    ga = r @ theta - (a - A_PRIOR) / A_SD ** 2
    gd = r.sum(axis=1) - d / D_SD ** 2
    haa = w @ (theta * theta) + 1.0 / A_SD ** 2
    had = w @ theta
    hdd = w.sum(axis=1) + 1.0 / D_SD ** 2
    det = haa * hdd - had * had
    da = (hdd * ga - had * gd) / det
    dd = (haa * gd - had * ga) / det
    step = np.maximum(1.0, np.maximum(np.abs(da), np.abs(dd)))
    return np.maximum(a + da / step, A_MIN).astype(np.float32), (d + dd / step).astype(np.float32), da, dd


def _items_given(x: np.ndarray, k: np.ndarray, a: np.ndarray, d: np.ndarray, theta: np.ndarray,
                 n_iter: int = 25, tol: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """Item parameters refined to the penalised maximum given the (standardised) abilities: at the joint
    sweep's fixed point the Newton step and the standardisation balance, so the items are not yet stationary
    for the abilities the model reports."""
    for _ in range(n_iter):
        a, d, da, dd = _item_newton_step(x, k, a, d, theta)
        if max(float(np.max(np.abs(da))), float(np.max(np.abs(dd)))) < tol:
            break
    return a, d


def estimate_ability(model: Irt2PL, right: np.ndarray, known: np.ndarray, items: np.ndarray | None = None,
                     n_iter: int = 30) -> np.ndarray:
    """MAP abilities (prior N(0, 1)) of new models from their answers on ``items`` (default: all).
    ``right``/``known``: (Q_items, M_new) restricted to ``items`` already when ``items`` is None."""
    a = model.a if items is None else model.a[items]
    d = model.d if items is None else model.d[items]
    x = np.asarray(right, dtype=np.float64)
    k = np.asarray(known, dtype=np.float64)
    theta = np.zeros(x.shape[1])
    for _ in range(n_iter):
        p = _sig(a[:, None] * theta[None, :] + d[:, None])
        g = a @ (k * (x - p)) - theta
        h = (a * a) @ (k * p * (1 - p)) + 1.0
        step = np.clip(g / h, -1.0, 1.0)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-6:
            break
    return theta


def anchors_kmeans(model: Irt2PL, n_anchors: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """tinyBenchmarks-style anchors on the IRT item embedding (a, d) (standardised). Returns (item
    indices, weights summing to 1); see :func:`kmeans_anchor_weights`."""
    emb = np.stack([model.a, model.d], axis=1)
    sd = emb.std(axis=0)
    w = kmeans_anchor_weights((emb - emb.mean(axis=0)) / np.where(sd > 0, sd, 1.0), n_anchors, seed)
    idx = np.flatnonzero(w)
    return idx, w[idx] / w[idx].sum()


def kmeans_anchor_weights(emb: np.ndarray, size: int, seed: int, max_iter: int = 20,
                          max_clusters: int | None = None) -> np.ndarray:
    """Anchor weights (Q,) from a k-means clustering of the item embedding ``emb`` (Q, D).

    ``k = min(size // 2, distinct rows, max_clusters)`` clusters (at least 1); every cluster gives one anchor and the
    other ``size - k`` anchors are shared out in proportion to the cluster sizes (largest remainder), so a
    big cluster is represented by several anchors rather than one heavily weighted item; within a cluster
    the items nearest its centroid come first (ties by item index). An anchor's weight is its cluster's
    size over the anchors taken from it (so the weights sum to the number of items).
    """
    import warnings

    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from ..tst.prune import largest_remainder

    Q = emb.shape[0]
    size = int(min(size, Q))
    if size <= 0:
        return np.zeros(Q)
    k = int(max(1, min(size // 2, len(np.unique(np.round(emb, 9), axis=0)), max_clusters or size)))
    # one OpenMP thread, always: Lloyd's iterations sum over chunks per thread, so the clusters (and the anchors)
    # changed with the thread count, that is with the machine's CPUs, and within one process with whether
    # scikit-learn's OpenMP runtime was loaded before the caller's threadpool limit (threadpoolctl limits only
    # libraries already loaded): a second `curate` in one process gave other anchors than the first
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="openmp"):
        warnings.simplefilter("ignore")
        km = KMeans(n_clusters=k, n_init=1, max_iter=max_iter, init="random", random_state=seed).fit(emb)
    lab = km.labels_
    sizes = np.bincount(lab, minlength=k)
    alloc = largest_remainder(size - int((sizes > 0).sum()), {f"{c:09d}": int(sizes[c]) for c in range(k)})
    n_pick = np.minimum(np.array([alloc[f"{c:09d}"] for c in range(k)], dtype=np.int64) + (sizes > 0), sizes)
    # a cluster smaller than its share (or an empty one) gives the rest to the clusters with items left, in
    # proportion to what they have left: exactly ``size`` anchors (936 of 1,000 on MATH-V before)
    while (short := size - int(n_pick.sum())) > 0:
        room = sizes - n_pick
        extra = largest_remainder(short, {f"{c:09d}": int(room[c]) for c in range(k) if room[c] > 0})
        n_pick = np.minimum(n_pick + np.array([extra.get(f"{c:09d}", 0) for c in range(k)], dtype=np.int64), sizes)
    dist = ((emb - km.cluster_centers_[lab]) ** 2).sum(axis=1)
    order = np.lexsort((np.arange(Q), dist, lab))
    lo = lab[order]
    start = np.r_[0, np.flatnonzero(lo[1:] != lo[:-1]) + 1]
    pos = np.arange(Q) - np.repeat(start, np.diff(np.r_[start, Q]))
    take = order[pos < n_pick[lo]]
    w = np.zeros(Q)
    w[take] = sizes[lab[take]] / np.maximum(n_pick[lab[take]], 1)
    return w


def information_anchors(model: Irt2PL, n_anchors: int, margin: float = 0.5) -> np.ndarray:
    """Anchors that pin down ability everywhere in the fitting models' range (metabench-style): for ``n``
    abilities evenly spaced from ``min(theta) - margin`` to ``max(theta) + margin``, in turn, the unused item
    with the largest Fisher information ``a^2 p (1 - p)`` at that ability (ties by item index)."""
    n = int(min(n_anchors, len(model.a)))
    grid = np.linspace(model.theta.min() - margin, model.theta.max() + margin, n)
    p = model.prob(grid)
    info = model.a[:, None] ** 2 * p * (1 - p)
    used = np.zeros(len(model.a), dtype=bool)
    out = np.empty(n, dtype=np.int64)
    for j in range(n):
        i = int(np.argmax(np.where(used, -1.0, info[:, j])))
        used[i] = True
        out[j] = i
    return np.sort(out)


def estimate_scores(model: Irt2PL, anchors: np.ndarray, weights: np.ndarray, right_a: np.ndarray,
                    known_a: np.ndarray, known_all: np.ndarray, lam: float) -> dict[str, np.ndarray]:
    """Full-pool accuracy estimates of models that answered only the anchor items.

    ``right_a``/``known_a``: (n_anchors, M_new); ``known_all``: (Q, M_new) which pool items count in each
    model's full accuracy (the estimate is over those). Returns anchor, p-IRT and gp-IRT estimates.
    """
    xa = np.asarray(right_a, dtype=np.float64) * known_a
    wk = weights[:, None] * known_a
    anchor = (weights @ xa) / np.maximum(wk.sum(axis=0), 1e-12)
    theta = estimate_ability(model, xa, known_a, items=anchors)
    p = model.prob(theta) * known_all
    p[anchors] = xa * known_all[anchors]
    pirt = p.sum(axis=0) / np.maximum(known_all.sum(axis=0), 1)
    return {"anchor": anchor, "pirt": pirt, "gpirt": lam * pirt + (1 - lam) * anchor, "theta": theta}


def choose_lambda(right: np.ndarray, known: np.ndarray, n_anchors: int, seed: int, n_iter: int = 200) -> float:
    """The gp-IRT mixing weight, validated on models outside the fit: the fitting models are split in
    two (seeded); a 2PL is fitted to one half, anchors are drawn from it, and lambda (grid of 21) minimises
    the mean absolute error on the other half. (Choosing it on the fitted models themselves favours the
    anchor estimator, whose clusters were built from those same models' answers.)"""
    M = right.shape[1]
    if M < 4:
        return 1.0
    perm = np.random.default_rng([seed, 17]).permutation(M)
    fit_m, val_m = perm[: M // 2], perm[M // 2:]
    model = fit_2pl(right[:, fit_m], known[:, fit_m], n_iter=n_iter)
    anchors, w = anchors_kmeans(model, n_anchors, seed)
    rv, kv = right[:, val_m], known[:, val_m]
    truth = (rv * kv).sum(axis=0) / np.maximum(kv.sum(axis=0), 1)
    est = estimate_scores(model, anchors, w, rv[anchors], kv[anchors], kv, 0.0)
    grid = np.linspace(0, 1, 21)
    mae = np.abs(grid[:, None] * est["pirt"][None, :] + (1 - grid[:, None]) * est["anchor"][None, :]
                 - truth[None, :]).mean(axis=1)
    return float(grid[int(np.argmin(mae))])
