"""The README's blind workflow end to end: saved full-arm runs with judged hits (files VLMEvalKit's and
lmms-eval's own code wrote), blind reruns made by `benchaudit blind` itself (served backend against the local
stub server, and the tiny local model), then `benchaudit audit --blind`. The image-gain detector must run per
model (not pool level) and say which correctness field it compared and why."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import StubServer  # noqa: E402

pytest.importorskip("openai")
pytest.importorskip("torch")
pytest.importorskip("transformers")

HERE = Path(__file__).parent
VLM = HERE / "fixtures" / "vlmevalkit" / "real"
LMMS = HERE / "fixtures" / "lmms_eval" / "real" / "v0.7.3"
KEY = "sk-e2e-4b1d9e7a2c"
MODELS = ("ScriptedGood", "ScriptedMid", "ScriptedWeak")
AUDIT = ["audit", "--calibration-sims", "0", "--n-permutations", "99", "--no-figures"]


def _blind(argv: list[str]) -> None:
    from audit_hub.blind.__main__ import main as blind_main

    assert blind_main([*argv, "--no-progress"]) == 0


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """VLMEvalKit MMStar sheets of three models + blind reruns: two served, one local (the tiny model)."""
    from tiny_model import build_tiny_llama

    root = tmp_path_factory.mktemp("e2e")
    questions = str(VLM / "LMUData" / "MMStar.tsv")
    tiny = build_tiny_llama(root / "tiny", seed=0, chat_template=True)
    os.environ["OPENAI_API_KEY"] = KEY
    try:
        with StubServer(KEY) as stub:
            for m in MODELS[:2]:
                _blind(["--backend", "openai", "--base-url", stub.base_url, "--model", "stub-model", "--model-name", m,
                        "--questions", questions, "--out", str(root / "blind" / m)])
        _blind(["--model", tiny, "--model-name", MODELS[2], "--questions", questions,
                "--out", str(root / "blind" / MODELS[2])])
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
    return {"root": root, "questions": questions, "runs": str(VLM / "outputs" / "*" / "T*" / "*_MMStar*.xlsx")}


def _audit(argv: list[str], capsys) -> tuple[dict, str, str]:
    from audit_hub.cli import main

    out = argv[argv.index("--out") + 1]
    capsys.readouterr()
    assert main([*AUDIT, *argv]) == 0
    cap = capsys.readouterr()
    s = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
    return s, open(os.path.join(out, "README.md"), encoding="utf-8").read(), cap.err + cap.out


def _exact_accuracy_by_the_blind_runners_parser(frame, model: str) -> float:
    """Full-arm exact-match accuracy recomputed row by row with the parser `benchaudit blind` uses."""
    from audit_hub.answers import extract_answer, score_exact

    q = frame.questions.set_index("question_id")
    rt = frame.runs_table()
    rt = rt[(rt["model"] == model) & (rt["arm"] == "full")]
    hits = []
    for qid, pred in zip(rt["question_id"], rt["prediction"]):
        row = q.loc[qid]
        ext = extract_answer(None if pd.isna(pred) else str(pred), list(row["options"]), row["answer_type"])
        hits.append(bool(score_exact(ext, row["answer"], row["answer_type"])))
    return float(np.mean(hits))


def test_documented_blind_workflow_runs_the_image_gain_detector_per_model(workflow, tmp_path, capsys):
    from audit_hub.readers.ingest import build_frame

    out = tmp_path / "report"
    s, card, console = _audit(["--runs", workflow["runs"], "--blind", str(workflow["root"] / "blind"),
                               "--out", str(out)], capsys)
    # the detector ran: the documented workflow must never skip it
    assert "visual_dependency" not in s["skipped"], s["skipped"]
    assert "skipped visual_dependency" not in console
    vd = s["visual_dependency"]
    assert not vd.get("skipped") and vd["pool_level"] is False
    assert vd["models_full"] == list(MODELS) and vd["models_blind"] == list(MODELS)  # per model, paired by name
    assert vd["n_items"] == 12 and vd["field"] == "hit_exact" and "no judged correctness" in vd["field_why"]
    # the field used and why: CLI, summary.json, card
    arms = s["arm_comparison"]
    assert arms["field"] == "hit_exact" and arms["judged_too"] is False and arms["exact_source"] == "parser"
    assert arms["models_without_judge"] == {"full": [], "blind": list(MODELS)}
    assert "no judged correctness" in arms["why"] and "same parser" in arms["why"]
    assert s["primary_field"] == "hit"  # the full-arm-only detectors still read the judge
    assert s["correctness_agreement"]["field"] == "hit"
    assert "full vs blind compared on exact matching (hit_exact)" in " ".join(console.split())
    assert "| Full vs blind compared on | exact match (`hit_exact`)" in card
    # judge dependence is no longer empty: the full arm's judge-vs-exact disagreement per model, and a note
    jd = s["judge_dependence"]
    assert {r["model"] for r in jd["per_model"]} == set(MODELS) and "exact matching only" in jd["note"]
    # per-model gains equal a hand count from the inputs: the full arm's exact-match correctness recomputed
    # with the blind runner's parser, the blind arm's as `benchaudit blind` wrote it
    frame = build_frame(None, sorted(glob.glob(workflow["runs"])), [str(workflow["root"] / "blind")])
    gains = {g["model"]: g for g in s["per_model"]["gains"]}
    assert set(gains) == set(MODELS)
    for m in MODELS:
        blind = pd.read_parquet(workflow["root"] / "blind" / m / "data" / "blind-00000-of-00001.parquet")
        full_exact = _exact_accuracy_by_the_blind_runners_parser(frame, m)
        g = gains[m]
        assert g["field"] == "hit_exact" and g["n_items"] == 12
        assert g["accuracy_full"] == pytest.approx(full_exact)
        assert g["accuracy_blind"] == pytest.approx(float(blind["hit_exact"].mean()))
        assert g["gain"] == pytest.approx(full_exact - float(blind["hit_exact"].mean()))
        assert g["gain_ci"][0] <= g["gain"] <= g["gain_ci"][1]
        # the zero-gain table counts the same per-item correctness
        assert g["n_right_only_with_image"] - g["n_right_only_blind"] == round(12 * g["gain"])
    # the card's per-model table
    assert "## Per-model accuracy" in card and "**Image gain per model**" in card
    for m in MODELS:
        assert f"| {m} | blind | 12 | n/a |" in card
    # VLMEvalKit's own accuracy of each model (its _acc.csv) is the judged full-arm accuracy shown
    rows = {(r["model"], r["arm"]): r for r in s["per_model"]["rows"]}
    for m in MODELS:
        acc = pd.read_csv(glob.glob(str(VLM / "outputs" / m / "T*" / f"{m}_MMStar_acc.csv"))[0])
        assert rows[(m, "full")]["accuracy_judged"] == pytest.approx(float(acc["Overall"].iloc[0]))


def test_blind_runs_pair_by_model_id_and_unmatched_names_are_reported(workflow, tmp_path, capsys):
    """A served blind run without --model-name pairs by its model id's last component; a blind run whose name
    matches no full-arm model is named in the CLI, summary.json and the card, never pooled with the others."""
    root = tmp_path
    os.environ["OPENAI_API_KEY"] = KEY
    try:
        with StubServer(KEY) as stub:
            _blind(["--backend", "openai", "--base-url", stub.base_url, "--model", "org/scriptedmid",
                    "--questions", workflow["questions"], "--out", str(root / "blind" / "mid")])
            _blind(["--backend", "openai", "--base-url", stub.base_url, "--model", "some-other-model",
                    "--questions", workflow["questions"], "--out", str(root / "blind" / "other")])
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
    s, card, console = _audit(["--runs", workflow["runs"], "--blind", str(root / "blind"), "--out",
                               str(root / "report")], capsys)
    pairing = s["pool"]["pairing"]["blind"]
    assert pairing["renames"] == {"org/scriptedmid": "ScriptedMid"} and pairing["how"] == {"ScriptedMid": "model id"}
    assert pairing["unmatched"] == [{"model": "some-other-model", "reason": "no full-arm model of this name or model id"}]
    assert s["pool"]["unmatched_blind"] == ["some-other-model"]
    vd = s["visual_dependency"]
    assert vd["pool_level"] is False and vd["models_full"] == ["ScriptedMid"] and vd["models_blind"] == ["ScriptedMid"]
    text = " ".join(console.split())
    assert "some-other-model" in text and "ScriptedGood" in text  # named, with the full-arm models left without
    assert "some-other-model" in card


def test_lmms_eval_logs_with_served_blind_reruns(tmp_path, capsys):
    """lmms-eval 0.7.3 MMStar logs (judged `average.score`) of two models, blind reruns from the stub server
    with the samples file as the questions: compared on exact matching, per model."""
    files = sorted(glob.glob(str(LMMS / "*" / "*samples_local_mmstar.jsonl")))
    assert len(files) == 2
    os.environ["OPENAI_API_KEY"] = KEY
    try:
        with StubServer(KEY) as stub:
            for m in ("StubGood", "StubWeak"):
                _blind(["--backend", "openai", "--base-url", stub.base_url, "--model", "stub", "--model-name", m,
                        "--questions", files[0], "--out", str(tmp_path / "blind" / m)])
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
    s, card, _ = _audit(["--runs", *files, "--blind", str(tmp_path / "blind"), "--out", str(tmp_path / "r")], capsys)
    vd = s["visual_dependency"]
    assert not vd.get("skipped") and vd["pool_level"] is False and vd["field"] == "hit_exact"
    assert sorted(vd["models_full"]) == ["StubGood", "StubWeak"]
    assert s["arm_comparison"]["field"] == "hit_exact" and s["primary_field"] == "hit"
    assert {g["model"] for g in s["per_model"]["gains"]} == {"StubGood", "StubWeak"}


def test_truncated_blind_prompts_are_named_in_summary_cli_and_card(workflow, tmp_path, capsys):
    """A blind rerun whose prompts were cut to the model's context (`--truncate left`) answered without the start
    of the question: the audit counts those rows per model from the blind folder (as many as its `truncated`
    column says), and says so in summary.json, the CLI and the card's limitations; an uncut rerun says nothing."""
    from tiny_model import build_tiny_llama

    tiny = build_tiny_llama(tmp_path / "tiny", seed=0, chat_template=True)
    _blind(["--model", tiny, "--model-name", MODELS[2], "--questions", workflow["questions"], "--max-length", "96",
            "--truncate", "left", "--out", str(tmp_path / "blind" / MODELS[2])])
    rows = pd.read_parquet(tmp_path / "blind" / MODELS[2] / "data" / "blind-00000-of-00001.parquet")
    n_cut = int(rows["truncated"].sum())
    assert 0 < n_cut < len(rows) == 12  # the case is real: some prompts were cut, not all
    s, card, console = _audit(["--runs", workflow["runs"], "--blind", str(tmp_path / "blind"), "--out",
                               str(tmp_path / "report")], capsys)
    assert s["pool"]["truncated_prompts"] == {"blind": {MODELS[2]: {"n_truncated": n_cut, "n_questions": 12,
                                                                    "max_length": 96}}}
    sentence = f"{MODELS[2]} {n_cut} of 12 (context 96 tokens)"
    assert sentence in s["pool"]["truncation_note"] and "--truncate left" in s["pool"]["truncation_note"]
    assert sentence in " ".join(console.split())
    lims = card.split("### Other Known Limitations", 1)[1]
    assert sentence in lims and "may come from the text that was cut" in lims
    # the uncut reruns of the module's workflow: nothing to say
    s2, card2, console2 = _audit(["--runs", workflow["runs"], "--blind", str(workflow["root"] / "blind"), "--out",
                                  str(tmp_path / "report2")], capsys)
    for m in MODELS:
        cut = pd.read_parquet(workflow["root"] / "blind" / m / "data" / "blind-00000-of-00001.parquet")
        assert not cut.get("truncated", pd.Series([False])).fillna(False).astype(bool).any()
    assert s2["pool"]["truncated_prompts"] == {} and s2["pool"]["truncation_note"] is None
    assert "cut to the model's context" not in card2 and "cut to the model's context" not in " ".join(console2.split())
