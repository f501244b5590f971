"""BLINK's saved outputs (``audit_hub.readers.blink``) on files of the repository, copied unchanged.

The expected figures are computed here from the files with ``json`` and BLINK's own rule (``evaluate.py``:
a prediction is right when it equals the gold), not with the reader under test.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest
from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "fixtures" / "blink" / "eval"
FAST = ["--calibration-sims", "0", "--no-figures", "--n-permutations", "99"]


def _cli(*args):
    return run_cli("audit", *args)


def _records(model: str) -> list[dict]:
    return [r for f in sorted(glob.glob(str(EVAL / "saved_outputs" / glob.escape(model) / "*.json")))
            for r in json.loads(Path(f).read_text(encoding="utf-8"))["val"]]


def test_choice_letters_and_one_file():
    from audit_hub.readers.blink import choice_letter, read_outputs

    assert [choice_letter(x) for x in ("(A)", "(C) the third image", "(Z)", "A", "", None)] == \
        ["A", "C", None, None, None, None]
    path = EVAL / "saved_outputs" / "GPT4o" / "Counting.json"
    res = read_outputs(str(path))
    recs = json.loads(path.read_text(encoding="utf-8"))["val"]
    assert res.benchmark == "BLINK_val" and str(res.runs["model"].iloc[0]) == "GPT4o"
    q = res.questions.set_index("question_id")
    assert list(q.index) == [r["idx"] for r in recs]
    assert all(o == ["A", "B", "C", "D"] for o in q["options"]) and set(q["category"]) == {"Counting"}
    assert list(q["answer"]) == [r["answer"][1] for r in recs]
    assert [int(h) for h in res.runs["hit"]] == [int(r["prediction"] == r["answer"]) for r in recs]
    runs = res.runs.set_index("question_id")
    assert runs.loc[recs[0]["idx"], "prediction"] == recs[0]["full_prediction"]


def test_saved_outputs_folder_one_audit_per_variant(tmp_path):
    out = tmp_path / "audit"
    p = _cli("--runs", EVAL, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    rows = {r["benchmark"]: r for r in index["benchmarks"]}
    assert sorted(rows) == ["BLINK_val", "BLINK_val_concat"]  # the concatenated-image variant is never pooled
    assert sorted(os.path.relpath(s["path"], EVAL) + ": " + s["reason"] for s in index["skipped_files"]) == [
        "saved_test_predictions/GPT4o.json: BLINK's test predictions hold no golds (the test answers are not released)",
        "saved_val_predictions/GPT4o.json: BLINK's merged val predictions hold only the chosen letters",
        "val_answers.json: BLINK's val answer key (the saved_outputs files carry the golds)"]
    # the answer key agrees with the golds the saved outputs carry
    key = json.loads((EVAL / "val_answers.json").read_text(encoding="utf-8"))
    assert all(key[r["idx"]] == r["answer"] for m in ("GPT4o", "llava_v1.5_7b") for r in _records(m))
    s = json.loads((out / rows["BLINK_val"]["path"] / "summary.json").read_text(encoding="utf-8"))
    assert sorted(s["models"]["full"]) == ["GPT4o", "instructblip_7b", "llava_v1.5_7b"]
    golds = {r["idx"]: r["answer"] for r in _records("GPT4o")}
    assert s["n_questions"] == len(golds) == 244
    for r in s["accuracy"]:
        recs = _records(r["model"])
        assert r["accuracy_judged"] == pytest.approx(sum(x["prediction"] == x["answer"] for x in recs) / len(recs),
                                                     abs=1e-12), r["model"]
    # "(Z)" (no choice found) is no answer: the model's parse rate counts it as unparsed
    z = {r["model"]: sum(x["prediction"] == "(Z)" for x in _records(r["model"])) for r in s["accuracy"]}
    assert any(z.values())
    for r in s["accuracy"]:
        assert r["unparseable_share"] == pytest.approx(z[r["model"]] / 244, abs=1e-12), r["model"]
    c = json.loads((out / rows["BLINK_val_concat"]["path"] / "summary.json").read_text(encoding="utf-8"))
    assert c["models"]["full"] == ["GeminiProVision* concatenate images"] and c["n_questions"] == 150


def test_test_predictions_and_a_bad_idx_are_one_line(tmp_path):
    out = tmp_path / "audit"
    p = _cli("--runs", EVAL / "saved_test_predictions" / "GPT4o.json", "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists()
    assert ("BLINK's test predictions hold no golds (the test answers are not released); pass the "
            "eval/saved_outputs files") in " ".join(p.stderr.split())
    d = json.loads((EVAL / "saved_outputs" / "GPT4o" / "Counting.json").read_text(encoding="utf-8"))
    d["val"][2]["idx"] = "val_Countng_3"
    bad = tmp_path / "GPT4o" / "Counting.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(d), encoding="utf-8")
    p = _cli("--runs", bad, "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists()
    assert f"file {bad}, row 3, column 'idx': idx 'val_Countng_3' is not val_<subtask>_<n>" in " ".join(p.stderr.split())


def test_curate_takes_one_benchmark_of_a_folder(tmp_path):
    from audit_hub import api
    from audit_hub.errors import InputError

    with pytest.raises(InputError) as e:
        api.curate(runs=[str(EVAL)], target_size=100, out=tmp_path / "c0", figures=False)
    assert str(e.value) == ("the runs hold 2 benchmarks (BLINK_val, BLINK_val_concat); curate works on one at a "
                            "time: add --benchmark NAME")
    assert not (tmp_path / "c0").exists()
    res = api.curate(runs=[str(EVAL)], benchmark=["BLINK_val"], target_size=100, random_draws=20, n_boot=50,
                     figures=False, out=tmp_path / "c1")
    assert res.summary["n_before"] == 244 and res.summary["n_after"] == 100
    assert sorted(res.summary["models"]) == ["GPT4o", "instructblip_7b", "llava_v1.5_7b"]
    assert res.engine.frame.meta["benchmark"] == "BLINK_val"
