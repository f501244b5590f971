"""benchaudit curate (issue 26): the default selection chosen by inner cross-validation, never below random;
a planted rank-distorting family avoided; leave-one-model-out for small pools; score estimators chosen by
inner CV; the 2PL on hand-checkable cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from audit_hub.curate.choose import choose, heldout_pair_tau
from audit_hub.curate.estimate import ENSEMBLE_PARTS, ESTIMATORS, IRT_BASED, score_split
from audit_hub.curate.filters import StageThresholds
from audit_hub.curate.irt import A_PRIOR, A_SD, D_SD, Irt2PL, estimate_ability, estimate_scores, fit_2pl
from audit_hub.curate.measures import spearman, weighted_accuracy
from audit_hub.curate.pipeline import CurateConfig, run_curation
from audit_hub.curate.simulate import simulate_pool

FAST = {"n_boot": 100, "n_random": 100, "pair_boot": 50, "score_budget": 30, "ibp": "off", "junk_fractions": ()}


def _two_pl(rng, Q, M, spread=1.0):
    theta = np.sort(rng.normal(0, spread, M))
    a = rng.lognormal(0.2, 0.3, Q)
    b = rng.normal(0, 1, Q)
    p = 1 / (1 + np.exp(-a[:, None] * (theta[None, :] - b[:, None])))
    return (rng.random((Q, M)) < p).astype(float), theta


def test_pair_tau_counts_pairs_with_a_heldout_model():
    full = np.array([0.9, 0.8, 0.7, 0.6])
    cur = np.array([0.5, 0.7, 0.4, 0.3])       # models 0 and 1 swapped
    # held out: model 0 -> pairs (0,1) discordant, (0,2), (0,3) concordant: (2 - 1) / 3
    assert heldout_pair_tau(cur, full, np.array([0])) == pytest.approx(1 / 3)
    # held-out pairs only: (2,3) concordant
    assert heldout_pair_tau(cur, full, np.array([2, 3]), test_only=True) == pytest.approx(1.0)
    # vectorised over draws
    both = heldout_pair_tau(np.stack([cur, full]), full, np.array([0]))
    assert both == pytest.approx([1 / 3, 1.0])


def test_default_is_not_below_random_in_inner_cv_where_random_ranks_well():
    """A clean 2PL pool (random subsets already rank models well): whatever is chosen has an inner figure
    above random's, or the default balanced draw is used and the statement says so."""
    rng = np.random.default_rng(5)
    x, _ = _two_pl(rng, 1200, 20)
    k = np.ones_like(x)
    cat = rng.integers(0, 4, 1200)
    res = choose(x, k, cat, {"none": np.ones(1200, bool)}, 360, 0.5, seed=1)
    chosen = next(t for t in res["candidates"] if t["candidate"] == res["candidate"])
    if res["beats_random_inner"]:
        assert chosen["inner_tau_mean"] > res["random_inner_tau"]
    else:
        assert res["method"] == "stratified_balanced" and "no candidate beat the default" in res["statement"]
    assert res["mask"].sum() == 360
    assert {t["method"] for t in res["candidates"]} >= {"random_best", "kmeans_anchors", "irt_information",
                                                         "point_biserial", "stratified_difficulty",
                                                         "stratified_balanced"}


def test_fallback_to_best_random_draw_when_nothing_beats_random():
    """Only a rank-distorting candidate on offer: it does not beat the default in inner CV, so the default
    (a stratified draw balanced on the selecting models' accuracies) is used and the statement says so."""
    x, _fam = _distorting_pool(1)
    Q = x.shape[0]
    res = choose(x, np.ones_like(x), np.zeros(Q, np.int64), {"none": np.ones(Q, bool)}, 200, 0.5, seed=0,
                 methods=("point_biserial",))
    assert not res["replaced_default"]
    assert res["candidate"] == "none/stratified_balanced" and res["mask"].sum() == 200
    assert "no candidate beat the default" in res["statement"]
    pb = next(t for t in res["candidates"] if t["method"] == "point_biserial")
    assert pb["margin_over_default"] < 0


