"""consensus_error on real-pool regimes (issue 25): shared letter bias, categories at chance, correlated
model families, mixed strong/weak pools, with and without planted wrong golds; the identifiability rule,
the held-out-model predictive check and a real-data regression on the BLINK pool."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sim import simulate_frame

from audit_hub.detectors import consensus_error as ce
from audit_hub.frame.core import AuditFrame
from audit_hub.stats import label_checks as lc
from audit_hub.stats import label_model as lm
from audit_hub.stats.label_model import average_precision

REAL = Path(__file__).parent / "fixtures" / "real_pools"

REGIMES = {
    "letter_bias": dict(accuracy_full=np.linspace(0.45, 0.9, 8), guess_rate=[0, 0, 0, 0, 0.3, 0.4, 0.5, 0.6],
                        difficulty_sd=1.0),
    "chance_category": dict(accuracy_full=np.linspace(0.6, 0.9, 8), guess_rate=0.4, chance_categories=[0],
                            difficulty_sd=1.0),
    "families": dict(accuracy_full=np.linspace(0.55, 0.9, 8), family=[0, 0, 0, 1, 1, 1, 2, 2], family_share=0.6,
                     difficulty_sd=1.0),
    "mixed_strong_weak": dict(accuracy_full=[0.92, 0.9, 0.88, 0.4, 0.35, 0.3, 0.3, 0.3], difficulty_sd=1.0),
}
# (recall of the findings, AP of the ranking) at least, with 18 planted wrong golds in 600 items (seed 0;
# measured 0.44 / 0.71, 0 / 0.43, 0.83 / 0.96, 0.72 / 0.97)
PLANTED_FLOOR = {"letter_bias": (0.3, 0.55), "chance_category": (0.0, 0.3), "families": (0.6, 0.85),
                 "mixed_strong_weak": (0.6, 0.85)}


def _run(regime: str, label_errors: int, seed: int = 0):
    f = simulate_frame(600, 8, accuracy_blind=None, n_categories=3, label_errors=label_errors, seed=seed,
                       **REGIMES[regime])
    return f, ce.run(f, recall_sims=0)


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_defect_free_regime_flags_at_most_one_percent(regime):
    for seed in (0, 1):
        _, r = _run(regime, 0, seed)
        share = r.per_question["is_consensus_error_issue"].mean()
        assert share <= 0.01, (regime, seed, share)


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_planted_wrong_golds_are_found(regime):
    f, r = _run(regime, 18)
    pq = r.per_question
    planted = pq["question_id"].isin(f.meta["planted"]["label_errors"]).to_numpy()
    assert planted.sum() == 18
    iss = pq["is_consensus_error_issue"].to_numpy()
    lo = np.nan_to_num(pq["consensus_error_log_odds_gold_wrong"].to_numpy(), nan=-1e9)
    rec_min, ap_min = PLANTED_FLOOR[regime]
    assert (iss & planted).sum() / planted.sum() >= rec_min
    assert average_precision(lo, planted) >= ap_min
    assert (iss & ~planted).sum() <= max(2, 0.25 * iss.sum())  # the findings are mostly the planted ones


def test_category_at_chance_with_letter_bias_is_not_flagged_and_the_card_says_why():
    f, r = _run("chance_category", 0)
    s = r.summary
    assert list(s["categories_not_identifiable"]) == ["cat0"]
    assert "position-bias baseline" in s["categories_not_identifiable"]["cat0"]
    cat = f.questions["category"].to_numpy()
    assert not r.per_question["is_consensus_error_issue"].to_numpy()[cat == "cat0"].any()
    assert (r.per_question["consensus_error_severity"].to_numpy()[cat == "cat0"] != "high").all()
    row = s["identifiability"]["cat0"]
    assert not row["identifiable"] and row["best_accuracy_out_of_sample"] < 0.5
    assert s["identifiability"]["cat1"]["identifiable"] and s["identifiability"]["cat2"]["identifiable"]
    card = ce.card_line(s)
    assert "cannot be audited for label errors" in card and "**cat0**" in card


def test_review_order_keeps_items_of_unidentifiable_categories_at_their_prior(monkeypatch):
    """The review order (`consensus_error_score`) reads the posterior only where the category passes the
    identifiability test; elsewhere the answers carry no evidence about the gold and the item keeps its prior
    odds. Planted: one item of the at-chance category is given a posterior of 0.99 (log odds +5), as the pool's
    shared errors gave VisOnlyQA's at-chance tasks (its planted-gold AP 0.215 -> 0.48 with this rule)."""
    f, _ = _run("chance_category", 18)
    cat = f.questions["category"].to_numpy()
    target = int(np.flatnonzero(cat == "cat0")[0])
    orig = ce.label_posterior

    def boosted(*a, **k):
        out = orig(*a, **k)
        j = int(np.flatnonzero(out["rows"] == target)[0])
        out["log_odds"] = out["log_odds"].copy()
        out["p_wrong"] = out["p_wrong"].copy()
        out["log_odds"][j], out["p_wrong"][j] = 5.0, 1.0 / (1.0 + np.exp(-5.0))
        return out

    monkeypatch.setattr(ce, "label_posterior", boosted)
    r = ce.run(f, recall_sims=0)
    pq, s = r.per_question, r.summary
    eps = s["label_model"]["eps"]
    closed = pq["consensus_error_p_gold_wrong"].notna().to_numpy()
    sc = pq["consensus_error_score"].to_numpy()
    # every closed item of cat0 is at the prior, P(gold right) = 1 - eps, whatever its posterior (within the
    # tie-break: log odds at most 1e-3 from the prior's), and among them the posterior's order is kept
    c0 = (cat == "cat0") & closed
    np.testing.assert_allclose(sc[c0], 1.0 - eps, rtol=0, atol=eps * (1 - eps) * 1.01e-3)
    lo0 = pq["consensus_error_log_odds_gold_wrong"].to_numpy()[c0]
    assert (np.diff(sc[c0][np.argsort(lo0)]) <= 0).all() and sc[target] == sc[c0].min()
    assert pq["consensus_error_p_gold_wrong"].iloc[target] == pytest.approx(0.9933, abs=1e-4)  # the posterior kept
    assert not pq["is_consensus_error_issue"].iloc[target] and not pq["consensus_error_gold_doubted"].iloc[target]
    # ... so it ranks after every item of an identifiable category that the answers doubt more than the prior
    lo = pq["consensus_error_log_odds_gold_wrong"].to_numpy()
    doubted = closed & (cat != "cat0") & (lo > np.log(eps / (1 - eps)) + 1e-9)
    assert doubted.sum() >= 18
    assert (sc[doubted] < sc[target]).all()
    # by its raw posterior it would have come before most of them
    assert lo[target] == 5.0 and (lo[doubted] < 5.0).mean() >= 0.5


