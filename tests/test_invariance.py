"""Metamorphic promises: what carries no information does not change the audit.

The metamorphic review found the seeded Monte-Carlo parts (the calibration's null simulations, the label model's
fits, checks and planted-error runs) depending on the order rows, files and models came in: shuffled runs moved
the bundled example's consensus_error calibration from 8% ("not decided") to 12% ("out of calibration"), one file
per model to 20%. They now run on the frame in its canonical order (``AuditFrame.canonical``). A run given twice
under two names moved the unanimous count from 194 to 687 over its expectation; it is now left out and named.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
DATA = ROOT / "audit_hub" / "data"

#: summary entries that legitimately follow the input (names of files, the order models are listed in)
_ORDER_KEYS = {"per_model", "accuracy", "pool", "dataset", "benchaudit_version", "models", "models_full",
               "models_blind", "leave_one_model_out", "config"}


def _audit(tmp_path: Path, name: str, q: pd.DataFrame, runs: list[pd.DataFrame], sims: int = 8):
    import audit_hub as ba

    d = tmp_path / name
    (d / "runs").mkdir(parents=True)
    q.to_parquet(d / "questions.parquet", index=False)
    for i, r in enumerate(runs):
        r.to_parquet(d / "runs" / f"part{i:02d}.parquet", index=False)
    return ba.audit(questions=str(d / "questions.parquet"), runs=str(d / "runs"), calibration_sims=sims,
                    figures=False, parallel=False, seed=0)


def _close(a, b, path=""):
    """Equal up to float rounding (1e-9 relative), ignoring list order where items are dicts with names."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (path, set(a) ^ set(b))
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12, nan_ok=True), path
    else:
        assert a == b, (path, a, b)


@pytest.fixture(scope="module")
def bundled():
    return pd.read_parquet(DATA / "mathv_questions.parquet"), pd.read_parquet(DATA / "mathv_runs.parquet")


def test_calibration_label_checks_and_detectors_do_not_depend_on_row_file_or_model_order(bundled, tmp_path):
    """Every detector's summary (its permutation p-values and bootstrap intervals included), the calibration and
    the per-question table are the same for the bundled runs as given, shuffled, with the questions shuffled, and
    one file per model in reverse order."""
    q, r = bundled
    base = _audit(tmp_path, "as_given", q, [r])
    variants = {
        "runs_shuffled": (q, [r.sample(frac=1, random_state=1)]),
        "questions_shuffled": (q.sample(frac=1, random_state=2), [r]),
        "one_file_per_model_reversed": (q, [g for _, g in r.groupby("model", sort=False)][::-1]),
    }
    keys = ("calibration", "flags_vs_null", "visual_dependency", "consensus_error", "fleiss_kappa_agreement",
            "correctness_agreement", "answer_options_distribution", "distractor_similarity")
    want = {k: v for k, v in base.summary.items() if k in keys}
    table = base.questions.set_index("question_id").sort_index()
    for name, (qq, rr) in variants.items():
        res = _audit(tmp_path, name, qq, rr)
        got = {k: v for k, v in res.summary.items() if k in keys}
        _close(json.loads(json.dumps(want, default=str)), json.loads(json.dumps(got, default=str)), name)
        other = res.questions.set_index("question_id").sort_index()
        pd.testing.assert_frame_equal(other[table.columns], table, check_exact=False, rtol=1e-9, obj=name)


def test_canonical_order_is_numeric_for_integer_ids_and_the_frame_itself_when_in_order(bundled):
    from audit_hub.frame.core import AuditFrame

    q, r = bundled
    f = AuditFrame.from_tables(q, r[r["model"].isin(["Gemini-Pro", "GPT4-CoT (Text Only)"])])
    canon, order = f.canonical()
    assert list(canon.models) == sorted(f.models)
    ids = canon.questions["question_id"].astype(int).to_numpy()
    assert (np.diff(ids) > 0).all()  # 1, 2, ..., 10 (numeric), not "1", "10", "100"
    assert (f.questions["question_id"].to_numpy()[order] == canon.questions["question_id"].to_numpy()).all()
    # the same runs in the canonical frame: every (question, model, arm) verdict equal
    a = f.correctness("full", "hit_exact", models=["Gemini-Pro"])[order]
    b = canon.correctness("full", "hit_exact", models=["Gemini-Pro"])
    assert (a == b).all()
    again, same = canon.canonical()
    assert again is canon and (same == np.arange(len(same))).all()


