"""A latent-truth model of model answers, for ranking gold labels by the posterior that they are wrong.

Model (closed items: mc with ``K`` options, yes/no with ``K = 2``). Item ``i`` has a true answer ``t``;
the stated gold is one noisy source: it equals ``t`` with probability ``1 - eps_i`` and is otherwise uniform
over the other ``K - 1`` options (``eps_i`` = ``eps``, or the rate of the item's evidence group: a
placeholder gold, a gold text another option repeats). In each arm (full; blind when present) model ``m``
knows ``t`` with probability ``expit(a[m, c] - u_i)``, where ``u_i ~ N(0, sigma^2)`` is the item's
difficulty in that arm (a random effect shared by the arm's models, integrated out by 15-point
Gauss-Hermite quadrature: a Rasch model with per-model ability) and ``c`` is the answer class: the
option count for mc items and, for yes/no items, the true answer itself (so a model's "say yes" bias is
a reliability of that model, not evidence against the gold: a two-coin Dawid-Skene on yes/no). Wrong
answers follow the item's distractor structure, shared by every model and both arms (attractive
distractors), a mixture of two kinds: with probability ``pi`` one attractive distractor (uniform over the
wrong options, summed out) takes a share ``s`` of the wrong answers and the rest are uniform, ``s`` with a
distribution fitted on ``SHARE_GRID``; otherwise the distractor probabilities are ``Dirichlet(alpha)``
(integrated out: Dirichlet-multinomial). Optional (off, see ``GUESSING`` and ``position_preferences``): a
knowledge-or-guess variant.

Fitting is EM on at most ``fit_items`` items (a random subsample; the posterior is then computed for
every item): abilities match each model's (soft) accuracy per class; each arm's ``sigma`` (first and last
iteration), ``alpha`` and ``pi`` maximise the marginal likelihood (bounded 1-D searches on at most
``HYPER_FIT_ITEMS`` items); the share distribution is an EM update; ``eps`` the mean posterior (evidence
groups: the posterior mean under their Beta prior). Cost ``O(Q M K)`` for the posterior.

Likelihood-ratio test of ``eps = 0`` with the fitted nuisance parameters: the statistic is
``2 max_eps sum_i log(1 - eps + eps r_i)`` with ``r_i`` the mean likelihood of the non-gold answers over
the gold's; on the boundary its null law is the 50:50 mixture of chi-square(0) and chi-square(1).
Because the null keeps item difficulty and attractive distractors, shared difficulty alone does not
reject (false-positive rate measured in ``benchmarks/label_errors.py`` and the tests), unlike the
independence count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit, gammaln, logsumexp

from .core import minimize_bounded

NODES, _W = np.polynomial.hermite_e.hermegauss(15)
LOGW = np.log(_W / np.sqrt(2 * np.pi))
SIGMA_MAX = 4.0
# knowledge-or-guess (a correct answer may be a lucky 1/K guess). Off: on simulated pools without
# guessing it made the likelihood-ratio test anti-conservative (13.5% at alpha 5% under shared
# difficulty) and it did not fix the fit on the near-chance MATH-Vision pool; kept for study.
GUESSING = False
_SIGMA_GRID = np.linspace(0.0, SIGMA_MAX, 9)
CHUNK = 1 << 16
#: an arm's answer layout (:func:`_arm_layout`) is kept on its :class:`LabelData` when its indicator matrices
#: take at most this many bytes (the fit's subsamples: the EM evaluates the same answers hundreds of times);
#: a larger one (the final posterior over every item) is rebuilt chunk by chunk on each call
LAYOUT_CACHE_BYTES = 64 << 20
#: Beta(a, b) prior of the wrong-gold rate of evidence groups 1, 2: a placeholder gold (the stated gold is
#: not an option text, so almost surely not the intended answer: mean 0.9) and a gold whose text another
#: option repeats (no prior lean: uniform); the answers update both (EM)
EVIDENCE_PRIOR = ((9.0, 1.0), (1.0, 1.0))
HYPER_FIT_ITEMS = 3000  # items on which the difficulty spreads and the distractor model are fitted
DISTRACTOR_ROUNDS = 1  # rounds of (pi, shares, concentration) per EM iteration (warm-started)
#: attractor model: the share of an item's wrong answers that go to its attractive distractor (the rest
#: uniform over the wrong options, the attractor included); its distribution is fitted on this grid
SHARE_GRID = np.array([0.0, 0.15, 0.3, 0.45, 0.6, 0.7, 0.8, 0.88, 0.94, 0.98])


def clean_codes(A: np.ndarray, k: np.ndarray, rows: np.ndarray | None = None, chunk: int = CHUNK) -> np.ndarray:
    """(n, M) int16 answer codes of the items ``rows`` of ``A`` (all when None; ``k`` is per row of the
    result), codes outside ``[0, k)`` set to -1. Chunked over rows: no full-size int32 copy or mask."""
    n = len(A) if rows is None else len(rows)
    out = np.empty((n, A.shape[1]), np.int16)
    for lo in range(0, n, chunk):
        a = A[lo:lo + chunk] if rows is None else A[rows[lo:lo + chunk]]
        kk = k[lo:lo + chunk, None]
        out[lo:lo + chunk] = np.where((a >= 0) & (a < kk), a, -1)
    return out


@dataclass
class LabelData:
    """Arrays the model needs. arms: list of (Q, M_a) int answer codes (-1 unparsed); k: (Q,) option
    count (>= 2); is_yn: (Q,) yes/no items (code 0 = yes, 1 = no); gold: (Q,) stated gold code."""

    arms: list
    k: np.ndarray
    is_yn: np.ndarray
    gold: np.ndarray
    evidence: np.ndarray | None = None  # (Q,) int: 0 none, g >= 1 an evidence group with its own prior rate
    #: (Q,) int item group (a category with enough items; 0 = the rest): mc answer classes are (group,
    #: option count), so every model has its own reliability and position preference per category
    group: np.ndarray | None = None
    #: the mc class keys (group x (Kmax + 1) + option count) and Kmax to use (a subset keeps its parent's
    #: classes, so fitted parameters index the same classes)
    class_keys: tuple | None = None

    def __post_init__(self):
        if self.evidence is not None:
            self.evidence = np.asarray(self.evidence, np.int64)
        self.k = np.asarray(self.k, np.int64)
        self.is_yn = np.asarray(self.is_yn, bool)
        self.gold = np.asarray(self.gold, np.int64)
        self.kmax = int(self.k.max()) if len(self.k) else 2
        grp = np.zeros(len(self.k), np.int64) if self.group is None else np.asarray(self.group, np.int64)
        self.group = None if self.group is None else grp
        if self.class_keys is not None:
            keys, self.kmax = self.class_keys
            key = grp * (self.kmax + 1) + self.k
        else:
            key = grp * (self.kmax + 1) + self.k
            keys = np.unique(key[~self.is_yn])
        self.class_keys = (keys, self.kmax)
        self.k_values = keys % (self.kmax + 1)       # option count of each mc class
        self.cls_groups = keys // (self.kmax + 1)    # group of each mc class
        self.cls_mc = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))  # class of mc items
        self.n_cls = len(keys) + 2                   # + yes-truth, no-truth
        # codes outside the item's options count as unparsed
        self.arms = [clean_codes(A, self.k) for A in self.arms]
        self.counts = np.zeros((len(self.k), self.kmax), np.int32)
        for A in self.arms:
            for t in range(self.kmax):
                self.counts[:, t] += (A == t).sum(axis=1)
        self.dcounts = self.counts  # the answers the shared distractor term sees (set_distractor_counts)
        self._dkey = None
        self._layouts: dict[int, list] = {}  # arm index -> its kept answer layout (_arm_layout)

    def subset(self, idx: np.ndarray) -> LabelData:
        return LabelData([A[idx] for A in self.arms], self.k[idx], self.is_yn[idx], self.gold[idx],
                         None if self.evidence is None else self.evidence[idx],
                         None if self.group is None else self.group[idx], self.class_keys)

    def cls(self, t: int) -> np.ndarray:
        """Answer class of every item if its truth were ``t``."""
        return np.where(self.is_yn, len(self.k_values) + min(t, 1), self.cls_mc)


@dataclass
class LabelParams:
    ability: list          # per arm (M_a, n_cls)
    sigma: list            # per arm float
    alpha: float = 1e4
    eps: float = 0.01
    history: list = field(default_factory=list)
    pref: list = field(default_factory=list)  # per arm (M_a, Kmax) option-position preference when wrong
    pi_attractor: float = 0.5 # share of items whose wrong answers follow the attractor model (else Dirichlet)
    share_w: np.ndarray | None = None  # attractor model: weights of SHARE_GRID
    eps_evidence: np.ndarray | None = None  # wrong-gold rate per evidence group 1, 2, ... (LabelData.evidence)

    def as_dict(self, models: list[list[str]] | None = None) -> dict:
        out = {"sigma": [float(s) for s in self.sigma], "alpha": float(self.alpha), "eps": float(self.eps),
               "attractor_items_share": float(self.pi_attractor) if self.share_w is not None else 0.0,
               "max_position_preference": [None if p is None else float(p.max()) for p in self.pref],
               "n_biased_model_classes": [0 if p is None or p.ndim != 3 else int((p.sum(axis=2) > 0).sum())
                                          for p in self.pref]}
        if self.share_w is not None:
            out["attractor_share_mean"] = float(SHARE_GRID @ self.share_w)
        return out


def solve_ability(acc: np.ndarray, sigma) -> np.ndarray:
    """a with E_u[expit(a - sigma z)] = acc (Newton, vectorised; ``sigma`` broadcasts against ``acc``): at most
    8 steps, fewer once every residual is below 1e-13 (Newton converges quadratically: 4 or 5 from the start)."""
    acc = np.clip(acc, 1e-4, 1 - 1e-4)
    sigma = np.asarray(sigma, np.float64)
    a = np.log(acc / (1 - acc)) * np.sqrt(1 + 0.35 * sigma ** 2)
    w = np.exp(LOGW)
    su = sigma[..., None] * NODES
    for _ in range(8):
        p = expit(a[..., None] - su)
        g = p @ w - acc
        if np.abs(g).max(initial=0.0) < 1e-13:
            break
        d = (p * (1 - p)) @ w
        a = a - g / np.maximum(d, 1e-9)
    return a


def _soft_counts(A: np.ndarray, data: LabelData, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, n_cls) expected correct answers and parsed answers per class under the truth posterior."""
    M = A.shape[1]
    corr = np.zeros((M, data.n_cls))
    tri = np.zeros((M, data.n_cls))
    P = A >= 0
    n_cls = data.n_cls
    mi = np.arange(M)[None, :]
    for t in range(data.kmax):
        w = post[:, t]
        if not (w > 0).any():
            continue
        # per (class, model) sums of w over the items (bincount: cost O(n M), whatever the number of classes)
        idx = (data.cls(t)[:, None] * M + mi).ravel()
        corr += np.bincount(idx, weights=((A == t) * w[:, None]).ravel(), minlength=n_cls * M).reshape(n_cls, M).T
        tri += np.bincount(idx, weights=(P * w[:, None]).ravel(), minlength=n_cls * M).reshape(n_cls, M).T
    return corr, tri


