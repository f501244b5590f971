"""Interval, test and multiplicity helpers against hand values, scipy and statsmodels."""

import numpy as np
import pytest
from scipy import stats as st

from audit_hub.stats import core as stats


def test_wilson_matches_statsmodels_and_hand_value():
    from statsmodels.stats.proportion import proportion_confint

    k = np.array([0, 3, 10, 50, 20])
    n = np.array([10, 10, 10, 200, 20])
    lo, hi = stats.wilson_ci(k, n)
    slo, shi = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert np.allclose(lo, slo) and np.allclose(hi, shi)
    # hand: k=3, n=10, z^2=3.841459: centre (0.3 + 0.192073) / 1.384146 = 0.355507
    assert (lo[1] + hi[1]) / 2 == pytest.approx(0.355507, abs=1e-5)


def test_clopper_pearson_matches_statsmodels_and_hand_values():
    from statsmodels.stats.proportion import proportion_confint

    k = np.array([0, 1, 4, 12, 20, 7])
    n = np.array([50, 50, 12, 12, 400, 50])
    for a in (0.05, 0.0125):
        lo, hi = stats.clopper_pearson_ci(k, n, a)
        slo, shi = proportion_confint(k, n, alpha=a, method="beta")
        assert np.allclose(lo, slo) and np.allclose(hi, shi)
    # hand: 0 of 50 -> upper 1 - 0.025^(1/50); 12 of 12 -> lower 0.025^(1/12)
    lo, hi = stats.clopper_pearson_ci(np.array([0, 12]), np.array([50, 12]))
    assert hi[0] == pytest.approx(1 - 0.025 ** (1 / 50)) and lo[1] == pytest.approx(0.025 ** (1 / 12))
    assert lo[0] == 0.0 and hi[1] == 1.0
    # exact coverage: at every rate the interval misses it at most alpha of the time (Wilson does not at n = 12)
    p_grid = np.linspace(0.01, 0.5, 50)
    ks = np.arange(13)
    lo, hi = stats.clopper_pearson_ci(ks, np.full(13, 12), 0.0125)
    miss = [(st.binom.pmf(ks, 12, p) * ((lo > p) | (hi < p))).sum() for p in p_grid]
    assert max(miss) <= 0.0125 + 1e-12
    wlo, whi = stats.wilson_ci(ks, np.full(13, 12), 0.0125)
    assert max((st.binom.pmf(ks, 12, p) * ((wlo > p) | (whi < p))).sum() for p in p_grid) > 0.0125
    assert np.isnan(stats.clopper_pearson_ci(np.array([0]), np.array([0]))[0][0])


def test_fleiss_matches_statsmodels():
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    rng = np.random.default_rng(0)
    counts = rng.multinomial(6, [0.5, 0.3, 0.2], size=40)
    assert stats.fleiss_kappa(counts) == pytest.approx(sm_fleiss(counts, method="fleiss"))
    # perfect agreement on varied categories -> 1
    perfect = np.array([[4, 0], [0, 4], [4, 0]])
    assert stats.fleiss_kappa(perfect) == pytest.approx(1.0)


def test_cochrans_q_matches_statsmodels_and_hand_case():
    from statsmodels.stats.contingency_tables import cochrans_q as sm_q

    rng = np.random.default_rng(1)
    x = (rng.random((60, 4)) < np.array([0.3, 0.5, 0.6, 0.8])).astype(int)
    q, df, p = stats.cochrans_q(x)
    ref = sm_q(x)
    assert q == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue) and df == 3
    # hand: 3 items x 2 raters, (1,0), (1,0), (1,1): C=(3,1), R=(1,1,2), T=4 -> Q = 1*(2*10-16)/(8-6) = 2
    q2, df2, _ = stats.cochrans_q(np.array([[1, 0], [1, 0], [1, 1]]))
    assert q2 == pytest.approx(2.0) and df2 == 1


def test_jeffreys_interval():
    mean, lo, hi = stats.jeffreys_interval([0, 3, 5], [5, 5, 5])
    assert mean.tolist() == pytest.approx([0.5 / 6, 3.5 / 6, 5.5 / 6])
    assert lo[0] == 0.0 and hi[2] == 1.0
    assert lo[1] == pytest.approx(st.beta.ppf(0.025, 3.5, 2.5))


