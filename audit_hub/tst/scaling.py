"""Calibration of TsT-RF's P(gold): power (temperature) scaling fitted on training folds only.

The option-level forest gives every option a raw probability ``r`` of being gold. Raw s(x)
normalises them within the question, ``r_j / sum_i r_i``; that ranks well but is not calibrated
(leaves of >= 5 rows and bagging shrink it towards 1/K). The calibrated P(gold) is

    P_j = (r_j + EPS) ** beta / sum_i (r_i + EPS) ** beta

(temperature scaling of log r, T = 1 / beta). Held-out fold f gets one ``beta``, fitted by maximum
likelihood of the gold option on the out-of-fold forest probabilities of the questions *outside*
f (its training folds) in the same repeat: only training-fold answers enter the fit. (Those
out-of-fold probabilities come from forests whose training data included fold f; ``beta`` is one
number per fold and the map is monotone within a question, so it can neither move a held-out
question's argmax, i.e. TsT accuracy, nor encode its answer.)

Expected calibration error (ECE) is top-label: questions are binned by their largest P over the
options (10 equal-width bins on [0, 1]); ECE = sum over bins of (share of questions) x |accuracy -
mean confidence|, with tie-aware accuracy, pooled over repeats.
"""

from __future__ import annotations

import numpy as np

EPS = 0.01
ISO_FLOOR = 1e-3
METHODS = ("isotonic", "power", "none")
BETA_BOUNDS = (0.05, 20.0)
N_BINS = 10


def power_normalise(r: np.ndarray, q_local: np.ndarray, n_q: int, beta: float) -> np.ndarray:
    """Within-question power normalisation of raw option probabilities (q_local: 0..n_q-1)."""
    lw = beta * np.log(np.asarray(r, dtype=np.float64) + EPS)
    mx = np.full(n_q, -np.inf)
    np.maximum.at(mx, q_local, lw)
    w = np.exp(lw - mx[q_local])
    return w / np.bincount(q_local, weights=w, minlength=n_q)[q_local]


def fit_power(r: np.ndarray, q_local: np.ndarray, n_q: int, gold: np.ndarray) -> float:
    """Maximum-likelihood ``beta`` (negative log-likelihood of the gold options), bounded.

    ``gold``: boolean per row, exactly one gold row per question. Returns 1.0 when there are fewer
    than 10 questions to fit on.
    """
    from scipy.optimize import minimize_scalar

    if n_q < 10:
        return 1.0
    lr = np.log(np.asarray(r, dtype=np.float64) + EPS)
    lg = lr[gold]

    def nll(log_beta: float) -> float:
        b = float(np.exp(log_beta))
        lw = b * lr
        mx = np.full(n_q, -np.inf)
        np.maximum.at(mx, q_local, lw)
        lse = mx + np.log(np.bincount(q_local, weights=np.exp(lw - mx[q_local]), minlength=n_q))
        return float(lse.sum() - b * lg.sum())

    res = minimize_scalar(nll, bounds=tuple(np.log(BETA_BOUNDS)), method="bounded", options={"xatol": 1e-3})
    return float(np.exp(res.x))


def fit_isotonic(p: np.ndarray, gold: np.ndarray):
    """Isotonic map from a row's normalised P to its gold rate (clipped outside the fitted range)."""
    from sklearn.isotonic import IsotonicRegression

    return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p, gold.astype(np.float64))


#: a strictly increasing part added to the isotonic map (times the raw probability): the fitted map is flat in
#: places, so two options with different raw probabilities could tie after it and the calibrated argmax move
#: (MATH-V: 248-310 of 1,532 questions per repeat with tied top options, calibrated top-label accuracy 28.6% against
#: the uncalibrated 29.0%); with it the map keeps every question's order of options, so accuracy does not change
ISO_TIE_BREAK = 1e-6


def isotonic_normalise(iso, p: np.ndarray, q_local: np.ndarray, n_q: int) -> np.ndarray:
    """Apply an isotonic map to normalised option probabilities (plus ISO_TIE_BREAK times the raw probability:
    strictly increasing, so the order of a question's options is kept), then renormalise within question (a floor
    of ISO_FLOOR keeps every option possible and an all-zero question uniform)."""
    p = np.asarray(p, dtype=np.float64)
    v = np.asarray(iso.predict(p), dtype=np.float64) + ISO_FLOOR + ISO_TIE_BREAK * p
    return v / np.bincount(q_local, weights=v, minlength=n_q)[q_local]


def top_label(P: np.ndarray, seg_starts: np.ndarray, gold_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Confidence (largest P) and tie-aware correctness of every question with options.

    ``P``: (R,) option probabilities whose questions are contiguous segments starting at
    ``seg_starts`` (increasing, first 0, together covering all R rows); ``gold_rows``: (R,) bool.
    """
    if len(seg_starts) == 0:
        return np.zeros(0), np.zeros(0)
    mx = np.maximum.reduceat(P, seg_starts)
    is_max = np.isclose(P, np.repeat(mx, np.diff(np.append(seg_starts, len(P)))), rtol=0, atol=1e-12)
    n_max = np.add.reduceat(is_max.astype(np.float64), seg_starts)
    g = np.add.reduceat((is_max & gold_rows).astype(np.float64), seg_starts)
    return mx, g / n_max


def reliability(conf: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> dict:
    """Reliability bins and the ECE of (confidence, correctness) pairs."""
    conf = np.asarray(conf, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    b = np.clip((conf * n_bins).astype(np.int64), 0, n_bins - 1)
    n = np.bincount(b, minlength=n_bins).astype(np.float64)
    sc = np.bincount(b, weights=conf, minlength=n_bins)
    sa = np.bincount(b, weights=correct, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mc = np.where(n > 0, sc / n, np.nan)
        ma = np.where(n > 0, sa / n, np.nan)
    tot = n.sum()
    ece = float(np.nansum(n * np.abs(ma - mc)) / tot) if tot else None
    edges = np.linspace(0, 1, n_bins + 1)
    return {"ece": ece, "bins": [{"lo": float(edges[i]), "hi": float(edges[i + 1]), "n": int(n[i]),
                                  "confidence": None if n[i] == 0 else float(mc[i]),
                                  "accuracy": None if n[i] == 0 else float(ma[i])} for i in range(n_bins)]}