def test_predictive_check_passes_on_a_well_fit_pool():
    _, r = _run("mixed_strong_weak", 18)
    chk = r.summary["predictive_check"]
    assert chk["supported"] is True
    assert chk["observed_agreement"] < chk["predicted_if_gold_right"] - 0.2
    assert r.summary["flags_supported"] and r.summary["n_flagged"] >= 10
    assert "Held-out-model check passed" in ce.card_line(r.summary)


def test_predictive_check_fails_on_a_misfit_pool(monkeypatch):
    """A letter-biased pool fitted by a model without position bias: its flags are the shared letter
    preference, the left-out models agree with those golds as if they were right, and the check fails."""
    f = simulate_frame(600, 8, accuracy_blind=None, n_categories=1, seed=3, difficulty_sd=0.5,
                       accuracy_full=[0.8, 0.75, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3],
                       guess_rate=[0, 0, 0.8, 0.8, 0.8, 0.85, 0.9, 0.9])
    orig = lm.fit
    monkeypatch.setattr(lm, "fit", lambda *a, **k: orig(*a, **(k | {"position_bias": False})))
    r = ce.run(f, recall_sims=0)
    s = r.summary
    assert s["n_posterior_gold_wrong"] >= 30          # the misfit model reads the letter bias as wrong golds
    chk = s["predictive_check"]
    assert chk["supported"] is False                  # measured: 81% observed vs 23% predicted, 44% if right
    assert chk["observed_agreement"] > chk["predicted_if_gold_right"] > chk["predicted_agreement"]
    assert s["n_flagged"] == 0 and not r.per_question["is_consensus_error_issue"].any()
    assert "Held-out-model check failed" in ce.card_line(s)
    monkeypatch.setattr(lm, "fit", orig)
    assert ce.run(f, recall_sims=0).summary["n_posterior_gold_wrong"] <= 3  # the position-bias model: none