def test_benjamini_hochberg_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, 0.04, 0.03, 0.2, np.nan, 0.5])
    adj = stats.benjamini_hochberg(p)
    ok = ~np.isnan(p)
    assert np.allclose(adj[ok], multipletests(p[ok], method="fdr_bh")[1])
    assert np.isnan(adj[4])
    assert np.allclose(stats.holm(p)[ok], multipletests(p[ok], method="holm")[1])


def test_permutation_p_value_correction():
    null = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert stats.permutation_p_value(null, 9) == pytest.approx(2 / 10)
    assert stats.permutation_p_value(null, 10) == pytest.approx(1 / 10)
    assert stats.permutation_p_value(null, 1, alternative="less") == pytest.approx(2 / 10)


def test_table_bootstrap_equals_item_bootstrap_in_distribution():
    """Multinomial over cells == resampling items: mean share replicate SD matches the binomial SD."""
    counts = np.array([30, 70])        # 30 'zero gain' items of 100
    lo, hi, reps = stats.table_bootstrap(counts, lambda t: t[:, 0, 0] / 100, n_boot=4000, seed=0)
    assert reps.std() == pytest.approx(np.sqrt(0.3 * 0.7 / 100), rel=0.08)
    assert lo < 0.3 < hi
    # stratified: each stratum keeps its size
    _, _, r2 = stats.table_bootstrap(np.array([[5, 5], [0, 10]]), lambda t: t.sum(axis=2)[:, 1], n_boot=50, seed=1)
    assert (r2 == 10).all()


def test_distribution_functions_equal_scipy_stats_bit_for_bit():
    """The audit evaluates distributions through scipy.special (no scipy.stats import, ~0.7 s per process);
    every value must be exactly what scipy.stats gives, including arguments outside the support."""
    rng = np.random.default_rng(0)
    k = rng.integers(1, 200, 5000)
    n = k + rng.integers(0, 200, 5000)
    for q in (0.025, 0.975, 0.5):
        assert np.array_equal(stats.beta_ppf(q, k, n - k + 1), st.beta.ppf(q, k, n - k + 1))
    x, df = rng.gamma(2, 3, 5000), rng.integers(1, 30, 5000)
    assert np.array_equal(stats.chi2_sf(x, df), st.chi2.sf(x, df))
    for q in (0.5, 0.95, 0.999):
        assert np.array_equal(stats.chi2_ppf(q, df), st.chi2.ppf(q, df))
    t = rng.normal(0, 3, 5000)
    assert np.array_equal(stats.t_cdf(t, df), st.t.cdf(t, df))
    assert np.array_equal(stats.norm_cdf(t), st.norm.cdf(t))
    p = rng.random(5000)
    assert np.array_equal(stats.norm_ppf(p), st.norm.ppf(p)) and np.array_equal(stats.norm_isf(p), st.norm.isf(p))
    kk, mu = rng.integers(-3, 50, 5000), rng.gamma(2, 5, 5000)
    assert np.array_equal(stats.poisson_sf(kk, mu), st.poisson.sf(kk, mu))
    kb, nb, pb = rng.integers(-3, 110, 5000), rng.integers(1, 100, 5000), 1 / rng.integers(2, 6, 5000)
    assert np.array_equal(stats.binom_sf(kb, nb, pb), st.binom.sf(kb, nb, pb))
    # hand values: below the support 1, at or above n 0; P(X > 0) for Bin(2, 1/2) = 3/4
    assert stats.binom_sf(-1, 5, 0.3) == 1.0 and stats.binom_sf(5, 5, 0.3) == 0.0
    assert stats.binom_sf(0, 2, 0.5) == pytest.approx(0.75, abs=1e-15)
    assert stats.poisson_sf(-1, 3.0) == 1.0


