"""``benchaudit`` run as a user runs it, for the tests: a child process with this checkout first on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m audit_hub.cli ARGS`` (e.g. ``run_cli("audit", "--runs", folder)``): exit code, stdout, stderr."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "Agg")
    return subprocess.run([sys.executable, "-m", "audit_hub.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)
