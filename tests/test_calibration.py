"""Calibration: null simulations keep structure, nominal rates on mc, the yes/no drift, generic detectors."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim import simulate_frame  # noqa: E402

from audit_hub.detectors.base import DetectorResult  # noqa: E402
from audit_hub.engine.calibration import NullSimulator, calibrate  # noqa: E402
from audit_hub.errors import DetectorSkipped  # noqa: E402

FAST = {"visual_dependency": {"n_permutations": 199}}


def test_null_simulator_keeps_structure_and_accuracy():
    f = simulate_frame(3000, 4, n_options=np.r_[np.full(1500, 3), np.full(1500, 5)],
                       accuracy_full=[0.3, 0.5, 0.7, 0.9], accuracy_blind=0.4,
                       planted={"blind_solvable": 200}, seed=1)
    sim = NullSimulator(f, n_items=None)
    g = sim.draw(np.random.default_rng(0))
    assert g.n_questions == f.n_questions and g.models == f.models
    assert np.array_equal(g.n_options, f.n_options)
    assert g.paired_models() == f.paired_models()
    acc_f = (f.correctness("full") == 1).mean(axis=0)
    acc_g = (g.correctness("full") == 1).mean(axis=0)
    assert acc_g == pytest.approx(acc_f, abs=0.03)
    # hits agree with the answer codes, and gold positions are uniform (no planted position bias)
    codes, gold = g.answer_codes("full"), g.gold_codes()
    assert np.array_equal(codes == gold[:, None], g.correctness("full") == 1)
    assert np.bincount(g.gold_index[:1500], minlength=3) / 1500 == pytest.approx([1 / 3] * 3, abs=0.05)


def test_mc_null_is_calibrated():
    f = simulate_frame(400, 4, accuracy_full=[0.4, 0.5, 0.6, 0.7], accuracy_blind=0.35, seed=2)
    cal = calibrate(f, ["visual_dependency", "correctness_agreement"], n_sims=60, seed=0, params=FAST)
    vd = cal["visual_dependency"]
    assert vd["kind"] == "p_value" and vd["nominal"] == 0.05 and vd["n_runs"] == 60
    assert vd["fpr"] <= 0.15 and vd["out_of_calibration"] is False
    assert cal["correctness_agreement"]["kind"] == "count"


REGIMES = {
    # (frame builder, expected: {stratify: (lo, hi)}) at 1,000 items x 3 models, as in the statistics issue
    "identical_4_option": (lambda: simulate_frame(1000, 3, accuracy_full=0.6, accuracy_blind=0.4, seed=1),
                           {"auto": False, "none": False}),
    "mixed_2_4_5_option": (lambda: simulate_frame(1000, 3, n_options=np.random.default_rng(1).choice([2, 4, 5], 1000),
                                                  accuracy_full=0.4, accuracy_blind=0.15, guessing=True, seed=2),
                           {"auto": False, "none": True}),
    "yes_no_response_bias": (lambda: simulate_frame(1000, 3, answer_type="yesno", accuracy_full=0.65,
                                                    accuracy_blind=0.55, yes_bias=0.3, seed=3),
                             {"auto": False, "none": True}),
}


@pytest.mark.parametrize("regime", list(REGIMES))
def test_calibration_regimes(regime):
    """The three regimes of the statistics issue, through the calibration check: the unstratified test is
    reported out of calibration exactly where accuracy depends on the stratum (mixed option counts, a
    shared yes bias); the default (auto) stratification is within calibration in all three."""
    build, expect = REGIMES[regime]
    f = build()
    for strat, out in expect.items():
        c = calibrate(f, ["visual_dependency"], n_sims=80, seed=0,
                      params={"visual_dependency": {"stratify": strat, "n_permutations": 199}})["visual_dependency"]
        assert c["out_of_calibration"] is out, (regime, strat, c["fpr"])
        if out:
            assert c["direction"] == "anti-conservative" and c["fpr"] > 0.12
        else:
            assert c["fpr"] <= 0.13
        assert c["n_items_simulated"] == 1000 and c["n_sims"] == 80


def test_simulator_keeps_response_bias_and_option_structure_on_a_subsample():
    """A 6,000-item benchmark is simulated on a stratified subsample: option counts and yes/no gold balance
    kept in proportion, per-model accuracy per (arm, option count, gold) reproduced."""
    rng = np.random.default_rng(55)  # not the simulator's seed (its first draw sets the gold)
    at = np.where(rng.random(6000) < 0.4, "yesno", "mc")
    k = rng.choice([2, 4, 5], 6000)
    f = simulate_frame(6000, 3, answer_type=at, n_options=k, accuracy_full=[0.5, 0.6, 0.7], accuracy_blind=0.3,
                       yes_bias=0.25, guessing=True, difficulty_sd=1.0, seed=5)
    sim = NullSimulator(f, n_items=600, seed=1)
    assert sim.n_items == pytest.approx(600, abs=6)
    keff = np.where(f.answer_type == "yesno", 1, f.n_options)
    share = np.bincount(keff, minlength=6)[[1, 2, 4, 5]] / 6000
    s_keff = np.where(sim.is_yn, 1, sim.k)
    assert np.bincount(s_keff, minlength=6)[[1, 2, 4, 5]] / sim.n_items == pytest.approx(share, abs=0.01)
    # difficulty in the full arm is estimated (true SD 1 on the logit scale, shrunk estimate)
    assert 0.5 < sim.difficulty_sd < 1.4
    frames = sim.draw_many(20, np.random.default_rng(0))
    yn = sim.is_yn
    for arm in ("full", "blind"):
        a = np.mean([(g.correctness(arm) == 1)[yn & (sim.gold_yn == 0)].mean(axis=0) for g in frames], axis=0)
        b = np.mean([(g.correctness(arm) == 1)[yn & (sim.gold_yn == 1)].mean(axis=0) for g in frames], axis=0)
        assert (a - b > 0.3).all()  # the yes bias (+0.25 on yes-gold, -0.25 on no-gold) survives
    # blind outcomes are independent of the item given its class: no item-level correlation between
    # two blind models beyond the class means
    g = frames[0]
    assert abs(np.corrcoef((g.correctness("blind") == 1)[~yn & (sim.k == 4)].T)[0, 1]) < 0.12


def test_calibration_cost_does_not_grow_with_items():
    """Same simulated work at 2,000 and 20,000 items (the subsample is fixed by the pool size)."""
    import time

    times = []
    for n in (2000, 20000):
        f = simulate_frame(n, 10, accuracy_full=0.6, accuracy_blind=0.4, seed=6)
        t = time.process_time()
        c = calibrate(f, ["visual_dependency"], n_sims=10, seed=0)["visual_dependency"]
        times.append(time.process_time() - t)
        assert c["n_items_simulated"] == 1500
    assert times[1] < 3 * times[0] + 0.5


def _fake(kind):
    def run(frame, *, field="hit", seed=0, **_):
        if kind == "skip":
            raise DetectorSkipped("needs option texts")
        pq = pd.DataFrame({"question_id": frame.question_ids, "fake_score": np.ones(frame.n_questions),
                           "is_fake_issue": np.zeros(frame.n_questions, bool), "fake_severity": "info"})
        if kind == "count":
            pq.loc[:1, "is_fake_issue"] = True
            return DetectorResult("fake", pq, {"n_unanimous_non_gold": 2, "expected_under_independence": 0.5})
        return DetectorResult("fake", pq, {"p_value": None})
    return run


def test_generic_detectors_count_flag_and_skip():
    f = simulate_frame(100, 3, seed=4)
    cal = calibrate(f, {"count_det": _fake("count"), "skip_det": _fake("skip")}, n_sims=5, seed=0, n_items=None)
    c = cal["count_det"]
    assert c["kind"] == "count" and c["fpr"] == pytest.approx(2 / 100) and c["nominal"] == pytest.approx(0.5 / 100)
    assert c["out_of_calibration"] is True
    assert cal["skip_det"]["kind"] == "skipped" and "option texts" in cal["skip_det"]["note"]


def test_worker_process_gives_the_same_calibration_and_waits_for_its_gate():
    """Simulations in a spawned worker (beside the detectors) give exactly the inline numbers; a worker with
    a gate submits them only after the gate returns, and the audit's calibration holds only detectors that ran."""
    import threading

    from audit_hub.engine.calibration import Calibration
    from audit_hub.engine.run import AuditConfig, run_audit
    from audit_hub.engine.worker import WorkerProcess

    f = simulate_frame(300, 5, accuracy_full=[0.4, 0.5, 0.6, 0.7, 0.8], accuracy_blind=0.35, seed=4)
    names = ["visual_dependency", "consensus_error", "answer_options_distribution"]
    inline = calibrate(f, names, n_sims=6, seed=3, params=FAST)
    gate = threading.Event()
    calls = []
    with WorkerProcess() as worker:
        worker.after = lambda: (gate.wait(), calls.append("gate passed"))
        cal = Calibration(f, names, n_sims=6, seed=3, params=FAST, worker=worker)
        assert cal._job is None and calls == []  # nothing submitted before the gate opens
        gate.set()
        out = cal.result()
    assert calls == ["gate passed"] and cal.worker["seconds"] > 0 and cal.worker["peak_rss_bytes"] > 1e7
    assert out == inline
    # the regimes follow the simulation index, so the per-regime rates do not depend on who ran which
    for name in names:
        assert set(out[name]["regimes"]) == {"iid", "letter_bias", "chance_categories", "families"}
        assert sum(r["n_runs"] for r in out[name]["regimes"].values()) == out[name]["n_runs"]
    cfg = AuditConfig(calibration_sims=4, n_permutations=99, detectors=tuple(names))
    a = run_audit(f, cfg, background_calibration=True)
    b = run_audit(f, cfg, background_calibration=False)
    assert a.calibration == b.calibration and set(a.calibration) == set(a.results)


