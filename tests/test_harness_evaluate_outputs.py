"""Judged, scored and rule-scored files as VLMEvalKit's and lmms-eval's own code writes them (the harness-format
review's fixtures: tests/fixtures/vlmevalkit/evaluate_outputs and tests/fixtures/lmms_eval/process_results, each
with its PROVENANCE.md). Each figure is checked against what the harness itself computed from the same files
(its ``_acc.csv``, ``_score.csv``, ``_rating.json``, ``_score.json``, or the per-sample metric)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
VK = ROOT / "tests" / "fixtures" / "vlmevalkit" / "evaluate_outputs"
LMMS = ROOT / "tests" / "fixtures" / "lmms_eval" / "process_results"
MODELS = ("ScriptedGood", "ScriptedWeak")


def _audit(runs, **kw):
    import audit_hub as ba

    return ba.audit(runs=runs, calibration_sims=0, figures=False, parallel=False, **kw)


def _acc(res, arm_field: str) -> dict[str, float | None]:
    return {r["model"]: r.get(arm_field) for r in res.summary["per_model"]["rows"] if r["arm"] == "full"}


def _one(dataset: str, tmp_path: Path, folder: Path = VK, models=MODELS) -> Path:
    """A work_dir holding one dataset's files (``outputs/{model}/{model}_{dataset}*``)."""
    out = tmp_path / dataset
    for m in models:
        (out / m).mkdir(parents=True)
        for f in (folder / m).glob(f"*{dataset}*"):
            shutil.copy(f, out / m / f.name)
    return out


def _vk_csv(model: str, name: str) -> pd.DataFrame:
    return pd.read_csv(VK / model / f"{model}_{name}")


def test_a_work_dir_of_six_benchmarks_gives_six_reports_and_no_judged_sheet_benchmark():
    """`_gpt-4-turbo.xlsx`, `_results.xlsx` and `_score.xlsx` were read as three more benchmarks (MMVet_gpt-4-turbo,
    ChartQA_TEST_results, Video-MME_8frame_score) and their verdicts ignored; MathVista_MINI was refused."""
    res = _audit(str(VK))
    assert sorted(res.results) == ["ChartQA_TEST", "MME", "MMVet", "MathVista_MINI", "OCRBench", "Video-MME_8frame"]
    for name, r in res.results.items():
        assert sorted(r.frame.models) == sorted(MODELS), name


def test_chartqa_results_sheet_is_the_judged_arm_and_list_golds_are_read(tmp_path):
    """`_results.xlsx` (ImageVQADataset.evaluate, relaxed accuracy, 0/1 here) gives the judged arm: VLMEvalKit's own
    Overall in `_acc.csv`. The golds are `str(list)` ("['42']"): read as 42, so the exact arm is no longer 0%."""
    res = _audit(str(_one("ChartQA_TEST", tmp_path)))
    judged = _acc(res, "accuracy_judged")
    for m in MODELS:
        assert judged[m] == pytest.approx(float(_vk_csv(m, "ChartQA_TEST_acc.csv")["Overall"][0]) / 100)
    assert res.frame.questions["answer"].tolist() == ["42", "Japan", "1.5", "20"]
    exact = _acc(res, "accuracy_exact")
    assert exact == {"ScriptedGood": 0.75, "ScriptedWeak": 0.5}  # 1.52 vs 1.5 misses; "twenty" reads as 20


def test_mmvet_partial_credit_gives_no_judged_arm_and_says_so(tmp_path):
    """MMVet's GPT score is partial credit (0, 0.5, 0.8, ...): no 0/1 verdict, so no judged arm, one note naming the
    files; the `<OR>` gold accepts either answer."""
    res = _audit(str(_one("MMVet", tmp_path)))
    assert _acc(res, "accuracy_judged") == {"ScriptedGood": None, "ScriptedWeak": None}
    notes = res.frame.meta["reader_notes"]
    assert len(notes) == 1 and "ScriptedGood_MMVet_gpt-4-turbo.xlsx" in notes[0]
    assert "partial credit" in notes[0] and "no judged arm" in notes[0]
    assert "partial credit" in res.card()
    q = res.frame.questions.set_index("question_id")
    assert q.loc["1", "answer"] == "cat" and json.loads(q.loc["1", "gold_alternatives"]) == ["cat", "kitten"]
    assert q.loc["4", "answer"] == "STOP<AND>ONE WAY"  # all required: not alternatives


