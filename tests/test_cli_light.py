"""`benchaudit --help` must not import torch, transformers or evaluate (import cost)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = (
    "import sys\n"
    "from audit_hub.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "bad = [m for m in ('torch', 'transformers', 'evaluate', 'datasets', 'sklearn', 'matplotlib') if m in sys.modules]\n"
    "print('BAD=' + ','.join(bad))\n"
)


@pytest.mark.parametrize("args", [["--help"], ["audit", "--help"], ["blind", "--help"], ["tst", "--help"], ["metrics", "--help"], ["push", "--help"]])
def test_help_is_light(args):
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    assert "Usage" in p.stdout, p.stderr
    bad = [ln for ln in p.stdout.splitlines() if ln.startswith("BAD=")][-1]
    assert bad == "BAD=", f"{args} imported heavy modules: {bad}"


def test_user_error_exits_2_with_one_line(tmp_path):
    missing = tmp_path / "nope.csv"
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "audit_hub.cli", "audit", "--runs", str(missing), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert err[-1].startswith("error: ") and "nope.csv" in err[-1]
    assert "Traceback" not in p.stderr
    assert not out.exists()


def test_audit_command_end_to_end_on_a_renamed_generic_layout(tmp_path):
    """The CLI path a user takes: questions + runs in another layout, --map renames, a report folder."""
    import json
    from pathlib import Path

    from audit_hub.cli import main

    fix = Path(__file__).parent / "fixtures" / "generic"
    out = tmp_path / "report"
    rc = main(["audit", "--questions", str(fix / "questions.csv"), "--runs", str(fix / "runs_other_layout.csv"),
               "--map", "qid=question_id", "--map", "system=model", "--map", "condition=arm",
               "--map", "output=prediction", "--map", "correct=hit", "--out", str(out),
               "--calibration-sims", "2", "--no-figures"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_questions"] == 2 and summary["models"]["full"] == ["model-a", "model-b"]
    assert summary["pool"]["paired"] == ["model-a"] and summary["pool"]["pool_level"] is False
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["name"] == "generic"  # questions.csv: named after its folder
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "# benchaudit report: generic" in card


def test_the_program_ends_with_its_exit_code_and_every_output_written(tmp_path):
    """`python -m audit_hub` (the console script's `console`) skips the interpreter's teardown after main():
    the exit code, every line on a pipe and the whole report folder are still there."""
    import json

    out = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "audit_hub", "audit", "--out", str(out), "--calibration-sims", "2",
                        "--no-figures"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().splitlines()[-1] == f"report: {out}"
    import hashlib

    listed = json.loads((out / "manifest.json").read_text())["outputs"]
    assert {"README.md", "summary.json"} <= {o["path"] for o in listed}
    for o in listed:  # every file whole: the size and hash the manifest recorded
        data = (out / o["path"]).read_bytes()
        assert len(data) == o["bytes"] and hashlib.sha256(data).hexdigest() == o["sha256"], o["path"]
    bad = subprocess.run([sys.executable, "-m", "audit_hub", "audit", "--runs", str(tmp_path / "nope.csv"),
                          "--out", str(tmp_path / "o2")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: ")


END_PROBE = (
    "import atexit, sys, threading, time\n"
    "from audit_hub.cli import _end_process\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: open(out + '.atexit', 'w').write('ran'))\n"
    "def late():\n"
    "    time.sleep(float(sys.argv[2]))\n"
    "    open(out + '.thread', 'w').write('done')\n"
    "if float(sys.argv[2]) >= 0:\n"
    "    threading.Thread(target=late).start()\n"
    "sys.stdout.write('x' * 200000)\n"
    "_end_process(3)\n"
)


@pytest.mark.parametrize("thread_s", [-1.0, 0.5])
def test_ending_the_process_runs_atexit_flushes_and_waits_for_live_threads(tmp_path, thread_s):
    """The exit code, a 200 kB buffered write on a pipe, the atexit handlers; a non-daemon thread still
    running makes it the ordinary exit, which waits for the thread."""
    base = str(tmp_path / "probe")
    p = subprocess.run([sys.executable, "-c", END_PROBE, base, str(thread_s)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 3, p.stderr
    assert p.stdout == "x" * 200000
    assert (tmp_path / "probe.atexit").read_text() == "ran"
    assert (tmp_path / "probe.thread").exists() == (thread_s >= 0)