# ---------------------------------------------------------------------------------------- real-pool regimes
def _wrong_share_at(frames, sims, regime, models, position=0):
    """Share of the wrong full-arm mc answers of ``models`` at option ``position`` over ``regime``'s frames."""
    n = w = 0
    for s, g in enumerate(frames):
        if sims.regime_of(s) != regime:
            continue
        A, gold = g.answer_codes("full")[:, models], g.gold_codes()
        wrong = (A >= 0) & (A != gold[:, None]) & (gold[:, None] != position)
        n += int(wrong.sum())
        w += int((wrong & (A == position)).sum())
    return w / n


def test_letter_bias_regime_draws_the_fitted_wrong_position_preference():
    """Models 4..7 guess option A on 30-60% of items: their wrong answers go to A far more than the uniform
    1/3 of the wrong options (items whose gold is not A); the regime reproduces it, the iid regime does not."""
    f = simulate_frame(800, 8, accuracy_full=list(np.linspace(0.45, 0.9, 8)),
                       guess_rate=[0, 0, 0, 0, 0.3, 0.4, 0.5, 0.6], difficulty_sd=1.0, accuracy_blind=0.35, seed=3)
    A, gold = f.answer_codes("full"), f.gold_codes()
    wrong = (A != gold[:, None]) & (gold[:, None] != 0)
    real = ((A == 0) & wrong)[:, 4:].sum() / wrong[:, 4:].sum()
    sim = NullSimulator(f, n_items=None)
    frames = sim.draw_many(8, np.random.default_rng(0))
    biased = _wrong_share_at(frames, sim, "letter_bias", [4, 5, 6, 7])
    assert real > 0.6 and biased == pytest.approx(real, abs=0.06)
    assert _wrong_share_at(frames, sim, "iid", [4, 5, 6, 7]) == pytest.approx(1 / 3, abs=0.03)
    # the unbiased models keep uniform wrong answers in the letter-bias regime too
    assert _wrong_share_at(frames, sim, "letter_bias", [0, 1, 2, 3]) == pytest.approx(1 / 3, abs=0.04)
    assert sim.describe()["regime_fit"]["letter_bias"]["largest_preference"]["model"] in f.models[4:]


