"""Interval estimates and multiplicity corrections, vectorised over integer counts.

Methods are always passed explicitly to statsmodels (its defaults are Wald intervals and Holm-Sidak),
so what is computed is what the report says.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

Z95 = 1.959963984540054


def wilson_ci(k, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials (vectorised; n == 0 -> (nan, nan))."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = _st.norm.ppf(1 - alpha / 2)
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
    """Exact (Clopper-Pearson) interval via the beta distribution."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, _st.beta.ppf(alpha / 2, k, n - k + 1), 0.0)
        hi = np.where(k < n, _st.beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    lo = np.where(n > 0, lo, np.nan)
    hi = np.where(n > 0, hi, np.nan)
    return lo, hi


def proportion_ci(k, n, alpha: float = 0.05, method: str = "wilson"):
    if method == "wilson":
        return wilson_ci(k, n, alpha)
    if method in ("clopper-pearson", "beta", "exact"):
        return clopper_pearson_ci(k, n, alpha)
    raise ValueError(f"unknown interval method {method!r}; use 'wilson' or 'clopper-pearson'")


def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN entries are ignored and stay NaN)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    pv = p[ok]
    m = len(pv)
    order = np.argsort(pv, kind="stable")
    adj = np.maximum.accumulate((m - np.arange(m)) * pv[order])
    res = np.empty(m)
    res[order] = np.minimum(adj, 1.0)
    out[ok] = res
    return out


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaN entries are ignored and stay NaN)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    pv = p[ok]
    m = len(pv)
    order = np.argsort(pv, kind="stable")
    ranked = pv[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    res = np.empty(m)
    res[order] = np.minimum(adj, 1.0)
    out[ok] = res
    return out


def bootstrap_ci(statistic, n_items: int, *, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05,
                 batch: int = 200) -> tuple[float, float, np.ndarray]:
    """Percentile bootstrap over items.

    ``statistic(weights)`` receives an integer array of shape (b, n_items) of resampling counts
    (multinomial weights, so a vectorised statistic is a weighted sum) and returns shape (b,).
    Returns (low, high, replicates).
    """
    rng = np.random.default_rng(seed)
    reps = []
    done = 0
    while done < n_boot:
        b = min(batch, n_boot - done)
        w = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=b)
        reps.append(np.asarray(statistic(w), dtype=np.float64))
        done += b
    r = np.concatenate(reps)
    lo, hi = np.nanquantile(r, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi), r


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
