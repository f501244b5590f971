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
    assert manifest["dataset"]["name"] == "questions"
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "# benchaudit report: questions" in card
