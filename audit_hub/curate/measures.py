"""Vectorised measures on a (items x models) correctness matrix: scores, rank agreement, discrimination.

Conventions: ``right`` is a (Q, M) 0/1 float or bool matrix (1 = correct), ``known`` the matching mask of
cells with a known outcome (a missing run counts on neither side). A *subset* of items is a boolean mask
(Q,) or a matrix of masks / integer weights (R, Q); every function takes a stack of weights so that
bootstrap replicates, random draws and the curated set all go through one matrix product.
"""

from __future__ import annotations

import functools
import math

import numpy as np


# ---------------------------------------------------------------------------------------- scores
def weighted_accuracy(weights: np.ndarray, right: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Per weight row and model: sum_i w_i x_im / sum_i w_i k_im. ``weights`` (R, Q) -> (R, M)."""
    w = np.atleast_2d(np.asarray(weights))
    if w.dtype.kind != "f":
        w = w.astype(np.float64)
    num = w @ (right * known)
    den = w @ known
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


_POISSON1_CDF = np.cumsum([np.exp(-1.0) / math.factorial(k) for k in range(16)]).astype(np.float32)


@functools.lru_cache(maxsize=4)
def boot_weights(seed_key: tuple, n: int, n_boot: int, batch: int = 100) -> tuple[np.ndarray, ...]:
    """Poisson(1) bootstrap weights over ``n`` items: ``n_boot`` replicates as uint8 batches (b, n).

    Batch ``i`` is drawn from ``numpy.random.default_rng([*seed_key, i])`` (uniform float32 through the
    Poisson(1) CDF), so every caller with the same key sees the same replicates (the folds share them);
    cached because they cost more to draw than to use."""
    out = []
    for bi, start in enumerate(range(0, n_boot, batch)):
        b = min(batch, n_boot - start)
        u = np.random.default_rng([*seed_key, bi]).random((b, n), dtype=np.float32)
        out.append(np.searchsorted(_POISSON1_CDF, u, side="right").astype(np.uint8))
    return tuple(out)


# ---------------------------------------------------------------------------------------- rank agreement
def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties get the mean rank), vectorised over leading axes."""
    from scipy.stats import rankdata

    return rankdata(np.asarray(x, dtype=np.float64), method="average", axis=-1)


def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman rho between the last axes of ``a`` and ``b`` (broadcast); NaN when either is constant."""
    ra, rb = _ranks(a), _ranks(b)
    ra = ra - ra.mean(axis=-1, keepdims=True)
    rb = rb - rb.mean(axis=-1, keepdims=True)
    num = (ra * rb).sum(axis=-1)
    den = np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def kendall_tau_b(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall tau-b between the last axes of ``a`` and ``b`` (broadcast; O(M^2) pairs, M = models)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    da = np.sign(a[..., :, None] - a[..., None, :])
    db = np.sign(b[..., :, None] - b[..., None, :])
    iu = np.triu_indices(a.shape[-1], 1)
    da, db = da[..., iu[0], iu[1]], db[..., iu[0], iu[1]]
    s = (da * db).sum(axis=-1)
    den = np.sqrt((da != 0).sum(axis=-1) * (db != 0).sum(axis=-1).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, s / np.maximum(den, 1e-300), np.nan)


def top_agreement(curated: np.ndarray, full: np.ndarray, k: int) -> tuple[bool, float]:
    """(same top-1 model, share of the full top-k found in the curated top-k); ties broken by index."""
    c = np.argsort(-np.asarray(curated, dtype=np.float64), kind="stable")
    f = np.argsort(-np.asarray(full, dtype=np.float64), kind="stable")
    k = max(1, min(int(k), len(f)))
    return bool(c[0] == f[0]), float(len(set(c[:k]) & set(f[:k])) / k)


def leader_change_on_drop(curated: np.ndarray, full: np.ndarray, names: list[str]) -> list[str]:
    """Models whose removal from the comparison makes the curated leader differ from the full leader."""
    out = []
    c = np.asarray(curated, dtype=np.float64)
    f = np.asarray(full, dtype=np.float64)
    for j, name in enumerate(names):
        keep = np.arange(len(names)) != j
        if keep.sum() < 2:
            continue
        if np.argmax(c[keep]) != np.argmax(f[keep]):
            out.append(name)
    return out


# ---------------------------------------------------------------------------------------- discrimination
def point_biserial(right: np.ndarray, known: np.ndarray, subset: np.ndarray | None = None) -> np.ndarray:
    """Per item: Pearson correlation across models between being right on the item and the model's
    accuracy on the *other* items of ``subset`` (item-rest point-biserial). NaN where the item or the
    rest score does not vary. Vectorised: every sum is a matrix-vector product with model vectors."""
    x = np.asarray(right, dtype=np.float64) * known
    kn = np.asarray(known, dtype=np.float64)
    s = np.ones(x.shape[0], dtype=bool) if subset is None else np.asarray(subset, dtype=bool)
    T = (x * s[:, None]).sum(axis=0)           # right on the subset, per model
    N = (kn * s[:, None]).sum(axis=0)          # known on the subset, per model
    # rest score of model m on item i (i in subset): (T_m - x_im) / (N_m - k_im); outside subset: T_m / N_m
    own = s[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = np.where(own, (T[None, :] - x) / np.maximum(N[None, :] - kn, 1), T[None, :] / np.maximum(N, 1)[None, :])
    w = kn
    sw = w.sum(axis=1)
    mx = (x * w).sum(axis=1) / np.maximum(sw, 1)
    my = (rest * w).sum(axis=1) / np.maximum(sw, 1)
    dx = (x - mx[:, None]) * w
    dy = (rest - my[:, None]) * w
    cov = (dx * dy).sum(axis=1)
    vx = (dx * dx).sum(axis=1)
    vy = (dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vx * vy)
    return np.where((sw >= 3) & (vx > 1e-12) & (vy > 1e-18), np.clip(r, -1, 1), np.nan)


def significant_pairs(mask: np.ndarray, right: np.ndarray, known: np.ndarray, *, seed_key: tuple,
                      n_boot: int = 500, alpha: float = 0.05) -> float:
    """Share of model pairs whose accuracy difference on the item subset is significant under a paired
    bootstrap over items (Poisson(1) item weights; percentile interval of the difference excludes 0)."""
    mask = np.asarray(mask, dtype=bool)
    M = right.shape[1]
    if mask.sum() < 2 or M < 2:
        return float("nan")
    x, k = right[mask].astype(np.float32), known[mask].astype(np.float32)
    iu = np.triu_indices(M, 1)
    diffs = []
    for w in boot_weights(tuple(seed_key), int(mask.sum()), int(n_boot)):
        acc = weighted_accuracy(w.astype(np.float32), x, k)
        diffs.append(acc[:, iu[0]] - acc[:, iu[1]])
    d = np.concatenate(diffs)
    lo, hi = np.nanquantile(d, [alpha / 2, 1 - alpha / 2], axis=0)
    return float(((lo > 0) | (hi < 0)).mean())


def discrimination(mask: np.ndarray, right: np.ndarray, known: np.ndarray, *, seed_key: tuple,
                   n_boot: int = 500) -> dict:
    """Discrimination of an item subset three ways: SD of model accuracies, mean item point-biserial,
    share of model pairs significantly different under a paired bootstrap over items."""
    mask = np.asarray(mask, dtype=bool)
    acc = weighted_accuracy(mask[None, :].astype(np.float64), right, known)[0]
    pb = point_biserial(right[mask], known[mask])
    return {"sd": float(np.nanstd(acc, ddof=1)) if np.isfinite(acc).sum() > 1 else None,
            "point_biserial": float(np.nanmean(pb)) if np.isfinite(pb).any() else None,
            "significant_pairs": significant_pairs(mask, right, known, seed_key=seed_key, n_boot=n_boot),
            "n_items": int(mask.sum())}


def relative_change(after: float | None, before: float | None) -> float | None:
    """``after / before - 1``; None where either is missing or not finite (a 1-item selection has no
    significant pairs: NaN, printed "+nan%") or ``before`` is 0."""
    if after is None or before is None or not np.isfinite(before) or not np.isfinite(after) or before == 0:
        return None
    return float(after / before - 1.0)
