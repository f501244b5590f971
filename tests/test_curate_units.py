"""benchaudit curate: the building blocks, on hand-computed cases and cross-checked against scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit_hub.curate.filters import DOUBTED, StageThresholds, apply_stages, stage_flags, stage_order
from audit_hub.curate.measures import (
    discrimination,
    kendall_tau_b,
    leader_change_on_drop,
    point_biserial,
    significant_pairs,
    spearman,
    top_agreement,
    weighted_accuracy,
)
from audit_hub.curate.select import select_top
from audit_hub.errors import InputError


def test_rank_correlations_match_scipy_with_ties():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, (5, 9)).astype(float)   # many ties
    b = rng.random((5, 9))
    b[:, 3] = b[:, 4]
    for i in range(5):
        assert spearman(a[i], b[i]) == pytest.approx(stats.spearmanr(a[i], b[i])[0], abs=1e-12)
        assert kendall_tau_b(a[i], b[i]) == pytest.approx(stats.kendalltau(a[i], b[i])[0], abs=1e-12)
    assert np.allclose(spearman(a, b), [stats.spearmanr(a[i], b[i])[0] for i in range(5)])
    assert np.isnan(spearman(np.ones(4), np.arange(4.0)))


def test_weighted_accuracy_ignores_unknown_cells():
    right = np.array([[1, 0], [1, 1], [0, 0]], float)
    known = np.array([[1, 1], [1, 0], [1, 1]], float)
    acc = weighted_accuracy(np.array([[1, 1, 1], [0, 2, 1]], float), right, known)
    # model 0: 2/3 and 2/3; model 1: 0/2 and 0/1 (its second item is unknown)
    assert acc == pytest.approx(np.array([[2 / 3, 0.0], [2 / 3, 0.0]]))


def test_point_biserial_is_item_rest_correlation():
    rng = np.random.default_rng(1)
    x = (rng.random((30, 9)) < 0.5).astype(float)
    k = np.ones_like(x)
    pb = point_biserial(x, k)
    for i in (0, 7, 29):
        rest = (x.sum(axis=0) - x[i]) / 29
        assert pb[i] == pytest.approx(np.corrcoef(x[i], rest)[0, 1], abs=1e-12)
    x[5] = 1.0  # constant item: undefined
    assert np.isnan(point_biserial(x, k)[5])


def test_top_agreement_and_leader_change():
    full = np.array([0.9, 0.8, 0.5, 0.4])
    cur = np.array([0.7, 0.75, 0.5, 0.1])   # leader swapped with the runner-up
    top1, topk = top_agreement(cur, full, 2)
    assert top1 is False and topk == 1.0
    # dropping model c or d keeps the swap; dropping a or b makes the leaders agree
    assert leader_change_on_drop(cur, full, ["a", "b", "c", "d"]) == ["c", "d"]


def test_significant_pairs_and_discrimination():
    rng = np.random.default_rng(2)
    Q = 400
    # two models far apart, two identical ones
    p = np.array([0.9, 0.2, 0.5, 0.5])
    right = (rng.random((Q, 4)) < p).astype(float)
    right[:, 3] = right[:, 2]
    known = np.ones_like(right)
    share = significant_pairs(np.ones(Q, bool), right, known, seed_key=(0,), n_boot=300)
    assert share == pytest.approx(5 / 6)    # every pair but (2, 3)
    d = discrimination(np.ones(Q, bool), right, known, seed_key=(0,), n_boot=100)
    acc = right.mean(axis=0)
    assert d["sd"] == pytest.approx(np.std(acc, ddof=1))


def _findings(rows: list[dict]) -> pd.DataFrame:
    base = {"visual_dependency_f": 5, "visual_dependency_b": 1, "visual_dependency_mf": 10, "visual_dependency_mb": 10,
            "correctness_agreement_n_correct": 5, "correctness_agreement_n_models": 10,
            "is_correctness_agreement_issue": False, "is_consensus_error_issue": False,
            "consensus_error_consensus_share": 0.2, "consensus_error_gold_share": 0.5,
            "distractor_similarity_severity": "info", "placeholder_gold": False, "placeholder_n_options": 0}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_stage_flags_first_flag_attribution_and_overlaps():
    t = _findings([
        {},                                                                        # 0 kept
        {"visual_dependency_f": 10, "visual_dependency_b": 9},                     # 1 blind-solvable
        {"correctness_agreement_n_correct": 10},                                   # 2 saturated
        {"visual_dependency_f": 10, "visual_dependency_b": 10,
         "correctness_agreement_n_correct": 10},                                   # 3 both
        {"correctness_agreement_n_correct": 0, "is_consensus_error_issue": True},  # 4 floor + label error
        {"distractor_similarity_severity": "critical"},                            # 5 duplicate options
        {"placeholder_gold": True},                                                # 6 placeholder gold
        {"placeholder_n_options": 2},                                              # 7 placeholder distractor only
        {"visual_dependency_f": 10, "visual_dependency_b": 7},                     # 8 blind 0.7 < 0.75: kept
    ])
    th = StageThresholds()
    flags = stage_flags(t, th)
    res = apply_stages(flags, ("text_ablation", "saturation", "anomaly"))
    assert list(res["stage"]) == ["", "text_ablation", "saturation", "text_ablation", "saturation", "anomaly",
                                  "anomaly", "", ""]
    assert res["removed_by_stage"] == {"text_ablation": 2, "saturation": 2, "anomaly": 2}
    assert res["overlaps"]["text_ablation"]["saturation"] == 1
    assert res["overlaps"]["saturation"]["anomaly"] == 1
    # the order changes the attribution, not the set
    res2 = apply_stages(flags, ("anomaly", "saturation", "text_ablation"))
    assert res2["stage"][4] == "anomaly" and res2["stage"][3] == "saturation"
    assert (res2["kept"] == res["kept"]).all()
    # thresholds are honoured: a stricter blind share keeps item 1; placeholder=any drops item 7; a lower
    # blind share with a gain cap removes item 8 (gain 0.3) only when the cap allows it
    th2 = StageThresholds(blind_min_share=0.95, placeholder="any")
    res3 = apply_stages(stage_flags(t, th2), ("text_ablation", "saturation", "anomaly"))
    assert res3["kept"][1] and not res3["kept"][7]
    assert stage_flags(t, StageThresholds(blind_min_share=0.7, max_gain=0.35))["text_ablation"][0][8]
    assert not stage_flags(t, StageThresholds(blind_min_share=0.7, max_gain=0.25))["text_ablation"][0][8]
    # the anomaly stage reads the label-error flag only: a strong non-gold consensus without the flag (the
    # label model's predictive check did not pass) is kept; the negative-discrimination test is off by default
    t2 = _findings([{"consensus_error_consensus_share": 0.9, "consensus_error_gold_share": 0.0},
                    {"is_correctness_agreement_issue": True}, {"is_consensus_error_issue": True}])
    assert list(stage_flags(t2, th, stages=("anomaly",))["anomaly"][0]) == [False, False, True]
    assert stage_flags(t2, StageThresholds(negative_discrimination=True), stages=("anomaly",))["anomaly"][0][1]
    # TsT s(x): a text-learnable item goes at text ablation
    tst = np.full(len(t), np.nan)
    tst[0] = 0.6
    assert stage_flags(t, th, tst)["text_ablation"][0][0]
    empty = apply_stages({}, (), n=len(t))
    assert empty["kept"].all() and empty["removed_by_stage"] == {}
    with pytest.raises(InputError):
        stage_flags(t, th, stages=("nonsense",))
    with pytest.raises(InputError):
        StageThresholds(blind_min_share=2.0).validate()


def test_doubted_golds_are_left_out_after_the_anomaly_stage_and_never_called_errors():
    """The doubted-gold rule: the label model's doubted golds that the audit does not flag (its held-out check
    does not support them) leave the draw after the anomaly stage; a flagged one stays the anomaly stage's;
    ``doubted_gold=keep`` and a run without the anomaly stage apply nothing."""
    t = _findings([{}, {"consensus_error_gold_doubted": True},
                   {"consensus_error_gold_doubted": True, "is_consensus_error_issue": True},
                   {"consensus_error_gold_doubted": False}])
    th = StageThresholds()
    order = stage_order(("saturation", "anomaly"), th)
    assert order == ("saturation", "anomaly", DOUBTED)
    res = apply_stages(stage_flags(t, th, stages=order), order)
    assert list(res["stage"]) == ["", DOUBTED, "anomaly", ""]
    assert res["removed_by_stage"] == {"saturation": 0, "anomaly": 1, DOUBTED: 1}
    assert "not a finding" in res["reason"][1] and "label error" in res["reason"][2]
    assert stage_order(("saturation", "anomaly"), StageThresholds(doubted_gold="keep")) == ("saturation", "anomaly")
    assert stage_order(("saturation",), th) == ("saturation",)
    # a findings table without the column (an older audit, or no label model) leaves nothing out
    assert not stage_flags(_findings([{}, {}]), th, stages=(DOUBTED,))[DOUBTED][0].any()
    with pytest.raises(InputError):
        StageThresholds(doubted_gold="drop").validate()


def test_select_top_category_floor_and_ties():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.1, 0.05, np.nan, 0.7])
    cats = np.array([0, 0, 0, 0, 1, 1, 1, 0])
    cand = np.ones(8, bool)
    keep = select_top(scores, cand, cats, 4, floor_share=0.0)
    assert list(np.flatnonzero(keep)) == [0, 1, 2, 7]           # tie 0.7: item 2 before 7
    keep, via = select_top(scores, cand, cats, 4, floor_share=1.0, with_floor=True)
    # category 1 has 3 of 8 candidates -> floor(1.0 * 4 * 3 / 8) = 1: its best item, kept only by the floor
    assert list(np.flatnonzero(keep)) == [0, 1, 2, 4]
    assert list(np.flatnonzero(via)) == [4]
    # a small share still keeps one item of every category
    keep = select_top(scores, cand, cats, 2, floor_share=0.1)
    assert list(np.flatnonzero(keep)) == [0, 4]


def test_in_pool_note_only_when_the_point_lies_above_its_interval():
    from audit_hub.curate.pipeline import _in_pool_note

    boot = np.linspace(0.5, 0.99, 1001)  # 97.5th percentile 0.98
    assert _in_pool_note(0.994, boot).startswith("the in-pool rho lies above its bootstrap interval")
    assert _in_pool_note(0.97, boot) is None
    assert _in_pool_note(None, boot) is None and _in_pool_note(0.99, np.full(5, np.nan)) is None


def test_text_ablation_note_names_blind_runs_that_answered_cut_prompts():
    """With blind runs, the text-ablation stage's evidence note says how many blind rows answered prompts cut to
    the model's context (fewer items then look text-answerable); without blind runs the cut count is moot."""
    from audit_hub.curate.filters import evidence_notes

    t = _findings([{}, {}])
    cut = {"m1": {"n_truncated": 700, "n_questions": 3040, "max_length": 256},
           "m2": {"n_truncated": 1300, "n_questions": 3040, "max_length": 256}}
    stages = ("text_ablation", "saturation")
    assert evidence_notes(t, None, stages) == {"text_ablation": "blind runs only (no TsT scores)"}
    assert evidence_notes(t, None, stages, cut) == {"text_ablation": (
        "blind runs only (no TsT scores); 2 blind runs answered 2,000 cut prompts (--truncate left): fewer items "
        "look text-answerable")}
    assert evidence_notes(t, np.zeros(2), stages, cut)["text_ablation"].startswith("2 blind runs answered 2,000")
    no_blind = _findings([{"visual_dependency_mb": 0}, {"visual_dependency_mb": 0}])
    assert "cut prompts" not in evidence_notes(no_blind, np.zeros(2), stages, cut).get("text_ablation", "")