def test_target_not_below_what_the_stages_leave_keeps_all_and_says_no_draw():
    """A target size at (or above) the items left: every item is kept and the statement says no draw happened
    (it used to describe a balanced draw "1 of up to 20" with an SD comparison)."""
    x, _fam = _distorting_pool(1)
    Q = x.shape[0]
    allowed = np.ones(Q, bool)
    allowed[:7] = False
    res = choose(x, np.ones_like(x), np.zeros(Q, np.int64), {"anomaly": allowed}, Q, 0.5, seed=0,
                 methods=("point_biserial",), selected=False)
    assert res["mask"].sum() == Q - 7 and not res["mask"][:7].any()
    assert f"the target size ({Q:,}) is not below the {Q - 7:,} items its stages leave" in res["statement"]
    assert "no draw" in res["statement"] and "draw 1 of up to" not in res["statement"]


def _distorting_pool(seed=0):
    """2PL items plus a planted family of step items: right (with 3% slips) exactly for the models above the
    median ability. Point-biserial ranks them first (they split the models cleanly), the SD of accuracies on
    them is the largest possible, and a set made of them ties every model with the others of its half: it
    keeps the halves and loses the order inside them."""
    rng = np.random.default_rng(seed)
    Q, n_fam, M = 1500, 300, 24
    x, theta = _two_pl(rng, Q - n_fam, M)
    top = theta > np.median(theta)
    fam = (rng.random((n_fam, M)) < np.where(top, 0.97, 0.03)[None, :]).astype(float)
    return np.vstack([x, fam]), np.r_[np.zeros(Q - n_fam, bool), np.ones(n_fam, bool)]


def test_default_avoids_a_discriminative_but_rank_distorting_family():
    x, fam = _distorting_pool()
    Q, M = x.shape
    k = np.ones_like(x)
    cat = np.zeros(Q, np.int64)
    tr, te = np.arange(M) % 3 != 0, np.arange(M) % 3 == 0
    full = weighted_accuracy(np.ones((1, Q)), x, k)[0]
    res = choose(x[:, tr], k[:, tr], cat, {"none": np.ones(Q, bool)}, 300, 0.5, seed=0)
    pb = next(t for t in res["candidates"] if t["candidate"] == "none/point_biserial")
    # the trap is real: point-biserial fills the set with the family and ranks inner held-out models badly
    from audit_hub.curate.select import select
    pb_mask, _ = select("point_biserial", x[:, tr], k[:, tr], np.ones(Q, bool), cat, 300, 0.5)
    assert fam[pb_mask].mean() > 0.9
    assert pb["inner_tau_mean"] < res["random_inner_tau"]
    # the default does not take it: the family keeps about its pool share, and held-out models rank well
    assert res["method"] != "point_biserial"
    assert fam[res["mask"]].mean() < 0.35
    acc = weighted_accuracy(res["mask"][None, :].astype(float), x[:, te], k[:, te])[0]
    acc_pb = weighted_accuracy(pb_mask[None, :].astype(float), x[:, te], k[:, te])[0]
    assert spearman(acc, full[te]) > spearman(acc_pb, full[te])


def test_small_pool_uses_leave_one_model_out_and_presents_no_fold_rho():
    frame = simulate_pool(400, 8, seed=4)
    res = run_curation(frame, CurateConfig(target_size=150, **FAST))
    s = res.summary
    assert s["heldout_design"]["mode"] == "leave_one_model_out"
    assert "leave-one-model-out" in s["heldout_design"]["why"] and "coarse steps" in s["heldout_design"]["why"]
    assert s["heldout_spearman_rho"] is None and "heldout_spearman_rho_ci" not in s
    assert all("spearman_rho" not in f for f in s["folds"]) and len(s["folds"]) == 8
    lomo = s["heldout_lomo"]
    assert sorted(lomo["models"]) == sorted(frame.models_in("full"))
    assert len(lomo["rank_displacement"]) == 8
    assert lomo["mean_rank_displacement"] == pytest.approx(np.mean(lomo["rank_displacement"]))
    assert np.allclose(lomo["rank_displacement"], np.abs(np.subtract(lomo["rank_curated"], lomo["rank_full"])))
    assert s["versus_random"].split(":")[0] in ("better than random", "worse than random",
                                                "not distinguishable from random")
    assert "rank displacement" in s["versus_random"]
    # every left-out model's accuracy error from the score estimation, beside its rank
    assert s["score_estimation"]["n_models"] == 8
    err = lomo["accuracy_error_points"]
    assert len(err) == 8 and np.mean(err) == pytest.approx(s["score_estimation"]["mae_points"])


