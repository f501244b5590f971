"""The fixed-margin table sampler and closed-form null moments against brute force and scipy."""

import itertools

import numpy as np
import pytest
from oracles import cell_sum_moments
from scipy import stats

from audit_hub.stats.nulls import (
    literal_is_cheaper,
    matched_pairs,
    matched_sum_moments,
    sample_matched_sum,
    sample_table,
    shared_permutation_drops,
    shared_permutation_matches,
)

F = np.array([0, 0, 1, 2, 2, 2, 3, 1, 0])
B = np.array([0, 1, 1, 2, 0, 2, 3, 3, 1])


def _brute(f, b):
    return np.array([(f == b[list(p)]).sum() for p in itertools.permutations(range(len(b)))])


def test_matched_pairs():
    i, j = matched_pairs(4, 4)
    assert i.tolist() == [0, 1, 2, 3] and j.tolist() == [0, 1, 2, 3]
    i, j = matched_pairs(12, 2)          # 11 full models, 1 blind model: (0,0) and (11,1)
    assert list(zip(i.tolist(), j.tolist())) == [(0, 0), (11, 1)]
    i, j = matched_pairs(5, 3)           # Mf=4, Mb=2: f*2 == b*4 -> (0,0), (2,1), (4,2)
    assert list(zip(i.tolist(), j.tolist())) == [(0, 0), (2, 1), (4, 2)]


def test_closed_form_moments_match_exhaustive_enumeration():
    vals = _brute(F, B)
    r, c = np.bincount(F, minlength=4), np.bincount(B, minlength=4)
    mean, var = matched_sum_moments(r, c, len(F))
    assert mean == pytest.approx(vals.mean(), abs=1e-12)
    assert var == pytest.approx(vals.var(), abs=1e-12)
    # hand value: r = (3, 2, 3, 1), c = (2, 3, 2, 2): E = (6 + 6 + 6 + 2) / 9
    assert mean == pytest.approx(20 / 9)
    m2, v2 = cell_sum_moments(r, c, np.eye(4))
    assert (m2, v2) == pytest.approx((vals.mean(), vals.var()))


def test_single_cell_variance_is_hypergeometric():
    r, c = np.array([7, 13]), np.array([5, 15])
    mean, var = matched_sum_moments(r[:1], c[:1], 20)
    h = stats.hypergeom(20, 5, 7)
    assert (mean, var) == pytest.approx((h.mean(), h.var()))


def test_sampler_matches_brute_force_distribution():
    rng = np.random.default_rng(0)
    vals = _brute(F, B)
    r, c = np.bincount(F, minlength=4), np.bincount(B, minlength=4)
    draws = sample_matched_sum(r[None], c[None], np.array([len(F)]), 100_000, rng)[0]
    exact = np.bincount(vals, minlength=10) / len(vals)
    obs = np.bincount(draws, minlength=10)
    keep = exact * len(draws) >= 5
    chi2 = (((obs[keep] - exact[keep] * len(draws)) ** 2) / (exact[keep] * len(draws))).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 0.001
    assert np.abs(obs / len(draws) - exact).max() < 0.005


def test_sampler_matches_row_permutation_on_random_data():
    """Distribution match against brute-force row shuffles (two-sample KS) on a bigger table."""
    rng = np.random.default_rng(1)
    f = rng.integers(0, 4, 300)
    b = np.minimum(f, rng.integers(0, 4, 300))
    perm = np.array([(f == rng.permutation(b)).sum() for _ in range(4000)])
    r, c = np.bincount(f, minlength=4), np.bincount(b, minlength=4)
    draws = sample_matched_sum(r[None], c[None], np.array([300]), 4000, rng)[0]
    assert stats.ks_2samp(perm, draws).pvalue > 0.001
    mean, var = matched_sum_moments(r, c, 300)
    assert draws.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / 4000))