def test_video_mme_candidates_are_the_options_and_the_score_sheet_the_verdict(tmp_path):
    """`candidates` ("['A. a cat runs.', ...]") are the options without their letters; `_score.xlsx` is the judged
    arm, equal to VLMEvalKit's `_rating.json` overall; the exact arm reads "B. a dog sits." as B."""
    res = _audit(str(_one("Video-MME_8frame", tmp_path)))
    assert list(res.frame.questions["options"].iloc[0]) == ["a cat runs.", "a dog sits.", "a car stops.", "nothing."]
    judged = _acc(res, "accuracy_judged")
    for m in MODELS:
        rating = json.loads((VK / m / f"{m}_Video-MME_8frame_rating.json").read_text())
        assert judged[m] == pytest.approx(float(rating["short"]["overall"]), abs=5e-4)
    assert _acc(res, "accuracy_exact") == pytest.approx(judged)


def test_mathvista_sheet_types_and_python_list_choices(tmp_path):
    """VLMEvalKit's MathVista sheet: `choices` is `str(list)` and `answer_type` is MathVista's (integer, float,
    text); multi_choice questions are mc with the gold's option letter. The exact arm equals MathVista_acc's."""
    res = _audit(str(_one("MathVista_MINI", tmp_path)))
    q = res.frame.questions.set_index("question_id")
    assert q["answer_type"].to_dict() == {"1": "mc", "2": "numeric", "3": "numeric", "4": "mc", "5": "numeric"}
    assert list(q.loc["1", "options"]) == ["3/11", "8/11", "6/11"] and q.loc["1", "answer"] == "B"
    exact = _acc(res, "accuracy_exact")
    for m in MODELS:
        overall = _vk_csv(m, "MathVista_MINI_gpt-4o-mini_score.csv").set_index("Task&Skill").loc["Overall", "acc"]
        assert exact[m] == pytest.approx(overall / 100)


def test_ocrbench_list_golds_accept_any_listed_answer(tmp_path):
    """OCRBench's golds list accepted answers ("['hello', 'Hello']"); VLMEvalKit writes no per-question verdict."""
    res = _audit(str(_one("OCRBench", tmp_path)))
    q = res.frame.questions.set_index("question_id")
    assert json.loads(q.loc["1", "gold_alternatives"]) == ["hello", "Hello"]
    assert _acc(res, "accuracy_judged") == {"ScriptedGood": None, "ScriptedWeak": None}


def test_benchmark_selection_skips_an_unreadable_file_of_another_benchmark(tmp_path):
    """`--benchmark MME` over a work_dir stopped on another benchmark's unreadable sheet; it is now skipped and
    named (files_not_read); without the selection it still stops the audit."""
    from cli_run import run_cli

    wd = tmp_path / "wd"
    shutil.copytree(VK, wd, ignore=shutil.ignore_patterns("PROVENANCE.md"))
    pd.DataFrame({"index": [1, 2], "question": ["a", "b"], "answer": ["A", "B"], "options": ["[bad", "[bad"],
                  "prediction": ["A", "B"]}).to_excel(wd / "ScriptedGood" / "ScriptedGood_MMStar.xlsx", index=False)
    out = run_cli("audit", "--runs", wd, "--benchmark", "MME", "--calibration-sims", "0", "--no-figures",
                  "--out", tmp_path / "mme")
    assert out.returncode == 0, out.stderr
    m = json.loads((tmp_path / "mme" / "manifest.json").read_text())
    why = {Path(f["path"]).name: f["reason"] for f in m["files_not_read"]}
    assert why["ScriptedGood_MMStar.xlsx"].startswith("not read (") and "--benchmark" in why["ScriptedGood_MMStar.xlsx"]
    out = run_cli("audit", "--runs", wd, "--calibration-sims", "0", "--no-figures", "--out", tmp_path / "all")
    assert out.returncode == 2 and "ScriptedGood_MMStar.xlsx" in out.stderr and "'options'" in out.stderr
    assert not (tmp_path / "all").exists()