def test_fold_design_keeps_at_least_six_heldout_models():
    frame = simulate_pool(300, 14, seed=1)
    res = run_curation(frame, CurateConfig(target_size=100, **FAST))
    d = res.summary["heldout_design"]
    assert d["mode"] == "folds" and d["folds"] == 2 and min(d["models_per_fold"]) >= 6
    assert "instead of 3" in d["why"]
    assert res.summary["heldout_spearman_rho"] is not None
    v = res.summary["versus_random"]
    assert v.split(":")[0] in ("better than random", "worse than random", "not distinguishable from random")
    assert "held-out rho" in v and "random stratified subsets" in v


# ---------------------------------------------------------------------------------------------- IRT
def test_ability_map_matches_the_hand_solved_equation():
    """One item (a = 1, d = 0) answered right, prior N(0, 1): the MAP solves 1 - sigmoid(t) - t = 0."""
    m = Irt2PL(a=np.array([1.0]), d=np.array([0.0]), theta=np.zeros(2), n_iter=0, converged=True)
    t = estimate_ability(m, np.array([[1.0]]), np.array([[1.0]]))[0]
    root = optimize.brentq(lambda z: 1 - 1 / (1 + np.exp(-z)) - z, -3, 3)
    assert t == pytest.approx(root, abs=1e-6) and root == pytest.approx(0.4011, abs=1e-4)
    # two equal items, one right one wrong: the gradient 1 - 2 sigmoid(t) - t vanishes at 0
    m2 = Irt2PL(a=np.ones(2), d=np.zeros(2), theta=np.zeros(2), n_iter=0, converged=True)
    assert estimate_ability(m2, np.array([[1.0], [0.0]]), np.ones((2, 1)))[0] == pytest.approx(0.0, abs=1e-9)


def test_pirt_estimate_is_observed_anchors_plus_probabilities_elsewhere():
    a, d = np.array([1.0, 2.0, 0.5, 1.0]), np.array([0.0, -1.0, 1.0, 0.5])
    m = Irt2PL(a=a, d=d, theta=np.zeros(3), n_iter=0, converged=True)
    anchors = np.array([0])
    est = estimate_scores(m, anchors, np.array([1.0]), np.array([[1.0]]), np.ones((1, 1)), np.ones((4, 1)), 1.0)
    t = optimize.brentq(lambda z: 1 - 1 / (1 + np.exp(-z)) - z, -3, 3)   # the MAP from one right answer
    p = 1 / (1 + np.exp(-(a[1:] * t + d[1:])))
    assert est["pirt"][0] == pytest.approx((1 + p.sum()) / 4, abs=1e-6)
    assert est["anchor"][0] == pytest.approx(1.0)


def test_2pl_fit_converges_to_a_stationary_point():
    rng = np.random.default_rng(0)
    x, theta = _two_pl(rng, 800, 15)
    k = np.ones_like(x)
    x[:5] = 1.0                      # saturated items (every model right): the fit must still converge
    m = fit_2pl(x, k)
    assert m.converged and m.n_iter < 200 and m.final_change < 1e-4
    assert abs(m.theta.mean()) < 1e-5 and m.theta.std() == pytest.approx(1.0, abs=1e-4)
    # item gradients of the penalised likelihood vanish given the abilities
    p = 1 / (1 + np.exp(-(m.a[:, None] * m.theta[None, :] + m.d[:, None])))
    r = x - p
    ga = r @ m.theta - (m.a - A_PRIOR) / A_SD ** 2
    gd = r.sum(axis=1) - m.d / D_SD ** 2
    free = m.a > 0.051
    assert np.abs(ga[free]).max() < 0.02 and np.abs(gd).max() < 0.02
    from scipy import stats
    assert stats.spearmanr(m.theta, theta)[0] > 0.95


