"""Issue 16: embedded options, placeholder options, CircularEval, yes/no rules, item accounting,
design labels and the CLI's several --runs paths (hand-computed cases)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_hub.cli import expand_multi_path_options
from audit_hub.detectors.accounting import item_accounting
from audit_hub.detectors.design_label import auc_discrete, parse_design_label
from audit_hub.detectors.placeholders import is_missing, is_placeholder, placeholder_mask
from audit_hub.detectors.strata import effective_option_count
from audit_hub.errors import InputError
from audit_hub.frame.core import AuditFrame
from audit_hub.readers import ingest
from audit_hub.readers.circular import collapse_circular
from audit_hub.readers.embedded_options import items_with_unparsed_options, split_embedded_options
from audit_hub.readers.vlmevalkit_rules import yes_no


# ------------------------------------------------------------------------------------ embedded options
@pytest.mark.parametrize("text, stem, options", [
    # MMStar's question field, form 1 (the official sheet)
    ("Which option describe the object relationship in the image correctly?\nOptions: A: The suitcase is on the "
     "book., B: The suitcase is beneath the cat., C: The suitcase is beneath the bed., D: The suitcase is beneath "
     "the book.", "Which option describe the object relationship in the image correctly?",
     ["The suitcase is on the book.", "The suitcase is beneath the cat.", "The suitcase is beneath the bed.",
      "The suitcase is beneath the book."]),
    # MMStar form 2 / MathVista's query: a Choices block; a comma inside an option does not split it
    ("What is the value of x?\nChoices:\n(A) 2\n(B) 4, or 5\n(C) 6\n(D) 8", "What is the value of x?",
     ["2", "4, or 5", "6", "8"]),
    # MMStar form 3: bare (A) lines after the question, no header
    ("Subtract all red things. How many objects are left?\n(A) 54\n(B) 52\n(C) 50\n(D) 48",
     "Subtract all red things. How many objects are left?", ["54", "52", "50", "48"]),
    # VLMEvalKit's ImageMCQDataset.build_prompt: "Options:\nA. x\nB. y\n" + instruction
    ("Hint: a kitchen\nQuestion: Which object is closest?\nOptions:\nA. a cup\nB. a plate\nC. a knife\n"
     "Please select the correct answer from the options above. \n",
     "Hint: a kitchen\nQuestion: Which object is closest?\nPlease select the correct answer from the options above.",
     ["a cup", "a plate", "a knife"]),
    # MME-RealWorld (VLMEvalKit): "The choices are listed below:" + "(A) .." lines
    ("What is the colour of the car?\nThe choices are listed below:\n(A) red\n(B) blue\n(C) green",
     "What is the colour of the car?", ["red", "blue", "green"]),
    # Chinese sets: 选项如下所示 / full-width punctuation
    ("图中有几只猫？选项如下所示:\n(A) 一只\n(B) 两只", "图中有几只猫？", ["一只", "两只"]),
    ("图中有几只猫？\n选项：\nA．一只\nB．两只\nC．三只", "图中有几只猫？", ["一只", "两只", "三只"]),
    ("哪个城市？\nA、北京\nB、上海", "哪个城市？", ["北京", "上海"]),
    ("哪个城市？\n（A）北京\n（B）上海", "哪个城市？", ["北京", "上海"]),
    # A) lines, and inline bracketed items
    ("What is it?\nA) cat\nB) dog\nAnswer with the letter.", "What is it?\nAnswer with the letter.", ["cat", "dog"]),
    ("Which is larger? (A) 5 (B) 6", "Which is larger?", ["5", "6"]),
    # SFE "Choices are:" with "A. " lines
    ("Pick one.\nChoices are:\nA. x\nB. y\n", "Pick one.", ["x", "y"]),
])
def test_embedded_option_forms(text, stem, options):
    assert split_embedded_options(text) == (stem, options)


@pytest.mark.parametrize("text", [
    "How many apples, pears: two?", "A. B. Smith wrote which novel?", "Is (A) the answer?",
    "Options: none of these apply", "plain question"])
def test_embedded_options_none(text):
    assert split_embedded_options(text) == (text, [])


def test_unparsed_options_with_letter_gold_is_an_error_unless_allowed(tmp_path):
    q = tmp_path / "q.csv"
    q.write_text("question_id,question,answer\n1,\"Which one? 1) x 2) y\",B\n2,\"What is 2+2?\",4\n")
    r = tmp_path / "r.csv"
    r.write_text("question_id,model,prediction\n1,m,B\n2,m,4\n")
    with pytest.raises(InputError, match="letter gold but no options") as ei:
        ingest.build_frame(str(q), [str(r)])
    assert ei.value.row == 1 and ei.value.column == "options"  # data row 1
    frame = ingest.build_frame(str(q), [str(r)], allow_unparsed_options=True)
    assert frame.meta["unparsed_options"] == {"n": 1, "question_ids": ["1"]}
    qs = pd.DataFrame({"question_id": ["a", "b", "c"], "question": ["Q?"] * 3, "options": [[], ["x", "y"], []],
                       "answer": ["(C)", "A", "C"], "answer_type": [None, None, "free"]})
    assert items_with_unparsed_options(qs) == [0]


# ------------------------------------------------------------------------------------ placeholder options
def _frame(questions: dict, runs: dict | None = None) -> AuditFrame:
    return AuditFrame.from_tables(pd.DataFrame(questions), pd.DataFrame(runs) if runs else None)


def test_placeholder_texts():
    assert all(is_placeholder(t) for t in ("", " nan ", "NaN", "None", "null", "N/A", None, float("nan")))
    assert not any(is_placeholder(t) for t in ("Na", "none of the above", "0", "No"))
    assert all(is_missing(t) for t in ("", "  ", " nan ", "NaN", "<NA>", None, float("nan")))
    assert not any(is_missing(t) for t in ("None", "null", "N/A"))


@pytest.mark.parametrize("options,expected", [
    # MATH-Vision Q758 "How many of the following flags ...?": "None" is an answer among counts
    (["None", "One", "Two", "Three", "Four"], [False] * 5),
    (["1", "2", "3", "None"], [False] * 4),                    # a single trailing "None" among numbers
    (["none", "40 of each colour", "41 of each colour"], [False] * 3),  # before real options: an answer
    (["cat", "dog", "None", "None"], [False, False, True, True]),  # str(None) padding
    (["1", "2", "None", "None"], [False, False, True, True]),     # a run of two is padding even among numbers
    (["cat", "dog", "null"], [False, False, True]),              # trailing, not a quantity item
    (["cat", "nan", "dog"], [False, True, False]),               # a missing value wherever it stands
    (["cat", "", "dog", " "], [False, True, False, True]),
])
def test_placeholder_mask_decides_from_the_item(options, expected):
    assert placeholder_mask(options) == expected


def test_none_as_a_real_answer_is_not_a_placeholder_finding():
    from audit_hub.detectors import distractor_similarity as ds

    f = _frame({"question_id": ["758", "pad"],
                "options": [["None", "One", "Two", "Three", "Four"], ["cat", "dog", "None", "None"]],
                "answer": ["C", "A"]})
    np.testing.assert_array_equal(effective_option_count(f), [5, 2])
    pq = ds.run(f).per_question.set_index("question_id")
    assert pq.loc["758", "distractor_similarity_severity"] == "info"
    assert pq.loc["758", "distractor_similarity_n_placeholder_distractors"] == 0
    assert pq.loc["pad", "distractor_similarity_severity"] == "high"
    assert pq.loc["pad", "distractor_similarity_n_placeholder_distractors"] == 2


def test_placeholder_distractors_and_gold():
    from audit_hub.detectors import answer_options_distribution as ao
    from audit_hub.detectors import distractor_similarity as ds
    from audit_hub.report.tables import suggested_actions

    f = _frame({"question_id": ["p", "g", "ok"],
                "options": [["cat", "dog", "nan", "nan"], ["cat", "", "dog"], ["red", "blue", "green"]],
                "answer": ["A", "B", "C"]})
    np.testing.assert_array_equal(effective_option_count(f), [2, 2, 3])
    r = ds.run(f)
    pq = r.per_question.set_index("question_id")
    # a padded 2-option item is not "exact-duplicate options C=D": it has placeholder distractors
    assert pq.loc["p", "distractor_similarity_n_exact_pairs"] == 0
    assert pq.loc["p", "distractor_similarity_severity"] == "high"
    assert pq.loc["p", "distractor_similarity_n_placeholder_distractors"] == 2
    # a placeholder gold: critical, unanswerable as released
    assert pq.loc["g", "distractor_similarity_placeholder_gold"]
    assert pq.loc["g", "distractor_similarity_severity"] == "critical"
    assert pq.loc["ok", "distractor_similarity_severity"] == "info"
    assert r.summary["n_placeholder_gold"] == 1 and r.summary["n_placeholder_distractor_items"] == 1
    sev = {"distractor_similarity": pq["distractor_similarity_severity"].map(
        {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}).to_numpy()}
    acts = suggested_actions(sev, sev["distractor_similarity"], {"distractor_similarity": r})
    assert list(acts) == ["rewrite distractor", "relabel", "keep"]
    # the gold-position test uses effective option counts and leaves the placeholder gold out
    a = ao.run(f, n_mc=99)
    assert a.summary["n_items"] == 2 and a.summary["excluded"] == {"placeholder gold": 1}
    assert a.summary["strata"].keys() == {"2", "3"}
    assert a.summary["chance_accuracy"] == pytest.approx((1 / 2 + 1 / 3) / 2)


# ------------------------------------------------------------------------------------ CircularEval
def _circular_frame(copy_predictions: dict[str, list[str]], judged: dict[str, list] | None = None):
    """Question 7 with 3 options and its copies 1000007, 2000007 (rotated); question 8 plain."""
    opts = [["red", "green", "blue"], ["green", "blue", "red"], ["blue", "red", "green"]]
    q = pd.DataFrame({"question_id": ["7", "1000007", "2000007", "8"],
                      "question": ["Colour?"] * 3 + ["Shape?"],
                      "options": opts + [["square", "circle"]],
                      "answer": ["A", "C", "B", "A"],
                      "group_id": ["7", "7", "7", None]})
    rows = []
    for m, preds in copy_predictions.items():
        for k, (qid, p) in enumerate(zip(["7", "1000007", "2000007", "8"], preds)):
            row = {"question_id": qid, "model": m, "arm": "full", "prediction": p}
            if judged is not None:
                row["hit"] = judged[m][k]
            rows.append(row)
    return collapse_circular(AuditFrame.from_tables(q, pd.DataFrame(rows)))


def test_circular_group_with_one_copy_wrong():
    f = _circular_frame({"all_right": ["A", "C", "B", "A"], "one_wrong": ["A", "A", "B", "A"],
                         "unreadable_copy": ["A", "C", "I am not sure", "B"]},
                        judged={"all_right": [1, None, None, 1], "one_wrong": [0, None, None, 1],
                                "unreadable_copy": [0, None, None, 0]})
    assert f.questions["question_id"].tolist() == ["7", "8"]
    exact = f.correctness("full", "hit_exact", ["all_right", "one_wrong", "unreadable_copy"])
    np.testing.assert_array_equal(exact, [[1, 0, 0], [1, 1, 0]])
    judged = f.correctness("full", "hit", ["all_right", "one_wrong", "unreadable_copy"])
    np.testing.assert_array_equal(judged, [[1, 0, 0], [1, 1, 0]])
    acc = f.accuracy_table().set_index("model")
    assert acc.loc["one_wrong", "n_items"] == 2 and acc.loc["one_wrong", "accuracy_exact"] == 0.5
    # the group with an unreadable copy is unparseable as a whole; the per-copy rows are kept
    assert acc.loc["unreadable_copy", "unparseable_share"] == 0.5
    copies = f.meta["_circular_copies"]
    assert len(copies) == 9 and set(copies["group_id"]) == {"7"}
    assert f.meta["circular"]["n_groups"] == 1 and f.meta["circular"]["n_copies"] == 3


def test_circular_needs_every_copy_for_the_exact_arm():
    f = _circular_frame({"m": ["A", "C", "B", "A"]})
    runs = f.meta["_circular_copies"]
    assert len(runs) == 3
    q = pd.DataFrame({"question_id": ["7", "1000007"], "question": ["Colour?"] * 2,
                      "options": [["red", "green"], ["green", "red"]], "answer": ["A", "B"],
                      "group_id": ["7", "7"]})
    only_main = collapse_circular(AuditFrame.from_tables(q, pd.DataFrame(
        {"question_id": ["7"], "model": ["m"], "prediction": ["A"]})))
    assert only_main.correctness("full", "hit_exact")[0, 0] == -1  # a copy is missing: unknown, not right


def test_group_id_that_is_not_circular_is_left_alone():
    q = pd.DataFrame({"question_id": ["1", "2"], "question": ["a?", "b?"], "options": [["x", "y"], ["x", "y"]],
                      "answer": ["A", "B"], "group_id": ["img1", "img1"]})
    f = AuditFrame.from_tables(q)
    assert collapse_circular(f) is f


# ------------------------------------------------------------------------------------ yes/no
@pytest.mark.parametrize("pred, expected", [
    ("Yes", "yes"), ("No.", "no"), ("Yes, there is a dog.", "yes"), ("I think the answer is no.", "no"),
    ("Yes and no.", None), ("Maybe.", None), ("Sorry, I am not sure.", None), ("nothing", None),
    ("no,yes", None), ("(yes)", "yes"), ("", None), (None, None), ("YES!", "yes"), ("No, it is not.", "no")])
def test_vlmevalkit_yes_no_rule(pred, expected):
    assert yes_no(pred) == expected


def test_empty_prediction_is_wrong_and_unparseable_share_is_beside(tmp_path):
    q = pd.DataFrame({"question_id": list("abcd"), "question": ["Is it?"] * 4, "answer": ["yes", "no", "yes", "no"]})
    runs = pd.DataFrame({"question_id": list("abcd"), "model": "m", "prediction": ["yes", "no", None, "maybe"]})
    f = AuditFrame.from_tables(q, runs)
    acc = f.accuracy_table().iloc[0]
    assert acc["n_items"] == 4 and acc["accuracy_exact"] == 0.5  # 2 / 4: the empty and unreadable rows count
    assert acc["unparseable_share"] == 0.5
    # a hit-only table (no output text at all) stays unknown for the exact arm
    g = AuditFrame.from_tables(q, pd.DataFrame({"question_id": list("abcd"), "model": "m", "hit": [1, 0, 1, 1]}))
    assert (g.correctness("full", "hit_exact") == -1).all()


# ------------------------------------------------------------------------------------ item accounting
def test_item_accounting_charges_first_reason():
    acc = item_accounting(5, [("a", np.array([1, 1, 0, 0, 0], bool)), ("b", np.array([0, 1, 1, 0, 0], bool))])
    assert acc == {"n_items": 2, "excluded": {"a": 2, "b": 1}}


def test_every_detector_accounts_for_every_question():
    from audit_hub.engine.run import AuditConfig, run_audit
    from tests.sim import simulate_frame

    f = simulate_frame(300, 4, n_options=np.where(np.arange(300) % 3 == 0, 2, 4), seed=3)
    # knock out some answers and correctness so detectors must exclude items
    r = f.runs.copy()
    drop = (r["q"].to_numpy() % 17 == 0) & (r["m"].to_numpy() == 0)
    r.loc[drop, "hit"] = -1
    r.loc[drop, "hit_exact"] = -1
    r.loc[(r["q"].to_numpy() % 23 == 0), "answer"] = None
    f2 = AuditFrame(questions=f.questions, runs=r, models=f.models, sources=f.sources, meta={})
    res = run_audit(f2, AuditConfig(seed=0, n_permutations=49, calibration_sims=0, run_calibration=False))
    assert len(res.results) >= 5
    for name, det in res.results.items():
        s = det.summary
        assert "n_items" in s and "excluded" in s, name
        assert s["n_items"] + sum(s["excluded"].values()) == f2.n_questions, (name, s["n_items"], s["excluded"])
    assert any(det.summary["excluded"] for det in res.results.values())
    from audit_hub.engine.run import exclusion_warning

    line = exclusion_warning(res)
    assert line is not None and "\n" not in line and "visual_dependency" in line


# ------------------------------------------------------------------------------------ design labels
def test_auc_hand_computed():
    out = auc_discrete(np.array([1.0, 0.5]), np.array([0.5, 0.0, 0.0]), n_boot=200, rng=np.random.default_rng(0))
    # pairs: (1>.5, 1>0, 1>0, .5=.5 -> .5, .5>0, .5>0) = 5.5 / 6
    assert out["auc"] == pytest.approx(5.5 / 6) and out["chance"] == 0.5
    assert out["ci"][0] <= out["auc"] <= out["ci"][1]
    assert parse_design_label("category:VD") == ("category", "VD") and parse_design_label("category") == ("category", None)


def test_design_label_recovers_planted_intent_and_not_an_absent_one():
    from audit_hub.detectors import visual_dependency as vd

    rng = np.random.default_rng(1)
    Q, M = 400, 4
    label = np.where(np.arange(Q) % 2 == 0, "VD", "VS")
    blind = rng.random((Q, M)) < 0.4
    # VD items gain from the image, VS items do not (planted); a shuffled label carries nothing
    full = np.where((label == "VD")[:, None], rng.random((Q, M)) < 0.85, blind)
    qs = pd.DataFrame({"question_id": [f"q{i}" for i in range(Q)], "question": ["Is it?"] * Q,
                       "answer": ["yes"] * Q, "category": label, "shuffled": rng.permutation(label)})
    rows = []
    for arm, mat in (("full", full), ("blind", blind)):
        for m in range(M):
            rows.append(pd.DataFrame({"question_id": qs["question_id"], "model": f"m{m}", "arm": arm,
                                      "prediction": np.where(mat[:, m], "yes", "no"), "hit": mat[:, m].astype(int)}))
    f = AuditFrame.from_tables(qs, pd.concat(rows))
    planted = vd.run(f, n_permutations=99, n_boot=200, design_label="category:VD").summary["design_label"]
    assert planted["auc"]["auc"] > 0.8 and planted["auc"]["ci"][0] > 0.5
    assert planted["per_value"]["VS"]["excess"] > planted["per_value"]["VD"]["excess"]
    absent = vd.run(f, n_permutations=99, n_boot=200, design_label="shuffled:VD").summary["design_label"]
    assert absent["auc"]["ci"][0] < 0.5 < absent["auc"]["ci"][1]
    line = vd.card_line({"design_label": planted})
    assert line.startswith("**Designer intent**") and "AUC 0." in line and "chance 0.50" in line
    assert vd.card_line({}) == ""


# ------------------------------------------------------------------------------------ CLI
def test_runs_takes_several_paths():
    argv = ["audit", "--runs", "a.jsonl", "b.jsonl", "c.jsonl", "-q", "q.tsv", "-b", "x", "y", "--out", "o"]
    assert expand_multi_path_options(argv) == [
        "audit", "--runs", "a.jsonl", "--runs", "b.jsonl", "--runs", "c.jsonl", "-q", "q.tsv", "-b", "x", "-b", "y",
        "--out", "o"]
    assert expand_multi_path_options(["audit", "-r", "a", "--", "b"]) == ["audit", "-r", "a", "--", "b"]


def test_design_label_excess_uses_the_per_category_null():
    """The design-label excess per value is the per-category excess when the label column is the category: both
    shuffle blind outcomes within (value x the headline's strata). The new-user walkthrough on HallusionBench saw
    VD -4.2 / VS -8.3 pp (null within the label value only) beside +0.0 pp for both in the per-category table, and a
    '2.0x' ratio of two negative excesses."""
    from audit_hub.detectors import visual_dependency as vd

    rng = np.random.default_rng(3)
    Q, M = 300, 3
    label = np.where(np.arange(Q) % 3 == 0, "VD", "VS")
    gold = np.where(rng.random(Q) < 0.5, "yes", "no")
    qs = pd.DataFrame({"question_id": [f"q{i}" for i in range(Q)], "question": ["Is it?"] * Q, "answer": gold,
                       "category": label})
    rows = []
    for arm in ("full", "blind"):
        for m in range(M):
            # a 'say yes' model: right on yes items, wrong on no items, in both arms (strata by gold matter)
            say_yes = rng.random(Q) < 0.8
            pred = np.where(say_yes, "yes", gold)
            rows.append(pd.DataFrame({"question_id": qs["question_id"], "model": f"m{m}", "arm": arm,
                                      "prediction": pred, "hit": (pred == gold).astype(int)}))
    f = AuditFrame.from_tables(qs, pd.concat(rows))
    s = vd.run(f, n_permutations=99, n_boot=0, design_label="category:VD").summary
    per_cat = {c["category"]: c for c in s["per_category"]} if isinstance(s["per_category"], list) else s["per_category"]
    for v in ("VD", "VS"):
        assert s["design_label"]["per_value"][v]["excess"] == pytest.approx(per_cat[v]["excess"], abs=1e-12), v
    neg = {"design_label": {"column": "c", "positive": "a", "auc": {"auc": 0.5, "ci": [0.4, 0.6], "p_value": 0.5},
                            "per_value": {"a": {"excess": -0.042, "n_items": 12}, "b": {"excess": -0.083, "n_items": 12}},
                            "excess_ratio": {"numerator": "b", "denominator": "a", "value": 2.0}}}
    assert "x that on" not in vd.card_line(neg)
    neg["design_label"]["per_value"] = {"a": {"excess": 0.04, "n_items": 12}, "b": {"excess": 0.08, "n_items": 12}}
    assert "the excess on b items is 2.0x that on a items" in vd.card_line(neg)


def test_design_label_help_shows_the_form_it_reads_and_the_error_corrects_the_other():
    """--help showed the metavar COLUMN=VALUE for an option that reads COLUMN[:VALUE]; a user who typed
    category=VD got 'no question column'. The metavar is the real form and the error names it."""
    from cli_run import run_cli

    from audit_hub.detectors import visual_dependency as vd

    res = run_cli("audit", "--help")
    assert "--design-label COLUMN[:VALUE]" in " ".join(res.stdout.split())
    qs = pd.DataFrame({"question_id": ["q0", "q1"], "question": ["a", "b"], "answer": ["yes", "no"],
                       "category": ["VD", "VS"]})
    rows = [pd.DataFrame({"question_id": ["q0", "q1"], "model": m, "arm": arm, "prediction": ["yes", "no"],
                          "hit": [1, 1]}) for m in ("m0", "m1") for arm in ("full", "blind")]
    f = AuditFrame.from_tables(qs, pd.concat(rows))
    with pytest.raises(InputError, match=r"the form is COLUMN:VALUE: --design-label category:VD"):
        vd.run(f, n_permutations=9, n_boot=0, design_label="category=VD")
