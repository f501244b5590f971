"""Files written by the harnesses' own code (tests/fixtures/*/real, see each PROVENANCE.md): for every
model and dataset the audit's judged and exact accuracies equal the harness's, and the question count
equals its scoring units."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pandas as pd
import pytest

from audit_hub.readers import ingest
from audit_hub.readers.vlmevalkit import parse_sheet_name

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
VLM = os.path.join(FIX, "vlmevalkit", "real")
LMMS = os.path.join(FIX, "lmms_eval", "real")
MODELS = ("ScriptedGood", "ScriptedMid", "ScriptedWeak")


def _vlm_files(dataset: str, model: str = "*") -> list[str]:
    return sorted(glob.glob(os.path.join(VLM, "outputs", model, "*", f"{model}_{dataset}*.xlsx")))


def _vlm_harness_accuracy(model: str, dataset: str) -> float:
    folder = glob.glob(os.path.join(VLM, "outputs", model, "*"))[0]
    if dataset in ("POPE", "HallusionBench"):
        sc = pd.read_csv(os.path.join(folder, f"{model}_{dataset}_score.csv"))
        col = "acc" if dataset == "POPE" else "aAcc"
        return float(sc.loc[sc["split"] == "Overall", col].iloc[0]) / 100
    return float(pd.read_csv(os.path.join(folder, f"{model}_{dataset}_acc.csv"))["Overall"].iloc[0])


@pytest.mark.parametrize("dataset", ["MMBench_DEV_EN", "MMStar", "POPE", "HallusionBench"])
def test_vlmevalkit_accuracies_equal_vlmevalkits(dataset):
    frame = ingest.build_frame(os.path.join(VLM, "LMUData", f"{dataset}.tsv"), _vlm_files(dataset))
    assert frame.models == MODELS
    acc = frame.accuracy_table().set_index("model")
    for m in MODELS:
        harness = _vlm_harness_accuracy(m, dataset)
        assert acc.loc[m, "accuracy_judged"] == pytest.approx(harness, abs=1e-12), (m, dataset)
        assert acc.loc[m, "accuracy_exact"] == pytest.approx(harness, abs=1e-12), (m, dataset)
    # question count = VLMEvalKit's scoring units (one row per question in its judged sheet; for
    # MMBench the circular groups, not the 70 option-shifted rows)
    units = pd.read_excel(_vlm_files(dataset, "ScriptedGood")[1], engine="openpyxl")
    assert frame.n_questions == len(units)
    if dataset == "MMBench_DEV_EN":
        assert frame.n_questions == 20 and frame.meta["circular"] == {
            "n_groups": 20, "n_copies": 70, "n_questions_before": 70,
            "rule": "a circular question is right only when every option-shifted copy is right and readable"}
        assert len(frame.meta["_circular_copies"]) == 70 * len(MODELS)


def test_vlmevalkit_benchmark_name_and_hallusion_metadata():
    frame = ingest.build_frame(None, _vlm_files("HallusionBench", "ScriptedGood"))
    assert frame.meta["benchmark"] == "HallusionBench"
    q = frame.questions.set_index("question_id")
    for col in ("subcategory", "visual_input", "set_id", "figure_id"):
        assert col in q.columns
    assert set(q["category"]) == {"VD", "VS"}
    assert q.loc["VD_math_chart_1_1_0", "subcategory"] == "math" and q.loc["VD_math_chart_1_1_0", "figure_id"] == "1"
    assert ingest.build_frame(None, _vlm_files("MMStar", "ScriptedMid")).meta["benchmark"] == "MMStar"


def test_vlmevalkit_mmstar_embedded_options_agree_with_columns():
    """MMStar's question field embeds the options in its three forms; parsed, they equal VLMEvalKit's A-D."""
    from audit_hub.readers.embedded_options import split_embedded_options

    df = pd.read_csv(os.path.join(VLM, "LMUData", "MMStar.tsv"), sep="\t")
    for _, r in df.iterrows():
        stem, opts = split_embedded_options(r["question"])
        assert opts == [r[c] for c in "ABCD" if isinstance(r[c], str)] and "\n" not in stem


@pytest.mark.parametrize("name, judge", [
    ("ScriptedGood_MMStar_gpt-4o-mini_result.xlsx", "gpt-4o-mini"),
    ("ScriptedGood_MMStar_exact_matching_result.xlsx", "exact_matching"),
    ("ScriptedGood_MMBench_DEV_EN_openai_result.xlsx", "openai"),
    ("llava_next_yi_34b_MMStar.xlsx", None)])
def test_vlmevalkit_judged_sheet_names(name, judge):
    n = parse_sheet_name(os.path.join("/x", name))
    assert n.judge == judge and n.dataset in ("MMStar", "MMBench_DEV_EN")
    assert n.model == ("llava_next_yi_34b" if judge is None else "ScriptedGood")


# ------------------------------------------------------------------------------------ lmms-eval
def _lmms_versions() -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(LMMS, "v*")))


def _samples(version: str, model: str, task: str) -> tuple[str, list[dict]]:
    path = glob.glob(os.path.join(LMMS, version, model, f"*samples_{task}*.jsonl"))[0]
    with open(path, encoding="utf-8") as fh:
        return path, [json.loads(line) for line in fh if line.strip()]


def _prediction(rec: dict) -> str:
    v = rec["resps"] if "resps" in rec else rec["filtered_resps"]
    while isinstance(v, list):
        v = v[0]
    return v


def _verdict(rec: dict, key: str) -> float:
    v = rec[key]
    return float(v["true_false"] if "true_false" in v else v["score"])


@pytest.mark.parametrize("version", _lmms_versions())
@pytest.mark.parametrize("model", ["StubGood", "StubWeak"])
def test_lmms_eval_accuracies_equal_lmms_evals(version, model):
    results_path = glob.glob(os.path.join(LMMS, version, model, "*results*.json"))[0]
    results = json.load(open(results_path, encoding="utf-8"))["results"]
    judge_key = "gpt_eval_score" if version.startswith("v0.3") else "llm_as_judge_eval"
    for task, key in (("local_pope", "pope_accuracy"), ("local_mmstar", "average"), ("local_mathvista", judge_key)):
        path, recs = _samples(version, model, task)
        frame = ingest.build_frame(None, [path])
        assert frame.meta["benchmark"] == task and frame.models == (model,)
        assert frame.n_questions == len(recs)  # one scoring unit per logged sample
        assert frame.meta["judges"] == {model: f"lmms-eval:{key}"}
        acc = frame.accuracy_table().iloc[0]
        per_item = np.array([_verdict(r, key) for r in recs])
        assert acc["accuracy_judged"] == pytest.approx(per_item.mean(), abs=1e-12)
        headline = results[task][f"{key},none"]
        if task == "local_pope":
            assert acc["accuracy_judged"] == pytest.approx(headline, abs=1e-12)
        elif task == "local_mathvista":
            assert 100 * acc["accuracy_judged"] == pytest.approx(headline, abs=0.01)
        else:  # lmms-eval's MMStar "average" is the mean over l2 categories of the per-item scores
            l2 = frame.questions["l2_category"].to_numpy(dtype=object)
            hits = frame.correctness("full", "hit")[:, 0]
            macro = np.mean([hits[l2 == c].mean() for c in sorted(set(l2))])
            assert macro == pytest.approx(headline, abs=1e-12)
        # the exact arm: our own reading of the prediction
        exact = frame.correctness("full", "hit_exact")[:, 0]
        judged = frame.correctness("full", "hit")[:, 0]
        preds = {str(r["doc_id"]): _prediction(r) for r in recs}
        if task == "local_mmstar":
            if version.startswith("v0.3"):
                # lmms-eval 0.3.5's MMStar rule reads only the first character (or after "(", "option ",
                # "the answer is "): "Answer: B" is wrong there; those are the only disagreements
                diff = np.flatnonzero(exact != judged)
                assert all(exact[i] == 1 and preds[str(i)].lower().startswith("answer:") for i in diff)
                answer_colon = [i for i in range(len(recs)) if preds[str(i)].lower().startswith("answer:")]
                assert sorted(diff) == sorted(i for i in answer_colon if exact[i] == 1 and preds[str(i)][8:9] != "A")
            else:
                np.testing.assert_array_equal(exact, judged)  # 0.7.3 extracts the letter as we do
        elif task == "local_pope":
            # lmms-eval's POPE scores prediction == gold after lower/strip only: "Yes." is wrong there;
            # every disagreement is such a punctuation/case variant of the gold, read right by the audit
            qid = frame.questions["question_id"].to_numpy(dtype=object)
            gold = frame.questions["answer"].to_numpy(dtype=object)
            diff = np.flatnonzero(exact != judged)
            for i in diff:
                assert exact[i] == 1 and judged[i] == 0
                p = preds[qid[i]] if qid[i] in preds else None
                assert p is not None and p.strip().strip(".").lower() == gold[i]
        else:
            # MathVista under API_TYPE=dummy: where lmms-eval's quick rules extracted the answer the two arms
            # agree; where its GPT extraction returned "dummy", lmms-eval snaps "dummy" to the nearest choice
            # (multi_choice: sometimes the gold, a false "right") or scores free-form answers wrong, so the
            # arms may differ there -- the judge failure the judged-vs-exact comparison exists to show
            qid = frame.questions["question_id"].to_numpy(dtype=object)
            extracted = {str(r[key]["question_id"]): r[key]["extraction"] not in ("dummy", None, "") for r in recs}
            read = np.array([extracted[q] for q in qid])
            assert read.any() and (~read).any()
            np.testing.assert_array_equal(exact[read], judged[read])


def test_lmms_eval_answer_types_mapped():
    version = _lmms_versions()[-1]
    path, recs = _samples(version, "StubGood", "local_mathvista")
    q = ingest.build_frame(None, [path]).questions.set_index("question_id")
    assert q.loc["1", "answer_type"] == "mc" and q.loc["1", "answer"] == "A"  # multi_choice text gold -> letter
    assert list(q.loc["1", "options"]) == ["red", "blue", "green", "yellow"]
    assert q.loc["2", "answer_type"] == "numeric" and q.loc["4", "answer_type"] == "numeric"  # integer, float


def test_runs_glob_expanded_by_the_shell_or_by_us(tmp_path):
    from audit_hub.cli import main

    version = _lmms_versions()[-1]
    files = sorted(glob.glob(os.path.join(LMMS, version, "*", "*samples_local_pope*.jsonl")))
    assert len(files) == 2
    base = ["audit", "--calibration-sims", "0", "--n-permutations", "9", "--no-figures"]
    # as the shell gives it: several words after --runs
    assert main(base + ["--out", str(tmp_path / "a"), "--runs", *files]) == 0
    # a quoted glob that we expand ourselves
    pattern = os.path.join(LMMS, version, "*", "*samples_local_pope*.jsonl")
    assert main(base + ["--out", str(tmp_path / "b"), "--runs", pattern]) == 0
    s = json.load(open(tmp_path / "a" / "summary.json", encoding="utf-8"))
    assert {a["model"] for a in s["accuracy"]} == {"StubGood", "StubWeak"}