def test_score_estimators_chosen_by_inner_cv():
    rng = np.random.default_rng(3)
    x, _ = _two_pl(rng, 1500, 18)
    k = np.ones_like(x)
    train, test = np.arange(12), np.arange(12, 18)
    s = score_split(x, k, train, test, 60, 0)
    assert set(s["abs_err"]) == set(ESTIMATORS) and all(v.shape == (6,) for v in s["abs_err"].values())
    inner = s["inner_mae_points"]
    eligible = [e for e in ESTIMATORS if s["irt_converged"] or e not in IRT_BASED]
    # the ensemble, unless an estimator on other items (not one of its parts) has an inner MAE lower by more
    # than one SE of the paired difference
    assert s["chosen"] == "ensemble" or (s["chosen"] in eligible and s["chosen"] not in ENSEMBLE_PARTS
                                         and inner[s["chosen"]] < inner["ensemble"])
    assert s["irt_converged"] and s["irt_not_eligible_because"] is None
    truth = x[:, test].mean(axis=0)
    assert np.abs(s["estimates"] - truth).mean() == pytest.approx(s["abs_err"][s["chosen"]].mean())
    # the choice replayed from the returned inner errors (benchmarks/score_estimation.py replays it under other
    # margins): the same choice at the product's margin, never a replacement at an infinite one, and at margin 0
    # the non-part estimator with the smallest inner MAE wherever it is below the ensemble's
    from audit_hub.curate.estimate import REPLACE_MARGIN_SE, choose_estimator

    ia = s["inner_abs_err"]
    assert set(ia) == set(ESTIMATORS) and all(v.shape == (12,) for v in ia.values())  # leave-one-out over 12
    assert 100 * ia["random"].mean() == pytest.approx(inner["random"])
    assert choose_estimator(ia, eligible, 12, margin_se=REPLACE_MARGIN_SE)[0] == s["chosen"]
    assert choose_estimator(ia, eligible, 12, margin_se=float("inf"))[0] == "ensemble"
    others = [e for e in eligible if e != "ensemble" and e not in ENSEMBLE_PARTS]
    best = min(others, key=lambda e: ia[e].mean())
    want = best if ia[best].mean() < ia["ensemble"].mean() else "ensemble"
    assert choose_estimator(ia, eligible, 12, margin_se=0.0)[0] == want


def test_sd_constraint_and_the_replacement_rule():
    """A candidate replaces the default balanced draw only with an inner margin over it above 3 standard
    errors (paired over the inner folds) and an SD of model accuracies at least the whole pool's; the default
    itself keeps the SD (recomputed here from the returned table and the matrix itself)."""
    rng = np.random.default_rng(11)
    x, _ = _two_pl(rng, 1200, 20)
    k = np.ones_like(x)
    cat = rng.integers(0, 4, 1200)
    res = choose(x, k, cat, {"none": np.ones(1200, bool)}, 360, 0.5, seed=2)
    sd_full = float(np.std(x.mean(axis=0), ddof=1))
    assert res["sd_full"] == pytest.approx(sd_full)
    # 20 models: inner folds of 6-7 models, one split (the repeat is for inner folds under 6 models)
    assert res["inner_folds"] == 3 and res["inner_repeats"] == 1
    small = choose(x[:, :12], k[:, :12], cat, {"none": np.ones(1200, bool)}, 360, 0.5, seed=2)
    assert small["inner_folds"] == 6 and small["inner_repeats"] == 2
    for t in res["candidates"]:  # the paired margin over the default, recomputed
        base = next(b for b in res["candidates"] if b["candidate"] == res["default_candidate"])
        d = np.array(t["inner_tau_per_fold"]) - np.array(base["inner_tau_per_fold"])
        assert t["margin_over_default"] == pytest.approx(d.mean())
    clear = [t for t in res["candidates"] if t["candidate"] != res["default_candidate"]
             and t["margin_over_default"] > res["replace_margin_se"] * t["margin_over_default_se"]
             and t["margin_over_random"] > t["margin_se"]
             and t["sd_selecting_models"] >= sd_full]
    assert res["replaced_default"] == bool(clear)
    acc = weighted_accuracy(res["mask"][None, :].astype(float), x, k)[0]
    assert float(np.std(acc, ddof=1)) >= sd_full
    if not res["replaced_default"]:
        assert res["candidate"] == "none/stratified_balanced" and "SD of model accuracies" in res["statement"]


