"""visual_dependency: hand-computed cases, planted leakage, pool level, missing values, LOMO, judge."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim import simulate_frame  # noqa: E402

from audit_hub.detectors import visual_dependency as vd  # noqa: E402
from audit_hub.errors import DetectorSkipped  # noqa: E402
from audit_hub.frame.core import AuditFrame  # noqa: E402


def _frame(full: np.ndarray, blind: np.ndarray, *, full_models=None, blind_models=None, cats=None):
    """Frame from explicit 0/1/-1 matrices (-1 = no row)."""
    Q = full.shape[0]
    fm = full_models or [f"m{j}" for j in range(full.shape[1])]
    bm = blind_models or fm[: blind.shape[1]]
    qs = pd.DataFrame({"question_id": [f"q{i}" for i in range(Q)], "question": "x",
                       "options": [["a", "b", "c", "d"]] * Q, "answer": "A",
                       "category": cats if cats is not None else ["c0"] * Q})
    rows = []
    for arm, mat, names in (("full", full, fm), ("blind", blind, bm)):
        for i in range(Q):
            for j, m in enumerate(names):
                if mat[i, j] >= 0:
                    h = int(mat[i, j])
                    rows.append({"question_id": f"q{i}", "model": m, "arm": arm, "prediction": "A" if h else "B",
                                 "answer": "A" if h else "B", "hit": h, "hit_exact": h})
    return AuditFrame.from_tables(qs, pd.DataFrame(rows))


def test_hand_computed_small_case():
    # 2 models, 4 items: f = (2, 1, 0, 2), b = (2, 0, 0, 1) -> zero gain on items 0 and 2
    full = np.array([[1, 1], [1, 0], [0, 0], [1, 1]])
    blind = np.array([[1, 1], [0, 0], [0, 0], [1, 0]])
    r = vd.run(_frame(full, blind), n_permutations=199, n_boot=200)
    s = r.summary
    assert s["n_items"] == 4 and s["n_zero_gain"] == 2 and s["zero_gain_share"] == 0.5
    # margins: f counts (r0, r1, r2) = (1, 1, 2); b counts (c0, c1, c2) = (2, 1, 1): E = (2 + 1 + 2)/4
    assert s["null_mean"] == pytest.approx(5 / 4 / 4)
    assert s["excess"] == pytest.approx(0.5 - 5 / 16)
    assert s["three_way"]["positive"]["count"] == 2 and s["three_way"]["negative"]["count"] == 0
    pq = r.per_question
    assert pq["visual_dependency_f"].tolist() == [2, 1, 0, 2]
    assert pq["visual_dependency_b"].tolist() == [2, 0, 0, 1]
    assert pq["visual_dependency_gain"].tolist() == pytest.approx([0, 0.5, 0, 0.5])
    # item 0 solved blind by both models but < 3 blind models -> medium; (0, 0) -> low
    assert pq["visual_dependency_severity"].tolist() == ["medium", "info", "low", "info"]
    assert pq["is_visual_dependency_issue"].tolist() == [True, False, False, False]
    assert pq["visual_dependency_score"].tolist() == pytest.approx([0.0, 1.0, 0.75, 1.0])
    assert s["diagonal_decomposition"]["f=2,b=2 (all right both ways: blind-solvable)"] == pytest.approx((1 - 2 * 1 / 4) / 4)
    assert len(s["leave_one_model_out"]) == 2


def test_planted_leakage_found_and_localised():
    f = simulate_frame(2000, 6, accuracy_full=0.55, accuracy_blind=0.35, planted={"blind_solvable": 120}, seed=11)
    r = vd.run(f, seed=3, n_boot=300)
    s = r.summary
    assert s["p_value"] <= 0.002 and s["excess"] > 0.03
    assert s["excess_ci"][0] > 0
    assert s["null_sd"] > 0 and s["z"] > 4
    # the null sample agrees with the closed form
    assert s["null_permutation_mean"] == pytest.approx(s["null_mean"], abs=3 * s["null_sd"] / np.sqrt(999) + 1e-4)
    cells = s["diagonal_cells"]
    top = max(cells, key=lambda c: c["excess"])
    assert (top["f"], top["b"]) == (6, 6)
    planted = set(f.meta["planted"]["blind_solvable"])
    high = set(r.per_question.loc[r.per_question["visual_dependency_severity"] == "high", "question_id"])
    assert planted <= high
    assert s["fragile"] is False
    assert all(row["p_value"] <= 0.002 and row["excess"] > 0 for row in s["leave_one_model_out"])
    # per-category table: BH adjusted p >= raw p
    t = r.table[(r.table["statistic"] == "zero_gain_share") & (r.table["category"] != "(all)")]
    assert len(t) == 3 and (t["p_adjusted"].astype(float) >= t["p_value"].astype(float) - 1e-12).all()


def test_no_effect_gives_unremarkable_p_on_average():
    ps = [vd.run(simulate_frame(400, 4, seed=s), seed=s, n_permutations=199, n_boot=0,
                 leave_one_out=False).summary["p_value"] for s in range(20)]
    ps = np.array(ps)
    assert 0.25 < ps.mean() < 0.75
    assert (ps <= 0.05).sum() <= 4


def test_pool_level_when_no_model_is_paired():
    f = simulate_frame(600, 11, accuracy_blind=0.3, blind_models=["gpt4_text"], seed=5)
    r = vd.run(f, n_permutations=199, n_boot=100)
    s = r.summary
    assert s["pool_level"] is True and "pool level" in s["note"]
    assert s["models_blind"] == ["gpt4_text"] and len(s["models_full"]) == 11
    pq = r.per_question
    fz = pq["visual_dependency_f"].to_numpy()
    bz = pq["visual_dependency_b"].to_numpy()
    zero = pq["visual_dependency_zero_gain"].to_numpy()
    assert np.array_equal(zero, (fz * 1 == bz * 11) & (fz >= 0))
    assert {(c["f"], c["b"]) for c in s["diagonal_cells"]} == {(0, 0), (11, 1)}
    # LOMO drops full-arm models only (the single blind model cannot be dropped)
    assert len(s["leave_one_model_out"]) == 11 and {x["arm"] for x in s["leave_one_model_out"]} == {"full"}


def test_missing_values_are_excluded_and_counted():
    full = np.array([[1, 1], [1, -1], [0, 0], [1, 1], [0, 1]])
    blind = np.array([[1, 1], [0, 0], [0, -1], [1, 0], [0, 1]])
    r = vd.run(_frame(full, blind), n_permutations=99, n_boot=50)
    assert r.summary["n_items"] == 3 and r.summary["n_excluded"] == 2
    pq = r.per_question
    assert pq["visual_dependency_excluded"].tolist() == [False, True, True, False, False]
    assert pq.loc[1, "visual_dependency_f"] == -1 and pq.loc[1, "visual_dependency_severity"] == "info"


def test_leave_one_model_out_flags_a_single_model_effect():
    rng = np.random.default_rng(0)
    Q = 300
    m0 = (rng.random(Q) < 0.5).astype(int)      # model 0: identical outcome with and without image
    full = np.column_stack([m0, (rng.random(Q) < 0.6).astype(int)])
    blind = np.column_stack([m0, (rng.random(Q) < 0.4).astype(int)])
    r = vd.run(_frame(full, blind), n_permutations=199, n_boot=0)
    s = r.summary
    assert s["p_value"] <= 0.01
    by = {x["dropped_model"]: x for x in s["leave_one_model_out"]}
    assert by["m1"]["p_value"] <= 0.01 and by["m0"]["p_value"] > 0.05
    assert s["fragile"] is True and "m0" in s["fragile_reason"]


def test_stratified_shuffle():
    f = simulate_frame(800, 4, n_options=np.r_[np.full(400, 2), np.full(400, 5)], seed=8)
    a = vd.run(f, n_permutations=99, n_boot=0, leave_one_out=False)
    b = vd.run(f, n_permutations=99, n_boot=0, leave_one_out=False, stratify=["category", "n_options"])
    assert a.summary["zero_gain_share"] == b.summary["zero_gain_share"]
    assert a.summary["null_mean"] != b.summary["null_mean"]
    assert b.summary["params"]["stratify"] == ["category", "n_options"]
    with pytest.raises(ValueError):
        vd.run(f, stratify="bogus")


def test_skips_without_blind_arm():
    f = simulate_frame(50, 3, accuracy_blind=None, seed=1)
    with pytest.raises(DetectorSkipped):
        vd.run(f)


def test_judge_dependence_localises_disagreement():
    f = simulate_frame(400, 3, seed=4)
    runs = f.runs_table()
    m = (runs["model"] == "model_02") & (runs["arm"] == "full")
    flip = m & (np.random.default_rng(0).random(len(runs)) < 0.3)
    runs["hit_exact"] = runs["hit"].astype(bool)
    runs.loc[flip, "hit_exact"] = ~runs.loc[flip, "hit"].astype(bool)
    f2 = AuditFrame.from_tables(f.questions_table(), runs)
    rh = vd.run(f2, field="hit", n_permutations=99, n_boot=0)
    re = vd.run(f2, field="hit_exact", n_permutations=99, n_boot=0)
    jd = vd.judge_dependence(f2, rh, re)
    assert jd["top_model"]["model"] == "model_02" and jd["top_model"]["arm"] == "full"
    assert jd["top_model"]["share_of_all_disagreement"] == 1.0
    assert jd["n_disagree"] == int(flip.sum())
    cats = jd["per_category"]
    assert set(cats) == {"cat0", "cat1", "cat2"}
    largest = jd["largest_difference"]
    assert abs(largest["difference"]) == max(abs(v["difference"]) for v in cats.values())
    assert jd["overall"]["hit"] == rh.summary["zero_gain_share"]


# ------------------------------------------------------------------ stratification and power (issue 12)
def test_auto_is_the_default_and_the_unstratified_figure_is_kept():
    rng = np.random.default_rng(11)
    f = simulate_frame(1200, 3, n_options=rng.choice([2, 4, 5], 1200), accuracy_full=0.4, accuracy_blind=0.15,
                       guessing=True, seed=12)
    r = vd.run(f, n_permutations=199, n_boot=0, leave_one_out=False)
    s = r.summary
    assert s["stratify"] == ["n_options", "gold"] and s["n_strata"] == 3
    assert "independent of the item given its stratum" in s["null_hypothesis"]
    un = s["unstratified"]
    none = vd.run(f, stratify="none", n_permutations=199, n_boot=0, leave_one_out=False).summary
    assert none["unstratified"] is None and none["stratify"] is None
    assert un["null_mean"] == pytest.approx(none["null_mean"]) and un["excess"] == pytest.approx(none["excess"])
    # accuracy tied to the option count: the global shuffle under-predicts zero gain
    assert un["excess"] > s["excess"]
    assert un["headline"] == "stratified" and "stratum" in un["why"]
    # by hand: the stratified null mean is the sum over strata of the within-stratum expectations
    fq, bq = r.per_question["visual_dependency_f"].to_numpy(), r.per_question["visual_dependency_b"].to_numpy()
    k = f.n_options
    exp = 0.0
    for kk in np.unique(k):
        m = k == kk
        n = m.sum()
        exp += sum((fq[m] == j).sum() * (bq[m] == j).sum() / n for j in range(4))
    assert s["null_mean"] == pytest.approx(exp / len(fq))


def test_yes_no_strata_use_the_gold_answer():
    f = simulate_frame(400, 3, answer_type="yesno", accuracy_full=0.7, accuracy_blind=0.6, yes_bias=0.2, seed=13)
    s = vd.run(f, n_permutations=99, n_boot=0, leave_one_out=False).summary
    assert s["n_strata"] == 2
    s2 = vd.run(f, stratify=["auto", "category"], n_permutations=99, n_boot=0, leave_one_out=False).summary
    assert s2["stratify"] == ["n_options", "gold", "category"] and s2["n_strata"] == 6
    with pytest.raises(ValueError):
        vd.run(f, stratify="colour")


def test_power_estimate_matches_direct_simulation():
    """Closed-form power of the stratified test against the rejection rate of simulated benchmarks with that
    share of blind-solvable items (1,500 items x 3 models)."""
    kw = dict(accuracy_full=0.6, accuracy_blind=0.4)
    base = vd.run(simulate_frame(1500, 3, seed=20, **kw), n_permutations=99, n_boot=0, leave_one_out=False)
    pw = base.summary["power"]
    share = 0.02
    predicted = pw["power_at"]["0.02"]
    assert 0.1 < predicted < 0.9  # a share where power is informative
    rej = 0
    n_sim = 60
    for s in range(n_sim):
        f = simulate_frame(1500, 3, planted={"blind_solvable": int(share * 1500)}, seed=100 + s, **kw)
        p = vd.run(f, n_permutations=199, n_boot=0, leave_one_out=False, power=False).summary["p_value"]
        rej += p <= 0.05
    assert abs(rej / n_sim - predicted) < 0.15, (rej / n_sim, predicted)
    assert 0 < pw["min_detectable_share"] < 0.1
    assert pw["power_at"]["0.02"] < pw["power_at"]["0.05"] < pw["power_at"]["0.1"]


def test_leave_one_model_out_samplers_agree_on_a_wide_pool(monkeypatch):
    """A wide pool (few items, many models) takes the literal sampler for its leave-one-model-out nulls; with
    the threshold forced the other way the same loop takes the table sampler. Same observed figures, same
    closed-form nulls; the permutation p-values agree within Monte Carlo error (999 permutations each)."""
    f = simulate_frame(400, 12, accuracy_full=0.55, accuracy_blind=0.35, planted={"blind_solvable": 4}, seed=31)
    a = vd.run(f, n_boot=0, power=False, secondary_permutations=False).summary
    assert a["leave_one_model_out_null"].startswith("the items permuted within strata, 999 permutations")
    assert a["null_sampler"] == vd.NULL_SAMPLERS["tables"]   # one pairing on 400 items: the tables are cheaper
    monkeypatch.setattr(vd, "literal_is_cheaper", lambda *a, **k: False)
    b = vd.run(f, n_boot=0, power=False, secondary_permutations=False).summary
    assert b["leave_one_model_out_null"].startswith("999 tables with the margins fixed")
    assert a["p_value"] == b["p_value"]                     # the headline's draws do not move
    la, lb = a["leave_one_model_out"], b["leave_one_model_out"]
    assert len(la) == len(lb) == 12
    for x, y in zip(la, lb):
        assert (x["dropped_model"], x["zero_gain_share"], x["null_mean"], x["null_sd"]) == \
            (y["dropped_model"], y["zero_gain_share"], y["null_mean"], y["null_sd"])
        se = np.sqrt(2 * max(x["p_value"], 1e-3) * (1 - x["p_value"]) / 999) + 2e-3
        assert abs(x["p_value"] - y["p_value"]) <= 4 * se


def test_leave_one_model_out_samplers_agree_at_pool_level_with_strata(monkeypatch):
    """Pool level (6 image models, 3 differently named text-only models; both arms' drops) and 3 category
    strata: the item permutation (forced) and the table sampler give the same observed figures and closed-form
    nulls, and p-values within Monte Carlo error."""
    f = simulate_frame(3000, 6, blind_models=["txt_a", "txt_b", "txt_c"], planted={"blind_solvable": 10}, seed=5)
    out = {}
    for lomo_literal in (False, True):   # the leave-one-model-out loop only (several pairings): forced each way
        monkeypatch.setattr(vd, "literal_is_cheaper", lambda n, t, p, k=1, w=lomo_literal: w and k > 1)
        out[lomo_literal] = vd.run(f, n_boot=0, power=False, secondary_permutations=False,
                                   stratify=["category"]).summary
    a, b = out[False], out[True]
    assert a["p_value"] == b["p_value"]
    assert a["pool_level"] and a["n_strata"] == 3
    assert a["leave_one_model_out_null"].startswith("999 tables")
    assert b["leave_one_model_out_null"].startswith("the items permuted within strata")
    assert [x["arm"] for x in a["leave_one_model_out"]] == ["full"] * 6 + ["blind"] * 3
    ps = []
    for x, y in zip(a["leave_one_model_out"], b["leave_one_model_out"]):
        assert (x["dropped_model"], x["zero_gain_share"]) == (y["dropped_model"], y["zero_gain_share"])
        assert x["null_mean"] == pytest.approx(y["null_mean"], abs=1e-12)
        se = np.sqrt(2 * max(x["p_value"], 1e-3) * (1 - x["p_value"]) / 999) + 2e-3
        assert abs(x["p_value"] - y["p_value"]) <= 4 * se
        ps.append(x["p_value"])
    assert max(ps) > 0.01 and min(ps) < 0.01   # some drops near the bar, some far from it


def test_headline_and_category_nulls_permute_the_items_on_a_wide_pool(monkeypatch):
    """A wide pool (200 items, 40 paired models, 4 category strata for the per-category null): the headline,
    per-category and unstratified nulls permute the items (cheaper than 41 matched pairs per table); forced onto
    the table sampler they give the same observed figures and closed-form nulls, and p-values within Monte Carlo
    error. The summary names the headline's sampler."""
    f = simulate_frame(200, 40, accuracy_full=0.55, accuracy_blind=0.35, planted={"blind_solvable": 3},
                       n_categories=4, seed=8)
    kw = {"n_boot": 0, "power": False, "leave_one_out": False, "stratify": ["category"]}
    a = vd.run(f, **kw).summary
    assert a["null_sampler"] == vd.NULL_SAMPLERS["items"]
    monkeypatch.setattr(vd, "literal_is_cheaper", lambda *x, **k: False)
    b = vd.run(f, **kw).summary
    assert b["null_sampler"] == vd.NULL_SAMPLERS["tables"]

    def close(p, q):
        se = np.sqrt(2 * max(p, 1e-3) * (1 - p) / 999) + 2e-3
        return abs(p - q) <= 4 * se
    assert (a["zero_gain_share"], a["null_mean"], a["null_sd"]) == (b["zero_gain_share"], b["null_mean"], b["null_sd"])
    assert close(a["p_value"], b["p_value"]) and 0.002 < a["p_value"] < 0.9
    assert close(a["unstratified"]["p_value"], b["unstratified"]["p_value"])
    assert "Its 999 permutations: the items permuted within strata" in vd.headline_notes(a)[0]
    assert "permutations:" not in vd.headline_notes(b)[0]
    cats = sorted(a["per_category"])
    assert len(cats) == 4
    for c in cats:
        x, y = a["per_category"][c], b["per_category"][c]
        assert x["zero_gain_share"] == y["zero_gain_share"] and x["null_mean"] == pytest.approx(y["null_mean"])
        assert close(x["p_value"], y["p_value"])


# ------------------------------------------------------------------ models that cover few items (a run stopped early)
def _known(q: int, missing: dict[int, list[int]], m: int) -> np.ndarray:
    """(q, m) correctness 1/0 with -1 on each model's ``missing`` items."""
    x = (np.arange(q * m).reshape(q, m) % 2).astype(np.int8)
    for j, rows in missing.items():
        x[rows, j] = -1
    return x


def test_coverage_keeps_a_model_missing_a_few_items_and_drops_one_that_covers_little():
    from audit_hub.detectors.visual_dependency import coverage_left_out

    # 4 paired models on 10 items; model 1 misses one item: 9 items x 4 = 36 cells beat 10 x 3 = 30 -> kept
    full = _known(10, {1: [0]}, 4)
    assert coverage_left_out(full, _known(10, {}, 4), pool_level=False) == ([], [], 9)
    # model 2 knows 2 items: 2 x 4 = 8 cells against 10 x 3 = 30 -> it leaves, every item stays
    full = _known(10, {2: list(range(2, 10))}, 4)
    assert coverage_left_out(full, _known(10, {}, 4), pool_level=False) == ([2], [2], 10)
    # paired: a gap in the blind run counts for the model too
    assert coverage_left_out(_known(10, {}, 4), _known(10, {3: list(range(8))}, 4), pool_level=False) == ([3], [3], 10)
    # nothing unknown: nothing leaves
    assert coverage_left_out(_known(5, {}, 3), _known(5, {}, 3), pool_level=True) == ([], [], 5)


def test_coverage_looks_past_a_single_step_with_no_gain():
    """Two of six models miss the same half: leaving one out gains nothing (5 x 5 = 25 < 5 x 6 = 30), leaving both
    out gains everything (10 x 4 = 40): both leave."""
    from audit_hub.detectors.visual_dependency import coverage_left_out

    half = list(range(5))
    full = _known(10, {4: half, 5: half}, 6)
    gone_f, gone_b, n = coverage_left_out(full, _known(10, {}, 6), pool_level=False)
    assert sorted(gone_f) == [4, 5] and n == 10


def test_coverage_at_pool_level_keeps_one_model_per_arm():
    from audit_hub.detectors.visual_dependency import coverage_left_out

    # the one blind model covers 3 items: it cannot leave; full model 0 covering 1 item leaves
    full = _known(10, {0: list(range(1, 10))}, 3)
    blind = _known(10, {0: list(range(3, 10))}, 1)
    assert coverage_left_out(full, blind, pool_level=True) == ([0], [], 3)


def test_a_run_stopped_early_leaves_the_test_not_its_items(tmp_path):
    """The bundled example with SPHINX-v2 cut to its first 100 items: the headline used to run on those 100 items
    (2,940 excluded); it now leaves SPHINX-v2 out and equals the audit without it, on every item."""
    from cli_run import run_cli

    from audit_hub.readers.example import example_paths

    p = example_paths()
    r = pd.read_parquet(p["runs"])
    sp = r.index[r.model == "SPHINX-v2"]
    r.drop(sp[100:]).to_parquet(tmp_path / "cut.parquet")
    r.drop(sp).to_parquet(tmp_path / "without.parquet")
    got = {}
    for name in ("cut", "without"):
        res = run_cli("audit", "-q", p["questions"], "-r", tmp_path / f"{name}.parquet", "--out", tmp_path / name,
                      "--calibration-sims", "0", "--no-figures")
        assert res.returncode == 0, res.stderr
        got[name] = (" ".join(res.stderr.split()), json.loads((tmp_path / name / "summary.json").read_text()))
    err, s = got["cut"]
    vd, w = s["visual_dependency"], got["without"][1]["visual_dependency"]
    assert vd["models_left_out"] == [{"model": "SPHINX-v2", "arm": "full", "items_known": 100}]
    assert w["models_left_out"] == []
    for key in ("n_items", "zero_gain_share", "null_mean", "excess", "p_value", "models_full"):
        assert vd[key] == w[key], key
    assert vd["n_items"] == 3040
    assert "Left out of this test for covering few items: SPHINX-v2 (full arm: hit known on 100 of 3,040 items)" in err
    card = (tmp_path / "cut" / "README.md").read_text()
    assert "**Models left out of this test for covering few items**: SPHINX-v2 (full arm: hit known on 100 of" in card


def test_excess_location_never_calls_more_than_the_total_all_of_it():
    """Blind runs of a tiny model on MMStar (new-user walkthrough): total excess +3.8 pp, the blind-solvable cell
    +7.6 pp and the unsolved cell -3.8 pp; the card said 'all of it (+7.6 pp ...)'."""
    from audit_hub.detectors.visual_dependency import excess_location

    cells = [{"label": "f=0,b=0 (all wrong both ways: unsolved)", "f": 0, "b": 0, "excess": -0.038, "observed": 1,
              "expected": 1.5},
             {"label": "f=2,b=2 (all right both ways: blind-solvable)", "f": 2, "b": 2, "excess": 0.076,
              "observed": 2, "expected": 1.09}]
    txt = excess_location({"excess": 0.038, "diagonal_cells": cells})
    assert txt.startswith("Where the excess is: more than all of it (+7.6 pp: 2 observed, 1.09 expected)")
    assert "the other zero-gain cells fall short of their null by 3.8 pp" in txt
    cells[0]["excess"] = 0.0
    assert excess_location({"excess": 0.076, "diagonal_cells": cells}).startswith("Where the excess is: all of it")


def test_fragility_says_vanished_not_flipped_when_the_excess_falls_to_zero():
    from audit_hub.detectors.visual_dependency import _fragility

    lomo = [{"dropped_model": "A", "p_value": 0.5, "excess": 0.0}, {"dropped_model": "B", "p_value": 0.5,
                                                                    "excess": -0.01},
            {"dropped_model": "C", "p_value": 0.5, "excess": 0.02}]
    fragile, why = _fragility(lomo, 0.5, 0.01, 0.05)
    assert fragile and why == "sign of the excess flips without B; the excess is zero without A"
    assert _fragility(lomo[2:], 0.5, 0.01, 0.05) == (False, "")
