"""Runs that carry nothing (a failed or mis-merged run): left out of the frame, said on the console, in
summary.json and on the card, and no longer able to switch off the headline detector.

Found by feeding the bundled example with one model's predictions, answers and correctness all empty: the full
arm had no judged correctness for that model, so the whole pool was compared on exact matching, where the model
was unknown on every item, and ``visual_dependency`` was skipped ("fewer than 2 items have 'hit_exact'
correctness for every model in both arms")."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_run import ROOT, run_cli

from audit_hub.errors import InputError
from audit_hub.frame.core import AuditFrame
from audit_hub.frame.validate import empty_runs, empty_runs_note
from audit_hub.readers.example import example_paths


def _questions():
    return pd.DataFrame({"question_id": ["q1", "q2", "q3"], "question": ["a?", "b?", "c?"],
                         "options": [["x", "y"], ["x", "y"], ["x", "y"]], "answer": ["A", "B", "A"],
                         "category": ["c"] * 3})


def _runs(**dead):
    """m1 and m2 answer every item in both arms; ``dead``: model -> (prediction, answer, hit) of all its full rows."""
    rows = []
    for m in ("m1", "m2", "m3"):
        for arm in ("full", "blind"):
            for qid, ans in zip(("q1", "q2", "q3"), ("A", "B", "B")):
                p, a, h = dead.get(m, (ans, ans, ans == {"q1": "A", "q2": "B", "q3": "A"}[qid])) if arm == "full" \
                    else (ans, ans, True)
                rows.append((qid, m, arm, p, a, h))
    return pd.DataFrame(rows, columns=["question_id", "model", "arm", "prediction", "answer", "hit"])


@pytest.mark.parametrize("dead", [(None, None, None), ("", "  ", None), ("\n", None, pd.NA)])
def test_a_run_with_nothing_in_it_is_left_out_and_recorded(dead):
    f = AuditFrame.from_tables(_questions(), _runs(m3=dead))
    assert f.models_in("full") == ["m1", "m2"]
    assert f.models_in("blind") == ["m1", "m2", "m3"]  # its blind run answered: kept
    assert f.meta["empty_runs"] == [{"model": "m3", "arm": "full", "rows": 3}]
    assert f.meta["input_defects"] == {"empty_runs": 1}
    assert len(f.runs) == 15
    # the rest is what the same table without those rows gives
    r = _runs(m3=dead)
    g = AuditFrame.from_tables(_questions(), r[~((r.model == "m3") & (r.arm == "full"))])
    np.testing.assert_array_equal(f.correctness("full"), g.correctness("full"))
    np.testing.assert_array_equal(f.correctness("blind", field="hit_exact"), g.correctness("blind", field="hit_exact"))


@pytest.mark.parametrize("kept", [
    ("A", None, False),             # the harness scored it wrong everywhere, but it answered: kept as scored
    ("A", None, None),              # a prediction with no correctness: exact matching reads it
    (None, "B", None),              # an answer column only
])
def test_a_run_with_anything_in_it_is_kept(kept):
    f = AuditFrame.from_tables(_questions(), _runs(m3=kept))
    assert f.models_in("full") == ["m1", "m2", "m3"]
    assert "empty_runs" not in f.meta and "input_defects" not in f.meta


@pytest.mark.parametrize("dead", [(None, None, False), ("Failed to obtain answer via API.", None, False),
                                  ("", None, 0)])
def test_a_run_scored_wrong_everywhere_with_no_output_is_left_out(dead):
    """VLMEvalKit judges a run whose every API call failed (FAIL_MSG everywhere, hit 0 everywhere): no output, so not
    a model that answered wrongly; the other runs of the table show text, so it is told apart and left out."""
    f = AuditFrame.from_tables(_questions(), _runs(m3=dead))
    assert f.models_in("full") == ["m1", "m2"]
    assert f.meta["empty_runs"] == [{"model": "m3", "arm": "full", "rows": 3, "scored_wrong": True}]
    assert "(full arm, 3 rows, scored wrong on every row)" in empty_runs_note(f.meta["empty_runs"])


def test_a_correctness_only_table_keeps_a_model_wrong_everywhere():
    """No prediction or answer in the table at all: a model wrong on every item cannot be told from one that
    answered wrongly, and is kept; so is one right on a single item in a table with texts."""
    r = _runs(m3=(None, None, False)).drop(columns=["prediction", "answer"])
    f = AuditFrame.from_tables(_questions(), r)
    assert f.models_in("full") == ["m1", "m2", "m3"] and "empty_runs" not in f.meta
    assert f.correctness("full")[:, 2].tolist() == [0, 0, 0]
    r = _runs(m3=(None, None, False))
    r.loc[(r.model == "m3") & (r.arm == "full") & (r.question_id == "q2"), "hit"] = True
    assert AuditFrame.from_tables(_questions(), r).models_in("full") == ["m1", "m2", "m3"]


def test_one_row_with_text_keeps_the_run():
    r = _runs(m3=(None, None, None))
    r.loc[(r.model == "m3") & (r.arm == "full") & (r.question_id == "q3"), "prediction"] = "A"
    f = AuditFrame.from_tables(_questions(), r)
    assert f.models_in("full") == ["m1", "m2", "m3"]
    assert f.correctness("full", field="hit_exact")[:, 2].tolist() == [0, 0, 1]  # empty rows: wrong, as harnesses say


def test_every_run_empty_is_not_emptied_further():
    r = _runs(m1=(None, None, None), m2=(None, None, None), m3=(None, None, None))
    r = r[r.arm == "full"]
    f = AuditFrame.from_tables(_questions(), r)
    assert f.models == ("m1", "m2", "m3") and "empty_runs" not in f.meta


def test_errors_after_the_drop_still_name_the_files_rows():
    r = _runs(m1=(None, None, None))
    r = pd.concat([r, r.iloc[[10]]], ignore_index=True)  # a duplicate of m2's blind q2 at file row 19
    with pytest.raises(InputError) as e:
        AuditFrame.from_tables(_questions(), r, runs_source="runs.csv")
    assert e.value.row == 19 and "first seen at row 11" in str(e.value)


def test_empty_runs_reads_the_texts_only_of_runs_without_correctness():
    m = np.repeat(np.arange(3, dtype=np.int16), 4)
    a = np.zeros(12, np.int8)
    hit = np.array([1, 0, 1, 1] + [-1] * 8, np.int8)
    texts = pd.array(["A"] * 4 + ["B", None, None, None] + [None, " ", "", None], dtype="string[pyarrow]")
    assert empty_runs(m, a, hit, None, texts, pd.array([None] * 12, dtype="string[pyarrow]")) == [(2, 0, 4, False)]
    # a correctness column that is complete: nothing to look at
    assert empty_runs(m, a, np.ones(12, np.int8), None, texts, texts) == []
    # hit_exact from the file counts as correctness: right once keeps the run, wrong everywhere does not
    assert empty_runs(m, a, hit, np.array([0] * 9 + [1, 0, 0], np.int8), texts, texts) == []
    assert empty_runs(m, a, hit, np.zeros(12, np.int8), texts, texts) == [(2, 0, 4, True)]
    # whitespace of any length is blank; one visible character anywhere in the run is text
    blank = pd.array(["A"] * 4 + ["B"] * 4 + [" \t\n" * 40, "\u3000", None, ""], dtype="string[pyarrow]")
    assert empty_runs(m, a, hit, None, blank, blank) == [(2, 0, 4, False)]
    late = pd.array(["A"] * 4 + ["B"] * 4 + [None, None, None, " x "], dtype="string[pyarrow]")
    assert empty_runs(m, a, hit, None, late, blank) == []
    # no correctness at all (predictions only): every run is a candidate, the one without text leaves
    assert empty_runs(m, a, np.full(12, -1, np.int8), None, blank, blank) == [(2, 0, 4, False)]
    # scored wrong (0, not unknown) with no text, beside runs with text: left out, marked scored
    wrong = np.array([1, 0, 1, 1, 0, 0, 1, 0, 0, -1, 0, 0], np.int8)
    assert empty_runs(m, a, wrong, None, blank, blank) == [(2, 0, 4, True)]
    # right on one row (in hit_exact only): kept
    exact = np.full(12, -1, np.int8)
    exact[10] = 1
    assert empty_runs(m, a, wrong, exact, blank, blank) == []
    # no text anywhere in the table: a run wrong everywhere is kept
    none = pd.array([None] * 12, dtype="string[pyarrow]")
    assert empty_runs(m, a, wrong, None, none, none) == []


def test_empty_runs_finds_an_empty_run_past_the_probe_rows_and_across_chunks(monkeypatch):
    """Runs interleaved over several chunks: a run with text only on rows the stride probe skips is kept; one with
    none anywhere leaves, with all its rows counted."""
    import audit_hub.frame.validate as v

    monkeypatch.setattr(v, "_PROBE_STRIDE", 4)
    monkeypatch.setattr(v, "_CHUNK_ROWS", 12)  # four chunks, the last one short
    n = 40
    m = (np.arange(n) % 4).astype(np.int16)  # runs 0..3 interleaved
    a = np.zeros(n, np.int8)
    txt = np.array(["A"] * n, dtype=object)
    txt[m == 2] = None
    txt[m == 3] = None
    txt[39] = "C"  # run 3's last row, never on a probed row (stride 4 probes rows 0, 4, ...: run 0)
    col = pd.array(list(txt), dtype="string[pyarrow]")
    none = pd.array([None] * n, dtype="string[pyarrow]")
    assert v.empty_runs(m, a, np.full(n, -1, np.int8), None, col, none) == [(2, 0, 10, False)]
    # the same with correctness: run 3 right only on its last row, run 2 wrong everywhere
    hit = np.zeros(n, np.int8)
    hit[m == 0] = 1
    hit[39] = 1
    assert v.empty_runs(m, a, hit, None, col, none) == [(2, 0, 10, True)]


def test_the_probe_rows_cannot_fall_on_one_run_only():
    """A table sorted by question with as many runs per question as the stride: a fixed stride would probe one
    run only; the probe rows are drawn at random in each stretch, so every run with right answers drops out at
    the probes and no full pass is needed."""
    import audit_hub.frame.validate as v

    n_runs, nq = v._PROBE_STRIDE, 2000
    m = np.tile(np.arange(n_runs, dtype=np.int16), nq)
    a = np.zeros(len(m), np.int8)
    hit = (np.random.default_rng(1).random(len(m)) < 0.5).astype(np.int8)
    seen = set(m[np.arange(0, len(m), v._PROBE_STRIDE)].tolist())
    assert seen == {0}  # what a fixed stride reads
    calls = []
    real = v._has_text
    v._has_text = lambda *x: calls.append(1) or real(*x)
    try:
        none = pd.array([None] * len(m), dtype="string[pyarrow]")
        assert v.empty_runs(m, a, hit, None, none, none) == []
    finally:
        v._has_text = real
    assert not calls


def test_the_note_names_the_runs_and_stops_at_ten():
    recs = [{"model": f"m{i}", "arm": "full", "rows": 1000} for i in range(12)]
    note = empty_runs_note(recs)
    assert note.startswith("12 runs left out") and "m9 (full arm, 1,000 rows)" in note
    assert "m10" not in note and note.endswith("and 2 more")
    assert empty_runs_note([]) is None and empty_runs_note(None) is None


def test_the_headline_survives_a_dead_model_end_to_end(tmp_path):
    """The bundled example with SPHINX-v2's full run emptied: the headline runs and equals the audit without it."""
    p = example_paths()
    r = pd.read_parquet(p["runs"])
    dead = (r.model == "SPHINX-v2") & (r.arm == "full")
    r2 = r.copy()
    r2.loc[dead, ["prediction", "answer"]] = None
    r2.loc[dead, "hit"] = pd.NA
    r2.to_parquet(tmp_path / "dead.parquet")
    r[~dead].to_parquet(tmp_path / "without.parquet")
    out = {}
    for name in ("dead", "without"):
        res = run_cli("audit", "-q", p["questions"], "-r", tmp_path / f"{name}.parquet", "--out", tmp_path / name,
                      "--calibration-sims", "0", "--no-figures")
        assert res.returncode == 0, res.stderr
        out[name] = (res.stderr, json.loads((tmp_path / name / "summary.json").read_text()))
    err, s = out["dead"]
    assert "warning: 1 run left out" in " ".join(err.split()) and "SPHINX-v2 (full arm, 3,040 rows)" in err
    assert s["empty_runs"] == [{"model": "SPHINX-v2", "arm": "full", "rows": 3040}]
    assert s["input_defects"] == {"empty_runs": 1}
    assert "visual_dependency" not in (s.get("skipped") or {})
    w = out["without"][1]
    for key in ("zero_gain_share", "excess", "p_value"):
        assert s["visual_dependency"][key] == w["visual_dependency"][key]
    assert s["primary_field"] == w["primary_field"] == "hit"
    card = (tmp_path / "dead" / "README.md").read_text()
    assert "| Left out | 1 run left out" in card