def test_a_run_given_twice_under_two_names_is_left_out_and_named(bundled, tmp_path):
    from cli_run import run_cli

    q, r = bundled
    copy = r[r["model"] == "Gemini-Pro"].assign(model="Gemini-Pro-copy")
    base = _audit(tmp_path, "base", q, [r], sims=0)
    res = _audit(tmp_path, "twice", q, [r, copy], sims=0)
    assert res.summary["duplicate_runs"] == [{"model": "Gemini-Pro-copy", "copy_of": "Gemini-Pro", "rows": 3040}]
    assert res.summary["input_defects"]["duplicate_runs"] == 1
    assert "Gemini-Pro-copy" not in res.frame.models
    for key in ("consensus_error", "fleiss_kappa_agreement", "correctness_agreement"):
        assert res.summary[key]["n_flagged"] == base.summary[key]["n_flagged"], key
    assert "an exact copy of another model's run" in res.card() and "Gemini-Pro-copy (a copy of Gemini-Pro" in res.card()
    # a run that differs on one prediction is another run
    near = copy.copy()
    near.iloc[0, near.columns.get_loc("prediction")] = str(near.iloc[0]["prediction"]) + " "
    kept = _audit(tmp_path, "near", q, [r, near], sims=0)
    assert "Gemini-Pro-copy" in kept.frame.models and not kept.summary.get("duplicate_runs")
    out = run_cli("audit", "-q", tmp_path / "twice" / "questions.parquet", "-r", tmp_path / "twice" / "runs",
                  "--calibration-sims", "0", "--no-figures", "--out", tmp_path / "rep")
    said = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 0 and "1 run left out as an exact copy of another model's run" in said


def test_a_run_file_with_no_rows_in_a_folder_is_skipped_like_an_empty_file(bundled, tmp_path):
    """Metamorphic review: a 0-byte file in a runs folder was skipped (named only in the manifest) but a
    header-only CSV or Parquet stopped the whole audit. Both are now skipped, said on the console, and the
    audit equals the one without them; named on the command line, a header-only file is still refused."""
    from cli_run import run_cli

    q, r = bundled
    d = tmp_path / "runs"
    d.mkdir()
    r.to_parquet(d / "all.parquet", index=False)
    r.iloc[:0].to_csv(d / "zz_header_only.csv", index=False)
    r.iloc[:0].to_parquet(d / "zz_header_only.parquet", index=False)
    (d / "zz_empty.jsonl").write_text("")
    q.to_parquet(tmp_path / "q.parquet", index=False)
    out = run_cli("audit", "-q", tmp_path / "q.parquet", "-r", d, "--calibration-sims", "0", "--no-figures",
                  "--out", tmp_path / "rep")
    said = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 0, out.stderr
    assert "3 files in the runs folders not read (manifest.json files_not_read)" in said
    assert "2 files: the file has a header but no data rows" in said
    m = json.loads((tmp_path / "rep" / "manifest.json").read_text())
    assert {Path(x["path"]).name for x in m["files_not_read"]} >= {"zz_header_only.csv", "zz_header_only.parquet",
                                                                   "zz_empty.jsonl"}
    named = run_cli("audit", "-q", tmp_path / "q.parquet", "-r", d / "zz_header_only.csv", "--calibration-sims", "0",
                    "--no-figures", "--out", tmp_path / "rep2")
    assert named.returncode == 2 and "the file has a header but no data rows" in named.stderr


