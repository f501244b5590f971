"""Calibration: null simulations keep structure, nominal rates on mc, the yes/no drift, generic detectors."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim import simulate_frame  # noqa: E402

from audit_hub.calibration import NullSimulator, calibrate  # noqa: E402
from audit_hub.detectors.base import DetectorResult  # noqa: E402
from audit_hub.errors import DetectorSkipped  # noqa: E402

FAST = {"visual_dependency": {"n_permutations": 199}}


def test_null_simulator_keeps_structure_and_accuracy():
    f = simulate_frame(3000, 4, n_options=np.r_[np.full(1500, 3), np.full(1500, 5)],
                       accuracy_full=[0.3, 0.5, 0.7, 0.9], accuracy_blind=0.4,
                       planted={"blind_solvable": 200}, seed=1)
    sim = NullSimulator(f)
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


def test_yes_no_response_bias_drives_visual_dependency_out_of_calibration():
    """The paper's drift on binary benchmarks: a shared 'say yes' bias makes the gold a covariate of f
    and b, which the item-matched shuffle does not condition on."""
    f = simulate_frame(500, 3, answer_type="yesno", accuracy_full=0.65, accuracy_blind=0.55, yes_bias=0.3,
                       seed=3)
    biased = calibrate(f, ["visual_dependency"], n_sims=40, seed=0, params=FAST)["visual_dependency"]
    assert biased["out_of_calibration"] is True and biased["direction"] == "anti-conservative"
    assert biased["fpr"] > 0.3
    # without conditioning on the gold the simulation is the independent null: calibrated again
    plain = calibrate(f, ["visual_dependency"], n_sims=40, seed=0, params=FAST,
                      condition_on_gold=False)["visual_dependency"]
    assert plain["out_of_calibration"] is False and plain["fpr"] <= 0.15


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
    cal = calibrate(f, {"count_det": _fake("count"), "skip_det": _fake("skip")}, n_sims=5, seed=0)
    c = cal["count_det"]
    assert c["kind"] == "count" and c["fpr"] == pytest.approx(2 / 100) and c["nominal"] == pytest.approx(0.5 / 100)
    assert c["out_of_calibration"] is True
    assert cal["skip_det"]["kind"] == "skipped" and "option texts" in cal["skip_det"]["note"]
