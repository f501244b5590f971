"""correctness_agreement: hand cases, item-rest vs numpy, Guttman gating, planted negative discrimination."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim import simulate_frame  # noqa: E402

from audit_hub.detectors import correctness_agreement as ca  # noqa: E402
from audit_hub.errors import DetectorSkipped  # noqa: E402
from audit_hub.frame.core import AuditFrame  # noqa: E402


def _frame(full: np.ndarray):
    Q, M = full.shape
    qs = pd.DataFrame({"question_id": [f"q{i}" for i in range(Q)], "options": [["a", "b"]] * Q, "answer": "A",
                       "category": ["c0"] * Q})
    rows = [{"question_id": f"q{i}", "model": f"m{j}", "arm": "full", "answer": "A" if full[i, j] else "B",
             "hit": int(full[i, j]), "hit_exact": int(full[i, j])}
            for i in range(Q) for j in range(M) if full[i, j] >= 0]
    return AuditFrame.from_tables(qs, pd.DataFrame(rows))


def test_hand_case_difficulty_saturation_floor():
    full = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, -1, 1]])
    r = ca.run(_frame(full))
    s, pq = r.summary, r.per_question
    assert s["n_saturated"] == 2 and s["n_floor"] == 1          # item 3 counts over its 2 known models
    assert pq["correctness_agreement_p_correct"].tolist() == pytest.approx([3.5 / 4, 0.5 / 4, 1.5 / 4, 2.5 / 3])
    assert pq["correctness_agreement_severity"].tolist() == ["info", "low", "info", "info"]
    assert "floor" in pq.loc[1, "correctness_agreement_note"] and "saturated" in pq.loc[0, "correctness_agreement_note"]
    assert s["item_rest"]["computed"] is False                   # fewer than 5 models
    assert np.isnan(pq["correctness_agreement_item_rest"]).all()


def test_item_rest_matches_numpy_corrcoef():
    rng = np.random.default_rng(0)
    full = (rng.random((40, 7)) < np.linspace(0.2, 0.9, 7)).astype(int)
    r = ca.run(_frame(full))
    got = r.per_question["correctness_agreement_item_rest"].to_numpy()
    tot = full.sum(axis=0)
    for i in range(40):
        x = full[i]
        rest = (tot - x) / (40 - 1)
        want = np.corrcoef(x, rest)[0, 1] if x.std() > 0 else np.nan
        assert got[i] == pytest.approx(want, nan_ok=True, abs=1e-9)


def test_guttman_hand_case():
    # models ordered weakest -> strongest: a, b, c. Item (1, 0, 0): weakest right, two stronger wrong -> 2 of 2
    x = np.array([[1, 0, 0], [0, 0, 1], [1, 0, 1]])
    inv, share = ca.guttman_inversions(x, x >= 0, np.array([0, 1, 2]))
    assert inv.tolist() == [2, 0, 1]
    assert share.tolist() == pytest.approx([1.0, 0.0, 0.5])


def test_planted_negative_discrimination_found_and_ranking_gate():
    f = simulate_frame(1500, 10, accuracy_full=np.linspace(0.3, 0.9, 10),
                       planted={"negative_discrimination": 25}, seed=2)
    r = ca.run(f)
    s = r.summary
    assert s["model_ranking"]["significant"] and s["guttman"]["computed"]
    planted = set(f.meta["planted"]["negative_discrimination"])
    flagged = set(r.issues()["question_id"])
    assert planted <= flagged and len(flagged - planted) <= 5
    g = r.per_question.set_index("question_id")["correctness_agreement_guttman_share"]
    assert g.loc[sorted(planted)].min() == 1.0 and g.drop(sorted(planted)).mean() < 0.5
    # equally able models: ranking not significant -> no Guttman
    r2 = ca.run(simulate_frame(300, 6, accuracy_full=0.6, seed=3))
    assert r2.summary["model_ranking"]["significant"] is False and r2.summary["guttman"]["computed"] is False
    assert (r2.per_question["correctness_agreement_guttman_inversions"] == -1).all()
    # flag rate under the null is near alpha on tested items
    it = r2.summary["item_rest"]
    assert it["n_flagged"] <= 2.5 * 0.05 * it["n_tested"] + 5


def test_per_category_and_skip():
    f = simulate_frame(300, 5, seed=6)
    r = ca.run(f, field="hit_exact")
    pc = r.summary["per_category"]
    assert sum(v["n_items"] for v in pc.values()) == r.summary["n_items"] == 300
    assert set(r.table["category"]) == {"(all)", "cat0", "cat1", "cat2"}
    with pytest.raises(DetectorSkipped):
        ca.run(simulate_frame(10, 1, seed=0))