def _floor(data: LabelData) -> np.ndarray:
    """(n_cls,) chance of a correct guess per answer class (1/K for mc, 1/2 for yes/no)."""
    if not GUESSING:
        return np.zeros(data.n_cls)
    return np.concatenate([1.0 / data.k_values, [0.5, 0.5]]) if len(data.k_values) else np.array([0.5, 0.5])


def _knowledge_rate(acc: np.ndarray, data: LabelData, gbar: np.ndarray | None = None) -> np.ndarray:
    """Accuracy per (model, class) to the rate of knowing: acc = rho + (1 - rho) g, with ``g`` the chance
    that a guess hits the truth (``gbar``: (M, n_cls) from the model's position preference; else 1/K when
    :data:`GUESSING`, else 0)."""
    g = _floor(data)[None, :] if gbar is None else gbar
    return np.clip((acc - g) / np.maximum(1 - g, 1e-6), 1e-3, 1 - 1e-3)


#: a (model, class) gets its own guess distribution over option positions when its answers' position
#: distribution departs from the unbiased model's (chi-square, df K - 1) at this level
BIAS_ALPHA = 1e-3
BIAS_MIN_ANSWERS = 20


def fit_guess(A: np.ndarray, data: LabelData, post: np.ndarray, acc: np.ndarray
              ) -> tuple[np.ndarray | None, np.ndarray]:
    """Per-model response bias over option positions (MACE's spamming distribution, per answer class).

    For model m in mc class c, with ``P(j)`` the share of truths at position j (posterior), ``f(j)`` the
    share of its answers there and ``acc`` its accuracy: a knowledge-or-guess model gives
    ``f(j) = rho P(j) + (1 - rho) g(j)`` and ``acc = rho + (1 - rho) sum_j P(j) g(j)``, so
    ``rho = (acc - sum_j P(j) f(j)) / (1 - sum_j P(j)^2)`` and ``g = (f - rho P) / (1 - rho)`` (moments).
    The guess is used only where the data supports a bias: the answer counts reject the unbiased model
    (a wrong answer uniform over the wrong options, ``f(j) = acc P(j) + (1 - acc)(1 - P(j)) / (K - 1)``) by a
    chi-square test at :data:`BIAS_ALPHA` with at least :data:`BIAS_MIN_ANSWERS` answers. Elsewhere g = 0
    (the reliability model without guessing). Returns (pref (M, n_cls, Kmax) or None when no class is
    biased, gbar (M, n_cls) = the chance a guess hits the truth)."""
    from .core import chi2_sf

    M = A.shape[1]
    pref = np.zeros((M, data.n_cls, data.kmax))
    gbar = np.zeros((M, data.n_cls))
    any_bias = False
    for cv, kv in enumerate(data.k_values):
        sel = np.flatnonzero((data.cls_mc == cv) & ~data.is_yn)
        kv = int(kv)
        if len(sel) < BIAS_MIN_ANSWERS or kv < 2:
            continue
        As = A[sel]
        n = np.stack([(As == j).sum(axis=0) for j in range(kv)], axis=1).astype(np.float64)  # (M, kv)
        tot = n.sum(axis=1)
        P = post[sel, :kv].mean(axis=0)
        P = P / max(P.sum(), 1e-12)
        f = n / np.maximum(tot, 1)[:, None]
        a = acc[:, cv][:, None]
        e0 = a * P[None, :] + (1 - a) * (1 - P[None, :]) / (kv - 1)
        chi = ((n - tot[:, None] * e0) ** 2 / np.maximum(tot[:, None] * e0, 1e-9)).sum(axis=1)
        biased = (tot >= BIAS_MIN_ANSWERS) & (np.asarray(chi2_sf(chi, kv - 1)) < BIAS_ALPHA)
        if not biased.any():
            continue
        any_bias = True
        S = float((P ** 2).sum())
        rho = np.clip((acc[:, cv] - f @ P) / max(1 - S, 1e-6), 0.0, 0.98)
        g = (f - rho[:, None] * P[None, :]) / (1 - rho[:, None])
        g = np.maximum(g, 0.05 / kv)
        g = g / g.sum(axis=1, keepdims=True)
        pref[biased, cv, :kv] = g[biased]
        gbar[biased, cv] = (g @ P)[biased]
    return (pref if any_bias else None), gbar