def test_balanced_draw_hits_the_stretched_target_and_keeps_categories():
    """Hand-checkable: 8 items, 2 categories, 2 models; the start takes 2 items per category. Model A is right
    on items 0-3 (every category-0 item), model B on items 0 and 4; whole-pool accuracies 0.5 and 0.25. Every
    draw with 2 items per category gives A 2 of 4; B gets 1 of 4 when exactly one of items 0 and 4 is in."""
    from audit_hub.curate.draws import balanced_draw

    right = np.zeros((8, 2))
    right[[0, 1, 2, 3], 0] = 1
    right[[0, 4], 1] = 1
    cat = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    start = np.array([1, 1, 0, 0, 1, 1, 0, 0], bool)  # A: 2/4, B: 2/4 (target 1/4)
    m = balanced_draw(right, np.ones_like(right), cat, start, (0,), stretch=1.0)
    assert m.sum() == 4 and m[:4].sum() == 2 and m[4:].sum() == 2
    assert right[m].mean(axis=0) == pytest.approx([0.5, 0.25])
    # stretch 1.5 about the mean 0.375: targets 0.5625 and 0.1875 (x 4 items: 2.25 and 0.75); A's count is
    # always 2 and B's 0, 1 or 2: the nearest is B = 1 (squared distance 0.0625 + 0.0625)
    m2 = balanced_draw(right, np.ones_like(right), cat, start, (0,), stretch=1.5)
    assert right[m2].sum(axis=0) == pytest.approx([2, 1])
    # only allowed items enter the draw
    allowed = np.ones(8, bool)
    allowed[0] = False
    m3 = balanced_draw(right, np.ones_like(right), cat, np.array([0, 1, 1, 0, 1, 1, 0, 0], bool), (0,),
                       allowed=allowed)
    assert not m3[0] and m3.sum() == 4


def test_default_not_below_random_over_seeds_on_a_simulated_pool():
    """The robustness mechanism: over several seeds (inner folds and draws differ), the default balanced draw's
    inner figure is on average above random subsets', and the selection chosen on 2/3 of the models ranks the
    held-out third at least as well as random subsets do on average over the seeds."""
    rng = np.random.default_rng(21)
    x, _ = _two_pl(rng, 1500, 24)
    k = np.ones_like(x)
    cat = rng.integers(0, 5, 1500)
    full = x.mean(axis=0)
    te = np.arange(24) % 3 == 0
    tr = ~te
    from audit_hub.curate.draws import stratified_random

    rand = stratified_random(cat, 300, 200, np.random.default_rng(0))
    rho_rand = np.nanmean(spearman(weighted_accuracy(rand, x[:, te], k[:, te]), np.broadcast_to(full[te], (200, te.sum()))))
    rhos, inner, inner_rand = [], [], []
    for seed in range(5):
        res = choose(x[:, tr], k[:, tr], cat, {"none": np.ones(1500, bool)}, 300, 0.5, seed=seed)
        base = next(t for t in res["candidates"] if t["candidate"] == res["default_candidate"])
        inner.append(base["inner_tau_mean"])
        inner_rand.append(res["random_inner_tau"])
        rhos.append(spearman(weighted_accuracy(res["mask"][None, :].astype(float), x[:, te], k[:, te])[0], full[te]))
    assert np.mean(inner) > np.mean(inner_rand)
    assert np.mean(rhos) >= rho_rand


def test_ensemble_estimate_is_the_inverse_squared_inner_mae_weighted_mean():
    """The ensemble estimator: weights 1 / inner MAE^2 over its parts (the four estimators on the one balanced
    draw: the same budget of items as every other estimator), normalised; its outer estimate is that weighted
    mean of theirs (recomputed here), and it reads the held-out models' answers on the budget's items only."""
    from audit_hub.curate.estimate import estimate_all

    rng = np.random.default_rng(3)
    x, _ = _two_pl(rng, 1500, 24)
    k = np.ones_like(x)
    test = np.arange(1, 24, 2)
    train = np.setdiff1d(np.arange(24), test)
    res = score_split(x, k, train, test, 60, 0)
    w = res["ensemble_weights"]
    im = res["inner_mae_points"]
    assert set(w) == set(ENSEMBLE_PARTS)
    assert sum(w.values()) == pytest.approx(1.0)
    raw = {e: 1 / im[e] ** 2 for e in w}
    for e in w:
        assert w[e] == pytest.approx(raw[e] / sum(raw.values()))
    est = estimate_all(x, k, train, test, 60, 0)["estimates"]
    truth = x[:, test].mean(axis=0)
    ens = sum(w[e] * est[e] for e in w)
    assert np.abs(ens - truth) == pytest.approx(res["abs_err"]["ensemble"])
    # the ensemble sees the same budget as every other estimator: the held-out models' answers off the random
    # draw (seed key [seed, 11]) change nothing in it, while the anchor-based estimators move
    from audit_hub.curate.draws import stratified_random

    draw = stratified_random(np.zeros(1500, np.int64), 60, 1, np.random.default_rng([0, 11]))[0] > 0
    x2 = x.copy()
    x2[np.ix_(~draw, test)] = 1 - x2[np.ix_(~draw, test)]
    est2 = estimate_all(x2, k, train, test, 60, 0)["estimates"]
    for e in ENSEMBLE_PARTS:
        assert est2[e] == pytest.approx(est[e])
    assert not np.allclose(est2["anchor_calibrated"], est["anchor_calibrated"])