def test_audit_imports_no_scipy_stats():
    """The audit's own modules and every detector load without scipy.stats (a fresh interpreter)."""
    import subprocess
    import sys

    code = ("import sys, audit_hub.engine.run, audit_hub.engine.calibration, audit_hub.stats.label_model\n"
            "from audit_hub import detectors\n"
            "[detectors.get(n).load() for n in detectors.names()]\n"
            "print('scipy.stats' in sys.modules, 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_bounded_minimisation_equals_scipy_minimize_scalar_bit_for_bit():
    """Trial points, minimum and evaluation count of scipy's bounded Brent method, on smooth, flat, kinked,
    monotone and NaN-returning functions and the tolerances the label model uses."""
    import warnings

    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(7)
    shapes = [lambda x, c: c[0] * (x - c[1]) ** 2 + c[2] * np.sin(3 * x),
              lambda x, c: float(np.round(c[0] * x * x + c[1] * x, 1)),  # plateaus
              lambda x, c: abs(x - c[0]),
              lambda x, c: c[0] * x,  # the minimum at an end
              lambda x, c: float("nan") if x > c[0] else x * x,
              lambda x, c: np.cos(5 * x) + 0.01 * x]
    for case in range(1200):
        c = rng.normal(size=3)
        shape = shapes[case % len(shapes)]
        seen_ours: list[float] = []
        seen_scipy: list[float] = []

        def f(x, seen, c=c, shape=shape):
            seen.append(float(x))
            return float(shape(x, c))

        lo = float(rng.normal() * 3)
        hi = lo + float(abs(rng.normal() * 4))
        xatol = [0.05, 0.1, 0.15, float(10 ** rng.uniform(-6, 0))][case % 4]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = minimize_scalar(lambda x, s=seen_scipy: f(x, s), bounds=(lo, hi), method="bounded",
                                options={"xatol": xatol})
            x, fx, n = stats.minimize_bounded(lambda x, s=seen_ours: f(x, s), lo, hi, xatol=xatol)
        assert seen_ours == seen_scipy or np.array_equal(seen_ours, seen_scipy, equal_nan=True)
        assert np.float64(x).tobytes() == np.float64(r.x).tobytes() and n == r.nfev
        assert np.float64(fx).tobytes() == np.float64(r.fun).tobytes() or (np.isnan(fx) and np.isnan(r.fun))
    x, fx, _ = stats.minimize_bounded(lambda x: (x - 1.0) ** 2, 0.0, 3.0, xatol=1e-8)
    assert x == pytest.approx(1.0, abs=1e-7) and fx == pytest.approx(0.0, abs=1e-14)
    with pytest.raises(ValueError):
        stats.minimize_bounded(lambda x: x, 2.0, 1.0)
    with pytest.raises(ValueError):
        stats.minimize_bounded(lambda x: x, 0.0, float("inf"))


@pytest.mark.parametrize("last_empty", [True, False])
def test_table_bootstrap_sparse_draws_the_same_replicates_bit_for_bit(last_empty):
    """Cells empty in every stratum (the last one among them, or not) are left out of the draws with
    ``sparse=True``: the statistic sees the other cells and their indices, and the replicates are identical to
    the dense bootstrap's (same generator, same batches)."""
    from audit_hub.stats.core import table_bootstrap

    rng = np.random.default_rng(4)
    counts = rng.integers(0, 6, size=(3, 40)) * (rng.random(40) < 0.3)   # most columns empty everywhere
    counts[:, -1] = 0 if last_empty else 3
    w = rng.integers(-50, 50, size=40) * 1000 + np.arange(40)   # integer weights: a replicate's value names its table

    def dense(t):
        return (t * w).sum(axis=(1, 2))

    def sparse(t, cells):
        return (t * w[cells]).sum(axis=(1, 2))

    a = table_bootstrap(counts, dense, n_boot=300, seed=9, max_cells_per_batch=3 * 40 * 7)
    b = table_bootstrap(counts, sparse, n_boot=300, seed=9, max_cells_per_batch=3 * 40 * 7, sparse=True)
    assert np.array_equal(a[2], b[2]) and (a[0], a[1]) == (b[0], b[1])
    assert a[2].std() > 0


def test_coverage_left_out_units_by_hand():
    """Cells = items known for every remaining unit x units; the first maximum over prefixes of the order by
    unknown items; each group keeps its floor."""
    from audit_hub.stats.coverage import coverage_left_out_units

    unk = np.zeros((10, 4), bool)
    assert coverage_left_out_units(unk) == ([], 10)
    unk[:8, 2] = True  # unit 2 knows 2 items: 2 x 4 = 8 < 10 x 3 = 30
    unk[0, 1] = True   # unit 1 misses one item: after unit 2 leaves, 9 x 3 = 27 < 30 -> it stays
    assert coverage_left_out_units(unk) == ([2], 9)
    # with a floor of 4 units in the group nothing may leave
    assert coverage_left_out_units(unk, keep_per_group=4) == ([], 2)
    # groups: unit 2, alone in its group, cannot leave; unit 1 leaving would give 2 x 3 = 6 < 2 x 4 = 8 cells
    assert coverage_left_out_units(unk, groups=np.array([0, 0, 1, 0])) == ([], 2)
    # a tie keeps the units: 5 items x 2 units == 10 items x 1 unit
    tie = np.zeros((10, 2), bool)
    tie[5:, 1] = True
    assert coverage_left_out_units(tie) == ([], 5)
