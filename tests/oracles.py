"""Reference formulas the tests check the vectorised statistics against (plain, direct implementations;
the package computes the same quantities by other routes, so these live with the tests)."""

from __future__ import annotations

import numpy as np


def cell_sum_moments(row_margin, col_margin, mask) -> tuple[float, float]:
    """Null mean and variance of ``sum(mask * X)`` for a table with the given margins (any 0/1 mask)."""
    r = np.asarray(row_margin, dtype=np.float64)
    c = np.asarray(col_margin, dtype=np.float64)
    s = np.asarray(mask, dtype=np.float64)
    n = r.sum()
    if not np.isclose(n, c.sum()):
        raise ValueError("row and column margins must have the same total")
    mean = float((np.outer(r, c) * s).sum() / n) if n > 0 else 0.0
    if n <= 1:
        return mean, 0.0
    a = n * np.diag(r) - np.outer(r, r)
    b = n * np.diag(c) - np.outer(c, c)
    var = float(((s.T @ a @ s) * b).sum() / (n * n * (n - 1)))
    return mean, max(var, 0.0)


def fleiss_kappa_general(counts: np.ndarray) -> float:
    """Fleiss' kappa of an (items x categories) count table whose rows may have different totals.

    Rows with fewer than 2 ratings are ignored. Equals statsmodels' ``fleiss_kappa`` for equal totals.
    """
    c = np.asarray(counts, dtype=np.float64)
    n = c.sum(axis=1)
    c = c[n >= 2]
    n = n[n >= 2]
    if len(n) == 0:
        return float("nan")
    p_i = ((c * c).sum(axis=1) - n) / (n * (n - 1))
    p_j = c.sum(axis=0) / n.sum()
    pe = float((p_j * p_j).sum())
    return float((p_i.mean() - pe) / (1 - pe)) if pe < 1 else float("nan")