def test_labels_that_differ_only_in_case_or_spacing_are_named(bundled, tmp_path):
    """Metamorphic review: alternating upper and lower case within each category gave "3,040 in 32 categories"
    with no warning; "bard" and "bard " were two models. The audit keeps them apart (a label is what the file
    says) and names them on the console and the card."""
    from audit_hub.frame.validate import label_collisions

    assert label_collisions(["Algebra", "algebra ", "Logic", "logic", "Counting"]) == [["Algebra", "algebra "],
                                                                                    ["Logic", "logic"]]
    assert label_collisions(["a b", "a  b", "ab"]) == [["a  b", "a b"]]
    q, r = bundled
    q = q.copy()
    q.loc[q.index[::2], "category"] = q.loc[q.index[::2], "category"].str.upper()
    r = r.copy()
    r.loc[(r["model"] == "Gemini-Pro") & (r.index % 2 == 0), "model"] = "Gemini-Pro "
    res = _audit(tmp_path, "cased", q, [r], sims=0)
    notes = " ".join(res.frame.meta["reader_notes"])
    assert "16 groups of category labels that differ only in case or spacing" in notes
    assert "1 group of model names that differ only in case or spacing, audited apart: 'Gemini-Pro' / 'Gemini-Pro '" in notes
    assert "differ only in case or spacing" in res.card()


def test_a_word_option_a_circular_copy_shows_is_an_answer_is_not_padding():
    """Statistics review: MMBench item 15's options "warm, cool, neutral, none" kept "none" last in the copy the
    audit keeps, so the placeholder rule read it as padding (effective options 3, severity high, "rewrite
    distractor", the gold-position chi-square 41.53 instead of 42.83). Its CircularEval copies put "none" at C, B
    and A: VLMEvalKit rotates only real options, so it is one."""
    import audit_hub as ba
    from audit_hub.detectors.strata import effective_option_count

    res = ba.audit(runs=str(ROOT / "tests" / "fixtures" / "vlmevalkit" / "real" / "workdir_runs"),
                   benchmark=["MMBench_DEV_EN"], calibration_sims=0, figures=False, parallel=False)
    q = res.questions.set_index("question_id")
    assert list(q.loc["15", "options"]) == ["warm", "cool", "neutral", "none"]
    assert q.loc["15", "severity"] == "low" and q.loc["15", "suggested_action"] == "keep"
    i = res.frame.questions.index[res.frame.questions["question_id"] == "15"][0]
    assert effective_option_count(res.frame)[i] == 4
    assert res.summary["answer_options_distribution"]["chi2"] == pytest.approx(42.8333333, rel=1e-6)


def test_two_models_right_everywhere_are_not_copies_and_a_copy_needs_the_same_blind_run(bundled, tmp_path):
    """Red team: two strong models that answer every question with its gold letter agree everywhere; one was left
    out as a "copy" (with its different blind run). Only shared wrong answers tell a copy, and a copy has the same
    blind run where either has one."""
    from audit_hub.frame.core import AuditFrame
    from audit_hub.frame.validate import duplicate_runs

    q = pd.DataFrame({"question_id": [f"q{i}" for i in range(40)], "question": "?", "answer": list("ABCD") * 10,
                      "options": [["w", "x", "y", "z"]] * 40})
    right = pd.DataFrame({"question_id": q["question_id"], "arm": "full", "prediction": q["answer"]})
    blind_a = pd.DataFrame({"question_id": q["question_id"], "arm": "blind", "prediction": ["A"] * 40})
    blind_b = pd.DataFrame({"question_id": q["question_id"], "arm": "blind", "prediction": ["B"] * 40})
    runs = pd.concat([right.assign(model="strong-1"), right.assign(model="strong-2"),
                      blind_a.assign(model="strong-1"), blind_b.assign(model="strong-2")], ignore_index=True)
    assert duplicate_runs(AuditFrame.from_tables(q, runs)) == []
    wrong = right.assign(prediction=["D", "A", "B", "C"] * 10)  # every answer wrong, the same way
    runs = pd.concat([wrong.assign(model="m1"), wrong.assign(model="m2"), blind_a.assign(model="m1"),
                      blind_b.assign(model="m2")], ignore_index=True)
    assert duplicate_runs(AuditFrame.from_tables(q, runs)) == []  # different blind runs: two models
    runs = pd.concat([wrong.assign(model="m1"), wrong.assign(model="m2")], ignore_index=True)
    assert duplicate_runs(AuditFrame.from_tables(q, runs)) == [{"model": "m2", "copy_of": "m1", "rows": 40}]