def test_a_vlmevalkit_run_whose_every_call_failed_is_left_out(tmp_path):
    """A work_dir (the real VLMEvalKit fixture) with a fourth model whose MMStar predictions are all VLMEvalKit's
    FAIL_MSG ('Failed to obtain answer via API.', what its API wrappers write when a call fails): that run is left
    out and named; a model with the message on a few rows keeps them as wrong answers, as VLMEvalKit scores them."""
    import shutil

    from audit_hub.answers.fill import FAILED_CALL_TEXTS

    src = ROOT / "tests" / "fixtures" / "vlmevalkit" / "real" / "workdir_runs"
    wd = tmp_path / "work_dir"
    shutil.copytree(src, wd)
    sheet = pd.read_excel(wd / "ScriptedMid" / "ScriptedMid_MMStar.xlsx", engine="openpyxl")
    (wd / "Broken").mkdir()
    sheet.assign(prediction=FAILED_CALL_TEXTS[0]).to_excel(wd / "Broken" / "Broken_MMStar.xlsx", index=False)
    flaky = sheet.copy()
    flaky.loc[:2, "prediction"] = FAILED_CALL_TEXTS[0]
    (wd / "Flaky").mkdir()
    flaky.to_excel(wd / "Flaky" / "Flaky_MMStar.xlsx", index=False)
    res = run_cli("audit", "--runs", wd, "--out", tmp_path / "out", "--calibration-sims", "0", "--no-figures")
    assert res.returncode == 0, res.stderr
    err = " ".join(res.stderr.split())
    assert "1 run left out, with no prediction (or only a harness's no-output message)" in err
    assert "Broken (full arm, 12 rows)" in err
    s = json.loads((tmp_path / "out" / "MMStar" / "summary.json").read_text())
    assert s["empty_runs"] == [{"model": "Broken", "arm": "full", "rows": 12}]
    assert "Broken" not in s["models"]["full"] and "Flaky" in s["models"]["full"]
    flaky_row = next(r for r in s["per_model"]["rows"] if r["model"] == "Flaky" and r["arm"] == "full")
    mid_row = next(r for r in s["per_model"]["rows"] if r["model"] == "ScriptedMid" and r["arm"] == "full")
    assert flaky_row["unparseable_share"] >= 3 / 12 and flaky_row["unparseable_share"] > mid_row["unparseable_share"]


