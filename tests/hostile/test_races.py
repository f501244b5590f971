"""Data loss by a race (issue 29): a folder the user makes at ``--out`` while a command runs is never deleted.

The check of ``--out`` holds at the moment of the swap, not only at the start: the finished output is
renamed into place with RENAME_NOREPLACE (fails if anything appeared), or swapped with what is there and
that is checked in its temporary place and swapped straight back when it is not a previous output.
Every case runs the real CLI in a subprocess; the test hook ``BENCHAUDIT_TEST_PAUSE_BEFORE_SWAP`` holds the
command just before the swap (touching a marker file outside the workspace) while the test makes the folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from .conftest import REPO, Result, all_bytes, assert_no_secret, command_args

PAUSE = "BENCHAUDIT_TEST_PAUSE_BEFORE_SWAP"


def _pool(ws) -> None:
    from audit_hub.curate.simulate import simulate_pool

    d = ws.root / "pool"
    d.mkdir()
    q, r, _ = simulate_pool(200, 6, seed=2, as_tables=True)
    q.to_parquet(d / "questions.parquet", index=False)
    r.to_parquet(d / "runs.parquet", index=False)


def _race(ws, args: list[str], during, *, pause: float = 2.0, extra_env: dict | None = None) -> Result:
    """Run ``benchaudit ARGS``; when it reaches the swap, call ``during()``; return its result."""
    marker = ws.root.parent / f"marker-{time.monotonic_ns()}"
    env = dict(os.environ, **(extra_env or {}))
    env[PAUSE] = f"{pause}:{marker}"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-m", "audit_hub.cli", *args], cwd=ws.root, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while not marker.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() - t0 < 240, "the command never reached the swap"
        time.sleep(0.01)
    during()
    out, err = p.communicate(timeout=240)
    return Result(p.returncode, out, err)


def _user_folder(ws, name="report"):
    def make():
        d = ws.root / name
        d.mkdir()
        (d / "thesis.txt").write_text("two years of work\n")
    return make


def _check_refused_and_kept(ws, res: Result, name="report"):
    assert res.rc == 2, res
    assert "Traceback" not in res.err + res.out, res
    assert len(res.error_lines) == 1, res
    assert "appeared or changed while" in res.error_lines[0] or "not a previous output" in res.error_lines[0], res
    assert (ws.root / name / "thesis.txt").read_text() == "two years of work\n"
    assert sorted(os.listdir(ws.root / name)) == ["thesis.txt"]
    assert not [n for n in os.listdir(ws.root) if ".ba-tmp-" in n or ".ba-old-" in n]
    assert_no_secret(res.out, res.err, all_bytes(ws.root))


@pytest.mark.parametrize("command", ["audit", "tst", "prune", "curate"])
def test_a_folder_made_at_out_during_the_run_is_kept(ws, command):
    if command == "curate":
        _pool(ws)
    before = ws.snap()
    res = _race(ws, command_args(ws, command, "report"), _user_folder(ws))
    _check_refused_and_kept(ws, res)
    after = ws.snap("report")
    assert after == before  # nothing else touched outside --out


def test_a_previous_output_replaced_by_the_user_during_the_run_is_kept(ws, previous_report):
    import shutil

    shutil.copytree(previous_report, ws.root / "report")

    def swap():
        shutil.rmtree(ws.root / "report")
        _user_folder(ws)()

    res = _race(ws, ws.audit_args("report"), swap)
    _check_refused_and_kept(ws, res)


def test_a_file_written_at_out_during_the_run_is_kept(ws):
    res = _race(ws, ws.audit_args("report"), lambda: (ws.root / "report").write_text("my notes\n"))
    assert res.rc == 2 and len(res.error_lines) == 1 and "Traceback" not in res.err, res
    assert (ws.root / "report").read_text() == "my notes\n"
    assert not [n for n in os.listdir(ws.root) if ".ba-tmp-" in n]


def test_a_symlink_made_at_out_during_the_run_is_kept_and_its_target_untouched(ws):
    (ws.root / "precious").mkdir()
    (ws.root / "precious" / "a.txt").write_text("keep\n")
    res = _race(ws, ws.audit_args("report"), lambda: os.symlink("precious", ws.root / "report"))
    assert res.rc == 2 and len(res.error_lines) == 1 and "Traceback" not in res.err, res
    assert os.readlink(ws.root / "report") == "precious"
    assert sorted(os.listdir(ws.root / "precious")) == ["a.txt"]


def test_an_empty_folder_made_at_out_during_the_run_is_filled(ws):
    """An empty folder is a valid --out at the start, so it is at the swap too (nothing of the user's is in it)."""
    res = _race(ws, ws.audit_args("report"), lambda: (ws.root / "report").mkdir())
    assert res.rc == 0, res
    assert "Traceback" not in res.err and not res.error_lines, res
    assert (ws.root / "report" / "manifest.json").is_file()


def test_blind_refuses_a_folder_made_at_out_before_its_first_write(ws):
    sys.path.insert(0, str(REPO / "tests"))
    import pandas as pd
    from openai_stub import StubServer

    pd.DataFrame({"question_id": [f"q{i}" for i in range(4)], "question": [f"Q{i}?" for i in range(4)],
                  "options": [["a", "b", "c"]] * 4, "answer": ["A"] * 4}).to_parquet(ws.root / "inputs" / "bq.parquet")
    key = "sk-canaryOpenAIkey0123456789abcdef"
    with StubServer(key) as stub:
        res = _race(ws, ["blind", "--backend", "openai", "--base-url", stub.base_url, "--model", "stub-model",
                         "--questions", str(ws.root / "inputs" / "bq.parquet"), "--out", "report", "--no-progress"],
                    _user_folder(ws), extra_env={"OPENAI_API_KEY": key})
    _check_refused_and_kept(ws, res)
