"""``benchaudit tst`` wall time and peak memory, measured as the command a user types.

    python benchmarks/tst.py                 # 1,200 questions, defaults (99-permutation null included)
    python benchmarks/tst.py --sizes 1200 5000 --extra "--null-permutations 0"
    python benchmarks/tst.py --smoke         # 200 questions, small settings: checks the script runs

Each run is a fresh subprocess (``python -m audit_hub tst ...``) on a synthetic table (10% numeric
questions) with a planted shortcut (``--kind planted``) or none (``--kind clean``); wall time is
measured around the subprocess and peak RSS is the child's (``RUSAGE_CHILDREN``). The 1-minute load
average before and after is printed because the development machine's 2 cores are shared.
Target: 1,200 questions with the defaults in under 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 60.0
TARGET_N = 1200


def run_one(n: int, kind: str, extra: list[str], workdir: Path) -> dict:
    from audit_hub.tst.synthetic import make_synthetic

    qf = workdir / f"q_{kind}_{n}.jsonl"
    make_synthetic(n, planted=kind == "planted", planted_templates=2, numeric_share=0.1, seed=0).to_json(
        qf, orient="records", lines=True)
    out = workdir / f"out_{kind}_{n}"
    cmd = [sys.executable, "-m", "audit_hub", "tst", "--questions", str(qf), "--out", str(out), *extra]
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(proc.returncode)
    s = json.loads((out / "summary.json").read_text())["tst"]
    return {"n_questions": n, "kind": kind, "args": " ".join(extra) or "(defaults)", "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "load_1min_before": round(load0, 2),
            "load_1min_after": round(os.getloadavg()[0], 2), "cores": os.cpu_count(),
            "accuracy": s["accuracy"], "p_value": s["p_value"], "excess": s["excess"],
            "target": f"< {TARGET_S:.0f} s" if n == TARGET_N and not extra else None,
            "printed": proc.stdout.strip().splitlines()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[TARGET_N])
    p.add_argument("--kind", choices=["planted", "clean", "both"], default="both")
    p.add_argument("--extra", default="", help="extra CLI arguments, e.g. \"--null-permutations 0\"")
    p.add_argument("--smoke", action="store_true", help="200 questions, k=3, 1 repeat, 9 permutations")
    a = p.parse_args()
    sizes, extra = a.sizes, a.extra.split()
    kinds = ["planted", "clean"] if a.kind == "both" else [a.kind]
    if a.smoke:
        sizes, kinds = [200], ["planted"]
        extra = ["--k", "3", "--repeats", "1", "--null-permutations", "9", "--n-estimators", "5"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for kind in kinds:
                r = run_one(n, kind, extra, Path(tmp))
                for line in r.pop("printed"):
                    print("   ", line)
                print(json.dumps(r))


if __name__ == "__main__":
    main()