def test_non_square_matching_matches_brute_force():
    rng = np.random.default_rng(2)
    f = np.array([0, 2, 4, 4, 1, 3, 0, 2])   # Mf = 4
    b = np.array([0, 1, 2, 2, 0, 1, 1, 0])   # Mb = 2
    pi, pj = matched_pairs(5, 3)

    def zero(bb):
        return (f * 2 == bb * 4).sum()
    vals = np.array([zero(b[list(p)]) for p in itertools.permutations(range(8))])
    r = np.bincount(f, minlength=5)[pi]
    c = np.bincount(b, minlength=3)[pj]
    mean, var = matched_sum_moments(r, c, 8)
    assert (mean, var) == pytest.approx((vals.mean(), vals.var()))
    draws = sample_matched_sum(r[None], c[None], np.array([8]), 50_000, rng)[0]
    exact = np.bincount(vals, minlength=9) / len(vals)
    assert np.abs(np.bincount(draws, minlength=9) / len(draws) - exact).max() < 0.01


def test_scipy_permutation_test_agrees_on_small_data():
    """Our table-based p-value against scipy.stats.permutation_test (pairings) on the same data."""
    rng = np.random.default_rng(3)
    f = rng.integers(0, 3, 40)
    b = np.where(rng.random(40) < 0.4, f, rng.integers(0, 3, 40))
    res = stats.permutation_test((f, b), lambda x, y: (x == y).sum(), permutation_type="pairings",
                                 n_resamples=20000, alternative="greater", random_state=4)
    r, c = np.bincount(f, minlength=3), np.bincount(b, minlength=3)
    draws = sample_matched_sum(r[None], c[None], np.array([40]), 20000, rng)[0]
    ours = (1 + (draws >= (f == b).sum()).sum()) / (len(draws) + 1)
    assert ours == pytest.approx(res.pvalue, abs=0.01)
    assert res.pvalue < 0.05


def test_strata_are_independent_and_vectorised():
    rng = np.random.default_rng(5)
    r = np.array([[3, 3, 2], [10, 0, 5]])
    c = np.array([[2, 4, 2], [5, 5, 5]])
    n = np.array([8, 15])
    d = sample_matched_sum(r, c, n, 20000, rng)
    mean, var = matched_sum_moments(r, c, n)
    assert d.shape == (2, 20000)
    assert d.mean(axis=1) == pytest.approx(mean, abs=0.05)
    assert d.var(axis=1) == pytest.approx(var, rel=0.05)
    assert (d[1] <= 10).all()


def test_sample_table_keeps_margins_and_moments():
    rng = np.random.default_rng(6)
    r, c = np.array([4, 3, 2, 1]), np.array([1, 2, 3, 4])
    t = sample_table(r, c, 20000, rng)
    assert (t.sum(axis=2) == r).all() and (t.sum(axis=1) == c).all()
    mask = np.eye(4)
    mean, var = cell_sum_moments(r, c, mask)
    d = np.trace(t, axis1=1, axis2=2)
    assert d.mean() == pytest.approx(mean, abs=0.03)
    assert d.var() == pytest.approx(var, rel=0.05)
    # a general (non-matching) mask: upper triangle
    up = np.triu(np.ones((4, 4)))
    m2, v2 = cell_sum_moments(r, c, up)
    s = (t * up).sum(axis=(1, 2))
    assert s.mean() == pytest.approx(m2, abs=0.03) and s.var() == pytest.approx(v2, rel=0.05)


def test_invalid_margins_raise():
    with pytest.raises(ValueError):
        sample_matched_sum(np.array([[5, 5]]), np.array([[1, 1]]), np.array([6]), 10, np.random.default_rng(0))
    with pytest.raises(ValueError):
        cell_sum_moments([1, 2], [1, 1], np.eye(2))


def test_shared_permutations_match_the_exhaustive_distribution():
    """The literal sampler's law against all 9! pairings of the hand data (one pairing, one stratum)."""
    vals = _brute(F, B)
    exact = np.bincount(vals, minlength=10) / len(vals)
    draws = shared_permutation_matches(np.zeros(len(F), np.int64), lambda d: (F, B), 1, 60_000,
                                       np.random.default_rng(11), chunk_cells=9 * 7000)[0]
    assert np.abs(np.bincount(draws, minlength=10) / len(draws) - exact).max() < 0.01
    assert draws.mean() == pytest.approx(20 / 9, abs=0.03)   # the hand value of the closed form above