def test_relative_change_of_a_missing_figure_is_none():
    """`curate --target-size 1`: significant pairs NaN after, printed "+nan%" on the console and card."""
    from audit_hub.curate.measures import relative_change

    assert relative_change(float("nan"), 0.4) is None and relative_change(0.5, 0.4) == pytest.approx(0.25)
    assert relative_change(0.5, 0.0) is None and relative_change(None, 0.4) is None


def test_kmeans_anchors_give_exactly_the_size_asked():
    """`curate --method kmeans_anchors --target-size 1000` kept 936 items on MATH-V: a cluster smaller than its
    share kept only its own items and the shortfall was dropped. It now goes to the clusters with items left."""
    from audit_hub.curate.irt import kmeans_anchor_weights

    rng = np.random.default_rng(1)
    centers = rng.normal(0, 10, (60, 3))  # 30 single items and 30 groups of 31 identical ones (960 items)
    emb = centers[np.r_[np.arange(30), np.repeat(np.arange(30, 60), 31)]]
    for size in (100, 500, 900, 960):  # before: 100, 480, 871, ...
        w = kmeans_anchor_weights(emb, size, 0)
        assert int((w > 0).sum()) == size and w.sum() == pytest.approx(960)


def test_stage_counts_name_flags_the_chosen_selection_set_aside():
    """MathVista's default curate printed "removed by stage: text_ablation 0, saturation 0" although the stages
    flagged 79 and 310 items: the chosen variant applied only the anomaly stage."""
    from audit_hub.curate.output import stage_counts_text

    s = {"removed_by_stage": {"text_ablation": 0, "saturation": 0, "anomaly": 0, "selection": 690},
         "flagged_by_stage": {"text_ablation": 79, "saturation": 310, "anomaly": 0}}
    assert stage_counts_text(s) == ("text_ablation 0 of 79 flagged (set aside by the chosen selection), saturation 0 "
                                    "of 310 flagged (set aside by the chosen selection), anomaly 0, selection 690")