def _fit_sigma(A: np.ndarray, data: LabelData, truth: np.ndarray, acc: np.ndarray) -> tuple[float, np.ndarray]:
    """Match the spread of per-item correct counts (vs ``truth``) to the random-effect model
    (``acc``: rate of knowing per model and class; a correct answer is knowing or a lucky guess)."""
    floor = _floor(data)
    P = (A >= 0).astype(np.float32)
    f = (A == truth[:, None]).sum(axis=1).astype(np.float64)
    c = np.where(data.is_yn, len(data.k_values) + np.minimum(truth, 1), data.cls_mc)
    w = np.exp(LOGW)
    G = len(_SIGMA_GRID)
    abil = solve_ability(np.broadcast_to(acc, (G,) + acc.shape), _SIGMA_GRID[:, None, None])  # (G, M, n_cls)
    resid = np.zeros(G)
    var = np.zeros(G)
    for cv in np.unique(c):
        sel = c == cv
        p = floor[cv] + (1 - floor[cv]) * expit(abil[:, :, cv][:, :, None] - _SIGMA_GRID[:, None, None] * NODES)
        M = p.shape[1]
        n = int(sel.sum())
        pm = p.transpose(1, 0, 2).reshape(M, -1).astype(np.float32)
        vm = (p * (1 - p)).transpose(1, 0, 2).reshape(M, -1).astype(np.float32)
        S = (P[sel] @ pm).reshape(n, G, -1).transpose(1, 0, 2)                   # expected correct given u
        V = (P[sel] @ vm).reshape(n, G, -1).transpose(1, 0, 2)
        e = S @ w                                                                  # (G, n)
        resid += ((f[sel][None, :] - e) ** 2).sum(axis=1)
        var += (V @ w + (S * S) @ w - e * e).sum(axis=1)
    gap = resid - var
    # gap decreases with sigma (more variance explained); take the first crossing
    if gap[0] <= 0:
        return 0.0, abil[0]
    neg = np.flatnonzero(gap <= 0)
    if not len(neg):
        return float(_SIGMA_GRID[-1]), abil[-1]
    j = int(neg[0])
    s = _SIGMA_GRID[j - 1] + (_SIGMA_GRID[j] - _SIGMA_GRID[j - 1]) * gap[j - 1] / (gap[j - 1] - gap[j])
    return float(s), solve_ability(acc, s)


def _fit_alpha(data: LabelData, truth: np.ndarray) -> float:
    """Dirichlet concentration from the coincidence rate of wrong answers (mc items with K >= 3)."""
    n = data.dcounts.astype(np.float64).copy()
    n[np.arange(len(truth)), truth] = 0
    d = (data.k - 1).astype(np.float64)
    W = n.sum(axis=1)
    ok = (data.k >= 3) & ~data.is_yn & (W >= 2)
    if ok.sum() < 5:
        return 1e4
    pairs = (W * (W - 1))[ok]
    coin = (n * (n - 1)).sum(axis=1)[ok]
    d = d[ok]

    def excess(al):
        return (pairs * (al + 1) / (d * al + 1)).sum() - coin.sum()

    if excess(1e4) >= 0:
        return 1e4
    lo, hi = np.log(0.02), np.log(1e4)
    if excess(np.exp(lo)) <= 0:
        return 0.02
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(np.exp(mid)) > 0 else (lo, mid)
    return float(np.exp((lo + hi) / 2))


def _fit_pref(A: np.ndarray, data: LabelData, truth: np.ndarray) -> np.ndarray:
    """(M, Kmax) each model's preference for option positions when wrong (rate per available slot)."""
    K = data.kmax
    wrong = (A >= 0) & (A != truth[:, None])
    avail_item = (np.arange(K)[None, :] < data.k[:, None]) & (np.arange(K)[None, :] != truth[:, None])  # (Q, K)
    chosen = np.stack([((A == j) & wrong).sum(axis=0) for j in range(K)], axis=1).astype(np.float64)  # (M, K)
    avail = wrong.T.astype(np.float64) @ avail_item.astype(np.float64)                                # (M, K)
    rate = (chosen + 1.0) / (avail / np.maximum(data.k.mean() - 1, 1) + 1.0)
    return rate / rate.sum(axis=1, keepdims=True)


def _log_dm(data: LabelData, alpha: float) -> np.ndarray:
    """(Q, Kmax) log Dirichlet-multinomial probability of the wrong answers if the truth were t."""
    # the counts are small integers: each gammaln is taken once per value it is needed at (the same
    # floating-point operations as item by item, so the same numbers) and gathered
    n = data.dcounts
    km1 = data.k - 1
    valid = np.arange(data.kmax)[None, :] < data.k[:, None]
    g = np.where(valid, (gammaln(alpha + np.arange(n.max(initial=0) + 1, dtype=np.float64)) - gammaln(alpha))[n], 0.0)
    W = n.sum(axis=1)[:, None] - n
    ds = np.arange(km1.max(initial=0) + 1, dtype=np.float64)[:, None]
    lw = gammaln(ds * alpha + np.arange(W.max(initial=0) + 1, dtype=np.float64)[None, :])    # (d, W)
    out = gammaln(ds[:, 0] * alpha)[km1][:, None] - lw[km1[:, None], W] + g.sum(axis=1)[:, None] - g
    return np.where(valid, out, -np.inf)

def _attractor_terms(counts: np.ndarray, k: np.ndarray, kmax: int) -> np.ndarray:
    """(q, Kmax, S) log probability of the wrong answers if the truth were t and the item's attractor share
    were ``SHARE_GRID[s]`` (the attractor, uniform over the wrong options, summed out).

    With ``W`` wrong answers and ``n_a`` of them on option a: ``W log((1-s)/(K-1)) + log mean_{a != t}
    (1 + s (K-1) / (1-s))^{n_a}``. Two-option items (and at most one wrong answer) carry no information."""
    s = SHARE_GRID[None, :]
    km1 = np.maximum(k - 1, 1).astype(np.float64)[:, None]
    c0 = np.log1p(-s) - np.log(km1)                                   # (q, S)
    c1 = np.log1p(s * km1 / (1 - s))
    n = counts.astype(np.float64)
    valid = np.arange(kmax)[None, :] < k[:, None]
    X = np.where(valid[:, :, None], n[:, :, None] * c1[:, None, :], -np.inf)  # (q, K, S)
    tot = n.sum(axis=1)
    # log sum_{a != t} exp(X_a) for every t from one pass: scaled by the largest term m1 (at a1), the sum
    # without t is the whole sum minus t's term (>= 1: a1's term stays); for t = a1, by the second largest
    a1 = X.argmax(axis=1)                                                    # (q, S)
    m1 = np.take_along_axis(X, a1[:, None, :], axis=1)[:, 0, :]
    X2 = X.copy()
    np.put_along_axis(X2, a1[:, None, :], -np.inf, axis=1)
    m2 = X2.max(axis=1)
    m1f = np.where(np.isfinite(m1), m1, 0.0)
    m2f = np.where(np.isfinite(m2), m2, 0.0)
    E1 = np.exp(X - m1f[:, None, :])
    S1 = E1.sum(axis=1)                                                      # (q, S)
    S2 = np.exp(X2 - m2f[:, None, :]).sum(axis=1)
    is_top = np.arange(kmax)[None, :, None] == a1[:, None, :]                # (q, K, S)
    with np.errstate(divide="ignore"):
        lme = np.where(is_top, (np.log(S2) + m2f)[:, None, :],
                       np.log(np.maximum(S1[:, None, :] - E1, 0.0)) + m1f[:, None, :]) - np.log(km1)[:, :, None]
    lt = (tot[:, None] - n)[:, :, None] * c0[:, None, :] + lme
    return np.where(valid[:, :, None], lt, -np.inf)


