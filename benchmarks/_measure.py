"""Run one command as a child process and report what a user would see: wall seconds, the child's
CPU seconds and its peak RSS (``resource.getrusage(RUSAGE_CHILDREN)`` read in a fresh wrapper
process, so that the peak is this command's own and not the largest of earlier children).

    python benchmarks/_measure.py -- benchaudit audit ...      # prints one JSON line

Used by cli_scale.py and xlsx_read.py; also records the machine's load (``os.getloadavg``), since
wall times on a shared machine mean little without it, and gives a machine reference
(:func:`machine_reference`) to compare figures across machines by. The seed sweeps (curate.py,
score_estimation.py) pair two figures over seeds with :func:`paired_over_seeds`.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time


def _wrapped(cmd: list[str], env: dict | None, timeout: float | None) -> dict:
    load = os.getloadavg()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"rc": p.returncode, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_gb": ru.ru_maxrss / 1024**2, "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "stdout_tail": p.stdout[-4000:], "stderr_tail": p.stderr[-4000:]}


def measure(cmd: list[str], env: dict | None = None, timeout: float | None = None) -> dict:
    """``cmd`` in a fresh wrapper process; returns rc, wall_s, cpu_s, peak_rss_gb, load, output tails."""
    wrapper = [sys.executable, os.path.abspath(__file__), "--timeout", str(timeout or 0), "--", *cmd]
    p = subprocess.run(wrapper, capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("MEASURE=")]
    if not lines:
        raise RuntimeError(f"measurement wrapper failed: {p.stderr[-2000:]}")
    return json.loads(lines[-1][8:])


#: a fixed single-threaded workload of the kinds the audit spends its CPU on (interpreted loops, NumPy
#: element-wise passes, small float32 matrix products, hypergeometric draws, a sort); see machine_reference
_REFERENCE_CODE = """
import time
import numpy as np
best = float('inf')
for _ in range(3):
    t0 = time.perf_counter()
    s = 0
    for i in range(3_000_000):
        s += i & 7
    rng = np.random.default_rng(0)
    x = rng.random(1_000_000)
    for _ in range(20):
        s += float(np.log1p(np.exp(-x)).sum())
    a = rng.random((20, 750)).astype(np.float32)
    b = rng.random((750, 15)).astype(np.float32)
    for _ in range(4_000):
        s += float((a @ b).max())
    s += int(rng.hypergeometric(np.full(400_000, 40), np.full(400_000, 60), 30).sum())
    s += float(np.sort(rng.random(1_000_000))[500_000])
    best = min(best, time.perf_counter() - t0)
print('REFERENCE=' + repr(best))
"""


def machine_reference() -> float:
    """Seconds this machine takes for a fixed single-threaded workload (best of 3, BLAS on one thread), printed
    beside wall times so that figures from different machines or days can be set side by side: the same code
    measured 7.9 s on one machine and 11.2 s on another (docs/scale.md, 2026-12-06); the reference tells
    a slower machine from a slower commit."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", _REFERENCE_CODE], capture_output=True, text=True, env=env, check=True)
    return float(next(ln for ln in p.stdout.splitlines() if ln.startswith("REFERENCE="))[10:])


def benchaudit_cmd() -> list[str]:
    """The CLI a user types (``benchaudit``), run with this interpreter so the checkout's package is used."""
    return [sys.executable, "-m", "audit_hub.cli"]


def child_env(root: str) -> dict:
    """This environment for a measured child, with ``root`` first on ``PYTHONPATH`` and Python's default
    bytecode caching: ``PYTHONDONTWRITEBYTECODE`` (set on some build machines) is dropped, since it makes every
    run, and every worker process it spawns (``-B`` is passed on), compile the package's sources again (about
    0.4 s of CPU per process measured), which an installed package (pip writes its ``.pyc``) never does."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


if __name__ == "__main__":
    args = sys.argv[1:]
    timeout = None
    if args[:1] == ["--timeout"]:
        timeout = float(args[1]) or None
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    try:
        out = _wrapped(args, None, timeout)
    except subprocess.TimeoutExpired:
        out = {"rc": 124, "wall_s": timeout, "cpu_s": None, "peak_rss_gb": None, "timed_out": True}
    print("MEASURE=" + json.dumps(out))


def paired_over_seeds(a, b) -> tuple[float, float, float, float]:
    """(mean of ``a``, mean of ``b``, mean of ``a - b``, its standard error over the seeds): two figures measured
    on the same seeds, paired. The SE is NaN with one seed."""
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = a - b
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
    return float(a.mean()), float(b.mean()), float(d.mean()), se


def pool_files(name: str):
    """(questions, runs) Parquet paths of a real pool: ``mathv`` the bundled MATH-V example, an existing folder
    its ``questions.parquet`` and ``runs.parquet`` (e.g. the VisOnlyQA pool ``scripts/build_visonlyqa_pool.py``
    writes), otherwise ``tests/fixtures/real_pools/<name>``."""
    from pathlib import Path

    if name == "mathv":
        from audit_hub.readers.example import example_paths

        p = example_paths()
        return Path(p["questions"]), Path(p["runs"])
    d = Path(name) if Path(name).is_dir() else Path(__file__).resolve().parents[1] / "tests" / "fixtures" / \
        "real_pools" / name
    return d / "questions.parquet", d / "runs.parquet"