def test_chance_category_regime_answers_at_chance_there():
    """cat0 is at chance in the data (the identifiability rule finds it): in the regime every model's accuracy
    there is ~1/4 (4 options) in both arms; elsewhere, and in the iid regime, it keeps the class accuracy."""
    f = simulate_frame(900, 8, accuracy_full=list(np.linspace(0.6, 0.9, 8)), guess_rate=0.4, chance_categories=[0],
                       difficulty_sd=1.0, accuracy_blind=0.35, seed=4)
    sim = NullSimulator(f, n_items=None)
    fit = sim.describe()["regime_fit"]["chance_categories"]
    assert fit["categories"] == ["cat0"] and "identifiability rule" in fit["source"]
    frames = sim.draw_many(8, np.random.default_rng(1))
    at = (f.questions["category"] == "cat0").to_numpy()
    other = []
    for s, g in enumerate(frames):
        acc = {arm: (g.correctness(arm) == 1)[at].mean() for arm in ("full", "blind")}
        per_model = (g.correctness("full") == 1)[at].mean(axis=0)
        rest = (g.correctness("full") == 1)[~at].mean()
        if sim.regime_of(s) == "chance_categories":
            assert acc["full"] == pytest.approx(0.25, abs=0.03) and acc["blind"] == pytest.approx(0.25, abs=0.03)
            assert per_model.max() < 0.35
        else:
            other.append(acc["full"])
        assert rest > 0.45
    # the other regimes keep these items hard (their difficulty posterior), but above chance
    assert np.mean(other) > 0.29


