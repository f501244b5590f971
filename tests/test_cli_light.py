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