def test_vlmevalkits_own_judged_failed_api_run_is_left_out(tmp_path):
    """A work_dir written by VLMEvalKit's own run.py (tests/fixtures/vlmevalkit/real/failed_api, PROVENANCE.md) with
    an API model whose every call failed: VLMEvalKit wrote FAIL_MSG as every prediction, then judged the run anyway
    (MMStar: ``hit`` 0 on every row; POPE: ``extracted`` Unknown, ``score`` False) and reported 0% for it. Kept, it was
    a 0%-accuracy model, unparseable everywhere, in every agreement count. Both runs are left out, marked scored, and
    each benchmark's report equals the one of the work_dir without that model."""
    import shutil

    src = ROOT / "tests" / "fixtures" / "vlmevalkit" / "real" / "failed_api"
    without = tmp_path / "work_dir_without"
    shutil.copytree(src, without, symlinks=True)
    shutil.rmtree(without / "ScriptedFailedAPI")
    out = {}
    for name, wd in (("with", src), ("without", without)):
        res = run_cli("audit", "--runs", wd, "--out", tmp_path / name, "--calibration-sims", "0", "--no-figures")
        assert res.returncode == 0, res.stderr
        out[name] = res.stderr
    err = " ".join(out["with"].split())
    for bench, rows in (("MMStar", 12), ("POPE", 40)):
        assert f"ScriptedFailedAPI (full arm, {rows} rows, scored wrong on every row)" in err
        s = json.loads((tmp_path / "with" / bench / "summary.json").read_text())
        w = json.loads((tmp_path / "without" / bench / "summary.json").read_text())
        assert s["empty_runs"] == [{"model": "ScriptedFailedAPI", "arm": "full", "rows": rows, "scored_wrong": True}]
        assert s["models"] == w["models"] == {"full": ["ScriptedGood", "ScriptedMid", "ScriptedWeak"], "blind": []}
        assert s["per_model"] == w["per_model"]
        for det in ("consensus_error", "fleiss_kappa_agreement", "correctness_agreement"):
            for key in ("n_flagged", "n_unanimous_non_gold", "kappa", "n_items"):
                if key in w.get(det, {}):
                    assert s[det][key] == w[det][key], (bench, det, key)
        card = (tmp_path / "with" / bench / "README.md").read_text()
        assert "scored wrong on every row" in card
    index = (tmp_path / "with" / "README.md").read_text()
    assert index.count("- warning: 1 run left out") == 2 and "input defect: empty\\_runs" not in index
    assert "ScriptedFailedAPI (full arm, 40 rows, scored wrong on every row)" in index
    rows = json.loads((tmp_path / "with" / "index.json").read_text())["benchmarks"]
    assert all(r["input_defects"] == {"empty_runs": 1} and len(r["warnings"]) == 1 for r in rows)