def _agreement(frames, sim, regime, pairs):
    """Mean share of same wrong answers over item-pairs of models both wrong, for model pairs ``pairs``."""
    n = w = 0
    for s, g in enumerate(frames):
        if sim.regime_of(s) != regime:
            continue
        A, gold = g.answer_codes("full"), g.gold_codes()
        wrong = A != gold[:, None]
        for a, b in pairs:
            both = wrong[:, a] & wrong[:, b]
            n += int(both.sum())
            w += int((both & (A[:, a] == A[:, b])).sum())
    return w / n


def test_families_regime_shares_an_attractor_within_the_family():
    """Models 0-2 and 3-5 are families (60% of a member's wrong answers on the family's own distractor of the
    item): found from the answers, and in the regime their wrong answers agree within a family far above
    across families (which stay at the uniform 1/3); the iid regime has no such agreement."""
    f = simulate_frame(900, 6, accuracy_full=list(np.linspace(0.5, 0.8, 6)), family=[0, 0, 0, 1, 1, 1],
                       family_share=0.6, difficulty_sd=1.0, accuracy_blind=0.35, seed=5)
    sim = NullSimulator(f, n_items=None)
    fams = sim.describe()["regime_fit"]["families"]
    assert sorted(fams["families"]) == [list(f.models[:3]), list(f.models[3:])]
    assert all(0.45 < x < 0.75 for x in fams["attractor_share"])
    frames = sim.draw_many(8, np.random.default_rng(2))
    within = [(0, 1), (0, 2), (1, 2), (3, 4), (3, 5), (4, 5)]
    across = [(a, b) for a in range(3) for b in range(3, 6)]
    assert _agreement(frames, sim, "families", within) > 0.55
    assert _agreement(frames, sim, "families", across) == pytest.approx(1 / 3, abs=0.04)
    assert _agreement(frames, sim, "iid", within) == pytest.approx(1 / 3, abs=0.04)


