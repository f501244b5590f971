"""Run files named as a text-only run or a baseline (``audit_hub.readers.named_roles``), on real files.

The MATH-Vision excerpt (``tests/fixtures/mathv``, see its NOTICE) is the repository's own layout: its
``outputs/`` folder holds a text-only GPT-4 run and a random baseline beside the image-enabled models.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from cli_run import run_cli

from audit_hub.readers.named_roles import BASELINE, TEXT_ONLY, named_role, named_roles_note

ROOT = Path(__file__).resolve().parents[1]
MATHV = ROOT / "tests" / "fixtures" / "mathv"
VLM = ROOT / "tests" / "fixtures" / "vlmevalkit" / "real" / "outputs"
FAST = ["--calibration-sims", "0", "--no-figures", "--n-permutations", "99"]
IMAGE_MODELS = ["Gemini-Pro", "InternLM-XComposer2-VL", "LLaVA-v1.5-7B", "Qwen-VL-Max", "SPHINX-MoE"]


def _share_correct(path: Path) -> float:
    """The file's own ``correct`` field, read with json (not with the reader under test)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sum(bool(r["correct"]) for r in rows) / len(rows)


@pytest.mark.parametrize("name, role", [
    ("GPT4-CoT (Text Only)", TEXT_ONLY), ("gpt-4o text-only", TEXT_ONLY), ("Qwen2-VL-7B_textonly", TEXT_ONLY),
    ("LLaVA-1.5 (blind)", TEXT_ONLY), ("GPT-4V (no image)", TEXT_ONLY), ("InternVL2 w/o image", TEXT_ONLY),
    ("Claude without images", TEXT_ONLY), ("Llama-3 language only", TEXT_ONLY),
    ("Random-Chance", BASELINE), ("Random chance", BASELINE), ("random", BASELINE), ("Frequent guess", BASELINE),
    ("Most frequent", BASELINE), ("majority_vote", BASELINE), ("(Random Guess)", BASELINE),
    ("uniform random", BASELINE), ("Random (text only)", BASELINE), ("MathVista random baseline", BASELINE),
    ("LLaVA-v1.5-7B", None), ("Qwen2-VL-7B-Instruct", None), ("GPT4-CoT (Text+Image Caption)", None),
    ("RandomForestVLM", None), ("Blindfold-7B", None), ("Chance-VL", None), ("GPT-4o", None),
    ("ChanceLLaVA", None), ("Human", None), ("Gemini-Pro", None),
])
def test_named_role_table(name, role):
    assert named_role(name) == role


