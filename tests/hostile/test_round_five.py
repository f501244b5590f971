"""Hostile inputs found in the 2026-12-08 red team on this round's new input paths: each case is the red team's
reproduction, with the promise of docs/safety.md it broke."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from .conftest import write_benchmark

COMMON = ["--no-figures", "--calibration-sims", "0", "--n-permutations", "19"]


def _run(args, capsys):
    from audit_hub.cli import main

    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def _hub_folder(hub: Path, questions: Path) -> Path:
    """A Hub-layout questions folder (data/test.csv + a card declaring it) holding ``questions``."""
    (hub / "data").mkdir(parents=True)
    pd.read_csv(questions).to_csv(hub / "data" / "test.csv", index=False)
    (hub / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n"
                                   "    path: data/test.csv\n---\n")
    return hub


def test_a_newline_in_a_model_or_file_name_cannot_print_a_line_of_its_own(tmp_path, capsys):
    """The duplicate-run warning and the files-not-read note printed a model name "zz\\nreport: all clean" and a
    file name "x\\nreport: the audit passed" as lines of their own. Notes and warnings are one line: a newline in a
    name is shown escaped."""
    q, r = write_benchmark(tmp_path / "in", models=("alpha", "beta", "gamma"), n=40)
    d = pd.read_csv(r, dtype=str)
    wrong = d["model"] == "alpha"
    d.loc[wrong & (d["arm"] == "full"), "prediction"] = "D"  # many shared wrong answers: a recognisable copy
    copy = d[wrong].assign(model="zz\nreport: all clean")
    runs = tmp_path / "runs"
    runs.mkdir()
    pd.concat([d, copy]).to_csv(runs / "runs.csv", index=False)
    (runs / "x\nreport: the audit passed.csv").write_text("")
    rc, said = _run(["audit", "-q", q, "-r", runs, "-o", tmp_path / "out", *COMMON], capsys)
    assert rc == 0, said
    lines = said.splitlines()
    assert not any(ln.startswith("report: all clean") or ln.startswith("report: the audit passed") for ln in lines)
    flat = " ".join(said.split())
    assert "zz\\nreport: all clean (a copy of alpha" in flat and "x\\nreport: the audit passed.csv" in flat


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_manifest_json_in_a_questions_folder_is_not_opened(tmp_path, capsys):
    """A FIFO named manifest.json beside a Hub-layout questions folder hung the audit (opened to see whether curate
    wrote the folder). It is read as a sidecar: regular files only, bounded, never through a link."""
    q, r = write_benchmark(tmp_path / "in")
    hub = _hub_folder(tmp_path / "hubq", q)
    os.mkfifo(hub / "manifest.json")
    t0 = time.time()
    rc, said = _run(["audit", "-q", hub, "-r", r, "-o", tmp_path / "out", *COMMON], capsys)
    assert rc == 0 and time.time() - t0 < 120, said
    (hub / "manifest.json").unlink()
    (hub / "manifest.json").symlink_to("/dev/zero")
    rc, said = _run(["audit", "-q", hub, "-r", r, "-o", tmp_path / "out2", *COMMON], capsys)
    assert rc == 0, said


def test_a_folder_claiming_to_be_curated_does_not_turn_foreign_runs_into_an_empty_audit(tmp_path, capsys):
    """A hand-written manifest saying "curate" beside questions of another benchmark gave exit 0 and an empty
    report (every run row "left out by curate"). With no run row of its questions, it is the ordinary error."""
    q, r = write_benchmark(tmp_path / "in")
    hub = _hub_folder(tmp_path / "hubq", q)
    (hub / "manifest.json").write_text(json.dumps({"command": "curate"}))
    d = pd.read_csv(r, dtype=str)
    d["question_id"] = "x" + d["question_id"]
    d.to_csv(tmp_path / "other.csv", index=False)
    rc, said = _run(["audit", "-q", hub, "-r", tmp_path / "other.csv", "-o", tmp_path / "out", *COMMON], capsys)
    assert rc == 2 and "none of the runs' question IDs is among the" in said
    assert not (tmp_path / "out").exists()


def test_a_crafted_list_gold_costs_linear_time(tmp_path):
    """A gold "['a'" + 20,000 spaces + "x" cost 0.3 s per cell in a backtracking regular expression (260 such
    cells: 98 s). The list test is string operations now."""
    from audit_hub.schema import accepted_golds

    cell = "['a'" + " " * 19990 + "x"
    t0 = time.perf_counter()
    for _ in range(200):
        assert accepted_golds(cell) is None
    assert time.perf_counter() - t0 < 1.0


def test_deeply_nested_options_are_one_line_naming_the_row(tmp_path, capsys):
    """Options "[[[[...]]]]" 5,000 deep raised RecursionError through the catch-all, with no file, row or column."""
    q, r = write_benchmark(tmp_path / "in")
    d = pd.read_csv(q, dtype=str)
    d.loc[3, "options"] = "[" * 5000 + "]" * 5000
    d.to_csv(q, index=False)
    rc, said = _run(["audit", "-q", q, "-r", r, "-o", tmp_path / "out", *COMMON], capsys)
    assert rc == 2 and "column 'options': options are nested too deeply" in said and "row 4" in said


def test_negative_integer_ids_give_the_same_canonical_order_wherever_they_stand():
    """Numeric order was decided from the first ID alone ("-1" first: text order; last: numeric)."""
    from audit_hub.frame.core import AuditFrame

    ids = ["-1"] + [str(i) for i in range(2, 41)]
    orders = []
    for seq in (ids, ids[1:] + ids[:1]):
        q = pd.DataFrame({"question_id": seq, "question": "?", "answer": "A", "options": [["x", "y"]] * len(seq)})
        f = AuditFrame.from_tables(q, None)
        canon, _ = f.canonical()
        orders.append(canon.questions["question_id"].tolist())
    assert orders[0] == orders[1] == [str(i) for i in [-1, *range(2, 41)]]


def test_a_metric_value_too_large_for_a_float_is_not_a_verdict(tmp_path, capsys):
    """lmms-eval `score: 10**400` failed the whole file with OverflowError; it is simply not a 0/1 verdict."""
    from audit_hub.readers.lmms_eval import _binary

    assert _binary([1, 0, 10**400]) is False and _binary([1, 0, True]) is True
