"""Interval estimates and multiplicity corrections, vectorised over integer counts.

Methods are always passed explicitly to statsmodels (its defaults are Wald intervals and Holm-Sidak),
so what is computed is what the report says.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import special as _sp

Z95 = 1.959963984540054

# Distribution functions the audit needs, as the scipy.special ufuncs that scipy.stats evaluates for them
# (the same values bit for bit, checked in tests/test_stats.py), with scipy.stats' handling of arguments
# outside the support. Importing scipy.stats costs ~0.7 s per process (its many distribution classes); the
# CLI and its calibration worker never import it.
try:  # what scipy.stats.binom.sf evaluates (boost); a private name, so fall back to cephes (1e-14 relative)
    from scipy.special._ufuncs import _binom_sf
except ImportError:  # pragma: no cover - a future scipy
    _binom_sf = None


def norm_ppf(q):
    """``scipy.stats.norm.ppf``."""
    return _sp.ndtri(q)


def norm_isf(q):
    """``scipy.stats.norm.isf``."""
    return -_sp.ndtri(q)


def norm_cdf(x):
    """``scipy.stats.norm.cdf``."""
    return _sp.ndtr(x)


def beta_ppf(q, a, b):
    """``scipy.stats.beta.ppf`` for ``a, b > 0``."""
    return _sp.betaincinv(a, b, q)


def chi2_sf(x, df):
    """``scipy.stats.chi2.sf`` for ``df > 0``."""
    return _sp.chdtrc(df, x)


def chi2_ppf(q, df):
    """``scipy.stats.chi2.ppf`` for ``df > 0`` (its formula, without importing ``scipy.stats``: about 1 s)."""
    return 2.0 * _sp.gammaincinv(np.asarray(df) / 2.0, q)


def t_cdf(x, df):
    """``scipy.stats.t.cdf`` for ``df > 0``."""
    return _sp.stdtr(df, x)


def poisson_sf(k, mu):
    """``scipy.stats.poisson.sf``: P(X > k) (1 below the support)."""
    k = np.floor(np.asarray(k, dtype=np.float64))
    return np.where(k < 0, 1.0, _sp.pdtrc(np.maximum(k, 0), mu))


def binom_sf(k, n, p):
    """``scipy.stats.binom.sf``: P(X > k) (1 below the support, 0 at or above ``n``)."""
    k = np.floor(np.asarray(k, dtype=np.float64))
    n = np.asarray(n)
    kk = np.clip(k, 0, n)
    inner = _binom_sf(kk, n, p) if _binom_sf is not None else _sp.bdtrc(kk, n, p)
    return np.where(k < 0, 1.0, np.where(k >= n, 0.0, inner))


# Bounded scalar minimisation: Brent's method (Forsythe, Malcolm and Moler's ``fmin``: golden-section steps
# with parabolic interpolation), as ``scipy.optimize.minimize_scalar(method="bounded")`` runs it: the same
# trial points and result bit for bit (tests/test_stats.py), without importing scipy.optimize (~0.35 s in
# each process, most of it modules the audit never uses).
_SQRT_EPS = float(np.sqrt(2.2e-16))
_GOLDEN = 0.5 * (3.0 - float(np.sqrt(5.0)))


def _sign(v: float) -> float:
    return v if v != v else (1.0 if v > 0 else -1.0 if v < 0 else 0.0)


def _nan_max(u: float, v: float) -> float:
    """``numpy.maximum`` of two floats (NaN wins)."""
    if u != u or v != v:
        return u if u != u else v
    return u if u >= v else v


def minimize_bounded(fun, lo: float, hi: float, xatol: float = 1e-5, maxiter: int = 500) -> tuple[float, float, int]:
    """The minimum of ``fun`` on ``[lo, hi]`` (the ends are never evaluated): ``(x, fun(x), evaluations)``,
    the ``x``, ``fun`` and ``nfev`` of ``scipy.optimize.minimize_scalar(fun, bounds=(lo, hi),
    method="bounded", options={"xatol": xatol, "maxiter": maxiter})``."""
    lo, hi = float(lo), float(hi)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"bounds must be finite, got ({lo}, {hi})")
    if lo > hi:
        raise ValueError(f"the lower bound {lo} exceeds the upper bound {hi}")
    a, b = lo, hi
    v = w = x = a + _GOLDEN * (b - a)  # x: best so far; w: second best; v: the previous w
    fx = fv = fw = fun(x)
    n = 1
    d = e = 0.0  # the last step and the one before it
    fu = float("inf")
    m = 0.5 * (a + b)
    tol1 = _SQRT_EPS * abs(x) + xatol / 3.0
    tol2 = 2.0 * tol1
    while abs(x - m) > tol2 - 0.5 * (b - a):
        golden = True
        if abs(e) > tol1:  # try a parabola through x, w, v
            golden = False
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            r, e = e, d
            if abs(p) < abs(0.5 * q * r) and p > q * (a - x) and p < q * (b - x):
                d = (p + 0.0) / q
                u = x + d
                if (u - a) < tol2 or (b - u) < tol2:  # too near an end: a minimal step towards the middle
                    d = tol1 * (_sign(m - x) + float(m - x == 0))
            else:
                golden = True
        if golden:
            e = (a - x) if x >= m else (b - x)
            d = _GOLDEN * e
        u = x + (_sign(d) + float(d == 0)) * _nan_max(abs(d), tol1)
        fu = fun(u)
        n += 1
        if fu <= fx:
            if u >= x:
                a = x
            else:
                b = x
            v, fv = w, fw
            w, fw = x, fx
            x, fx = u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv = w, fw
                w, fw = u, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu
        m = 0.5 * (a + b)
        tol1 = _SQRT_EPS * abs(x) + xatol / 3.0
        tol2 = 2.0 * tol1
        if n >= maxiter:
            break
    return x, fx, n


@functools.lru_cache(maxsize=64)
def _z(alpha: float) -> float:
    """Two-sided normal quantile; cached because detectors
    call :func:`wilson_ci` hundreds of times (per category, per left-out model)."""
    return float(norm_ppf(1 - alpha / 2))


def wilson_ci(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials (vectorised; n == 0 -> (nan, nan))."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = _z(float(alpha))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        lo = np.where(n > 0, np.clip(centre - half, 0, 1), np.nan)
        hi = np.where(n > 0, np.clip(centre + half, 0, 1), np.nan)
    # exact boundary values (avoid 1e-17 rounding at k == 0 or k == n)
    lo = np.where((n > 0) & (k == 0), 0.0, lo)
    hi = np.where((n > 0) & (k == n), 1.0, hi)
    return lo, hi


def clopper_pearson_ci(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson) interval for k successes in n trials: its coverage is at least ``1 - alpha`` at
    every rate, unlike the Wilson interval's at a few trials (vectorised; a non-integer k is the continuous
    extension; n == 0 -> (nan, nan))."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta_ppf(alpha / 2, np.maximum(k, 1e-300), np.maximum(n - k + 1, 1e-300)), 0.0)
        hi = np.where(k < n, beta_ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1e-300)), 1.0)
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


def paired_difference_ci(n11, n10, n01, n00, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Difference p1 - p2 of two proportions measured on the same items, with Newcombe's (1998, method 10)
    square-and-add interval for paired data: the Wilson intervals of p1 = (n11 + n10) / n and
    p2 = (n11 + n01) / n combined with their correlation, estimated from the 2 x 2 table with the
    continuity-corrected phi of Fagerland, Lydersen and Laake (2014; 0 when ``|A| <= n/2`` for positive A,
    A = n11 n00 - n10 n01). Vectorised; n == 0 -> nan. Returns (difference, lower, upper)."""
    n11, n10, n01, n00 = (np.asarray(x, dtype=np.float64) for x in (n11, n10, n01, n00))
    n = n11 + n10 + n01 + n00
    r1, c1 = n11 + n10, n11 + n01
    with np.errstate(invalid="ignore", divide="ignore"):
        p1, p2 = r1 / n, c1 / n
        l1, u1 = wilson_ci(r1, n, alpha)
        l2, u2 = wilson_ci(c1, n, alpha)
        a = n11 * n00 - n10 * n01
        prod = r1 * (n - r1) * c1 * (n - c1)
        num = np.where(a > n / 2, a - n / 2, np.where(a >= 0, 0.0, a))
        psi = np.where(prod > 0, num / np.sqrt(np.where(prod > 0, prod, 1.0)), 0.0)
        d = p1 - p2
        lo = d - np.sqrt(np.maximum((p1 - l1) ** 2 + (u2 - p2) ** 2 - 2 * psi * (p1 - l1) * (u2 - p2), 0.0))
        hi = d + np.sqrt(np.maximum((p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * psi * (p2 - l2) * (u1 - p1), 0.0))
    ok = n > 0
    return (np.where(ok, d, np.nan), np.where(ok, np.clip(lo, -1, 1), np.nan), np.where(ok, np.clip(hi, -1, 1), np.nan))


def _adjust_finite(pvalues, adjust) -> np.ndarray:
    """Apply ``adjust`` (sorted-order adjustment of a 1-d array of p-values) to the non-NaN entries;
    NaN entries stay NaN. ``adjust(sorted_p) -> adjusted sorted_p`` before clipping at 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    pv = p[ok]
    order = np.argsort(pv, kind="stable")
    res = np.empty(len(pv))
    res[order] = np.minimum(adjust(pv[order]), 1.0)
    out[ok] = res
    return out


def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN entries are ignored and stay NaN)."""
    return _adjust_finite(pvalues, lambda ps: np.maximum.accumulate((len(ps) - np.arange(len(ps))) * ps))


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaN entries are ignored and stay NaN)."""
    return _adjust_finite(pvalues, lambda ps: np.minimum.accumulate((ps * len(ps) / np.arange(1, len(ps) + 1))[::-1])[::-1])


def permutation_p_value(null: np.ndarray, observed: float, alternative: str = "greater") -> float:
    """One-sided permutation p with the (1 + #{null >= obs}) / (B + 1) correction."""
    null = np.asarray(null, dtype=np.float64)
    eps = 1e-12 * max(1.0, abs(observed))
    if alternative == "greater":
        g = int((null >= observed - eps).sum())
    elif alternative == "less":
        g = int((null <= observed + eps).sum())
    else:
        raise ValueError("alternative must be 'greater' or 'less'")
    return (1 + g) / (len(null) + 1)


def jeffreys_interval(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jeffreys posterior mean ``(k + 1/2) / (n + 1)`` and equal-tailed interval (Beta(k+1/2, n-k+1/2)).

    The mean shrinks 0/n and n/n towards 1/2, so saturated and floor items with few models do not
    get a difficulty of exactly 0 or 1. Vectorised; n == 0 gives the prior (0.5 and its interval).
    Returns (mean, low, high).
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    a, b = k + 0.5, n - k + 0.5
    mean = a / (a + b)
    lo = np.where(k > 0, beta_ppf(alpha / 2, a, b), 0.0)
    hi = np.where(k < n, beta_ppf(1 - alpha / 2, a, b), 1.0)
    return mean, lo, hi


def cochrans_q(x) -> tuple[float, int, float]:
    """Cochran's Q test that k binary raters (columns) have the same success rate over items (rows).

    ``x``: (n_items, k) 0/1 matrix (complete cases only). Q = (k-1) (k sum_j C_j^2 - T^2) /
    (k T - sum_i R_i^2) with column totals C, row totals R and grand total T; chi-square on k-1 df.
    Items with all 0 or all 1 contribute nothing (as in statsmodels' ``cochrans_q``).
    Returns (Q, df, p); Q = 0, p = 1 when no item varies.
    """
    x = np.asarray(x)
    n, k = x.shape
    if k < 2:
        raise ValueError("Cochran's Q needs at least two columns")
    col = x.sum(axis=0, dtype=np.int64).astype(np.float64)
    row = x.sum(axis=1, dtype=np.int64).astype(np.float64)
    t = col.sum()
    denom = k * t - (row * row).sum()
    if denom <= 0:
        return 0.0, k - 1, 1.0
    q = (k - 1) * (k * (col * col).sum() - t * t) / denom
    return float(q), k - 1, float(chi2_sf(q, k - 1))


def fleiss_kappa(counts) -> float:
    """Fleiss' kappa from an (n_items, n_categories) matrix of rater counts (same raters per item)."""
    c = np.asarray(counts, dtype=np.float64)
    n_raters = c.sum(axis=1)
    if not np.allclose(n_raters, n_raters[0]) or n_raters[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of raters on every item")
    m = n_raters[0]
    p_j = c.sum(axis=0) / c.sum()
    p_i = ((c * c).sum(axis=1) - m) / (m * (m - 1))
    pe = (p_j * p_j).sum()
    if pe >= 1:
        return float("nan")
    return float((p_i.mean() - pe) / (1 - pe))


def table_bootstrap(counts, statistic, *, n_boot: int = 1000, seed: int | np.random.Generator = 0,
                    alpha: float = 0.05, max_cells_per_batch: int = 4_000_000,
                    sparse: bool = False) -> tuple[float, float, np.ndarray]:
    """Percentile bootstrap over items when a statistic depends only on a count table.

    Resampling N items with replacement is the same as a multinomial draw of the cell counts with the
    observed cell shares, so a replicate costs O(cells), not O(items). ``counts``: (S, K) cell counts
    for S strata (each stratum keeps its own size, a stratified bootstrap) or (K,) for one table.
    ``statistic(tables)`` receives (b, S, K) int arrays and returns (b,). Returns (low, high, reps).

    ``sparse``: a cell empty in every stratum stays empty in every replicate, so only the other cells (and the
    last, which the multinomial draw fills with any remainder) are drawn and ``statistic(tables, cells)``
    receives (b, S, K') tables of those cells and their (K',) indices. The replicates are the same, bit for bit
    (a zero-probability cell takes no random draw, and the batches are sized on the full K): on a wide pool's
    (M+1)^2 table of which only a few thousand cells are filled, the cost follows the filled cells.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim == 1:
        c = c[None, :]
    s, k = c.shape
    batch = max(1, min(n_boot, max_cells_per_batch // max(s * k, 1)))
    cells = None
    if sparse:
        cells = np.flatnonzero((c.sum(axis=0) > 0) | (np.arange(k) == k - 1))
        c = c[:, cells]
        statistic = functools.partial(statistic, cells=cells)
        s, k = c.shape
    tot = c.sum(axis=1)
    probs = np.where(tot[:, None] > 0, c / np.maximum(tot[:, None], 1), 0.0)
    reps = []
    done = 0
    while done < n_boot:
        b = min(batch, n_boot - done)
        tab = np.empty((b, s, k), dtype=np.int64)
        for i in range(s):
            tab[:, i, :] = rng.multinomial(tot[i], probs[i], size=b) if tot[i] > 0 else 0
        reps.append(np.asarray(statistic(tab), dtype=np.float64))
        done += b
    r = np.concatenate(reps)
    lo, hi = np.nanquantile(r, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi), r