def test_calibrated_random_pirt_is_the_training_models_least_squares_line_through_their_own_pirt():
    """``random_pirt_calibrated``: the held-out model's p-IRT estimate on the random draw mapped through the line
    ``full ~ a + b * pirt`` fitted (least squares, ``np.polyfit``) on the training models' p-IRT estimates from the
    same draw and the same 2PL fit; clipped to [0, 1]."""
    from audit_hub.curate.draws import stratified_random
    from audit_hub.curate.estimate import estimate_all
    from audit_hub.curate.irt import estimate_scores, fit_2pl

    rng = np.random.default_rng(8)
    x, _ = _two_pl(rng, 900, 14)
    k = np.ones_like(x)
    test = np.array([2, 7, 11])
    train = np.setdiff1d(np.arange(14), test)
    est = estimate_all(x, k, train, test, 80, 4)["estimates"]
    model = fit_2pl(x[:, train], k[:, train])
    ri = np.flatnonzero(stratified_random(np.zeros(900, np.int64), 80, 1, np.random.default_rng([4, 11]))[0] > 0)
    w = np.full(len(ri), 1 / len(ri))
    p_tr = estimate_scores(model, ri, w, x[ri][:, train], k[ri][:, train], k[:, train], 1.0)["pirt"]
    p_te = estimate_scores(model, ri, w, x[ri][:, test], k[ri][:, test], k[:, test], 1.0)["pirt"]
    assert est["random_pirt"] == pytest.approx(p_te)
    b, a = np.polyfit(p_tr, x[:, train].mean(axis=0), 1)
    assert est["random_pirt_calibrated"] == pytest.approx(np.clip(a + b * p_te, 0, 1), abs=1e-12)
    # the line moves the estimate: it is not the raw p-IRT figure
    assert not np.allclose(est["random_pirt_calibrated"], p_te)


def test_inner_cross_validation_leaves_one_model_out_in_small_pools():
    """Up to LOO_MAX_TRAIN training models the estimators are compared in leave-one-model-out inner folds (fitted
    to n - 1 models, as the outer split fits them to n); above, in 3 folds; under 6 training models, none."""
    from audit_hub.curate.estimate import LOO_MAX_TRAIN

    rng = np.random.default_rng(5)
    x, _ = _two_pl(rng, 800, 26)
    k = np.ones_like(x)
    for n_train, folds in ((7, 7), (LOO_MAX_TRAIN, LOO_MAX_TRAIN), (LOO_MAX_TRAIN + 1, 3), (25, 3), (5, 0)):
        s = score_split(x, k, np.arange(n_train), np.array([25]), 60, 0)
        assert s["inner_folds"] == folds
        assert (s["inner_mae_points"]["ensemble"] is None) == (folds == 0)
    assert score_split(x, k, np.arange(7), np.array([25]), 60, 0, loo_max_train=0)["inner_folds"] == 2



