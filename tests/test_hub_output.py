"""The output layer (audit_hub/hub/output.py): one folder of several complete reports plus an index.

Each report inside the index is a valid output of its own (its own manifest, card and configs); the index
card's YAML lists every report's configs so ``datasets.load_dataset(folder, NAME)`` loads one report's
questions; the index manifest lists every file under the folder; nothing partial is left on failure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_report import make_fake_result  # noqa: E402


def _fill(result, cmd):
    from audit_hub.report.writer import fill_report

    def fill(f):
        fill_report(result, f, command_line=cmd, inputs=[], figures=False)
        return {"items": int(result.frame.n_questions), "models": len(result.frame.models_in("full"))}

    return fill


def test_report_set_writes_complete_reports_and_an_index(tmp_path):
    import datasets

    from audit_hub.hub.output import write_report_set
    from audit_hub.hub.publish import report_files

    out = tmp_path / "index"
    res = make_fake_result()
    write_report_set(out, {"BenchA": _fill(res, ["benchaudit", "audit"]), "BenchB": _fill(res, ["benchaudit", "audit"])},
                     command_line=["benchaudit", "audit", "--runs", "wd"],
                     index_rows=lambda r: [{"name": n, **v} for n, v in r.items()],
                     title="benchaudit work_dir", body="# Index\n")
    idx = json.loads((out / "index.json").read_text())
    assert [r["name"] for r in idx["reports"]] == ["BenchA", "BenchB"]
    assert idx["reports"][0] == {"name": "BenchA", "items": 6, "models": 3, "path": "BenchA/"}
    top = json.loads((out / "manifest.json").read_text())
    assert top["kind"] == "index" and top["command"] == "audit" and top["manifest_version"] == 2
    assert top["output_of"] == "audit"
    listed = {r["path"] for r in top["outputs"]}
    assert {"README.md", "index.json", "BenchA/manifest.json", "BenchB/data/questions-00000-of-00001.parquet"} <= listed
    for name in ("BenchA", "BenchB"):
        sub = json.loads((out / name / "manifest.json").read_text())
        assert sub["command"] == "audit" and sub["output_of"] == "audit" and "kind" not in sub
        assert set(report_files(out / name)) == {r["path"] for r in sub["outputs"]} | {"manifest.json"}
    # the hashes the index records of the stamped sub-manifests are true
    from audit_hub.hub.folders import sha256_file

    for rec in top["outputs"]:
        assert sha256_file(out / rec["path"]) == rec["sha256"], rec["path"]
    assert set(report_files(out)) == listed | {"manifest.json"}
    q = datasets.load_dataset(str(out), "BenchB", split="train")
    assert q.num_rows == 6
    runs = datasets.load_dataset(str(out), "BenchA-runs", split="train")
    assert runs.num_rows == 6 * 3 * 2


def test_report_set_failure_leaves_nothing(tmp_path):
    from audit_hub.hub.output import write_report_set

    def boom(f):
        raise RuntimeError("planted")

    out = tmp_path / "index"
    with pytest.raises(RuntimeError, match="planted"):
        write_report_set(out, {"A": _fill(make_fake_result(), ["x"]), "B": boom}, command_line=["x"])
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../x", ".hidden", "a/b", "", "-x", "x" * 97])
def test_report_set_refuses_unsafe_report_names(tmp_path, name):
    from audit_hub.errors import InputError
    from audit_hub.hub.output import write_report_set

    with pytest.raises(InputError, match="report folder name"):
        write_report_set(tmp_path / "o", {name: _fill(make_fake_result(), ["x"])})
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ a Ctrl-C while the early runs config starts
def _staging_left(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".ba-tmp-" in p.name)


@pytest.mark.parametrize("where", ["after_the_folder_is_made", "while_the_table_is_built"])
def test_a_signal_while_the_staged_config_starts_leaves_no_folder(tmp_path, monkeypatch, where):
    """A SIGINT that lands just after the staging folder is made (before the caller holds the object) or while the
    runs table is built: the folder goes, the interrupt reaches the caller. Found by the fresh-clone suite under load:
    `test_signal_gives_exit_code_one_line_and_nothing_written[SIGINT]` left `.report.ba-tmp-*/data` behind."""
    import os
    import signal

    import audit_hub.hub.folders as folders
    from audit_hub.errors import Interrupted
    from audit_hub.hub.output import StagedConfig

    real_staging = folders.staging_dir

    def staging_then_signal(*a, **k):
        d = real_staging(*a, **k)
        os.kill(os.getpid(), signal.SIGINT)  # delivered at once to this (main) thread's handler
        return d

    def table():
        if where == "while_the_table_is_built":
            raise KeyboardInterrupt
        import pyarrow as pa

        return pa.table({"x": [1, 2, 3]})

    if where == "after_the_folder_is_made":
        monkeypatch.setattr(folders, "staging_dir", staging_then_signal)
    held: list = []
    with pytest.raises((KeyboardInterrupt, Interrupted)):
        try:
            StagedConfig(tmp_path / "report", "runs", table, command="audit", register=held.append)
        finally:
            for h in held:
                h.discard()
    assert _staging_left(tmp_path) == []
    assert len(held) == 1  # the caller held it before the signal was passed on


def test_a_staged_config_runs_and_moves_its_shards(tmp_path):
    import pyarrow as pa

    from audit_hub.hub.output import StagedConfig

    held: list = []
    s = StagedConfig(tmp_path / "report", "runs", lambda: pa.table({"x": [1, 2, 3]}), command="audit",
                     register=held.append)
    assert held == [s] and s.dir is not None and s.dir.is_dir()
    (tmp_path / "into").mkdir()
    assert s.move_into(tmp_path / "into") == ["data/runs-00000-of-00001.parquet"]
    s.discard()
    assert _staging_left(tmp_path) == []
