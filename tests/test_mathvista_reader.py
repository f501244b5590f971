"""MathVista's result files (``audit_hub.readers.mathvista``) on an excerpt of the released files.

``tests/fixtures/mathvista`` (see its NOTICE) keeps the repository's layout and JSON form; the figures below
are computed from the files with ``json`` here, not with the reader under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "tests" / "fixtures" / "mathvista" / "results"
FAST = ["--calibration-sims", "0", "--no-figures", "--n-permutations", "99"]
IMAGE = {"bard": "bard/output_bard.json", "llava_llama_2_13b": "llava/output_llava_llama_2_13b.json",
         "mplugowl_7b_ft": "mplugowl/output_mplugowl_7b_ft.json"}


def _cli(*args):
    return run_cli("audit", *args)


def _score(rel: str) -> float:
    """MathVista's own accuracy (evaluation/calculate_score.py): true_false == True over every problem."""
    d = json.loads((RESULTS / rel).read_text(encoding="utf-8"))
    return sum(r.get("true_false") is True for r in d.values()) / len(d)


def test_read_outputs_maps_the_released_fields():
    from audit_hub.readers.mathvista import is_output_file, read_outputs

    path = str(RESULTS / IMAGE["bard"])
    assert is_output_file(path)
    res = read_outputs(path)
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    assert res.benchmark == "MathVista_testmini" and res.judges == {"bard": "MathVista evaluation (true_false)"}
    assert list(res.runs["question_id"]) == list(d) and str(res.runs["model"].iloc[0]) == "bard"
    q = res.questions.set_index("question_id")
    assert q.loc["781", "options"] == ["option A", "option B", "option C", "option C"]
    assert q.loc["781", "answer"] == "C"  # the first of the two equal choices, as the verdict reads it
    assert q.loc["3", "answer_type"] == "mc" and q.loc["1", "answer_type"] == "numeric"
    assert q.loc["1", "category"] == d["1"]["metadata"]["task"] and q.loc["1", "l2_category"] == d["1"]["metadata"]["context"]
    runs = res.runs.set_index("question_id")
    assert runs.loc["3", "answer"] == "C" and runs.loc["1", "answer"] == d["1"]["prediction"]
    assert runs.loc["3", "prediction"] == d["3"]["response"]
    assert [int(h) for h in runs["hit"]] == [int(d[k]["true_false"] is True) for k in d]


def test_results_folder_audit_matches_mathvistas_own_scores(tmp_path):
    out = tmp_path / "audit"
    p = _cli("--runs", RESULTS, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    # the random baseline is left out by its name; the template is skipped; ChatGPT, one of the repository's
    # text-only LLM runs (the paper's augmented-LLM baselines), is the blind arm (readers.mathvista.TEXT_ONLY_RUNS)
    assert sorted(s["models"]["full"]) == ["bard", "llava_llama_2_13b", "mplugowl_7b_ft"]
    assert s["models"]["blind"] == ["chatgpt"]
    assert s["pool"]["named_roles"]["baselines_left_out"] == ["random_guess"]
    acc = {r["model"]: r["accuracy_judged"] for r in s["accuracy"]}
    for model, rel in {**IMAGE, "chatgpt": "chatgpt/output_chatgpt.json"}.items():
        assert acc[model] == pytest.approx(_score(rel), abs=1e-12), model
    chatgpt = next(r for r in s["accuracy"] if r["model"] == "chatgpt")
    assert chatgpt["n_judged"] == 41  # its refusals (pids 2 and 4: no true_false) counted wrong, as MathVista does
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["dataset"]["name"] == "MathVista_testmini"
    assert s["n_questions"] == 41
    # problem 781 repeats its gold among the choices (C = D, as released): the option detector's critical finding
    import glob

    import pandas as pd

    q = pd.read_parquet(glob.glob(str(out / "data" / "questions-*.parquet"))[0]).set_index("question_id")
    assert q.loc["781", "distractor_similarity_severity"] == "critical"
    assert q.loc["781", "distractor_similarity_pair"] == "C=D" and bool(q.loc["781", "distractor_similarity_involves_gold"])
    assert (q["distractor_similarity_severity"] == "critical").sum() == 1


def test_image_runs_and_a_text_only_blind_arm(tmp_path):
    out = tmp_path / "audit"
    runs = [x for rel in IMAGE.values() for x in ("--runs", RESULTS / rel)]
    p = _cli(*runs, "--blind", RESULTS / "chatgpt" / "output_chatgpt.json", "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert s["models"]["blind"] == ["chatgpt"] and s["pool"]["pool_level"] is True
    vd = s["visual_dependency"]
    assert not vd.get("skipped") and vd["n_items"] == 41


def test_the_template_is_read_when_named_and_a_bad_verdict_is_one_line(tmp_path):
    from audit_hub.errors import InputError
    from audit_hub.readers.mathvista import read_outputs

    tpl = RESULTS / "leaderboad_submission_template" / "output_testmini_template_for_leaderboard_submission.json"
    assert str(read_outputs(str(tpl)).runs["model"].iloc[0]) == "testmini_template_for_leaderboard_submission"
    d = json.loads((RESULTS / IMAGE["bard"]).read_text(encoding="utf-8"))
    d["5"]["true_false"] = "maybe"
    bad = tmp_path / "output_bard.json"
    bad.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_outputs(str(bad))
    assert str(e.value).startswith(f"file {bad}, row 5, column 'true_false': problem '5': true_false is 'maybe'")
    out = tmp_path / "audit"
    p = _cli("--runs", bad, "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists()
    assert "row 5, column 'true_false'" in p.stderr
    # the scores summary beside an output file: skipped in a folder (the folder test), refused when named
    p = _cli("--runs", RESULTS / "bard" / "scores_bard.json", "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists()
    assert "this is MathVista's scores summary; pass the output_*.json beside it" in " ".join(p.stderr.split())