def test_leave_one_out_inner_folds_on_the_real_mathvista_pool():
    """MathVista's 8 image models, each left out in turn with 100 budget items (seed 0). With 2 inner folds the
    2PL-based estimators were compared fitted to 3-4 models and lost to the model-free ones; with leave-one-out
    inner folds they are compared fitted to 6 (as the outer split fits them to 7) and p-IRT on information
    anchors is chosen for 7 of the 8 left-out models. Measured (seeds 0-3): reported MAE 1.97 / 1.68 / 1.17 /
    2.04 points with leave-one-out inner folds (1.84 / 1.56 / 1.17 / 2.11 before the ensemble gained its fourth
    part, ``random_pirt_calibrated``, 2026-12-06: the left-out model that keeps the ensemble is estimated worse
    there), 4.24 / 1.48 / 3.71 / 3.20 with 2 folds (before that change), plain random items 3.70 / 1.93 / 3.97 /
    3.43.

    The 2-fold figure of seed 0 depends on the machine: 4.24 on an AMD EPYC, 4.13 on an Intel Xeon with
    AVX-512 and 4.07 there with OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE=Haswell); 3.83 on the AMD EPYC
    since the ensemble's own parts no longer replace it (2026-12-06), 3.70 there with the four-part ensemble, and
    3.50 on another AMD EPYC machine (2026-12-07, at the same commit as a 3.70 there). Its
    inner folds fit the
    2PL to 3-4 models, the estimators come out nearly tied, and the last bits of NumPy's and OpenBLAS's
    CPU-specific kernels decide 3 of the 8 choices. So it is asserted as a range, well above the leave-one-out
    figure. The leave-one-out figure and its choices are the same on all three."""
    from audit_hub.curate.pipeline import _Pool
    from audit_hub.frame.core import AuditFrame

    real = Path(__file__).parent / "fixtures" / "real_pools" / "mathvista"
    pool = _Pool(AuditFrame.from_tables(pd.read_parquet(real / "questions.parquet"),
                                        pd.read_parquet(real / "runs.parquet")), "hit")
    M = pool.right.shape[1]
    loo, kfold, rnd, chosen = [], [], [], []
    for j in range(M):
        train, test = np.setdiff1d(np.arange(M), [j]), np.array([j])
        a = score_split(pool.right, pool.known, train, test, 100, 0, pool.cat)
        b = score_split(pool.right, pool.known, train, test, 100, 0, pool.cat, loo_max_train=0)
        assert a["inner_folds"] == M - 1 and b["inner_folds"] == 2
        loo.append(a["abs_err"][a["chosen"]][0])
        kfold.append(b["abs_err"][b["chosen"]][0])
        rnd.append(a["abs_err"]["random"][0])
        chosen.append(a["chosen"])
    assert 100 * np.mean(loo) == pytest.approx(1.97, abs=0.01)
    assert 100 * np.mean(rnd) == pytest.approx(3.70, abs=0.01)
    assert 3.4 <= 100 * np.mean(kfold) <= 4.4 and 100 * np.mean(kfold) >= 100 * np.mean(loo) + 1.5
    assert chosen.count("pirt_information") == 7


def test_doubted_golds_leave_the_draw_on_the_real_mathvista_pool():
    """MathVista's released runs (8 image models): the label model doubts 10 golds that its held-out check does not
    support as label errors (the audit publishes no label-error flag). Curation leaves them out of its draw and says
    why, without calling them errors. Measured with ``benchmarks/curate.py`` (20 seeds, 300 items): held-out
    rank displacement 0.603 with them left out, 0.891 with them kept (``doubted_gold=keep``), random subsets
    0.885. Seed 0: 0.750, and 1.500 when kept, against 0.902 for random subsets."""
    from audit_hub.curate.filters import DOUBTED
    from audit_hub.frame.core import AuditFrame

    real = Path(__file__).parent / "fixtures" / "real_pools" / "mathvista"
    frame = AuditFrame.from_tables(pd.read_parquet(real / "questions.parquet"), pd.read_parquet(real / "runs.parquet"))
    cheap = {**FAST, "score_budget": 0}
    res = run_curation(frame, CurateConfig(target_size=300, seed=0, **cheap))
    s = res.summary
    assert s["stage_order"][-1] == DOUBTED and s["removed_by_stage"][DOUBTED] == 10
    gone = res.removed[res.removed["stage"] == DOUBTED]
    assert len(gone) == 10 and gone["reason"].str.contains("not a finding").all()
    f = res.findings.set_index("question_id").loc[gone["question_id"]]
    assert f["consensus_error_gold_doubted"].all() and not f["is_consensus_error_issue"].any()
    lomo = s["heldout_lomo"]
    assert lomo["mean_rank_displacement"] <= 0.8 and lomo["mean_rank_displacement"] < lomo["random_mean_rank_displacement"]
    kept = run_curation(frame, CurateConfig(target_size=300, seed=0, thresholds=StageThresholds(doubted_gold="keep"),
                                            **cheap))
    assert DOUBTED not in kept.summary["stage_order"] and kept.summary["heldout_lomo"]["mean_rank_displacement"] >= 1.2
