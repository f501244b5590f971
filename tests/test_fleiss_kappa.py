"""fleiss_kappa_agreement: statsmodels cross-checks, unequal raters by hand, per-item statistics, CIs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from oracles import fleiss_kappa_general
from sim import simulate_frame
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from audit_hub.detectors import fleiss_kappa_agreement as fk
from audit_hub.errors import DetectorSkipped
from audit_hub.frame.core import AuditFrame


def test_general_form_reduces_to_statsmodels():
    rng = np.random.default_rng(0)
    table = rng.multinomial(7, [0.5, 0.2, 0.2, 0.1], size=60)
    assert fleiss_kappa_general(table) == pytest.approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)
    # Fleiss (1971) worked example (statsmodels' test data): kappa = 0.2099
    fleiss_table = np.array([
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    assert fleiss_kappa_general(fleiss_table) == pytest.approx(0.20993070442195522, abs=1e-12)


def test_unequal_raters_by_hand():
    # item 1: 3 raters (A,A,B): P=(4+1-3)/6=1/3; item 2: 2 raters (A,A): P=1; item 3: 1 rater (ignored)
    table = np.array([[2, 1], [2, 0], [0, 1]])
    p_bar = (1 / 3 + 1) / 2
    p_a, p_b = 4 / 5, 1 / 5
    pe = p_a ** 2 + p_b ** 2
    assert fleiss_kappa_general(table) == pytest.approx((p_bar - pe) / (1 - pe))


def test_detector_matches_statsmodels_equal_raters():
    f = simulate_frame(1500, 6, accuracy_full=0.5, seed=2)
    r = fk.run(f, n_boot=300)
    table, _ = aggregate_raters(f.answer_codes("full"))
    assert r.summary["kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)
    assert r.summary["randolph_kappa"] == pytest.approx(fleiss_kappa(table, method="randolph"), abs=1e-12)
    lo, hi = r.summary["kappa_ci"]
    assert lo < r.summary["kappa"] < hi and hi - lo < 0.05
    # a random-group bootstrap gives a similar interval to the item-level one
    r2 = fk.run(f, n_boot=300, max_units=100)
    lo2, hi2 = r2.summary["kappa_ci"]
    assert r2.summary["kappa"] == r.summary["kappa"]
    assert abs((hi2 - lo2) - (hi - lo)) < 0.5 * (hi - lo)
    assert set(r.summary["per_category"]) == {"cat0", "cat1", "cat2"}


def test_unequal_raters_detector_and_per_item():
    qs = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "options": [["x", "y", "z"]] * 4,
                       "answer": ["A"] * 4})
    ans = {"q1": ["A", "A", "B", "C"], "q2": ["A", "A", "A", None], "q3": ["A", "B", "C", None],
           "q4": ["B", None, None, None]}
    rows = [(q, f"m{m}", "full", a, a, None, None) for q, aa in ans.items() for m, a in enumerate(aa)]
    runs = pd.DataFrame(rows, columns=["question_id", "model", "arm", "prediction", "answer", "hit", "hit_exact"])
    f = AuditFrame.from_tables(qs, runs)
    r = fk.run(f, n_boot=200)
    counts = np.array([[2, 1, 1], [3, 0, 0], [1, 1, 1], [0, 1, 0]])
    assert r.summary["kappa"] == pytest.approx(fleiss_kappa_general(counts))
    pq = r.per_question.set_index("question_id")
    assert pq["fleiss_kappa_agreement_agreement"]["q1"] == pytest.approx((4 + 1 + 1 - 4) / 12)
    assert pq["fleiss_kappa_agreement_agreement"]["q2"] == 1.0
    assert pq["fleiss_kappa_agreement_agreement"]["q3"] == 0.0
    assert np.isnan(pq["fleiss_kappa_agreement_agreement"]["q4"])
    assert pq["fleiss_kappa_agreement_n_distinct"].tolist() == [3, 1, 3, 1]
    assert pq["fleiss_kappa_agreement_n_raters"].tolist() == [4, 3, 3, 1]
    ent = pq["fleiss_kappa_agreement_entropy"]
    h1 = -(0.5 * np.log(0.5) + 2 * 0.25 * np.log(0.25)) / np.log(3)
    assert ent["q1"] == pytest.approx(h1) and ent["q2"] == 0.0 and ent["q3"] == pytest.approx(1.0)
    # agreement at or below chance (P_e = 0.6^2 + 0.2^2 + 0.2^2 = 0.44) with 3+ raters is flagged
    assert pq["fleiss_kappa_agreement_severity"].tolist() == ["medium", "info", "medium", "info"]
    assert pq["fleiss_kappa_agreement_score"]["q4"] == 1.0
    assert r.summary["p_e"] == pytest.approx(0.44)


def test_null_and_planted_agreement():
    # independent random guessing: kappa ~ 0 and its CI covers 0 in most seeds
    cover = 0
    for s in range(10):
        f = simulate_frame(400, 5, n_options=4, accuracy_full=0.25, seed=50 + s)
        r = fk.run(f, n_boot=200, seed=s)
        lo, hi = r.summary["kappa_ci"]
        cover += lo <= 0 <= hi
    assert cover >= 8
    f = simulate_frame(400, 5, n_options=4, accuracy_full=0.9, seed=1)
    assert fk.run(f, n_boot=100).summary["kappa"] > 0.5


def test_skip_single_model():
    with pytest.raises(DetectorSkipped):
        fk.run(simulate_frame(20, 1, seed=0))