def _wrong_position_test(frame, *, field="hit", seed=0, **_):
    """A detector calibrated only while wrong answers are uniform over the wrong options: chi-square of the
    positions of the wrong 4-option answers against that (its p-value is the headline)."""
    from audit_hub.stats.core import chi2_sf

    A, gold = frame.answer_codes("full"), frame.gold_codes()
    wrong = (A >= 0) & (A != gold[:, None])
    n = np.array([(wrong & (A == j)).sum() for j in range(4)], float)
    e = np.array([(wrong & (gold[:, None] != j)).sum() / 3 for j in range(4)])
    p = float(chi2_sf(((n - e) ** 2 / e).sum(), 3))
    pq = pd.DataFrame({"question_id": frame.question_ids, "pos_score": np.ones(frame.n_questions),
                       "is_pos_issue": np.zeros(frame.n_questions, bool), "pos_severity": "info"})
    return DetectorResult("pos", pq, {"p_value": p})


def test_a_detector_miscalibrated_only_under_letter_bias_is_caught_by_that_regime():
    """The check can fail: a test that assumes uniform wrong answers is within calibration on the iid null and
    is caught by the letter-bias regime; the entry is out of calibration and names that regime as the worst."""
    f = simulate_frame(300, 6, accuracy_full=list(np.linspace(0.5, 0.85, 6)), guess_rate=[0, 0, 0, 0.3, 0.4, 0.5],
                       accuracy_blind=0.35, seed=6)
    c = calibrate(f, {"pos": _wrong_position_test}, n_sims=40, seed=0)["pos"]
    reg = c["regimes"]
    assert [reg[r]["n_runs"] for r in ("iid", "letter_bias", "chance_categories", "families")] == [10] * 4
    assert reg["iid"]["out_of_calibration"] is False and reg["iid"]["fpr"] <= 0.2
    assert reg["letter_bias"]["out_of_calibration"] is True and reg["letter_bias"]["fpr"] == 1.0
    assert c["worst_regime"] == "letter_bias" and c["worst_regime_fpr"] == 1.0
    assert c["out_of_calibration"] is True and c["direction"] == "anti-conservative"
    # without the regimes (the old iid-only null) the same detector looked calibrated
    from audit_hub.engine.calibration import NullSimulator as NS

    sim = NS(f, n_items=None, regimes=False)
    assert sim.regimes == ("iid",)


def test_open_items_answer_the_gold_exactly_when_they_hit():
    """MathVista (1,000 items, half free-form; tests/fixtures/real_pools): in the null an open item's answer
    equals its gold exactly when the run is correct (the earlier null drew the gold at random among 2 values,
    so half the easy open items had every model 'unanimous' on a non-gold answer and were flagged), and wrong
    answers spread over several values as in the data (no unanimous wrong answer by construction)."""
    d = Path(__file__).parent / "fixtures" / "real_pools" / "mathvista"
    from audit_hub.frame.core import AuditFrame

    f = AuditFrame.from_tables(pd.read_parquet(d / "questions.parquet"), pd.read_parquet(d / "runs.parquet"))
    sim = NullSimulator(f, n_items=None)
    assert sim.k_open >= 3
    is_open = ~sim.is_mc & ~sim.is_yn
    assert is_open.sum() > 300
    for g in sim.draw_many(4, np.random.default_rng(0)):
        A, gold, C = g.answer_codes("full"), g.gold_codes(), g.correctness("full")
        known = C[is_open] >= 0
        assert np.array_equal((A[is_open] == gold[is_open, None])[known], (C[is_open] == 1)[known])
        from audit_hub.detectors import consensus_error as ce

        r = ce.run(g, recall_sims=0, label_iters=3, check=False)
        assert r.summary["n_flagged"] == 0


def test_card_shows_the_worst_regime():
    """The card's calibration table names each detector's worst regime (and whether it is out of calibration
    there); the lead says the simulations are split over the regimes."""
    from types import SimpleNamespace

    from audit_hub.report.card import _calibration

    f = simulate_frame(300, 6, accuracy_full=list(np.linspace(0.5, 0.85, 6)), guess_rate=[0, 0, 0, 0.3, 0.4, 0.5],
                       accuracy_blind=0.35, seed=6)
    cal = calibrate(f, {"pos": _wrong_position_test}, n_sims=40, seed=0)
    txt = _calibration(SimpleNamespace(calibration=cal))
    assert "| Worst regime |" in txt and "letter bias: 100.0% (out of calibration)" in txt
    assert "split evenly over 4 regimes" in txt and "chance categories" in txt


