"""The label-permutation null of TsT-RF.

**What the null assumes.** Within a stratum (category x answer format x number of options), the gold
answer is independent of the question and option text: which option is gold (its position) or, for
numeric questions, which gold value a question carries, could have been assigned to any other
question of the stratum. What the null keeps: each stratum's multiset of gold positions (so a
benchmark whose gold is "B" 40% of the time in one category keeps that skew) and of numeric gold
values, every question's text and options, and (with a group column) the joint answers of the
questions of one image or scene. A p-value below alpha says the text predicts the gold *beyond* the
per-stratum answer frequencies; those frequencies alone are what the majority baseline measures.

**How it is sampled.** Permutation ``b`` draws ``numpy.random.default_rng([seed, PERM_STREAM, b])``.
Without groups, the gold answers are shuffled among the questions of each stratum. With groups, the
unit is a *block*: the questions of one group inside one stratum; blocks of the same stratum and
the same size trade their answers as a whole (the j-th question of a block, in frame order, takes
the answer of the j-th question of the other block), so answers that move together inside an image
keep moving together.

**The p-value.** One-sided, ``(1 + #{b: T_b >= T_obs}) / (N + 1)``, where ``T`` is computed by the
identical pipeline on the observed and on every permuted answer set (same folds, same forest seeds,
same features), so under the null ``T_obs`` is exchangeable with the ``T_b`` and the p-value is
valid at every level (ties count against the observed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..stats.core import Z95, permutation_p_value

PERM_STREAM = 0x7E57  # second entry of the permutation generators' seed sequence


def strata_codes(kind: np.ndarray, category: np.ndarray, n_choices: np.ndarray,
                 answer_type: np.ndarray) -> np.ndarray:
    """Integer stratum per question (category x format x number of options); -1 for unscored."""
    fmt = np.where(kind == 1, 0, np.where(answer_type == "yesno", 1, 2))
    key = (category.astype(np.int64) * 3 + fmt) * 1000 + n_choices.astype(np.int64)
    _, codes = np.unique(key, return_inverse=True)
    return np.where(kind >= 0, codes, -1).astype(np.int64)


@dataclass
class Permuter:
    """Precomputed exchangeable units; :meth:`source` gives one permutation as a source index.

    ``source(b)[q]`` is the question whose answer question ``q`` receives in permutation ``b``
    (``q`` itself for unscored questions).
    """

    n: int
    buckets: list[np.ndarray]  # each (m_blocks, block_size) matrix of question indices
    seed: int

    @classmethod
    def build(cls, strata: np.ndarray, groups: np.ndarray | None, seed: int) -> Permuter:
        n = len(strata)
        idx = np.flatnonzero(strata >= 0)
        unit = np.arange(n) if groups is None else np.asarray(groups, dtype=np.int64)
        # block = (stratum, unit); order questions by (stratum, unit, frame position)
        order = idx[np.lexsort((idx, unit[idx], strata[idx]))]
        s, u = strata[order], unit[order]
        new_block = np.ones(len(order), dtype=bool)
        new_block[1:] = (s[1:] != s[:-1]) | (u[1:] != u[:-1])
        starts = np.flatnonzero(new_block)
        sizes = np.diff(np.append(starts, len(order)))
        block_stratum = s[starts]
        buckets: list[np.ndarray] = []
        key = block_stratum * (int(sizes.max()) + 1 if len(sizes) else 1) + sizes
        for k in np.unique(key):
            sel = np.flatnonzero(key == k)
            if len(sel) < 2:
                continue
            size = int(sizes[sel[0]])
            mat = order[starts[sel][:, None] + np.arange(size)[None, :]]
            buckets.append(mat)
        return cls(n=n, buckets=buckets, seed=int(seed))

    def source(self, b: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, PERM_STREAM, int(b)])
        src = np.arange(self.n)
        for mat in self.buckets:
            src[mat] = mat[rng.permutation(len(mat))]
        return src

    @property
    def n_exchangeable(self) -> int:
        """Questions that can trade answers with at least one other (the rest keep their own)."""
        return int(sum(m.size for m in self.buckets))


def p_value(observed: float, null: np.ndarray) -> float:
    """One-sided permutation p-value (1 + #{null >= observed}) / (N + 1); ties count against
    (:func:`audit_hub.stats.core.permutation_p_value`)."""
    return float(permutation_p_value(null, observed, "greater"))


def null_figures(observed: float | None, null: np.ndarray) -> dict:
    """Null mean, spread and 95% range; the excess of the observed statistic over the null mean
    (with +/- 1.96 null sd); the one-sided p-value. All None without a null."""
    null = np.asarray(null, dtype=np.float64)
    # the statistics are means of shares: rounded to 1e-12 so that a permutation equal to the observed answers up
    # to summation order ties with them (a null sd of 1e-17 printed as "0.00000000%", an excess of -0.0)
    null = np.round(null[np.isfinite(null)], 12)
    if observed is not None and np.isfinite(observed):
        observed = float(np.round(float(observed), 12))
    if observed is None or not np.isfinite(observed) or len(null) == 0:
        return {"test_statistic": observed, "null_mean": None, "null_sd": None, "null_interval": [None, None],
                "excess": None, "excess_ci": [None, None], "p_value": None, "n_permutations": int(len(null))}
    m = float(null.mean())
    sd = float(null.std(ddof=1)) if len(null) > 1 else 0.0
    ex = float(observed - m)
    sd, ex = (0.0 if abs(x) < 1e-12 else x for x in (sd, ex))  # the mean of equal shares is off by ~1e-17
    return {"test_statistic": float(observed), "null_mean": m, "null_sd": sd,
            "null_interval": [float(np.quantile(null, 0.025)), float(np.quantile(null, 0.975))],
            "excess": ex, "excess_ci": [ex - Z95 * sd, ex + Z95 * sd],
            "p_value": p_value(observed, null), "n_permutations": int(len(null))}