def test_unreadable_runs_are_named_not_left_out():
    """A run whose answers the parser mostly cannot read while the rest of its arm reads well: named (a format the
    parser does not read, or a failed run that wrote an error message on every row), not left out."""
    from audit_hub.engine.per_model import UNREADABLE_SHARE, unreadable_note, unreadable_runs

    rows = [{"model": f"m{i}", "arm": "full", "unparseable_share": s} for i, s in enumerate([0.02, 0.1, 0.05, 0.6])]
    rows += [{"model": "b0", "arm": "blind", "unparseable_share": 0.9}, {"model": "b1", "arm": "blind",
                                                                        "unparseable_share": 0.3}]
    got = unreadable_runs(rows)
    assert got == [{"model": "m3", "arm": "full", "unparseable_share": 0.6, "others_median": 0.05, "n_others": 3}]
    # one other run in the arm (b1) is too few to call b0 an outlier; a pool that reads badly everywhere is no outlier
    assert unreadable_runs([dict(r, unparseable_share=0.3) if r["model"] != "m3" else r for r in rows[:4]]) == []
    assert unreadable_runs([dict(r, unparseable_share=UNREADABLE_SHARE - 1e-9) if r["model"] == "m3" else r
                            for r in rows]) == []
    note = unreadable_note(got)
    assert "m3 (full arm): 60% of its answers unreadable, the other full-arm runs' median 5%" in note
    assert unreadable_note([]) is None