def _first_deciding_n(p, margin, start, alpha=0.05):
    """Brute force: the smallest trial count from ``start`` whose exact interval at rate ``p`` ends at or below
    ``margin``."""
    from audit_hub.stats.core import clopper_pearson_ci

    n = start
    while float(clopper_pearson_ci(p * n, n, alpha)[1]) > margin:
        n += 1
    return n


def test_a_rate_that_does_not_refute_the_nominal_one_is_not_called_within_calibration():
    """``decided`` separates "within calibration" (the interval ends below 1.5 x nominal) from a rate the
    simulations cannot place: hand-computed exact interval ends, the simulations that would decide, and the
    card word."""
    from audit_hub.engine.calibration import MARGIN_HIGH, decision
    from audit_hub.report.card import calibration_status
    from audit_hub.stats.core import clopper_pearson_ci

    # 0 of 50 at alpha 0.05: the exact interval is [0, 1 - 0.025^(1/50)] = [0, 0.0711], below 0.075: decided
    assert float(clopper_pearson_ci(0, 50)[1]) == pytest.approx(1 - 0.025 ** (1 / 50))
    assert decision(0, 50, 0.05, False) == {"decided": True, "sims_to_decide": None}
    # 1 of 50: the interval reaches 0.106: not decided; at the observed 2% the interval ends below 7.5% from
    # the brute-force count on (the answer is a grid point at most 1/64 of a doubling above it)
    assert float(clopper_pearson_ci(1, 50)[1]) == pytest.approx(0.1065, abs=1e-3)
    d = decision(1, 50, 0.05, False)
    need = _first_deciding_n(0.02, MARGIN_HIGH * 0.05, 51)
    assert d["decided"] is False and need <= d["sims_to_decide"] <= need * (1 + 1 / 64) + 1, (d, need)
    # 8 of 50 (16%): the observed rate is above the margin itself: more simulations would not make it within
    assert decision(8, 50, 0.05, False) == {"decided": False, "sims_to_decide": None}
    # a verdict of out of calibration is a test: decided whatever the count
    assert decision(20, 50, 0.05, True) == {"decided": True, "sims_to_decide": None}
    # a per-item count: trials are items x simulations, the answer is in simulations
    d = decision(30, 10 * 600, 0.004, False, per_run=600)
    need = _first_deciding_n(30 / 6000, MARGIN_HIGH * 0.004, 6001)
    assert d["decided"] is False and d["sims_to_decide"] == pytest.approx(need / 600, rel=0.03, abs=1)
    base = {"nominal": 0.05, "n_sims": 50, "out_of_calibration": False}
    assert calibration_status(base | {"fpr_ci": list(map(float, clopper_pearson_ci(0, 50))), "decided": True}) == \
        "within calibration"
    word = calibration_status(base | {"fpr_ci": list(map(float, clopper_pearson_ci(1, 50))), "decided": False,
                                      "sims_to_decide": 89})
    assert word == ("not decided: 50 simulations leave rates up to 10.6% possible (out of calibration above "
                    "7.5%); about 89 would decide it at the observed rate (`--calibration-sims`)"), word
    # a regime above the margin on too few simulations to call it out
    reg = {"families": {"kind": "p_value", "fpr": 3 / 12, "nominal": 0.05, "n_runs": 12}}
    word = calibration_status(base | {"fpr_ci": [0.01, 0.07], "decided": False, "undecided_regime": "families",
                                      "regimes": reg})
    assert word == ("not decided: in the families regime its rate is 25.0% (3 of 12 simulations), above the 7.5% "
                    "margin, on too few simulations to call it out of calibration (`--calibration-sims`)"), word