def _count_patterns(counts: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (option count, answer counts) rows of ``counts`` (q, Kmax) and ``k`` (q,): (inverse (q,),
    unique counts (u, Kmax), unique k (u,)). Terms that depend on an item only through its counts are computed
    once per pattern (far fewer than items: counts are small integers)."""
    key = np.concatenate([np.asarray(k, np.int64)[:, None], counts.astype(np.int64)], axis=1)
    lo = key.min(axis=0, initial=0)
    width = np.maximum(key.max(axis=0, initial=0) - lo + 1, 1)
    if np.log2(width.astype(np.float64)).sum() < 62:  # one int64 per row (mixed radix)
        mult = np.concatenate([[1], np.cumprod(width[:-1])]).astype(np.int64)
        packed = (key - lo) @ mult
    else:
        packed = np.ascontiguousarray(key).view(np.dtype((np.void, key.dtype.itemsize * key.shape[1])))[:, 0]
    _, first, inv = np.unique(packed, return_index=True, return_inverse=True)
    return inv.reshape(-1), counts[first], np.asarray(k)[first]


def _attractor_exp_patterns(counts: np.ndarray, k: np.ndarray, kmax: int
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_attractor_terms` per distinct count pattern (:func:`_count_patterns`) as (E, m, inverse):
    ``E = exp(terms - m)`` (u, Kmax, S) with ``m`` (u, Kmax) the maximum over the grid (0 where the option
    does not exist, E then 0), so a share distribution ``w`` gives ``log(E @ w) + m``; the inverse (q,) maps
    the items to their patterns."""
    inv, cu, ku = _count_patterns(counts, k)
    E = np.empty((len(ku), kmax, len(SHARE_GRID)))
    m = np.empty((len(ku), kmax))
    for lo in range(0, len(ku), CHUNK):  # chunked: the terms' temporaries stay small
        T = _attractor_terms(cu[lo:lo + CHUNK], ku[lo:lo + CHUNK], kmax)
        mm = T.max(axis=2)
        m[lo:lo + CHUNK] = mm = np.where(np.isfinite(mm), mm, 0.0)
        E[lo:lo + CHUNK] = np.exp(T - mm[:, :, None])
    return E, m, inv


def _attractor_patterns(data: LabelData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_attractor_exp_patterns` of ``data``'s distractor counts, kept on ``data`` until the counts
    change (:func:`set_distractor_counts`)."""
    pat = getattr(data, "_pat_cache", None)
    if pat is None:
        pat = data._pat_cache = _attractor_exp_patterns(data.dcounts, data.k, data.kmax)
    return pat


def _log_attractor(data: LabelData, share_w: np.ndarray) -> np.ndarray:
    """(Q, Kmax) log probability of the wrong answers if the truth were t under the attractor model with
    share weights ``share_w`` (per distinct count pattern, then gathered)."""
    E, m, inv = _attractor_patterns(data)
    with np.errstate(divide="ignore"):
        return (np.log(E @ share_w) + m)[inv]


def _fit_share_weights(data: LabelData, post: np.ndarray, share_w: np.ndarray | None, n_steps: int = 15
                       ) -> np.ndarray:
    """EM for the attractor-share distribution on ``SHARE_GRID`` over the items that carry information (mc,
    K >= 3, at least two answers); ``post`` (Q, Kmax) weighs each (item, truth) (posterior of the truth, times
    that of the attractor kind in the mixture)."""
    S = len(SHARE_GRID)
    w = np.full(S, 1.0 / S) if share_w is None else share_w.copy()
    sel = _informative(data)
    if sel.sum() < 5:
        return w
    # an item's responsibilities over the grid depend on it only through its count pattern: the EM runs on
    # the patterns, each weighted by the summed posterior of its informative items
    E, _, inv = _attractor_patterns(data)
    P = post[sel]
    Pu = np.stack([np.bincount(inv[sel], weights=P[:, t], minlength=len(E)) for t in range(data.kmax)], axis=1)
    used = Pu.any(axis=1)
    E, Pu = E[used], Pu[used]
    tot = max(float(P.sum()), 1e-300)
    for _ in range(n_steps):
        z = E * w
        r = z / np.maximum(z.sum(axis=2, keepdims=True), 1e-300)
        w = np.maximum(np.einsum("uk,uks->s", Pu, r) / tot, 1e-8)
        w = w / w.sum()
    return w


def _log_distractor(data: LabelData, params: LabelParams) -> np.ndarray:
    """(Q, Kmax) wrong-answer term: the attractor / Dirichlet mixture (:func:`_fit_distractors`)."""
    dm = _log_dm(data, params.alpha)
    if params.share_w is None or params.pi_attractor <= 0:
        return dm
    return np.logaddexp(np.log(params.pi_attractor) + _log_attractor(data, params.share_w),
                        np.log1p(-params.pi_attractor) + dm)


def marginal_loglik(data: LabelData, ll: np.ndarray, eps: float, prior: np.ndarray | None = None) -> float:
    """log P(answers, stated gold) with the truth summed out (``ll``: (Q, Kmax) log P(answers | truth));
    ``prior``: ``_log_prior(data, eps)`` when the caller has it (a likelihood search at a fixed rate)."""
    x = ll + (_log_prior(data, eps) if prior is None else prior)
    m = x.max(axis=1, keepdims=True)
    return float((np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]).sum())


def _log_prior(data: LabelData, eps: float) -> np.ndarray:
    """(Q, Kmax) log P(truth = t | stated gold): 1 - eps on the gold, eps spread over the other options."""
    Q = len(data.k)
    valid = np.arange(data.kmax)[None, :] < data.k[:, None]
    with np.errstate(divide="ignore"):  # eps = 0: the null fit
        lp = np.where(valid, np.log(eps / np.maximum(data.k - 1, 1))[:, None], -np.inf)
    lp[np.arange(Q), data.gold] = np.log1p(-eps)
    return lp


def _class_groups(data: LabelData, kk: np.ndarray, is_yn: np.ndarray, cls_mc: np.ndarray):
    """(class, item selector, candidate answers) groups: mc items by option count (every candidate shares
    the class), yes/no items by candidate (the class is the candidate itself)."""
    n_k = len(data.k_values)
    for cv in range(n_k):
        sel = np.flatnonzero((cls_mc == cv) & ~is_yn)
        if len(sel):
            yield cv, sel, range(int(data.k_values[cv]))
    sel = np.flatnonzero(is_yn)
    if len(sel):
        for t in (0, 1):
            yield n_k + t, sel, (t,)


def set_distractor_counts(data: LabelData, prefs: list) -> None:
    """Leave out of the shared distractor term the answers of (model, class) pairs with a guess distribution
    (:func:`fit_guess`): their wrong answers follow their own position preference (MACE), not the item's
    distractors. Resets the attractor cache when the counts change."""
    key = tuple(None if p is None else (p.shape, float(p.sum()), float((p * np.arange(p.size).reshape(p.shape)).sum()))
                for p in prefs)
    if key == data._dkey:
        return
    data._dkey = key
    data._pat_cache = None
    if all(p is None or p.ndim != 3 for p in prefs):
        data.dcounts = data.counts
        return
    dc = data.counts.copy()
    cls = np.where(data.is_yn, data.n_cls - 1, data.cls_mc)
    for A, p in zip(data.arms, prefs):
        if p is None or p.ndim != 3:
            continue
        biased = p.sum(axis=2) > 0                                   # (M, n_cls)
        for lo in range(0, len(data.k), CHUNK):
            mask = biased[:, cls[lo:lo + CHUNK]].T & ~data.is_yn[lo:lo + CHUNK, None]
            a = A[lo:lo + CHUNK]
            for t in range(data.kmax):
                dc[lo:lo + CHUNK, t] -= ((a == t) & mask).sum(axis=1)
    data.dcounts = dc


def _guess(pref: np.ndarray | None, M: int, kv: int, t: int, cv: int = 0) -> np.ndarray:
    """(M,) probability that a model that does not know the answer guesses position t (of kv options):
    ``pref`` (M, n_cls, Kmax) per answer class (:func:`fit_guess`; 0 where a model has no guess), or the
    older (M, Kmax) per model."""
    if pref is None:
        return np.full(M, 1.0 / kv if GUESSING else 0.0)
    if pref.ndim == 3:
        return np.clip(pref[:, cv, t], 0.0, 1 - 1e-9)
    return pref[:, t] / pref[:, :kv].sum(axis=1)


def _lse_rows(x: np.ndarray) -> np.ndarray:
    """``scipy.special.logsumexp(x, axis=1)`` for a finite real 2-D ``x``, bit for bit (the same steps:
    the maxima are split out, ``log1p(sum exp(x - max) / n_max) + log(n_max) + max``) without scipy's
    array-API dispatch, which dominated the cost on the many small (n, 15) quadrature blocks."""
    amax = x.max(axis=1, keepdims=True)
    mask = x == amax
    m = mask.sum(axis=1, keepdims=True, dtype=x.dtype)
    s = np.exp(np.where(mask, -np.inf, x) - amax).sum(axis=1, keepdims=True, dtype=x.dtype)
    s = np.where(s == 0, s, s / m)
    return (np.log1p(s) + np.log(m) + amax)[:, 0]


def _arm_terms(data: LabelData, M: int, rho: np.ndarray, pref: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray | None]:
    """Per (class, candidate t) answer terms of :func:`_arm_loglik`, every class and candidate at once:
    ``d`` (n_cls, Kmax, M, nq) float32, the log-likelihood added by a model answering t (over what a wrong
    answer adds), and ``lg`` (n_cls, Kmax, M) float32 or None, what every parsed answer adds (the older
    per-model preference only). Candidates beyond a class's option count are zero (never read)."""
    n_cls, K = data.n_cls, data.kmax
    kv = np.concatenate([np.asarray(data.k_values, np.int64), [2, 2]])[:n_cls]          # options per class
    valid = np.arange(K)[None, :] < kv[:, None]                                           # (n_cls, K)
    if pref is None:
        g = np.full((M, n_cls, K), 0.0)
        if GUESSING:
            g[:] = (1.0 / kv)[None, :, None]
    elif pref.ndim == 3:
        g = np.clip(pref, 0.0, 1 - 1e-9)
    else:  # (M, Kmax) per model, renormalised over each class's options
        cs = np.cumsum(pref, axis=1)                                                      # (M, K)
        g = pref[:, None, :] / cs[:, kv - 1][:, :, None]
    g = np.where(valid[None], g, 0.0)                                                     # (M, n_cls, K)
    r = rho[:, :, None, :]                                                                # (M, n_cls, 1, nq)
    gg = g[..., None]                                                                     # (M, n_cls, K, 1)
    if pref is not None and pref.ndim == 3:
        # MACE: a guess picks position j with g(j), wrong or right, so P(answer j | t) = (1 - rho) g(j) for
        # j != t (the factor g(j) does not depend on t: dropped) and rho + (1 - rho) g(t) for t
        lgt = np.where(gg > 0, np.log(np.maximum(gg, 1e-300)), 0.0)
        d = np.log(r + (1 - r) * gg) - np.log1p(-r) - lgt
        lg = None
    else:
        d = np.log(r + (1 - r) * gg) - np.log1p(-r) - np.log1p(-gg)
        lg = np.log1p(-g)                                                                 # (M, n_cls, K)
        lg = lg.transpose(1, 2, 0).astype(np.float32) if lg.any() else None  # log1p(-0) = 0 adds nothing
    d = np.where(valid[None, :, :, None], d, 0.0)
    return np.ascontiguousarray(d.transpose(1, 2, 0, 3).astype(np.float32)), lg


def _arm_loglik(A: np.ndarray, data: LabelData, a: np.ndarray, sigma: float, pref: np.ndarray | None = None
                ) -> np.ndarray:
    """(Q, Kmax) log-likelihood of one arm's answers if the truth were t (difficulty integrated out).

    Knowledge-or-guess: model m knows the answer with probability rho = expit(a - sigma z); otherwise it
    guesses and hits t with its own preference g = pi_m[t] (1/K when ``pref`` is None). So
    P(answer t) = rho + (1 - rho) g and P(a wrong answer) = (1 - rho)(1 - g); which wrong option is
    chosen is the shared distractor term (:func:`_log_dm`). Vectorised over each class's candidates (one
    stacked matrix product and one log-sum-exp per class and chunk)."""
    Q, M = A.shape
    out = np.full((Q, data.kmax), -np.inf)
    u = sigma * NODES
    rho = np.clip(expit(a[:, :, None] - u), 1e-9, 1 - 1e-9)        # (M, n_cls, nq)
    l1r = np.log1p(-rho).astype(np.float32)
    D, LG = _arm_terms(data, M, rho, pref)                           # parameters only: once, not per chunk
    # items along the last axis: the products and the log-sum-exp over the nodes run down contiguous rows
    DT = np.ascontiguousarray(D.transpose(0, 1, 3, 2))              # (n_cls, Kmax, nq, M)
    l1rT = np.ascontiguousarray(l1r.transpose(1, 2, 0))             # (n_cls, nq, M)
    logw = LOGW[None, :, None]
    for rows, cv, ts, PsT, X in _arm_layout(A, data):
        ll = l1rT[cv] @ PsT + np.matmul(DT[cv, ts], X)                          # (n_t, nq, n)
        if LG is not None and LG[cv, ts].any():
            ll = ll + (LG[cv, ts] @ PsT)[:, None, :]
        x = ll.astype(np.float64) + logw
        amax = x.max(axis=1)
        x -= amax[:, None, :]
        np.exp(x, out=x)
        out[rows[:, None], ts[None, :]] = (np.log(x.sum(axis=1)) + amax).T
    return out


def _arm_layout(A: np.ndarray, data: LabelData):
    """The parameter-free part of :func:`_arm_loglik` for the answers ``A`` (one of ``data.arms``): per chunk of
    :data:`CHUNK` items and answer class group (:func:`_class_groups`), (item rows, class, candidate answers,
    (M, n) float32 "parsed" indicator, (n_t, M, n) float32 "answered t" indicators). Kept on ``data`` when it
    fits :data:`LAYOUT_CACHE_BYTES` (a list), else yielded chunk by chunk (a generator: one chunk in memory)."""
    j = next((i for i, B in enumerate(data.arms) if B is A), None)
    if j is not None and j in data._layouts:
        return data._layouts[j]
    gen = _layout_groups(A, data)
    if j is None or A.size * data.kmax * 4 > LAYOUT_CACHE_BYTES:
        return gen
    data._layouts[j] = groups = list(gen)
    return groups


def _layout_groups(A: np.ndarray, data: LabelData):
    for lo in range(0, A.shape[0], CHUNK):
        Ac = A[lo:lo + CHUNK]
        kk = data.k[lo:lo + CHUNK]
        for cv, sel, cands in _class_groups(data, kk, data.is_yn[lo:lo + CHUNK], data.cls_mc[lo:lo + CHUNK]):
            AsT = np.ascontiguousarray(Ac[sel].T)                              # (M, n)
            ts = np.asarray(cands, np.int64)
            yield (lo + sel, cv, ts, (AsT >= 0).astype(np.float32),
                   (AsT[None, :, :] == ts[:, None, None]).astype(np.float32))


def log_likelihood(data: LabelData, params: LabelParams) -> np.ndarray:
    """(Q, Kmax) log-likelihood of all answers given truth t (every arm plus the distractor term)."""
    set_distractor_counts(data, params.pref)
    ll = _log_distractor(data, params)
    for j, (A, a, s) in enumerate(zip(data.arms, params.ability, params.sigma)):
        pref = params.pref[j] if j < len(params.pref) else None
        ll = ll + _arm_loglik(A, data, a, s, pref)
    return ll


def item_eps(data: LabelData, params: LabelParams) -> np.ndarray:
    """(Q,) prior probability that each item's stated gold is wrong: ``eps`` for items without evidence,
    the evidence group's rate (placeholder gold, gold text duplicated by another option) otherwise."""
    ev = params.eps_evidence
    if data.evidence is None or ev is None or not len(ev):
        return np.full(len(data.k), params.eps)
    return np.concatenate([[params.eps], ev])[data.evidence]


def posterior(data: LabelData, params: LabelParams, ll: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(Q, Kmax) posterior over the truth and the log-likelihood used."""
    ll = log_likelihood(data, params) if ll is None else ll
    z = ll + _log_prior(data, item_eps(data, params))
    z = z - logsumexp(z, axis=1, keepdims=True)
    return np.exp(z), ll


def log_odds_wrong(data: LabelData, params: LabelParams, ll: np.ndarray) -> np.ndarray:
    """(Q,) log posterior odds that the stated gold is wrong (no saturation, for ranking)."""
    Q = len(data.k)
    z = ll + _log_prior(data, item_eps(data, params))
    zg = z[np.arange(Q), data.gold]
    z[np.arange(Q), data.gold] = -np.inf
    return logsumexp(z, axis=1) - zg


def _ml_sigma(j: int, d: LabelData, acc: np.ndarray, rest: np.ndarray, eps: np.ndarray,
              bracket: tuple[float, float], sub: np.ndarray, ds: LabelData, pref: np.ndarray | None = None
              ) -> tuple[float, np.ndarray, np.ndarray]:
    """Arm ``j``'s difficulty spread maximising the marginal likelihood on the items ``sub`` (abilities
    moment-matched to ``acc`` at each trial spread; ``rest``: the other terms of the log-likelihood).
    ``ds`` = ``d.subset(sub)``. Returns (sigma, ability, the arm's log-likelihood on every item of ``d``)."""
    A, rest, eps = ds.arms[j], rest[sub], eps[sub]
    lp = _log_prior(ds, eps)

    def nll(s):
        return -marginal_loglik(ds, rest + _arm_loglik(A, ds, solve_ability(acc, s), s, pref), eps, lp)

    lo, hi = bracket
    s, best, _ = minimize_bounded(nll, lo, hi, xatol=0.05)
    for edge in (lo, hi):  # the bounded search never evaluates the ends
        if abs(s - edge) < 0.1 and nll(edge) < best:
            s = edge
    a = solve_ability(acc, s)
    return s, a, _arm_loglik(d.arms[j], d, a, s, pref)


def _informative(d: LabelData) -> np.ndarray:
    """Items whose wrong answers say something about distractors: mc with K >= 3 and two or more answers."""
    return (d.k >= 3) & ~d.is_yn & (d.dcounts.sum(axis=1) >= 2)


def _fit_distractors(d: LabelData, post: np.ndarray, arms_ll: np.ndarray, eps: np.ndarray,
                     params: LabelParams) -> tuple[float, float, np.ndarray]:
    """The wrong-answer mixture: an item is of the attractor kind with probability ``pi`` (its share
    distribution on ``SHARE_GRID`` by EM), else of the Dirichlet kind (concentration by marginal
    likelihood). Nests both (``pi`` 0 or 1). Returns (pi, alpha, share weights)."""
    inf = _informative(d)
    pi, alpha = params.pi_attractor, params.alpha
    lo_a, hi_a, lo_p, hi_p = np.log(0.02), np.log(1e4), -9.2, 6.9
    if params.share_w is None:  # first pass: the whole ranges; later: around the previous values
        al_br, pi_br = (lo_a, hi_a), (lo_p, hi_p)
    else:
        la, lp = np.log(alpha), np.log(pi / (1 - pi))
        al_br = (max(lo_a, la - 1.5), min(hi_a, la + 1.5))
        pi_br = (max(lo_p, lp - 2.0), min(hi_p, lp + 2.0))
    w = np.full(len(SHARE_GRID), 1.0 / len(SHARE_GRID)) if params.share_w is None else params.share_w
    at = _log_attractor(d, w)
    prior = _log_prior(d, eps)
    for _ in range(DISTRACTOR_ROUNDS):
        dm = _log_dm(d, alpha)
        if inf.any():  # pi by marginal likelihood with the components fixed (EM crawls: they overlap)
            def nll_pi(x, at=at, dm=dm):
                lp = -np.logaddexp(0.0, -x)
                return -marginal_loglik(d, arms_ll + np.logaddexp(lp + at, lp - x + dm), eps, prior)

            pi = float(expit(minimize_bounded(nll_pi, *pi_br, xatol=0.15)[0]))
        mix = np.logaddexp(np.log(pi) + at, np.log1p(-pi) + dm)
        ok = np.isfinite(mix)
        r_t = np.where(ok, np.exp(np.log(pi) + at - np.where(ok, mix, 0.0)), 0.0)
        w = _fit_share_weights(d, post * r_t, w)
        at = _log_attractor(d, w)

        def nll(la, pi=pi, at=at):
            m = np.logaddexp(np.log(pi) + at, np.log1p(-pi) + _log_dm(d, float(np.exp(la))))
            return -marginal_loglik(d, arms_ll + m, eps, prior)

        alpha = float(np.exp(minimize_bounded(nll, *al_br, xatol=0.1)[0]))
    return pi, alpha, w


def _fit_eps(d: LabelData, post: np.ndarray, n_groups: int) -> tuple[float, np.ndarray | None]:
    """EM update of the wrong-gold rate: the mean posterior over items without evidence, and per evidence
    group the posterior mean under the group's Beta prior (:data:`EVIDENCE_PRIOR`; few items, no 0 or 1)."""
    pw = 1.0 - post[np.arange(len(d.k)), d.gold]
    if d.evidence is None:
        return float(np.clip(pw.mean(), 1e-4, 0.5)), None
    base = d.evidence == 0
    eps = float(np.clip(pw[base].mean() if base.any() else pw.mean(), 1e-4, 0.5))
    if n_groups == 0:
        return eps, None
    a = np.array([EVIDENCE_PRIOR[min(g, len(EVIDENCE_PRIOR)) - 1][0] for g in range(1, n_groups + 1)])
    b = np.array([EVIDENCE_PRIOR[min(g, len(EVIDENCE_PRIOR)) - 1][1] for g in range(1, n_groups + 1)])
    s = np.array([pw[d.evidence == g].sum() for g in range(1, n_groups + 1)])
    n = np.array([(d.evidence == g).sum() for g in range(1, n_groups + 1)])
    return eps, np.clip((s + a) / (n + a + b), 1e-4, 1 - 1e-4)


def fit_subset(data: LabelData, fit_items: int, seed: int) -> LabelData:
    """The items the model is fitted (and the headline test computed) on: all, or a seeded random
    ``fit_items`` of them."""
    Q = len(data.k)
    if Q <= fit_items:
        return data
    return data.subset(np.sort(np.random.default_rng([seed, 5]).choice(Q, fit_items, replace=False)))


def fit_and_test(data: LabelData, *, n_iter: int = 4, fit_items: int = 20000, seed: int = 0,
                 profile: bool = False) -> tuple[LabelParams, dict]:
    """The model fitted on :func:`fit_subset` and the headline likelihood-ratio test of "no gold is
    wrong" on those items, with the nuisance parameters of the free fit (plug-in). ``profile``: refit them
    under the null (``eps = 0``) too; measured too conservative (false-positive rate 0.010 and 0.030 at
    alpha 0.05 on 300 defect-free simulations of the two null regimes of ``benchmarks/label_errors.py``,
    against 0.037 and 0.067 for the plug-in), because the free EM fit stops short of the joint maximum."""
    d = fit_subset(data, fit_items, seed)
    p1 = fit(d, n_iter=n_iter, seed=seed)
    ll1 = log_likelihood(d, p1)
    if not profile:
        return p1, lr_test(d, ll1)
    return p1, lr_test(d, ll1, log_likelihood(d, fit(d, n_iter=n_iter, seed=seed, null=True)))


def fit(data: LabelData, *, n_iter: int = 4, fit_items: int = 20000, seed: int = 0,
        eps0: float = 0.02, position_preferences: bool = False, null: bool = False,
        position_bias: bool = True) -> LabelParams:
    """EM on a subsample of at most ``fit_items`` items: abilities moment-matched to each model's (soft)
    accuracy per class; each arm's difficulty spread, the Dirichlet concentration and the wrong-gold rate
    by marginal likelihood; the attractor/Dirichlet mixture of wrong answers (:func:`_fit_distractors`).
    ``null``: the wrong-gold rate fixed at 0 (the headline test's null fit). ``position_bias``: each
    model's guess distribution over option positions per answer class where the data supports one
    (:func:`fit_guess`), refitted every iteration."""
    rng = np.random.default_rng(seed)
    d = fit_subset(data, fit_items, seed)
    q = len(d.k)
    post = np.zeros((q, d.kmax))
    post[np.arange(q), d.gold] = 1.0
    params = LabelParams(ability=[], sigma=[], eps=0.0 if null else eps0)
    if data.evidence is not None and data.evidence.max(initial=0) > 0 and not null:
        params.eps_evidence = np.full(int(data.evidence.max()), 0.5)
    D = _log_dm(d, _fit_alpha(d, d.gold))  # first pass: Dirichlet only (moment-matched)
    arm_ll, sig, abil = [], [], []
    for A in d.arms:  # start: moment-matched spreads against the stated gold
        corr, tri = _soft_counts(A, d, post)
        acc = _knowledge_rate((corr + 0.5) / (tri + 1.0), d)
        s, a = _fit_sigma(A, d, d.gold, acc)
        sig.append(s)
        abil.append(a)
        arm_ll.append(_arm_loglik(A, d, a, s))
    params.alpha = _fit_alpha(d, d.gold)
    sub = np.sort(rng.permutation(q)[:HYPER_FIT_ITEMS])  # likelihood searches (spreads, distractors): a subsample
    ds = d if len(sub) == q else d.subset(sub)
    prefs = [None] * len(d.arms)
    for it in range(n_iter):
        eps_i = item_eps(d, params)
        for j, A in enumerate(d.arms):
            corr, tri = _soft_counts(A, d, post)
            raw = (corr + 0.5) / (tri + 1.0)
            gbar = None
            if position_bias:
                prefs[j], gbar = fit_guess(A, d, post, raw)
            acc = _knowledge_rate(raw, d, gbar if prefs[j] is not None else None)
            pr = prefs[j]
            if A.shape[1] < 2:  # one model: its item difficulty is not identified (any sigma fits alike)
                sig[j], abil[j] = 0.0, solve_ability(acc, 0.0)
                arm_ll[j] = _arm_loglik(A, d, abil[j], 0.0, pr)
            elif it == 0 or it == n_iter - 1:  # first with the stated gold, last at the fitted rate
                rest = D + sum(x for i, x in enumerate(arm_ll) if i != j)
                # first: below the moment estimate against the stated gold (wrong golds inflate it)
                br = ((max(0.0, sig[j] - 1.2), min(SIGMA_MAX, sig[j] + 0.3)) if it == 0
                      else (max(0.0, sig[j] - 0.2), min(SIGMA_MAX, sig[j] + 0.2)))
                sig[j], abil[j], arm_ll[j] = _ml_sigma(j, d, acc, rest, eps_i, br, sub, ds, pr)
            else:
                abil[j] = solve_ability(acc, sig[j])
                arm_ll[j] = _arm_loglik(A, d, abil[j], sig[j], pr)
        set_distractor_counts(d, prefs)
        if ds is not d:
            set_distractor_counts(ds, prefs)
        pi, alpha, share_w = _fit_distractors(ds, post[sub], sum(arm_ll)[sub], eps_i[sub], params)
        params = LabelParams(ability=list(abil), sigma=list(sig), alpha=alpha, eps=params.eps,
                             history=params.history, pref=list(prefs), pi_attractor=pi, share_w=share_w,
                             eps_evidence=params.eps_evidence)
        D = _log_distractor(d, params)
        post, _ = posterior(d, params, sum(arm_ll) + D)
        if not null:
            params.eps, params.eps_evidence = _fit_eps(d, post, 0 if params.eps_evidence is None
                                                       else len(params.eps_evidence))
        params.history.append({"iter": it, "sigma": [float(x) for x in sig], "alpha": alpha, "eps": params.eps,
                               "attractor_items_share": pi})
    if position_preferences:
        params.pref = [_fit_pref(A, d, post.argmax(axis=1)) for A in d.arms]
    return params


def lr_test(data: LabelData, ll: np.ndarray, ll_null: np.ndarray | None = None) -> dict:
    """Likelihood-ratio test of eps = 0 (no wrong gold). ``ll``: the log-likelihood under the free fit;
    ``ll_null``: under the fit with eps = 0 (nuisance parameters re-estimated under the null; without
    it they are those of the free fit). Null law: the boundary chi-bar-square."""
    from .core import chi2_sf

    Q = len(data.k)
    valid = np.arange(data.kmax)[None, :] < data.k[:, None]
    other = np.where(valid, ll, -np.inf)
    other[np.arange(Q), data.gold] = -np.inf
    lg = ll[np.arange(Q), data.gold]
    lr = logsumexp(other, axis=1) - np.log(np.maximum(data.k - 1, 1)) - lg
    lr = np.clip(lr, -50, 700)
    er = np.exp(-lr)

    def deriv(e):
        return float(((1 - er) / (e + (1 - e) * er)).sum())

    def gain(e):
        return float(np.logaddexp(np.log1p(-e), np.log(e) + lr).sum())

    if deriv(1e-12) <= 0:
        e_hat, g = 0.0, 0.0
    else:
        lo, hi = 1e-12, 1 - 1e-9
        if deriv(hi) > 0:
            lo = hi
        for _ in range(80):
            mid = np.sqrt(lo * hi)
            lo, hi = (mid, hi) if deriv(mid) > 0 else (lo, mid)
        e_hat = float(np.sqrt(lo * hi))
        g = max(gain(e_hat), 0.0)
    if ll_null is not None:  # profile: free maximum against the null fit's (never below it)
        g = max(g + float(lg.sum() - ll_null[np.arange(Q), data.gold].sum()), 0.0)
    stat = 2 * g
    p = 1.0 if stat <= 0 else float(0.5 * chi2_sf(stat, 1))
    return {"statistic": stat, "p_value": p, "eps_hat": e_hat, "n_items_test": int(Q),
            "null": "chi-bar-square (0.5 chi2_0 + 0.5 chi2_1)" + (
                ", nuisance parameters refitted under the null" if ll_null is not None else "")}


RATE_BINS_PER_UNIT = 50  # bins per unit of log r in wrong_gold_rate (r within 1% of its value)


def wrong_gold_rate(ll: np.ndarray, k: np.ndarray, gold: np.ndarray, level: float = 0.95) -> dict:
    """Maximum-likelihood share of ``data``'s items whose stated gold is wrong, with a profile-likelihood
    interval: with ``r_i`` the mean likelihood of the item's non-gold answers over its gold's under the fitted
    parameters (``ll``: (Q, Kmax) log P(answers | truth); ``k``, ``gold``: (Q,) option count, stated gold), ``L(e) = sum_i log(1 - e + e r_i)`` (the headline
    test's statistic, :func:`lr_test`); the interval is ``{e: 2 (L(e_hat) - L(e)) <= chi2_1(level)}``. The
    nuisance parameters are held at the fit (plug-in), so the interval is conditional on the fitted model."""
    return rate_from_log_ratio(log_ratio_wrong(ll, k, gold), level)


def log_ratio_wrong(ll: np.ndarray, k: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """(Q,) ``log r_i``: the mean likelihood of item ``i``'s answers under its non-gold truths over that under its
    stated gold (``ll``: (Q, Kmax) log P(answers | truth); ``k``, ``gold``: (Q,)), clipped to [-50, 50]. The
    posterior that the gold is wrong is ``eps r / (1 - eps + eps r)``."""
    Q = len(k)
    valid = np.arange(ll.shape[1])[None, :] < np.asarray(k)[:, None]
    other = np.where(valid, ll, -np.inf)
    other[np.arange(Q), gold] = -np.inf
    return np.clip(logsumexp(other, axis=1) - np.log(np.maximum(np.asarray(k) - 1, 1)) - ll[np.arange(Q), gold],
                   -50, 50)


def rate_from_log_ratio(lr: np.ndarray, level: float = 0.95) -> dict:
    """:func:`wrong_gold_rate` from the items' ``log r`` (:func:`log_ratio_wrong`)."""
    from .core import chi2_ppf

    Q = len(lr)
    if not Q:
        return {"estimate": None, "ci": [None, None], "n_items": 0}
    # L depends on the items through log r only: binned at 1/RATE_BINS_PER_UNIT (cost O(Q) once, then O(bins)
    # per evaluation, whatever the number of items)
    b = np.rint(lr * RATE_BINS_PER_UNIT).astype(np.int64) + 50 * RATE_BINS_PER_UNIT
    w = np.bincount(b, minlength=100 * RATE_BINS_PER_UNIT + 1).astype(np.float64)
    nz = np.flatnonzero(w)
    r, w = np.exp((nz - 50 * RATE_BINS_PER_UNIT) / RATE_BINS_PER_UNIT), w[nz]

    def L(e):  # a rate (a float) or an array of rates (their values in one product)
        return np.log1p(np.multiply.outer(e, r - 1)) @ w

    grid = np.concatenate([[0.0], np.geomspace(1e-5, 0.999, 400)])
    vals = L(grid)
    j = int(vals.argmax())
    lo_b, hi_b = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
    e_hat = float(minimize_bounded(lambda e: -L(e), lo_b, hi_b, xatol=1e-6)[0]) if hi_b > lo_b else float(grid[j])
    if L(grid[j]) > L(e_hat):
        e_hat = float(grid[j])
    top = L(e_hat)
    cut = top - 0.5 * float(chi2_ppf(level, 1))

    def edge(a, b):  # L(a) >= cut > L(b): bisection on the crossing
        for _ in range(60):
            m = 0.5 * (a + b)
            a, b = (m, b) if L(m) >= cut else (a, m)
        return 0.5 * (a + b)

    lo = 0.0 if L(0.0) >= cut else edge(e_hat, 0.0)
    hi = 0.999 if L(0.999) >= cut else edge(e_hat, 0.999)
    return {"estimate": e_hat, "ci": [float(lo), float(hi)], "level": level, "n_items": int(Q),
            "expected_count": float(e_hat * Q)}


def simulate(data: LabelData, params: LabelParams, rng: np.random.Generator, *, error_rate: float = 0.0
             ) -> tuple[LabelData, np.ndarray]:
    """Answers drawn from the fitted model on ``data``'s items and answer patterns; ``error_rate`` of the
    stated golds changed uniformly to another option. Returns (data, planted mask)."""
    Q = len(data.k)
    k = data.k
    truth = np.where(data.is_yn, data.gold, (rng.random(Q) * k).astype(np.int64))
    n_err = int(round(error_rate * Q))
    planted = np.zeros(Q, bool)
    if n_err:
        planted[rng.choice(Q, n_err, replace=False)] = True
    gold = np.where(planted, (truth + 1 + (rng.random(Q) * (k - 1)).astype(np.int64)) % k, truth)
    slots = np.arange(data.kmax)[None, :] < (k - 1)[:, None]   # the K - 1 wrong options, as offsets
    # Dirichlet kind: distractor probabilities ~ Dirichlet(alpha) over the K-1 wrong options (gamma draws)
    g = np.where(slots, rng.gamma(min(params.alpha, 1e3), size=(Q, data.kmax)), 0.0)
    q = g / np.maximum(g.sum(axis=1, keepdims=True), 1e-300)
    if params.share_w is not None:  # attractor kind, with probability pi_attractor
        sh = rng.choice(SHARE_GRID, size=Q, p=params.share_w / params.share_w.sum())
        att = (rng.random(Q) * (k - 1)).astype(np.int64)
        qa = np.where(slots, ((1 - sh) / np.maximum(k - 1, 1))[:, None], 0.0)
        qa[np.arange(Q), att] += sh
        q = np.where((rng.random(Q) < params.pi_attractor)[:, None], qa, q)
    cq = np.cumsum(q, axis=1)
    arms = []
    c_true = np.where(data.is_yn, len(data.k_values) + np.minimum(truth, 1), data.cls_mc)
    for j, (A, a, s) in enumerate(zip(data.arms, params.ability, params.sigma)):
        M = A.shape[1]
        u = rng.normal(0, s, size=Q)
        know = rng.random((Q, M)) < expit(a.T[c_true] - u[:, None])   # (Q, M)
        pr = params.pref[j] if j < len(params.pref) else None
        hit = know | (rng.random((Q, M)) < (1.0 / k[:, None] if GUESSING else 0.0))  # a lucky guess
        r = rng.random((Q, M))
        off = 1 + np.minimum((r[:, :, None] > cq[:, None, :]).sum(axis=2), (k - 2)[:, None])
        ch = np.where(hit, truth[:, None], (truth[:, None] + off) % k[:, None])
        if pr is not None and pr.ndim == 3:  # MACE: a model with a position preference guesses by it
            G = np.transpose(pr[:, c_true, :], (1, 0, 2))                 # (Q, M, Kmax)
            biased = G.sum(axis=2) > 0
            guess = (rng.random((Q, M))[:, :, None] > np.cumsum(G, axis=2)).sum(axis=2)
            guess = np.minimum(guess, (k - 1)[:, None])
            ch = np.where(biased & ~know, guess, ch)
        arms.append(np.where(A >= 0, ch, -1))
    return LabelData(arms, k, data.is_yn, gold, group=data.group, class_keys=data.class_keys), planted


def average_precision(score_suspicious: np.ndarray, planted: np.ndarray) -> float:
    """Average precision of a ranking (higher = more suspicious) against planted positives."""
    order = np.argsort(-score_suspicious, kind="stable")
    y = planted[order]
    if not y.any():
        return float("nan")
    hits = np.cumsum(y)
    return float((hits[y] / (np.flatnonzero(y) + 1)).mean())


def detection_estimate(data: LabelData, params: LabelParams, *, n_items: int = 2000, error_rate: float = 0.03,
                       n_reps: int = 2, seed: int = 0, threshold: float = 0.5) -> dict:
    """Recall / precision / AP of the posterior ranking on simulations of this pool with planted errors."""
    from .core import wilson_ci

    rng = np.random.default_rng([seed, 11])
    Q = len(data.k)
    rec, ap = [], []
    n_planted = n_flagged = n_hit = 0
    for _ in range(n_reps):
        idx = np.sort(rng.choice(Q, min(Q, n_items), replace=False))
        sim, planted = simulate(data.subset(idx), params, rng, error_rate=error_rate)
        if not planted.any():
            continue
        pr = fit(sim, n_iter=4, seed=seed)
        post, ll = posterior(sim, pr)
        pw = 1 - post[np.arange(len(sim.k)), sim.gold]
        flag = pw >= threshold
        lo = log_odds_wrong(sim, pr, ll)
        hit = int((flag & planted).sum())
        n_planted += int(planted.sum())
        n_flagged += int(flag.sum())
        n_hit += hit
        rec.append(hit / float(planted.sum()))
        ap.append(average_precision(lo, planted))
    return {"error_rate": error_rate, "n_items": int(min(Q, n_items)), "n_reps": len(rec),
            # pooled over the runs (the share of all planted / all flagged items), the figures the intervals below
            # are of: the mean of the runs' precisions (83% on BLINK) sat beside the pooled interval of 26 / 32
            "recall": n_hit / n_planted if n_planted else None,
            "precision": n_hit / n_flagged if n_flagged else None,
            "average_precision": float(np.mean(ap)) if ap else None, "threshold": threshold,
            # pooled over the runs, with 95% Wilson intervals over the planted (recall) and flagged (precision)
            # items: how far a few runs pin the figures down (the runs share the fitted model, so the interval
            # is of the simulation's noise, not of the fit)
            "n_planted": n_planted, "n_flagged": n_flagged, "n_true_flags": n_hit,
            "recall_ci": [float(x) for x in wilson_ci(n_hit, n_planted)] if n_planted else None,
            "precision_ci": [float(x) for x in wilson_ci(n_hit, n_flagged)] if n_flagged else None}


def held_out_prediction(data: LabelData, params: LabelParams, answers: np.ndarray) -> dict:
    """Posterior predictive of a model left out of the fit (``answers``: its (Q,) codes on ``data``'s items)
    agreeing with the stated gold, from the fit ``params`` on the others: with the item's truth ``t`` and
    full-arm difficulty node ``z`` drawn from their joint posterior given the others' answers, the left-out
    model knows the truth with ``expit(a_c - sigma z)`` (its ability ``a`` per class from its accuracy against
    the fit's posterior truth), else answers one wrong option uniformly. Returns (Q,) arrays ``p_wrong`` (the
    fit's posterior that the gold is wrong), ``pred`` (predicted agreement with the gold) and ``pred_if_right``
    (the same if the gold were right: only the item's difficulty lowers it)."""
    Q = len(data.k)
    set_distractor_counts(data, params.pref)
    rest = _log_distractor(data, params)
    for j in range(1, len(data.arms)):
        rest = rest + _arm_loglik(data.arms[j], data, params.ability[j], params.sigma[j],
                                  params.pref[j] if j < len(params.pref) else None)
    A0, a0, s0 = data.arms[0], params.ability[0], params.sigma[0]
    p0 = params.pref[0] if params.pref else None
    lq = np.stack([_arm_loglik(A0, data, a0 - s0 * z, 0.0, p0) for z in NODES], axis=2)   # (Q, Kmax, nq)
    z = lq + (rest + _log_prior(data, item_eps(data, params)))[:, :, None] + LOGW[None, None, :]
    z = np.where(np.isfinite(z), z, -np.inf)
    post = np.exp(z - logsumexp(z.reshape(Q, -1), axis=1)[:, None, None])                  # (Q, Kmax, nq)
    tpost = post.sum(axis=2)
    Au = clean_codes(np.asarray(answers).reshape(-1, 1), data.k)
    corr, tri = _soft_counts(Au, data, tpost)
    a_u = solve_ability(np.clip((corr + 0.5) / (tri + 1.0), 1e-3, 1 - 1e-3), s0)[0]        # (n_cls,)
    c_g = np.where(data.is_yn, len(data.k_values) + np.minimum(data.gold, 1), data.cls_mc)
    rho = expit(a_u[c_g][:, None] - s0 * NODES[None, :])                                     # (Q, nq)
    at_g = post[np.arange(Q), data.gold]                                                     # (Q, nq)
    other = post.sum(axis=1) - at_g
    km1 = np.maximum(data.k - 1, 1)[:, None]
    pred = (at_g * rho + other * (1 - rho) / km1).sum(axis=1)
    cond = at_g / np.maximum(at_g.sum(axis=1, keepdims=True), 1e-300)
    pred_right = (cond * rho).sum(axis=1)
    return {"p_wrong": 1.0 - tpost[np.arange(Q), data.gold], "pred": pred, "pred_if_right": pred_right}