def _real(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(REAL / name / "questions.parquet"), pd.read_parquet(REAL / name / "runs.parquet")


def _swap_and_rank(q, runs, sel: np.ndarray, rng: np.random.Generator):
    """Swap the gold of the items ``sel`` uniformly to another option (letters A-D), rerun consensus_error, and
    return its log odds that the gold is wrong (-1e9 where none), the mask of the swapped items and the swapped
    questions table."""
    k = q["options"].map(len).to_numpy()
    letters = "ABCD"
    old = q["answer"].map(letters.index).to_numpy()
    q2 = q.copy()
    q2.loc[sel, "answer"] = [letters[(old[i] + rng.integers(1, k[i])) % k[i]] for i in sel]
    r2 = ce.run(AuditFrame.from_tables(q2, runs), recall_sims=0, check=False)
    lo = np.nan_to_num(r2.per_question["consensus_error_log_odds_gold_wrong"].to_numpy(), nan=-1e9)
    planted = np.zeros(len(q), bool)
    planted[sel] = True
    return lo, planted, q2


def test_real_blink_pool_regression():
    """BLINK val (1,901 items, 19 models; humans ~96%): the golds are essentially right and several subtasks
    are at chance for this pool. Before issue 25: 466-558 flags (24-29%), 61% of Relative_Reflectance."""
    q, runs = _real("blink")
    f = AuditFrame.from_tables(q, runs)
    r = ce.run(f, recall_sims=0)
    s = r.summary
    assert r.per_question["is_consensus_error_issue"].mean() <= 0.03
    # the wrong-gold share of the closed items of identifiable categories (1,232 items): posterior mean 0.087,
    # ML 0.112 (95% profile CI about 0.08-0.15), above the 5% target (the card's check also fails here)
    n_id = s["n_items_identifiable"]
    assert n_id == 1232
    assert s["expected_wrong_gold_share"] == pytest.approx(s["expected_wrong_gold"] / n_id)
    assert 0.06 <= s["expected_wrong_gold_share"] <= 0.11
    wg = s["wrong_gold_share"]
    assert wg["n_items"] == n_id and wg["ci"][0] < wg["estimate"] < wg["ci"][1]
    assert 0.08 <= wg["estimate"] <= 0.14
    # calibrated by the held-out check over every item the held-out fits doubt, weighted by the posterior that the
    # gold is wrong (about 327 expected wrong golds): left-out models agree with those golds on 39%, above even
    # what right golds on hard items predict (37.5%; 33% if wrong): w = 0 (clipped), interval 0 to 0.26. On the
    # flagged items alone (344, 33% / 28% / 35%) w was 0.29: 0.112 x 0.29 = 0.032.
    wc = s["wrong_gold_share_checked"]
    sc = s["predictive_check"]["share_check"]
    w = (sc["predicted_if_gold_right"] - sc["observed_agreement"]) / (
        sc["predicted_if_gold_right"] - sc["predicted_agreement"])
    assert sc["realised_share"] == pytest.approx(w) and w < 0 and 250 <= sc["expected_wrong_checked"] <= 400
    assert wc["realised_share"] == 0.0 and wc["checked_on"] == "posterior-weighted items"
    assert 0.1 <= wc["realised_share_ci"][1] <= 0.4
    assert wc["estimate"] == pytest.approx(wg["estimate"] * wc["realised_share"])
    assert wc["estimate"] <= 0.05 and wc["ci"][0] <= wc["estimate"] <= wc["ci"][1] <= wg["ci"][1]
    line = next(x for x in ce._notes(s) if x.startswith("**Estimated wrong-gold share**"))
    assert f"{100 * wc['estimate']:.1f}%" in line and f"{100 * wg['estimate']:.1f}%" in line
    assert "of the 1,232 closed" in line
    bad = s["categories_not_identifiable"]
    assert {"Relative_Reflectance", "IQ_Test", "Object_Localization"} <= set(bad)
    assert {"Counting", "Forensic_Detection", "Visual_Correspondence"}.isdisjoint(bad)
    # planted wrong golds on identifiable items rank well above chance (0.03); measured 0.19 at seed 0
    # (0.17-0.24 over three plantings): below the 0.5, see docs/statistics.md
    rng = np.random.default_rng(0)
    ident = ~q["category"].isin(list(bad)).to_numpy()
    sel = np.sort(rng.choice(np.flatnonzero(ident), int(0.03 * ident.sum()), replace=False))
    lo, planted, _ = _swap_and_rank(q, runs, sel, rng)
    assert average_precision(lo[ident], planted[ident]) >= 0.12


def test_real_blink_planted_on_informative_items():
    """The issue's planting rule: 3% of the identifiable mc items, swapped among the items whose pool is
    informative (the category's 3 most accurate models all give the released gold; benchmarks/label_errors.py
    ``informative_items``). Measured AP 0.37 at this planting (0.436 mean over the benchmark's 20)."""
    q, runs = _real("blink")
    f = AuditFrame.from_tables(q, runs)
    bad = ce.run(f, recall_sims=0, check=False).summary["categories_not_identifiable"]
    ident = ~q["category"].isin(list(bad)).to_numpy()
    A = f.answer_codes("full", models=f.models_in("full"))
    gold = f.gold_codes().astype(np.int64)
    cat = q["category"].to_numpy()
    inf = np.zeros(len(q), bool)
    for c in np.unique(cat[ident]):
        s = np.flatnonzero(cat == c)
        top = np.argsort(-(A[s] == gold[s, None]).mean(axis=0), kind="stable")[:3]
        inf[s] = (A[s][:, top] == gold[s, None]).all(axis=1)
    assert 0.3 <= inf[ident].mean() <= 0.45            # measured 0.386 of the identifiable items
    rng = np.random.default_rng(0)
    sel = np.sort(rng.choice(np.flatnonzero(inf), int(round(0.03 * ident.sum())), replace=False))
    lo, planted, q2 = _swap_and_rank(q, runs, sel, rng)
    ours = average_precision(lo, planted)
    assert ours >= 0.3
    # a ranking told the planting rule, on the planted benchmark: the items where the category's 3 strongest
    # models (by accuracy against the stated gold) agree on one non-gold answer first, by vote margin. BLINK has
    # more such items that were not planted (look-alikes) than planted ones, so even that ranking stays below
    # AP 0.5: the 0.5 is beyond what these answers allow under this planting. Here ours 0.37, the rule
    # 0.45; over benchmarks/label_errors.py's 20 plantings ours 0.436 vs 0.397 (higher in 15 of 20)
    g2 = AuditFrame.from_tables(q2, runs).gold_codes().astype(np.int64)
    rule = np.zeros(len(q), bool)
    margin = np.zeros(len(q))
    for c in np.unique(cat[ident]):
        s = np.flatnonzero((cat == c) & ident)
        top = A[s][:, np.argsort(-(A[s] == g2[s, None]).mean(axis=0), kind="stable")[:3]]
        rule[s] = (top == top[:, :1]).all(axis=1) & (top[:, 0] >= 0) & (top[:, 0] != g2[s])
        margin[s] = (A[s] == top[:, :1]).sum(axis=1) - (A[s] == g2[s, None]).sum(axis=1)
    score = np.where(rule, 1000 + margin, -(A == g2[:, None]).sum(axis=1))
    assert int((rule & ~planted).sum()) >= 1.5 * planted.sum()    # measured 62 beside 37 planted
    assert int((rule & planted).sum()) >= 0.6 * planted.sum()     # the rule finds most planted swaps (32)
    assert 0.3 <= average_precision(score, planted) <= 0.55       # measured 0.45


def test_weak_held_out_models_no_stronger_than_the_pool_are_not_used_by_the_check():
    """One strong model among seven weak ones (4 options, 29-35% right): only the strong one is held out.
    Each weak one has kappa over its position-bias baseline below 0.2 and is within z < 2 of the median of
    the others (accuracy a, SE sqrt(a (1 - a) / n) on the checked items), so it is listed, with its figures,
    and never fitted against. A pool of equally strong models (kappa >= 0.2) holds out its five strongest."""
    f = simulate_frame(600, 8, accuracy_blind=None, n_categories=1, seed=0, difficulty_sd=1.0,
                       accuracy_full=[0.9, 0.35, 0.34, 0.33, 0.32, 0.31, 0.3, 0.29])
    chk = ce.run(f, recall_sims=0).summary["predictive_check"]
    assert [u["model"] for u in chk["units"]] == ["model_00"] and chk["n_held_out"] == 1
    weaker = chk["too_weak_to_hold_out"]
    assert sorted(w["model"] for w in weaker) == list(range(1, 8))
    A = f.answer_codes("full", models=f.models_in("full"))
    gold = f.gold_codes().astype(np.int64)
    acc = (A == gold[:, None]).mean(axis=0)
    n = len(gold)
    freq = np.stack([(A == j).mean(axis=0) for j in range(4)], axis=1)
    base = freq @ (np.bincount(gold, minlength=4) / n)
    kap = (acc - base) / (1 - base)
    for w in weaker:
        j = w["model"]
        med = np.median(np.delete(acc, j))
        assert w["accuracy"] == pytest.approx(acc[j]) and w["median_of_rest"] == pytest.approx(med)
        assert w["kappa_over_position_baseline"] == pytest.approx(kap[j]) and kap[j] < lc.KAPPA_MIN
        assert (acc[j] - med) / np.sqrt(acc[j] * (1 - acc[j]) / n) < lc.STRONGER_Z
    assert (acc[0] - np.median(acc[1:])) / np.sqrt(acc[0] * (1 - acc[0]) / n) >= lc.STRONGER_Z
    even = simulate_frame(600, 8, accuracy_blind=None, n_categories=1, seed=0, difficulty_sd=1.0,
                          accuracy_full=0.6)
    chk = ce.run(even, recall_sims=0).summary["predictive_check"]
    assert chk["n_held_out"] == 5 and chk["too_weak_to_hold_out"] == []


def test_real_mathvista_pool_regression():
    """MathVista testmini (1,000 items; 8 image models of 2023, 32-49% on its mc items, one above the others:
    Bard). Before the held-out models had to be stronger than the pool's median model, the check "passed" on
    the label model's 10 flags (z = 2.4) because the four weak held-out models agreed with the gold on 10-20%
    of them, below even what wrong golds predict (26%): they erred with the pool. At least two of the ten
    golds are right on their face (item 320: a midline of a 5-12-13 right triangle, gold 6; item 235: the
    epigraph of a function is an infinite set, gold Yes). Now Bard alone is held out, it agrees with those
    golds on 4 of 10 (53% predicted if right, 26% if wrong) and the check fails: no findings."""
    q, runs = _real("mathvista")
    r = ce.run(AuditFrame.from_tables(q, runs), recall_sims=0)
    s = r.summary
    chk = s["predictive_check"]
    assert [u["model"] for u in chk["units"]] == ["bard"] and len(chk["too_weak_to_hold_out"]) == 7
    assert chk["supported"] is False and chk["n_flagged_checked"] == 10
    assert chk["observed_agreement"] == pytest.approx(0.4)
    assert s["n_posterior_gold_wrong"] == 10 and s["n_flagged"] == 0
    assert not r.per_question["is_consensus_error_issue"].any()
    flagged = set(r.per_question.loc[r.per_question["consensus_error_p_gold_wrong"] >= 0.5, "question_id"])
    assert {"235", "320"} <= {str(x) for x in flagged}
    line = next(x for x in ce._notes(s) if x.startswith("**Held-out-model check failed**"))
    assert "1 model held out; 7 others not" in line
    # the share check (every checked item weighted by the posterior that its gold is wrong: about 19 expected
    # wrong golds) realises 0.22 of the predicted drop (46% observed, 38% if wrong, 49% if right): 0.161 x 0.22
    wc = s["wrong_gold_share_checked"]
    sc = chk["share_check"]
    assert 10 <= sc["expected_wrong_checked"] <= 30
    assert sc["predicted_agreement"] < sc["observed_agreement"] < sc["predicted_if_gold_right"]
    assert wc["realised_share"] == pytest.approx(sc["realised_share"]) and 0.1 <= wc["realised_share"] <= 0.35
    assert wc["estimate"] == pytest.approx(wc["model_estimate"] * wc["realised_share"]) and wc["estimate"] <= 0.05


def test_wrong_gold_rate_hand_case():
    """90 items whose answers favour the gold infinitely (r = 0) and 10 that favour another option
    (r = e^50): L(e) = 90 log(1 - e) + 10 log(1 - e + e r), maximised near 10/100; the interval's ends sit
    where 2 (L(e_hat) - L(e)) = chi2_1(0.95) = 3.841."""
    from scipy.stats import chi2

    n0, n1 = 90, 10
    ll = np.zeros((n0 + n1, 2))
    ll[:n0, 1] = -60.0           # clipped to -50
    ll[n0:, 1] = 50.0
    out = lm.wrong_gold_rate(ll, np.full(n0 + n1, 2), np.zeros(n0 + n1, np.int64))
    r = np.exp(np.r_[np.full(n0, -50.0), np.full(n1, 50.0)])

    def L(e):
        return np.log1p(e * (r - 1)).sum()

    assert out["estimate"] == pytest.approx(0.1, abs=1e-4)
    for e in out["ci"]:
        assert 2 * (L(out["estimate"]) - L(e)) == pytest.approx(chi2.ppf(0.95, 1), abs=1e-3)
    assert out["ci"][0] < 0.1 < out["ci"][1] and out["n_items"] == 100


def test_checked_wrong_gold_rate_hand_case():
    """w = (P0 - O) / (P0 - P) = (0.6 - 0.4) / (0.6 - 0.2) = 0.5; its interval (0.2 -+ 1.96 x 0.05) / 0.4 =
    0.255 .. 0.745; the estimate 0.1 x 0.5 and the interval [0.05 x 0.255, 0.2 x 0.745]. Agreement below P reads
    as w = 1 (clipped), above P0 as w = 0; no check: the model's own figure."""
    wg = {"estimate": 0.1, "ci": [0.05, 0.2], "n_items": 100}
    chk = {"predicted_if_gold_right": 0.6, "predicted_agreement": 0.2, "observed_agreement": 0.4,
           "sd_observed_agreement": 0.05, "realised_share": 0.5}
    out = ce.checked_wrong_gold_rate(wg, chk)
    assert out["realised_share"] == pytest.approx(0.5)
    assert out["realised_share_ci"] == pytest.approx([0.255, 0.745])
    assert out["estimate"] == pytest.approx(0.05) and out["ci"] == pytest.approx([0.05 * 0.255, 0.2 * 0.745])
    assert out["model_estimate"] == 0.1 and out["n_items"] == 100
    assert ce.checked_wrong_gold_rate(wg, chk | {"observed_agreement": 0.1})["estimate"] == pytest.approx(0.1)
    assert ce.checked_wrong_gold_rate(wg, chk | {"observed_agreement": 0.7})["estimate"] == 0.0
    none = ce.checked_wrong_gold_rate(wg, {"supported": None, "realised_share": None})
    assert none["estimate"] == 0.1 and none["realised_share"] is None
    assert ce.checked_wrong_gold_rate(None, chk) is None


def test_share_check_hand_case():
    """Sums over the checked items of w, w hit, w pred, w pred0, w^2 pred0 (1 - pred0) with w the posterior that
    the gold is wrong: two items, w = (1, 0.5), hit = (0, 1), pred = (0.2, 0.4), pred0 = (0.6, 0.8): W = 1.5,
    O = 0.5 / 1.5, P = 0.4 / 1.5, P0 = 1.0 / 1.5, V = 0.24 + 0.25 x 0.16 = 0.28; realised (1.0 - 0.5) / (1.0 -
    0.4) = 5 / 6. Fewer than MIN_CHECK_FLAGS expected wrong golds: no check. The checked rate reads the share
    check when there is one, the flagged items' figures otherwise."""
    w, hit = np.array([1.0, 0.5]), np.array([0.0, 1.0])
    pred, pred0 = np.array([0.2, 0.4]), np.array([0.6, 0.8])
    sw = np.array([w.sum(), w @ hit, w @ pred, w @ pred0, (w * w) @ (pred0 * (1 - pred0))])
    assert lc._share_check(sw) is None                       # 1.5 expected wrong golds < 5
    sc = lc._share_check(sw * 4)                             # the same items four times over
    assert sc["expected_wrong_checked"] == pytest.approx(6.0)
    assert sc["observed_agreement"] == pytest.approx(1 / 3) and sc["predicted_agreement"] == pytest.approx(0.4 / 1.5)
    assert sc["predicted_if_gold_right"] == pytest.approx(1 / 1.5)
    assert sc["sd_observed_agreement"] == pytest.approx(np.sqrt(4 * 0.28) / 6.0)
    assert sc["realised_share"] == pytest.approx(5 / 6)
    wg = {"estimate": 0.1, "ci": [0.05, 0.2], "n_items": 100}
    flag = {"predicted_if_gold_right": 0.6, "predicted_agreement": 0.2, "observed_agreement": 0.4,
            "sd_observed_agreement": 0.05, "realised_share": 0.5}
    out = ce.checked_wrong_gold_rate(wg, flag | {"share_check": sc})
    assert out["realised_share"] == pytest.approx(5 / 6) and out["checked_on"] == "posterior-weighted items"
    assert out["estimate"] == pytest.approx(0.1 * 5 / 6)
    lo = (1 / 1.5 - 1 / 3 - 1.96 * sc["sd_observed_agreement"]) / (0.6 / 1.5)
    assert out["realised_share_ci"][0] == pytest.approx(max(lo, 0.0)) and out["realised_share_ci"][1] == 1.0
    out = ce.checked_wrong_gold_rate(wg, flag | {"share_check": None})
    assert out["realised_share"] == pytest.approx(0.5) and out["checked_on"] == "flagged items"


@pytest.mark.parametrize("rate", [0.0, 0.03, 0.08])
def test_share_check_keeps_a_well_fit_estimate(rate):
    """A pool the label model fits (8 models at 75-90%, difficulty sd 1) with 0, 3% or 8% planted wrong golds:
    held-out models realise the drop the fits predict on the items they doubt (w near 1), so the checked share
    is the model's (measured: 0.022-0.023 at 3%, 0.072-0.076 at 8%, seeds 0-1) and its interval holds the planted
    rate; without wrong golds the model's estimate is 0 and so is the checked one."""
    f = simulate_frame(800, 8, accuracy_blind=None, n_categories=3, seed=0, difficulty_sd=1.0,
                       accuracy_full=[0.9, 0.87, 0.85, 0.82, 0.8, 0.78, 0.76, 0.75], label_errors=int(rate * 800))
    s = ce.run(f, recall_sims=0).summary
    wc = s["wrong_gold_share_checked"]
    if rate == 0:
        assert wc["estimate"] <= 0.003 and wc["ci"][1] <= 0.01
        return
    assert wc["checked_on"] == "posterior-weighted items" and wc["realised_share"] >= 0.85
    assert wc["ci"][0] <= rate <= wc["ci"][1] + 0.005
    assert abs(wc["estimate"] - rate) <= 0.015


def test_audit_calibration_null_keeps_findings_below_one_percent_in_every_regime():
    """The audit's own calibration (engine/calibration.py) on a pool with letter-biased models, a category at
    chance and families: every regime of its null is drawn (2 simulations each here) and consensus_error flags
    at most 1% of the items in each (measured 0.04-0.4%)."""
    from audit_hub.engine.calibration import calibrate

    f = simulate_frame(600, 8, accuracy_full=list(np.linspace(0.45, 0.9, 8)),
                       guess_rate=[0, 0, 0, 0, 0.3, 0.4, 0.5, 0.6], chance_categories=[0],
                       family=[0, 0, 0, 1, 1, 1, 2, 2], family_share=0.6, difficulty_sd=1.0, accuracy_blind=0.35,
                       seed=3)
    c = calibrate(f, ["consensus_error"], n_sims=8, seed=0)["consensus_error"]
    fit = c["simulator"]["regime_fit"]
    assert fit["chance_categories"]["categories"] == ["cat0"] and fit["families"]["families"]
    assert set(c["regimes"]) == {"iid", "letter_bias", "chance_categories", "families"}
    for r, v in c["regimes"].items():
        assert v["n_runs"] == 2 and v["flag_rate"] <= 0.01, (r, v)
    assert c["worst_regime_flag_rate"] == max(v["flag_rate"] for v in c["regimes"].values())


def _family_pool(seed: int = 3, accuracy_blind=None):
    """3 strong models (90%) and 5 weak ones (40%), 18 planted wrong golds: the flags rest on the strong three."""
    f = simulate_frame(600, 8, accuracy_blind=accuracy_blind,
                       accuracy_full=[0.9, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.4], difficulty_sd=1.0, label_errors=18,
                       seed=seed)
    names = {"model_00": "gpt-4o", "model_01": "gpt-4v", "model_02": "gpt-4-turbo", "model_03": "llava-7b",
             "model_04": "qwen-vl", "model_05": "cogvlm", "model_06": "instructblip", "model_07": "yi-vl"}
    r = f.runs_table()
    r["model"] = r["model"].astype(str).map(names)
    return f, AuditFrame.from_tables(f.questions_table(), r), names


def test_name_families_group_releases_of_one_base_and_never_the_whole_pool():
    assert lc.name_families(["InternVL2-8B", "internvl2-Llama3-76B", "gpt-4o", "GPT4V", "claude-3"]) == [[0, 1], [2, 3]]
    assert lc.name_families(["model_00", "model_01", "model_02"]) == []   # one prefix for all: not a family
    assert lc.name_families(["4o", "x"]) == []                            # no leading letters: no prefix


def test_flag_stability_drops_flags_that_rest_on_one_family():
    """Hand check of the rule: without the family's answers (parameters held at the fit) a flag whose posterior
    falls below 0.5 is not stable; the same pool with the strong three under unrelated names keeps its flags."""
    f, _, names = _family_pool()
    models = f.models_in("full")
    rows, data = ce._label_data(f, models, [], f.gold_codes().astype(np.int64))
    params, _ = lm.fit_and_test(data, seed=0)
    post, _ = lm.posterior(data, params)
    flagged = 1.0 - post[np.arange(len(rows)), data.gold] >= 0.5
    assert flagged.sum() >= 10
    plain = lc.flag_stability(data, params, flagged, names=models)          # model_XX: no family at all
    assert plain["units"] == [] and plain["n_stable"] == flagged.sum()
    fam = lc.flag_stability(data, params, flagged, names=[names[m] for m in models])
    assert [u["family"] for u in fam["units"]] == [[0, 1, 2]]
    # the same posterior by hand: drop the three columns and their parameters
    keep = np.arange(3, 8)
    d = lm.LabelData([data.arms[0][:, keep]], data.k, data.is_yn, data.gold, data.evidence, data.group,
                     data.class_keys)
    p2 = lm.LabelParams(ability=[params.ability[0][keep]], sigma=list(params.sigma), alpha=params.alpha,
                        eps=params.eps, pref=[p[keep] if p is not None else None for p in params.pref],
                        pi_attractor=params.pi_attractor, share_w=params.share_w, eps_evidence=params.eps_evidence)
    post2, _ = lm.posterior(d, p2)
    still = (1.0 - post2[np.arange(len(rows)), data.gold] >= 0.5) & flagged
    np.testing.assert_array_equal(fam["stable"], still)
    assert fam["n_stable"] < flagged.sum()        # five 40% models cannot carry most flags alone
    assert fam["units"][0]["n_flags_it_carries"] == int(flagged.sum() - still.sum())


def test_findings_that_rest_on_one_family_are_a_review_order_and_the_card_names_the_family():
    _, f2, _ = _family_pool()
    r = ce.run(f2, recall_sims=0)
    s, pq = r.summary, r.per_question
    assert s["flags_supported"] is True
    n_unstable = s["n_posterior_gold_wrong_unstable"]
    assert n_unstable >= 1
    assert s["n_flagged"] == s["n_posterior_gold_wrong"] - n_unstable
    unstable = pq["consensus_error_gold_doubted"] & ~pq["is_consensus_error_issue"]
    assert unstable.sum() == n_unstable
    assert (pq.loc[unstable, "consensus_error_severity"] == "medium").all()
    card = ce.card_line(s)
    assert f"{n_unstable} rest on one family of models" in card and "gpt-4-turbo, gpt-4o, gpt-4v" in card


def test_checked_wrong_gold_rate_with_a_family_robust_share_is_the_smaller_of_the_two():
    """The held-out check gives 0.1 x 0.5 = 0.05, interval [0.05 x 0.255, 0.2 x 0.745] = [0.01275, 0.149]
    (the hand case above). A family-robust share of 0.02 [0.005, 0.06] is smaller at each end: it is reported; one of
    0.08 [0.03, 0.2] is larger at the estimate and the low end: the check's are kept there, its upper end is not."""
    chk = {"predicted_if_gold_right": 0.6, "predicted_agreement": 0.2, "observed_agreement": 0.4,
           "sd_observed_agreement": 0.05, "realised_share": 0.5}
    wg = {"estimate": 0.1, "ci": [0.05, 0.2], "n_items": 100}
    out = ce.checked_wrong_gold_rate(wg | {"family_robust": {"estimate": 0.02, "ci": [0.005, 0.06]}}, chk)
    assert out["estimate"] == pytest.approx(0.02) and out["ci"] == pytest.approx([0.005, 0.06])
    assert out["estimate_from"] == "family-robust share" and out["family_robust_estimate"] == 0.02
    assert out["realised_share"] == pytest.approx(0.5) and out["model_estimate"] == 0.1
    out = ce.checked_wrong_gold_rate(wg | {"family_robust": {"estimate": 0.08, "ci": [0.03, 0.2]}}, chk)
    assert out["estimate"] == pytest.approx(0.05) and out["estimate_from"] == "held-out check"
    assert out["ci"] == pytest.approx([0.05 * 0.255, 0.2 * 0.745])
    note = " ".join(ce._notes({"wrong_gold_share_checked": out}))
    assert "the smaller of two checks" in note and "times the share of its predicted drop" in note


def test_family_robust_share_counts_only_evidence_no_single_family_carries():
    """On the pool of three strong models of one name family and five weak ones (18 wrong golds in 600 items):
    the share is the maximum-likelihood rate of each item's log r at its smallest over the full pool and the pool
    without the family (recomputed here by hand), below the model's; with no family there is none."""
    f, _, names = _family_pool()
    models = f.models_in("full")
    rows, data = ce._label_data(f, models, [], f.gold_codes().astype(np.int64))
    params, _ = lm.fit_and_test(data, seed=0)
    _, ll = lm.posterior(data, params)
    every = np.ones(len(rows), bool)
    none = lc.flag_stability(data, params, every & False, names=models, share_items=every)
    assert none["family_robust_share"] is None
    fam = lc.flag_stability(data, params, every & False, names=[names[m] for m in models], share_items=every)
    keep = np.arange(3, 8)
    d = lc._without_full_models(data, keep)
    p2 = lm.LabelParams(ability=[params.ability[0][keep]], sigma=list(params.sigma), alpha=params.alpha,
                        eps=params.eps, pref=[p[keep] if p is not None else None for p in params.pref],
                        pi_attractor=params.pi_attractor, share_w=params.share_w, eps_evidence=params.eps_evidence)
    _, ll2 = lm.posterior(d, p2)
    lr = np.minimum(lm.log_ratio_wrong(ll, data.k, data.gold), lm.log_ratio_wrong(ll2, data.k, data.gold))
    want = lm.rate_from_log_ratio(lr)
    got = fam["family_robust_share"]
    assert got["estimate"] == pytest.approx(want["estimate"]) and got["ci"] == pytest.approx(want["ci"])
    ml = lm.wrong_gold_rate(ll, data.k, data.gold)
    assert got["n_items"] == ml["n_items"] == 600
    assert got["estimate"] < ml["estimate"]


def test_flag_stability_leaves_a_family_s_blind_runs_out_with_it():
    """With a blind arm, leaving the GPT family out removes its three blind runs too (by name): the share is the
    hand computation with both arms' columns and parameters dropped."""
    _, f2, names = _family_pool(accuracy_blind=[0.6, 0.6, 0.6, 0.3, 0.3, 0.3, 0.3, 0.3])
    models, blind = f2.models_in("full"), f2.models_in("blind")
    assert len(blind) == 8
    rows, data = ce._label_data(f2, models, blind, f2.gold_codes().astype(np.int64))
    assert len(data.arms) == 2
    params, _ = lm.fit_and_test(data, seed=0)
    _, ll = lm.posterior(data, params)
    every = np.ones(len(rows), bool)
    out = lc.flag_stability(data, params, every & False, names=models, blind_names=blind, share_items=every)
    gpt = {"gpt-4o", "gpt-4v", "gpt-4-turbo"}
    keep = np.array([j for j, m in enumerate(models) if m not in gpt])
    keep_b = np.array([j for j, m in enumerate(blind) if m not in gpt])
    assert len(keep) == len(keep_b) == 5
    d = lc._without_full_models(data, keep, keep_b)
    assert [a.shape[1] for a in d.arms] == [5, 5]
    kp = [keep, keep_b]
    p2 = lm.LabelParams(ability=[a[kp[i]] for i, a in enumerate(params.ability)], sigma=list(params.sigma),
                        alpha=params.alpha, eps=params.eps,
                        pref=[p[kp[i]] if p is not None else None for i, p in enumerate(params.pref)],
                        pi_attractor=params.pi_attractor, share_w=params.share_w, eps_evidence=params.eps_evidence)
    _, ll2 = lm.posterior(d, p2)
    lr = np.minimum(lm.log_ratio_wrong(ll, data.k, data.gold), lm.log_ratio_wrong(ll2, data.k, data.gold))
    assert out["family_robust_share"]["estimate"] == pytest.approx(lm.rate_from_log_ratio(lr)["estimate"])
    # ... and not the figure that keeps the family's blind runs
    d1 = lc._without_full_models(data, keep)
    p1 = lm.LabelParams(ability=[params.ability[0][keep], params.ability[1]], sigma=list(params.sigma),
                        alpha=params.alpha, eps=params.eps,
                        pref=[params.pref[0][keep] if params.pref[0] is not None else None] + list(params.pref[1:]),
                        pi_attractor=params.pi_attractor, share_w=params.share_w, eps_evidence=params.eps_evidence)
    _, ll1 = lm.posterior(d1, p1)
    lr1 = np.minimum(lm.log_ratio_wrong(ll, data.k, data.gold), lm.log_ratio_wrong(ll1, data.k, data.gold))
    assert lm.rate_from_log_ratio(lr1)["estimate"] != pytest.approx(out["family_robust_share"]["estimate"])


def test_a_family_whose_blind_runs_are_the_only_ones_leaves_no_blind_arm_behind():
    """Only gpt-4o has a blind run: leaving the GPT family out (the flag rule) or gpt-4o out (the held-out check)
    leaves no blind model, so those fits have no blind arm (not an arm of zero models); the audit runs through."""
    f = simulate_frame(600, 8, accuracy_blind=0.5, blind_models=1, difficulty_sd=1.0, label_errors=18, seed=3,
                       accuracy_full=[0.9, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.4])
    names = {"model_00": "gpt-4o", "model_01": "gpt-4v", "model_02": "gpt-4-turbo", "model_03": "llava-7b",
             "model_04": "qwen-vl", "model_05": "cogvlm", "model_06": "instructblip", "model_07": "yi-vl"}
    r = f.runs_table()
    r["model"] = r["model"].astype(str).map(names)
    f2 = AuditFrame.from_tables(f.questions_table(), r)
    assert f2.models_in("blind") == ["gpt-4o"]
    rows, data = ce._label_data(f2, f2.models_in("full"), ["gpt-4o"], f2.gold_codes().astype(np.int64))
    params, _ = lm.fit_and_test(data, seed=0)
    keep = np.arange(3, 8)
    kb = lc._blind_keep([0, 1, 2], f2.models_in("full"), ["gpt-4o"])
    assert kb is not None and len(kb) == 0
    d = lc._without_full_models(data, keep, kb)
    p2 = lc._without_model_params(params, keep, kb)
    assert len(d.arms) == 1 and len(p2.ability) == len(p2.sigma) == 1 and p2.ability[0].shape[0] == 5
    lm.posterior(d, p2)
    s = ce.run(f2, recall_sims=0).summary
    st = s["predictive_check"]["stability"]
    assert [u["family"] for u in st["units"]] == [["gpt-4-turbo", "gpt-4o", "gpt-4v"]]  # names in the canonical (sorted) order
    assert s["predictive_check"]["n_held_out"] >= 1


def test_the_unidentifiable_reason_never_reads_as_significant():
    """MATH-V's solid geometry (bundled example): the best model is right on 25% against a 12% position baseline,
    p = 0.00315 against the Bonferroni bar 0.05 / 16 = 0.003125. The card said 'do not beat ... p = 0.003' (a p
    below 0.05, rounded below the bar): it now prints the adjusted p (0.0504) and names each bar it misses."""
    r = lc._not_identifiable_reason(0.0031510744869702734, 16, 0.2525, 0.1212, 0.1494)
    assert "Bonferroni-adjusted p = 0.0504 over 16 categories, above 0.05" in r
    assert "not beat their position-bias baseline significantly" in r and "kappa over the baseline 0.15 < 0.2" in r
    assert "kappa" not in lc._not_identifiable_reason(0.83, 16, 0.17, 0.18, -0.01)  # below the baseline: no kappa
    assert "p = 0.20, above 0.05)" in lc._not_identifiable_reason(0.2, 1, 0.33, 0.21, 0.3)
    r = lc._not_identifiable_reason(0.0005, 16, 0.33, 0.21, 0.15)
    assert r.startswith("the best models barely beat") and "kappa over the baseline 0.15 < 0.2" in r
    # the audit's own rows carry it, from the bundled example's summary
    from audit_hub.readers.example import example_paths

    p = example_paths()
    f = AuditFrame.from_tables(pd.read_parquet(p["questions"]), pd.read_parquet(p["runs"]))
    s = ce.run(f, recall_sims=0, check=False).summary
    why = s["categories_not_identifiable"]["solid geometry"]
    assert "Bonferroni-adjusted p = 0.0504 over 16 categories" in why, why
    assert s["categories_not_identifiable"]["counting"].startswith("too few multiple-choice or yes/no items")


def test_wrong_answer_agreement_hand_case():
    """Four 3-option items, gold A (0) everywhere: m0 and m1 both wrong on items 0-2, same wrong option on 0 and 1;
    m2 wrong on items 0 and 3 only. a(m0, m1) = 2/3, e = 1/2 (two wrong options), x = (2/3 - 1/2) / (1/2) = 1/3."""
    A = np.array([[1, 1, 2], [2, 2, 0], [1, 2, 0], [0, 0, 1]])
    X, N = lc.wrong_answer_agreement(A, np.zeros(4, np.int64), np.full(4, 3))
    assert N[0, 1] == 3 and N[0, 2] == 1 and N[1, 2] == 1 and N[2, 2] == 2
    assert X[0, 1] == pytest.approx(1 / 3) and X[1, 0] == pytest.approx(1 / 3)
    assert X[0, 2] == pytest.approx(-1.0) and X[1, 2] == pytest.approx(-1.0)  # item 0: m0 and m1 pick B, m2 C
    adj = np.zeros((5, 5), bool)
    adj[0, 1] = adj[1, 0] = adj[1, 3] = adj[3, 1] = True
    assert lc.family_components(adj) == [[0, 1, 3]]


def test_family_links_on_real_pools_find_the_fine_tunes_and_why_fits_do_not_leave_them_out():
    """The one family definition (label_checks.family_links) on the bundled MATH-V pool: no two models agree on
    85% of the items (the leave-out rule finds nothing), while their wrong answers link the fine-tunes of one base:
    InternLM-XComposer2-VL with its CoT run, LLaVA-v1.5 with ShareGPT4V (a LLaVA fine-tune) -- what the null's
    families regime draws. On the simulated mixed pool the same rule links the three strong models, which share
    no training, once wrong golds are planted: the three answer the true option where the stated gold is wrong, and
    those shared "wrong answers" are what links them. A fit that left such links out would leave out the evidence
    for the wrong golds (recall 0.72 -> 0.06 when it did)."""
    from audit_hub.readers.example import example_paths

    p = example_paths()
    f = AuditFrame.from_tables(pd.read_parquet(p["questions"]), pd.read_parquet(p["runs"]))
    models = f.models_in("full")
    _, data = ce._label_data(f, models, [], f.gold_codes().astype(np.int64))
    A = data.arms[0]
    assert all(len(x) == 1 for x in lc.families(A))
    links = lc.family_links(A, data.gold, data.k, ~data.is_yn)
    comps = [sorted(str(models[j]) for j in c) for c in lc.family_components(links["adjacency"])]
    assert ["InternLM-XComposer2-VL", "InternLM-XComposer2-VL-CoT"] in comps
    llava = next(c for c in comps if "ShareGPT4V-13B" in c)
    assert {"LLaVA-v1.5-13B", "ShareGPT4V-13B", "LLaVA-v1.5-7B", "ShareGPT4V-7B"} <= set(llava)
    i, j = models.index("ShareGPT4V-13B"), models.index("LLaVA-v1.5-13B")
    assert links["excess"][i, j] > 0.5 and 0.05 < links["median"] < 0.2
    assert not any({"Qwen-VL-Max", "Gemini-Pro"} & set(c) for c in comps)
    # the simulated mixed pool with 18 planted wrong golds: the strong three (accuracy 0.88-0.92) are linked
    fs, _ = _run("mixed_strong_weak", 18)
    _, ds = ce._label_data(fs, fs.models_in("full"), [], fs.gold_codes().astype(np.int64))
    adj = lc.family_links(ds.arms[0], ds.gold, ds.k, ~ds.is_yn)["adjacency"]
    assert adj[0, 1] and adj[0, 2] and adj[1, 2] and not adj[3:, 3:].any()
    assert all(len(x) == 1 for x in lc.families(ds.arms[0]))