def test_the_calibration_entry_says_whether_its_simulations_decide_it():
    """Through :func:`calibrate`: every entry with a nominal rate carries ``decided`` consistent with its
    interval and verdict; a test calibrated at 5% is not decided at 12 simulations and is at 400 (a
    stand-in detector with a uniform p-value, so the rate is exactly what the draws give)."""
    f = simulate_frame(200, 4, accuracy_full=0.7, accuracy_blind=0.4, seed=3)

    def uniform_p(frame, field="hit", seed=0, **kw):
        Q = frame.n_questions
        pq = pd.DataFrame({"question_id": frame.question_ids, "fake_score": np.ones(Q),
                           "is_fake_issue": np.zeros(Q, bool), "fake_severity": "info"})
        return DetectorResult("fake", pq, {"p_value": float(np.random.default_rng(seed).random())})

    for n_sims, decided in ((12, False), (400, None)):
        e = calibrate(f, {"uniform_p": uniform_p}, n_sims=n_sims, seed=1)["uniform_p"]
        hi = e["fpr_ci"][1]
        assert e["decided"] == (bool(e["out_of_calibration"]) or hi <= 1.5 * e["nominal"]), e
        if decided is not None:
            assert e["decided"] is decided, e
        else:  # 400 draws of a uniform p: about 20 rejections, an interval near [3%, 8%]
            assert e["fpr_ci"][1] < 0.09 and not e["out_of_calibration"], e


def _majority_wrong_in(category, planted=0):
    """A stand-in detector: flags the items of ``category`` whose most common full-arm answer is not the gold,
    and, on a frame that is not a calibration null, the first ``planted`` items of the other categories (a
    defect the nulls do not have)."""
    def run(frame, *, field="hit", seed=0, **_):
        A, gold = frame.answer_codes("full"), frame.gold_codes()
        K = int(max(A.max(), gold.max())) + 1
        votes = np.stack([(A == j).sum(axis=1) for j in range(K)], axis=1)
        at = (frame.questions["category"] == category).to_numpy()
        flag = (votes.argmax(axis=1) != gold) & at
        if not frame.meta.get("simulated_null"):
            flag[np.flatnonzero(~at)[:planted]] = True
        pq = pd.DataFrame({"question_id": frame.question_ids, "fake_score": (~flag).astype(float),
                           "is_fake_issue": flag, "fake_severity": np.where(flag, "medium", "info")})
        return DetectorResult("fake", pq, {})
    return run