def test_mathv_outputs_folder_reads_text_only_as_blind_and_leaves_the_baseline_out(tmp_path):
    out = tmp_path / "audit"
    p = run_cli("audit", "--questions", MATHV / "data" / "test.jsonl", "--runs", MATHV / "outputs", "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert sorted(s["models"]["full"]) == IMAGE_MODELS
    assert s["models"]["blind"] == ["GPT4-CoT (Text Only)"]
    assert s["pool"]["named_roles"] == {"text_only_as_blind": ["GPT4-CoT (Text Only)"],
                                        "baselines_left_out": ["Random-Chance"]}
    assert s["pool"]["pool_level"] is True  # no image-enabled GPT-4 run to pair with
    acc = {(r["model"], r["arm"]): r["accuracy_judged"] for r in s["accuracy"]}
    gpt = MATHV / "outputs" / "closed-source" / "GPT" / "GPT4-CoT (Text Only).jsonl"
    assert acc[("GPT4-CoT (Text Only)", "blind")] == pytest.approx(_share_correct(gpt), abs=1e-12)
    assert ("Random-Chance", "full") not in acc
    # the visual-dependency detector runs (it was skipped with both baselines read as image-enabled models)
    assert not s["visual_dependency"].get("skipped")
    stderr = " ".join(p.stderr.split())
    assert "read as blind-arm runs: GPT4-CoT (Text Only)" in stderr
    assert "left out of the pool: Random-Chance" in stderr
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "named as baselines, left out of the pool: Random-Chance" in card
    assert "pretty_name: 'benchaudit report: mathv (test)'" in card  # not the split's name alone


def test_runs_as_given_keeps_every_file_in_the_full_arm(tmp_path):
    out = tmp_path / "audit"
    p = run_cli("audit", "--questions", MATHV / "data" / "test.jsonl", "--runs", MATHV / "outputs", "--out", out,
             "--runs-as-given", *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert sorted(s["models"]["full"]) == sorted([*IMAGE_MODELS, "GPT4-CoT (Text Only)", "Random-Chance"])
    assert s["models"]["blind"] == [] and s["pool"]["named_roles"] == {}
    assert s["visual_dependency"].get("skipped")
    assert "named as" not in p.stderr


def test_only_baselines_given_is_one_clear_error(tmp_path):
    out = tmp_path / "audit"
    p = run_cli("audit", "--questions", MATHV / "data" / "test.jsonl", "--runs", MATHV / "outputs" / "Random-Chance.jsonl",
             "--out", out, *FAST)
    assert p.returncode == 2
    assert "every --runs file is named as a text-only run or a baseline (Random-Chance)" in " ".join(p.stderr.split())
    assert not out.exists()
    p = run_cli("audit", "--questions", MATHV / "data" / "test.jsonl", "--runs", MATHV / "outputs" / "Random-Chance.jsonl",
             "--runs", MATHV / "outputs" / "closed-source" / "GPT", "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists()
    assert "a baseline (GPT4-CoT (Text Only), Random-Chance)" in " ".join(p.stderr.split())


def test_a_file_that_names_its_arm_or_several_models_is_taken_as_it_says(tmp_path):
    from audit_hub.readers.ingest import build_frame

    q = pd.DataFrame({"question_id": ["1", "2", "3"], "question": ["a?", "b?", "c?"], "answer": ["A", "B", "A"],
                      "options": [["x", "y"]] * 3})
    q.to_json(tmp_path / "q.jsonl", orient="records", lines=True)
    one = pd.DataFrame({"question_id": ["1", "2", "3"], "model": ["M (text only)"] * 3, "arm": ["full"] * 3,
                        "prediction": ["A", "B", "B"]})
    one.to_csv(tmp_path / "explicit.csv", index=False)
    many = pd.DataFrame({"question_id": ["1", "2", "3"] * 2, "model": ["random"] * 3 + ["N"] * 3,
                         "prediction": ["A", "A", "A", "A", "B", "A"]})
    many.to_csv(tmp_path / "many.csv", index=False)
    frame = build_frame(str(tmp_path / "q.jsonl"), [str(tmp_path / "explicit.csv"), str(tmp_path / "many.csv")])
    assert sorted(frame.models_in("full")) == ["M (text only)", "N", "random"]
    assert frame.meta["named_roles"] == {}
    # the same single-model file without its arm column: read as a blind-arm run
    one.drop(columns="arm").to_csv(tmp_path / "implicit.csv", index=False)
    frame = build_frame(str(tmp_path / "q.jsonl"), [str(tmp_path / "implicit.csv"), str(tmp_path / "many.csv")])
    assert frame.models_in("blind") == ["M (text only)"]
    assert frame.meta["named_roles"] == {"text_only_as_blind": ["M (text only)"], "baselines_left_out": []}


def test_work_dir_of_several_benchmarks_leaves_the_baseline_out_of_each(tmp_path):
    work = tmp_path / "work_dir"
    shutil.copytree(VLM, work)
    src = next((VLM / "ScriptedWeak").iterdir())
    for name in ("Random", "ScriptedMid-TextOnly"):
        dst = work / name / src.name
        dst.mkdir(parents=True)
        for f in src.iterdir():
            if f.name.endswith(".xlsx") and "_MMStar" in f.name:
                shutil.copy(f, dst / f.name.replace("ScriptedWeak", name))
    out = tmp_path / "out"
    p = run_cli("audit", "--runs", work, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    folders = {r["benchmark"]: r["path"] for r in index["benchmarks"]}
    s = json.loads((out / folders["MMStar"] / "summary.json").read_text(encoding="utf-8"))
    assert sorted(s["models"]["full"]) == ["ScriptedGood", "ScriptedMid", "ScriptedWeak"]
    assert s["models"]["blind"] == ["ScriptedMid-TextOnly"]
    assert s["pool"]["named_roles"] == {"text_only_as_blind": ["ScriptedMid-TextOnly"],
                                        "baselines_left_out": ["Random"]}
    other = json.loads((out / folders["POPE"] / "summary.json").read_text(encoding="utf-8"))
    assert other["pool"]["named_roles"] == {} and other["models"]["blind"] == []
    assert any(r.get("named_role") == "baseline" for r in index["skipped_files"])


def test_curate_reads_the_same_roles(tmp_path):
    from audit_hub import api

    res = api.curate(str(MATHV / "data" / "test.jsonl"), [str(MATHV / "outputs")], target_size=120,
                     random_draws=20, n_boot=50, figures=False, out=tmp_path / "curated")
    assert sorted(res.summary["models"]) == IMAGE_MODELS
    assert res.summary["named_roles"]["baselines_left_out"] == ["Random-Chance"]
    assert "left out of the pool: Random-Chance" in (tmp_path / "curated" / "README.md").read_text(encoding="utf-8")


def test_note_text():
    assert named_roles_note({}) is None
    assert named_roles_note({"text_only_as_blind": [], "baselines_left_out": ["R"]}) == (
        "run files given with --runs: named as baselines, left out of the pool: R "
        "(--runs-as-given reads them as image-enabled runs)")


def test_mathvistas_own_text_only_llm_runs_are_the_blind_arm(tmp_path):
    """New-user walkthrough: `audit --runs MathVista/results` read the repository's ChatGPT run (a text-only LLM, one of
    the paper's augmented-LLM baselines) as an image-enabled model of the pool. The MathVista reader knows the
    repository's text-only runs by name (chatgpt, claude, gpt4 and their shot/caption/OCR variants; not gpt4v) and they go to the blind arm like
    a run named '(Text Only)'; --runs-as-given keeps them in the full arm."""
    from audit_hub import api
    from audit_hub.readers.mathvista import TEXT_ONLY_RUNS, text_only_run

    assert sorted(TEXT_ONLY_RUNS) == ["chatgpt", "claude", "gpt4"]
    for m in ("gpt4_2shot_solution_use_caption_ocr", "chatgpt_2shot_code_use_caption_ocr", "claude_zero_shot"):
        assert text_only_run(m), m
    for m in ("gpt4v", "gpt4v_2shot", "claude_3_opus", "claude2", "bard", "chatgpt4o"):
        assert text_only_run(m) is None, m
    res = api.audit(runs=str(ROOT / "tests" / "fixtures" / "mathvista" / "results"), calibration_sims=0,
                    figures=False, out=tmp_path / "r")
    s = res.summary
    assert s["models"]["blind"] == ["chatgpt"] and "chatgpt" not in s["models"]["full"]
    assert s["pool"]["named_roles"]["known_text_only"] == {"chatgpt": TEXT_ONLY_RUNS["chatgpt"]}
    note = named_roles_note(s["pool"]["named_roles"])
    assert "known as text-only runs (MathVista's text-only LLM runs" in note and "blind-arm runs: chatgpt" in note
    assert "named as text-only runs" not in note
    given = api.audit(runs=str(ROOT / "tests" / "fixtures" / "mathvista" / "results"), calibration_sims=0,
                      figures=False, runs_as_given=True)
    assert "chatgpt" in given.summary["models"]["full"]


def test_folder_name_for_a_split_named_questions_file(tmp_path):
    from audit_hub.readers.ingest import _named_for_folder

    assert _named_for_folder("/x/mathv/data/test.jsonl", "test") == "mathv (test)"
    assert _named_for_folder("/x/MathVista/testmini.parquet", "testmini") == "MathVista (testmini)"
    assert _named_for_folder("/x/mathv/data/MMStar.tsv", "MMStar") == "MMStar"
    assert _named_for_folder("/x/MMStar/data/questions.csv", "questions") == "MMStar"


def test_a_hostile_model_name_in_the_note_is_escaped_on_the_card(tmp_path):
    q = pd.DataFrame({"question_id": ["1", "2", "3"], "question": ["a?", "b?", "c?"], "answer": ["A", "B", "A"],
                      "options": [["x", "y"]] * 3})
    q.to_json(tmp_path / "q.jsonl", orient="records", lines=True)
    runs = []
    for i, model in enumerate(["<img src=x onerror=alert(1)> [text only](http://e.x)", "M1", "M2", "M3"]):
        f = tmp_path / f"r{i}.csv"
        pd.DataFrame({"question_id": ["1", "2", "3"], "model": [model] * 3, "prediction": ["A", "B", "B"]}).to_csv(
            f, index=False)
        runs += ["--runs", f]
    out = tmp_path / "audit"
    p = run_cli("audit", "--questions", tmp_path / "q.jsonl", *runs, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "<img" not in card and "[text only](" not in card  # no raw HTML, no live link
    assert "&lt;img src=x onerror=alert(1)&gt; \\[text only\\](http\\://e.x)" in card
