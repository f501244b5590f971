"""answer_options_distribution: stratified chi-square by hand / scipy, Monte Carlo p, null rate, planted bias."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from sim import simulate_frame

from audit_hub.detectors import answer_options_distribution as ao
from audit_hub.errors import DetectorSkipped
from audit_hub.frame.core import AuditFrame


def test_stratified_chi2_matches_scipy():
    k = np.array([4] * 40 + [5] * 50)
    pos = np.concatenate([np.repeat([0, 1, 2, 3], [16, 8, 8, 8]), np.repeat([0, 1, 2, 3, 4], [10, 10, 10, 10, 10])])
    r = ao.stratified_chi2(k, pos)
    c4 = st.chisquare([16, 8, 8, 8]).statistic
    assert r["chi2"] == pytest.approx(c4 + 0.0) and c4 == pytest.approx(4.8)
    assert r["dof"] == 3 + 4 and r["method"] == "asymptotic"
    assert r["p_value"] == pytest.approx(st.chi2.sf(4.8, 7))


def test_monte_carlo_p_when_expected_small():
    k = np.array([3] * 9)
    pos = np.array([0] * 7 + [1, 2])
    r = ao.stratified_chi2(k, pos, n_mc=20000, rng=np.random.default_rng(1))
    assert r["method"] == "monte_carlo"
    # exact multinomial tail P(chi2 >= 8) for n=9, K=3 by enumeration
    from itertools import product
    probs = 0.0
    for a, b in product(range(10), repeat=2):
        c = 9 - a - b
        if c < 0:
            continue
        x = np.array([a, b, c])
        if ((x - 3) ** 2 / 3).sum() >= r["chi2"] - 1e-9:
            probs += st.multinomial.pmf(x, 9, [1 / 3] * 3)
    assert r["p_value"] == pytest.approx(probs, abs=0.006)


def test_null_false_positive_rate_near_nominal():
    rng = np.random.default_rng(7)
    hits = 0
    n_rep = 400
    for _ in range(n_rep):
        k = rng.choice([3, 4, 5], size=120)
        pos = (rng.random(120) * k).astype(np.int64)
        hits += ao.stratified_chi2(k, pos, rng=rng)["p_value"] < 0.05
    assert 0.02 <= hits / n_rep <= 0.09


def test_planted_position_bias_and_flags():
    f = simulate_frame(2000, 3, n_options=np.where(np.arange(2000) % 2 == 0, 4, 5),
                       planted={"gold_position": [0.4, 0.2, 0.2, 0.1, 0.1]}, seed=5)
    r = ao.run(f, n_mc=999)
    s = r.summary
    assert s["p_value"] < 1e-10 and s["dof"] == 7
    assert sum(s["gold_position_counts"].values()) == 2000
    assert s["gold_position_counts"]["A"] > s["gold_position_counts"]["B"]
    assert s["cohens_w"] == pytest.approx(np.sqrt(s["chi2"] / 2000))
    assert s["majority_letter_baseline"] > s["chance_accuracy"] == pytest.approx((0.25 + 0.2) / 2)
    pq = r.per_question
    fl = pq.is_answer_options_distribution_issue
    assert s["strata"]["4"]["over_represented"] == ["A"]
    # a position bias is a benchmark-level finding: no item carries evidence of its own, none is flagged
    assert not fl.any() and s["n_flagged"] == 0
    k4 = pq.answer_options_distribution_n_options == 4
    a4 = k4 & (pq.answer_options_distribution_gold_letter == "A")
    assert (pq.loc[a4, "answer_options_distribution_position_excess"] > 0).all()
    assert s["n_items"] == 2000 and s["excluded"] == {}
    pm = s["per_model"]["model_00"]
    assert set(pm) == {"full", "blind"} and pm["full"]["n"] == 2000


def test_balanced_no_flags_and_hand_per_model():
    qs = pd.DataFrame({"question_id": ["a", "b", "c", "d"], "options": [["x", "y"]] * 4,
                       "answer": ["A", "B", "A", "B"]})
    runs = pd.DataFrame({"question_id": ["a", "b", "c", "d"], "model": "m", "arm": "full",
                         "prediction": ["A", "A", "A", "B"], "answer": ["A", "A", "A", "B"],
                         "hit": [1, 0, 1, 1], "hit_exact": [1, 0, 1, 1]})
    f = AuditFrame.from_tables(qs, runs)
    r = ao.run(f, n_mc=999)
    assert r.summary["gold_position_counts"] == {"A": 2, "B": 2} and r.summary["chi2"] == 0.0
    assert r.summary["p_value"] == 1.0 and r.summary["n_flagged"] == 0
    pm = r.summary["per_model"]["m"]["full"]
    assert pm["predicted"] == {"A": 3, "B": 1} and pm["total_variation"] == pytest.approx(0.25)
    assert pm["chi2"] == pytest.approx((3 - 2) ** 2 / 2 + (1 - 2) ** 2 / 2)
    assert r.per_question["answer_options_distribution_score"].tolist() == [1.0] * 4
    # zero runs: still works
    r0 = ao.run(AuditFrame.from_tables(qs, None), n_mc=99)
    assert r0.summary["per_model"] == {} and r0.summary["chi2"] == 0.0


def test_skip_without_mc():
    qs = pd.DataFrame({"question_id": ["a", "b"], "answer": ["7", "yes"]})
    with pytest.raises(DetectorSkipped):
        ao.run(AuditFrame.from_tables(qs, None))