def test_flags_in_categories_at_chance_are_compared_with_the_regime_that_draws_them_at_chance(monkeypatch):
    """cat0 is at chance in the data. The calibration keeps, for the chance-categories regime, the share of cat0's
    simulated items each detector flags; flags_vs_null compares the audited flags on cat0 with it and the
    questions table caps exactly those flags (a stand-in detector that flags only cat0 items whose majority answer
    is not the gold: on a pool at chance there, most are; so its flags are what chance answers look like)."""
    from audit_hub.engine.run import flags_vs_null
    from audit_hub.report.tables import build_questions_table
    from audit_hub.severity import NULL_CAP

    f = simulate_frame(600, 8, accuracy_full=list(np.linspace(0.6, 0.9, 8)), chance_categories=[0],
                       difficulty_sd=1.0, accuracy_blind=0.35, seed=4)
    det = _majority_wrong_in("cat0", planted=150)
    cal = calibrate(f, {"fake": det}, n_sims=40, seed=0, n_items=None)
    e = cal["fake"]
    sc = e["chance_categories_null"]
    n_cat0 = int((f.questions["category"] == "cat0").sum())
    assert sc["categories"] == ["cat0"] and sc["n_sims"] == 10 and sc["n_items_simulated"] == n_cat0
    # every flag of this detector is in cat0: the scope's flagged items are the regime's flagged items
    reg = e["regimes"]["chance_categories"]
    assert sc["flag_rate"] * sc["n_items_simulated"] == pytest.approx(reg["flag_rate"] * e["n_items_simulated"])
    assert sc["flag_rate"] > 0.5  # at chance with 4 options the majority is mostly not the gold
    lo, hi = sc["flag_rate_ci"]
    assert lo <= sc["flag_rate"] <= hi

    res = det(f)
    fvn = flags_vs_null(f, {"fake": res}, cal)
    c = fvn["fake"]["chance_categories"]
    at = (f.questions["category"] == "cat0").to_numpy()
    assert c["n_items"] == at.sum() and c["n_flagged"] == int(res.per_question["is_fake_issue"].to_numpy()[at].sum())
    assert c["flag_rate"] == pytest.approx(c["n_flagged"] / at.sum())
    assert c["null_share_of_flags"] == pytest.approx(min(1.0, sc["flag_rate"] / c["flag_rate"]))
    assert c["capped_at"] == NULL_CAP
    # over every category the planted flags outnumber what the nulls explain: no cap for the detector as a whole
    assert fvn["fake"]["capped_at"] is None and fvn["fake"]["null_share_of_flags"] < 0.5

    class R:  # what build_questions_table reads of an audit result
        frame = f
        results = {"fake": res}
        alt_results: dict = {}
        tst = None
        summary = {"flags_vs_null": fvn}

    import audit_hub.report.tables as tables

    monkeypatch.setattr(tables, "_phrase", lambda name, pq, flag, sev: pd.Series("stand-in", index=pq.index[flag]))
    q = build_questions_table(R())
    flagged = res.per_question["is_fake_issue"].to_numpy()
    sev = q["severity"].to_numpy()
    assert (flagged & at).any() and (sev[flagged & at] == NULL_CAP).all()
    assert (flagged & ~at).sum() == 150 and (sev[flagged & ~at] == "medium").all()  # outside cat0: their level
    assert (q["fake_severity"].to_numpy()[flagged] == "medium").all()  # the detector's own column is kept



def test_a_regime_above_the_margin_keeps_the_detector_from_within_calibration():
    """A stand-in test rejects 9 of the 100 families-regime simulations (simulation s is in that regime when
    s mod 4 == 3; it rejects where s // 4 is a multiple of 12) and none elsewhere: pooled 9 of 400 (exact interval
    ending near 4.2%, below the 7.5% margin), but the families rate, 9%, is above the margin with an exact
    Bonferroni interval reaching below it: not out of calibration, not within either."""
    from audit_hub.report.card import calibration_status

    f = simulate_frame(200, 4, accuracy_full=0.7, accuracy_blind=0.4, seed=3)

    def stand_in(frame, field="hit", seed=0, **kw):
        Q = frame.n_questions
        pq = pd.DataFrame({"question_id": frame.question_ids, "fake_score": np.ones(Q),
                           "is_fake_issue": np.zeros(Q, bool), "fake_severity": "info"})
        return DetectorResult("fake", pq, {"p_value": 0.001 if seed % 4 == 3 and (seed // 4) % 12 == 0 else 0.5})

    e = calibrate(f, {"stand_in": stand_in}, n_sims=400, seed=0)["stand_in"]
    assert e["fpr"] == pytest.approx(9 / 400) and e["fpr_ci"][1] < 0.075
    fam = e["regimes"]["families"]
    assert fam["fpr"] == pytest.approx(0.09) and fam["n_runs"] == 100 and fam["out_of_calibration"] is False
    assert e["out_of_calibration"] is False and e["decided"] is False and e["undecided_regime"] == "families"
    assert calibration_status(e).startswith("not decided: in the families regime its rate is 9.0% (9 of 100 ")
    # the same test rejecting nowhere in 50 is within calibration (exact interval [0, 7.1]%)
    e0 = calibrate(f, {"never": lambda frame, field="hit", seed=0, **kw: stand_in(frame, seed=1)},
                   n_sims=50, seed=0)["never"]
    assert e0["fpr"] == 0 and e0["decided"] is True and calibration_status(e0) == "within calibration"