def test_shared_permutations_stay_inside_strata_and_agree_with_the_table_sampler():
    """Two strata: each pairing's draws have the stratified null's exact mean and variance and the table
    sampler's law (KS); a permutation never moves an item out of its stratum (stratum 1 alone matches
    nothing, so every match comes from stratum 0, whose bound is 4)."""
    rng = np.random.default_rng(12)
    strata = np.array([0, 1, 0, 1, 1, 0, 0, 1, 1, 1])
    f = np.array([1, 0, 1, 2, 0, 2, 0, 1, 2, 1])
    b = np.array([1, 2, 0, 1, 2, 2, 1, 2, 2, 2])
    tgt_one = np.where(strata == 0, f, -1)            # pairing 1: only stratum 0 can match
    pairings = [(f, b), (tgt_one, b)]
    draws = shared_permutation_matches(strata, lambda d: pairings[d], 2, 40_000, rng, chunk_cells=10 * 999)
    assert draws.shape == (2, 40_000)
    assert draws[1].max() <= 4 and (draws[1] <= draws[0]).all()  # the same permutation for both pairings
    r = np.stack([np.bincount(f[strata == s], minlength=3) for s in (0, 1)])
    c = np.stack([np.bincount(b[strata == s], minlength=3) for s in (0, 1)])
    n = np.bincount(strata)
    mean, var = matched_sum_moments(r, c, n)
    assert draws[0].mean() == pytest.approx(mean.sum(), abs=4 * np.sqrt(var.sum() / 40_000))
    assert draws[0].var() == pytest.approx(var.sum(), rel=0.05)
    table = sample_matched_sum(r, c, n, 40_000, rng).sum(axis=0)
    assert stats.ks_2samp(draws[0], table).pvalue > 0.001


def test_literal_sampler_is_chosen_only_where_it_is_clearly_cheaper():
    # one pairing: 2 x items x (16 + 2.5) ns against tables x pairs x 500 ns
    assert literal_is_cheaper(5_000, 6, 151)               # 185,000 < 453,000
    assert not literal_is_cheaper(3_040, 4, 2)             # the bundled MATH-V pool: the tables
    assert literal_is_cheaper(1_500, 6, 21)                # 20 paired models on 1,500 items: 55,500 < 63,000
    assert not literal_is_cheaper(5_000, 6, 21)            # ... on 5,000: 185,000 > 63,000
    # the leave-one-model-out loop, one pairing per left-out model, shares the shuffle
    assert literal_is_cheaper(5_000, 6, 51, n_pairings=50)           # 5k x 50
    assert not literal_is_cheaper(100_000, 6, 21, n_pairings=20)     # 100k x 20: the tables, as before
    assert not literal_is_cheaper(1_000_000, 6, 51, n_pairings=50)   # 1M x 50


def test_paired_drops_count_exactly_what_the_general_pairings_count():
    """The leave-one-model-out fast path (only item-and-slot pairs with |f - b(pi)| <= 1 are read) gives the
    same counts as the general sampler on the same permutations, for every left-out model, strata included."""
    rng = np.random.default_rng(21)
    n, m = 700, 9
    full = (rng.random((m, n)) < rng.uniform(0.3, 0.8, (m, 1))).astype(np.int8)
    blind = (rng.random((m, n)) < rng.uniform(0.2, 0.6, (m, 1))).astype(np.int8)
    f, b = full.sum(axis=0), blind.sum(axis=0)
    strata = rng.integers(0, 3, n)
    fast = shared_permutation_drops(strata, f, b, full, blind, 500, np.random.default_rng(5), chunk_cells=n * 64)
    slow = shared_permutation_matches(strata, lambda d: (f - full[d], b - blind[d]), m, 500,
                                      np.random.default_rng(5), chunk_cells=n * 64)
    assert np.array_equal(fast, slow) and fast.std(axis=1).min() > 0