def test_lmms_eval_mme_verdict_split_over_two_metric_fields():
    """lmms-eval's MME records carry `mme_perception_score` or `mme_cognition_score`, never both: the judged arm
    takes whichever each record has (it was empty); each per-question score is the harness's own."""
    res = _audit([str(p) for p in sorted(LMMS.glob("*/*samples_mme.jsonl"))])
    judges = res.frame.meta["judges"]
    assert set(judges.values()) == {"lmms-eval:mme_perception_score|mme_cognition_score"}
    for path in sorted(LMMS.glob("*/*samples_mme.jsonl")):
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        want = sum(next(r[k]["score"] for k in ("mme_perception_score", "mme_cognition_score") if k in r)
                   for r in recs) / len(recs)
        assert _acc(res, "accuracy_judged")[path.parent.name] == pytest.approx(want)


def test_lmms_eval_ocrbench_categories_and_list_targets():
    """`target` is `str(list)` and the category is the metric dict's `question_type` (it was "(none)")."""
    res = _audit([str(p) for p in sorted(LMMS.glob("*/*samples_ocrbench.jsonl"))])
    q = res.frame.questions.set_index("question_id")
    assert q.loc["0", "category"] == "Regular Text Recognition" and q.loc["0", "answer"] == "CENTRAL"
    assert json.loads(q.loc["1", "gold_alternatives"]) == ["hello", "Hello"]
    assert _acc(res, "accuracy_judged") == {"StubGood": 1.0, "StubWeak": 0.2}  # ocrbench_accuracy's own scores
    runs = res.frame.runs
    weak = res.frame.models.index("StubWeak")
    assert runs[(runs["m"] == weak)]["hit_exact"].sum() >= 1


def test_accepted_answers_survive_the_report_and_an_audit_of_it(tmp_path):
    """The report's questions carry `gold_alternatives`, so the audit can be recomputed from the report: auditing
    the saved questions with the same runs gives the same exact-match accuracies."""
    wd = _one("OCRBench", tmp_path)
    res = _audit(str(wd))
    folder = res.save(tmp_path / "rep")
    q = pd.read_parquet(next((folder / "data").glob("questions-*.parquet")))
    assert json.loads(q.set_index("question_id").loc["1", "gold_alternatives"]) == ["hello", "Hello"]
    again = _audit(str(wd), questions=str(folder))
    assert _acc(again, "accuracy_exact") == _acc(res, "accuracy_exact")
    assert again.frame.questions.set_index("question_id").loc["1", "gold_alternatives"] == \
        res.frame.questions.set_index("question_id").loc["1", "gold_alternatives"]


def test_accepted_golds_rules():
    from audit_hub.schema import accepted_golds, options_cell

    assert accepted_golds("['hello', 'Hello']") == ["hello", "Hello"]
    assert accepted_golds('["x", "y", "x", " "]') == ["x", "y"]
    assert accepted_golds("cat<OR>kitten") == ["cat", "kitten"]
    assert accepted_golds("STOP<AND>ONE WAY") is None and accepted_golds("a<OR>b<AND>c") is None
    assert accepted_golds("[1, 2]") is None and accepted_golds("[0.1, 'a']") is None  # a list answer; mixed
    assert accepted_golds("['a', __import__('os')]") is None  # literals only, never code
    assert accepted_golds("plain") is None and accepted_golds(None) is None
    assert options_cell("['3/11', '8/11']", "f", 1) == ["3/11", "8/11"]
    with pytest.raises(Exception, match="nor a Python list"):
        options_cell("[open('x')]", "f", 1)


def test_an_answer_equal_to_any_accepted_gold_is_the_gold(tmp_path):
    """Hand case: gold "['cat', 'kitten']" (accepted answers); "kitten" and "Cat" are right and read as the gold
    itself (every detector then sees one answer), "dog" is wrong."""
    pd.DataFrame({"question_id": ["q1", "q2"], "question": ["what animal?", "what colour?"],
                  "answer": ["['cat', 'kitten']", "red"]}).to_csv(tmp_path / "q.csv", index=False)
    pd.DataFrame({"question_id": ["q1", "q2"] * 3, "model": ["a", "a", "b", "b", "c", "c"],
                  "prediction": ["kitten", "red", "Cat", "blue", "dog", "red"]}).to_csv(tmp_path / "r.csv", index=False)
    res = _audit(str(tmp_path / "r.csv"), questions=str(tmp_path / "q.csv"))
    runs = res.frame.runs
    q1 = runs[runs["q"] == 0].sort_values("m")
    assert q1["hit_exact"].tolist() == [1, 1, 0]
    assert q1["answer"].tolist() == ["cat", "cat", "dog"]
