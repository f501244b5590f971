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
    cfg = AuditConfig(calibration_sims=4, n_permutations=99, detectors=tuple(names))
    a = run_audit(f, cfg, background_calibration=True)
    b = run_audit(f, cfg, background_calibration=False)
    assert a.calibration == b.calibration and set(a.calibration) == set(a.results)
