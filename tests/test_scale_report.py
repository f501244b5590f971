"""Issue 11: the runs config from Arrow codes, stage timings, the xlsx engine switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from audit_hub.clock import StageClock, current_timings, recording, stage
from audit_hub.frame.core import AuditFrame
from audit_hub.hub.shards import write_arrow_parquet
from audit_hub.report.runs_arrow import runs_arrow_table
from audit_hub.report.tables import judge_disagreement_counts

ROOT = Path(__file__).resolve().parents[1]


def small_frame() -> AuditFrame:
    """4 questions, 2 models, both arms; one unparseable answer, one unknown judge verdict."""
    q = pd.DataFrame({"question_id": ["q0", "q1", "q2", "q3"], "question": ["a?", "b?", "c?", "d?"],
                      "options": [["x", "y", "z"]] * 4, "answer": ["A", "B", "C", "A"],
                      "category": ["c1", "c1", "c2", "c2"]})
    rows = []
    for arm in ("full", "blind"):
        for m in ("m0", "m1"):
            for i, qid in enumerate(q.question_id):
                let = "ABCA"[i] if (m == "m0" or i % 2) else "B"
                ans = None if (arm == "blind" and m == "m1" and i == 3) else let
                hit = None if (arm == "full" and m == "m1" and i == 2) else (ans == "ABCA"[i])
                exact = (not hit) if (arm == "full" and m == "m0" and i == 1) else (ans == "ABCA"[i])
                rows.append({"question_id": qid, "model": m, "arm": arm, "prediction": f"answer {ans}",
                             "answer": ans, "hit": hit, "hit_exact": exact})
    return AuditFrame.from_tables(q, pd.DataFrame(rows))


def test_runs_arrow_table_equals_runs_table_without_copying_codes():
    f = small_frame()
    t = runs_arrow_table(f)
    for c in ("question_id", "model", "arm"):
        assert pa.types.is_dictionary(t.schema.field(c).type)
    # the indices are the frame's own code buffers
    idx = t.column("question_id").chunk(0).indices.to_numpy()
    assert np.shares_memory(idx, f.runs["q"].to_numpy())
    want = f.runs_table()
    got = t.to_pandas()
    for c in ("question_id", "model", "arm", "prediction", "answer"):
        assert [None if pd.isna(v) else str(v) for v in got[c]] == \
               [None if pd.isna(v) else str(v) for v in want[c]], c
    for c in ("hit", "hit_exact"):
        assert [None if pd.isna(v) else bool(v) for v in got[c]] == \
               [None if pd.isna(v) else bool(v) for v in want[c]], c
    assert got["hit"].isna().sum() == 1 and got["answer"].isna().sum() == 1


def test_runs_parquet_is_dictionary_encoded_plain_strings_in_row_groups(tmp_path):
    f = small_frame()
    path = tmp_path / "runs.parquet"
    write_arrow_parquet(runs_arrow_table(f), path, row_group_rows=5)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == 16 and meta.num_row_groups == 4  # ceil(16 / 5)
    schema = pq.read_schema(path)
    assert schema.field("question_id").type == pa.string() and schema.field("hit").type == pa.bool_()
    col = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i) for i in range(7)}
    assert "RLE_DICTIONARY" in col["question_id"].encodings and col["question_id"].has_dictionary_page
    assert col["question_id"].statistics is None  # no min/max over the dictionary (the slow part)
    assert col["hit"].statistics is not None
    back = pq.read_table(path).to_pandas()
    assert list(back["question_id"]) == list(f.runs_table()["question_id"])


def test_judge_disagreement_counts_by_hand():
    f = small_frame()
    c = judge_disagreement_counts(f)
    m0, m1 = f.models.index("m0"), f.models.index("m1")
    M = f.n_models
    assert c["n_all"].tolist() == [4] * 4 + [0] * M  # one slot per (arm, model); no base-arm runs here
    assert c["n_both"][0 * M + m1] == 3 and c["n_both"][0 * M + m0] == 4  # m1 full: one unknown verdict
    assert c["n_dis"][0 * M + m0] == 1 and c["n_dis"].sum() == 1
    assert c["unparsed"][1 * M + m1] == 1 and c["unparsed"].sum() == 1
    assert judge_disagreement_counts(f) is c  # cached for the card and the figure


def test_stage_clock_accumulates_and_is_a_no_op_without_a_clock():
    seen = []
    clock = StageClock(on_start=seen.append)
    with stage("outside"):
        pass
    assert current_timings() == {}
    with recording(clock):
        with stage("read"):
            with stage("validate"):
                pass
        with stage("read"):
            pass
        assert set(current_timings()) == {"read", "validate"}
    assert seen == ["read", "validate", "read"]
    assert list(clock.timings) == ["validate", "read"] and all(v >= 0 for v in clock.timings.values())
    assert clock.lines()[-1].startswith("total")


def test_cli_records_stage_timings_and_prints_them(tmp_path):
    f = small_frame()
    from sim import save_frame

    save_frame(f, str(tmp_path / "in"))
    out = tmp_path / "report"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "audit_hub.cli", "audit", "--questions",
                        str(tmp_path / "in" / "questions.parquet"), "--runs", str(tmp_path / "in" / "runs.parquet"),
                        "--out", str(out), "--calibration-sims", "0", "--n-permutations", "19", "--verbose"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "stage timings" in p.stderr
    timings = json.loads((out / "manifest.json").read_text())["timings_s"]
    from audit_hub import detectors

    expected = {"read", "validate", "report", "figures", "card"}
    assert expected <= set(timings), set(timings) ^ expected
    # each detector: its own stage, or (detectors on threads, with a second CPU) its time beside the
    # "detectors" stage
    from audit_hub.bounds import detector_threads

    threaded = detector_threads(True) > 1
    for name in detectors.names():
        assert (name + " (parallel)" if threaded else name) in timings
    assert ("detectors" in timings) == threaded
    assert "calibration" not in timings  # --calibration-sims 0 skips it
    for name in expected | set(detectors.names()):
        assert name in p.stderr


@pytest.mark.parametrize("engine", ["openpyxl", "calamine"])
def test_xlsx_engines_give_the_same_values(tmp_path, engine):
    from audit_hub.readers.xlsx import read_xlsx_sheet, xlsx_engine

    assert xlsx_engine() == "calamine"  # python-calamine is a dependency
    df = pd.DataFrame({"index": [0, 1, 2], "answer": ["A", "NA", None], "score": [1.0, 2.5, np.nan],
                       "prediction": ["The answer is A", "", "B"]})
    path = tmp_path / "m_DS.xlsx"
    df.to_excel(path, index=False)
    got = read_xlsx_sheet(str(path), engine=engine)
    ref = read_xlsx_sheet(str(path), engine="openpyxl")
    assert list(got.columns) == ["index", "answer", "score", "prediction"]
    assert got["index"].tolist() == [0, 1, 2] and type(got["index"][0]) is int
    assert got["score"][1] == 2.5 and pd.isna(got["score"][2])
    pd.testing.assert_frame_equal(got, ref)


def test_early_runs_write_gives_the_same_report_and_leaves_nothing_behind(tmp_path):
    """The runs config written while the detectors run (EarlyRuns) is moved into the report: the same
    files as writing it at the end; a discarded one (a failed audit) leaves no staging folder."""
    from audit_hub.engine.run import AuditConfig, run_audit
    from audit_hub.report.writer import EarlyRuns, write_report

    frame = small_frame()
    result = run_audit(frame, AuditConfig(run_calibration=False, n_permutations=19))
    plain = write_report(result, tmp_path / "plain", command_line=["x"], inputs=[], figures=False)
    early = EarlyRuns(frame, tmp_path / "early")
    assert early.dir is not None and early.dir.parent == tmp_path and early.dir.name.startswith(".early.ba-tmp-")
    try:
        out = write_report(result, tmp_path / "early", command_line=["x"], inputs=[], figures=False,
                           early_runs=early)
    finally:
        early.discard()
    a = sorted(p.relative_to(plain).as_posix() for p in plain.rglob("*.parquet"))
    b = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert a == b and any(x.startswith("data/runs-") for x in a)
    for rel in a:
        assert pq.read_table(plain / rel).equals(pq.read_table(out / rel))
    assert (plain / "README.md").read_text() == (out / "README.md").read_text()
    # a failed audit: the early write is discarded, nothing is left beside the output
    failed = EarlyRuns(frame, tmp_path / "failed")
    failed.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["early", "plain"]
    # an EarlyRuns of another frame is not used
    other = EarlyRuns(small_frame(), tmp_path / "other")
    try:
        assert not other.usable_for(frame)
    finally:
        other.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["early", "plain"]