def test_a_run_of_error_messages_is_named_on_the_console_and_card(tmp_path):
    """The bundled example with SPHINX-v2's predictions replaced by an API error text on every row (the judged hit
    kept): the parser reads no answer from an error message, so all its answers are unreadable against a median of
    8%: named; the bundled example itself names no run."""
    p = example_paths()
    r = pd.read_parquet(p["runs"])
    m = (r.model == "SPHINX-v2") & (r.arm == "full")
    r.loc[m, "prediction"] = "Error code: 429 - rate limit exceeded"
    r.loc[m, "answer"] = None
    r.to_parquet(tmp_path / "runs.parquet")
    res = run_cli("audit", "-q", p["questions"], "-r", tmp_path / "runs.parquet", "--out", tmp_path / "o",
                  "--calibration-sims", "0", "--no-figures")
    assert res.returncode == 0, res.stderr
    err = " ".join(res.stderr.split())
    assert "1 run whose answers the parser mostly could not read" in err
    assert "SPHINX-v2 (full arm): 100% of its answers unreadable, the other full-arm runs' median 8%" in err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    (u,) = s["per_model"]["unreadable"]
    assert u["model"] == "SPHINX-v2" and u["unparseable_share"] == 1.0 and u["n_others"] == 10
    assert "**Unreadable runs.** 1 run" in (tmp_path / "o" / "README.md").read_text()
    assert "SPHINX-v2" in s["models"]["full"]  # kept: its judged correctness still holds
    res = run_cli("audit", "--out", tmp_path / "ex", "--calibration-sims", "0", "--no-figures")
    assert res.returncode == 0 and "mostly could not read" not in res.stderr
    assert json.loads((tmp_path / "ex" / "summary.json").read_text())["per_model"]["unreadable"] == []
