"""The audit a user runs, at scale: ``benchaudit audit`` with its defaults, as a subprocess.

For each size N questions x M models (both arms for every model, so 2 x N x M run rows), the
script generates synthetic data of the detector benchmark's shape (``detectors.make_data``:
Parquet, dictionary-encoded IDs), then

* times pyarrow alone reading the same two Parquet files into Arrow tables (best of 3, in a child
  process): the floor for this input;
* runs ``benchaudit audit --questions q.parquet --runs runs.parquet --out DIR`` in a child process
  with every default (add ``--extra "--calibration-sims 0"`` to drop an option) and reports its wall
  time, CPU time, peak RSS (``getrusage(RUSAGE_CHILDREN)`` in a fresh wrapper process), the ratio to
  the pyarrow floor, the machine's load, and the per-stage timings from the report's manifest.json;
* prints two lower bounds of the wall/floor ratio that no schedule removes: a fresh interpreter
  starting and importing the audit, and the longest single detector (each detector runs on one thread).

Targets (issue 11): 1,000,000 x 50 under 60 s and 6 GB; 100,000 x 20 under 10 s; wall within 4x
the pyarrow floor. Each target line says PASS or FAIL; on a machine shared with other jobs the
wall time is only meaningful next to the load printed with it (CPU seconds are the steadier figure).

    python benchmarks/cli_scale.py                        # 100000x20 and 1000000x50
    python benchmarks/cli_scale.py --sizes 100000x20 --extra "--calibration-sims 0"
    python benchmarks/cli_scale.py --smoke                # 2000 x 3 with 2 calibration sims; what CI runs
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _measure import benchaudit_cmd, child_env, measure  # noqa: E402

TARGETS = {"1000000x50": {"wall_s": 60.0, "peak_rss_gb": 6.0}, "100000x20": {"wall_s": 10.0}}
FLOOR_RATIO = 4.0

_FLOOR_CODE = """
import sys, time, json
import pyarrow.parquet as pq
best = float('inf')
for _ in range(3):
    t0 = time.perf_counter()
    tables = [pq.read_table(p) for p in sys.argv[1:]]
    best = min(best, time.perf_counter() - t0)
    del tables
print('FLOOR=' + json.dumps(best))
"""


def pyarrow_floor(files: list[Path]) -> float:
    import subprocess

    p = subprocess.run([sys.executable, "-c", _FLOOR_CODE, *map(str, files)], capture_output=True, text=True,
                       check=True)
    return float(next(ln for ln in p.stdout.splitlines() if ln.startswith("FLOOR="))[6:])


_IMPORT_CODE = """
import sys, time
t0 = time.perf_counter()
import audit_hub.cli, audit_hub.api, audit_hub.commands.audit, audit_hub.readers.ingest, audit_hub.engine.run, audit_hub.engine.calibration
from audit_hub import detectors
[detectors.get(n).load() for n in detectors.names()]
print('IMPORT=' + repr(time.perf_counter() - t0))
"""


def import_floor() -> float:
    """Seconds a fresh interpreter takes to start and import the audit and its detectors (best of 3): a
    cost of the command the pyarrow floor does not have."""
    import subprocess

    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _IMPORT_CODE], capture_output=True, text=True, check=True,
                       env=child_env(str(ROOT)))
        best = min(best, time.perf_counter() - t0)
    return best


def run_size(size: str, data_root: Path, extra: list[str], timeout: float | None) -> dict:
    from detectors import make_data

    n_q, n_m = (int(x) for x in size.split("x"))
    folder = data_root / size
    q, r = folder / "questions.parquet", folder / "runs.parquet"
    if not (q.is_file() and r.is_file()):
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        make_data(folder, n_q, n_m)
        print(f"[{size}] generated {2 * n_q * n_m:,} run rows "
              f"({(q.stat().st_size + r.stat().st_size) / 1e6:.0f} MB Parquet) in {time.perf_counter() - t0:.1f} s",
              flush=True)
    floor = pyarrow_floor([q, r])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        cmd = [*benchaudit_cmd(), "audit", "--questions", str(q), "--runs", str(r), "--out", str(out), *extra]
        m = measure(cmd, env=child_env(str(ROOT)), timeout=timeout)
        timings = {}
        if (out / "manifest.json").is_file():
            timings = json.loads((out / "manifest.json").read_text())["timings_s"]
    m.update(size=size, floor_s=floor, timings=timings, command="benchaudit " + shlex.join(cmd[3:]),
             import_s=import_floor())
    return m


def report(m: dict) -> bool:
    size = m["size"]
    if m["rc"] != 0:
        print(f"[{size}] benchaudit audit FAILED (exit {m['rc']}); stderr tail:\n{m.get('stderr_tail', '')}")
        return False
    ratio = m["wall_s"] / m["floor_s"]
    print(f"[{size}] benchaudit audit{' ' + ' '.join(m['extra']) if m['extra'] else ' (defaults)'}: "
          f"wall {m['wall_s']:.1f} s, CPU {m['cpu_s']:.1f} s, peak RSS {m['peak_rss_gb']:.2f} GB; "
          f"pyarrow read floor {m['floor_s']:.2f} s -> wall/floor ratio {ratio:.1f}x; "
          f"load avg before {m['load_before'][0]:.1f}, after {m['load_after'][0]:.1f} (1 min)", flush=True)
    if m["timings"]:
        print(f"[{size}] stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in m["timings"].items()), flush=True)
        # what no schedule can go below: the start-up, and the longest detector (each runs on one thread)
        det = {k[: -len(" (parallel)")]: v for k, v in m["timings"].items() if k.endswith(" (parallel)")
               and "worker" not in k}
        det = det or {k: v for k, v in m["timings"].items() if k not in ("read", "validate", "calibration",
                                                                         "report", "figures", "card")}
        if det:
            name, longest = max(det.items(), key=lambda kv: kv[1])
            imp = m["import_s"]
            print(f"[{size}] lower bounds of the wall/floor ratio: interpreter start and imports {imp:.2f} s "
                  f"({imp / m['floor_s']:.1f}x the floor); the longest detector, {name}, {longest:.2f} s "
                  f"({longest / m['floor_s']:.1f}x); both ({(imp + longest) / m['floor_s']:.1f}x)", flush=True)
    ok = True
    checks = [("wall", m["wall_s"], TARGETS.get(size, {}).get("wall_s"), "s"),
              ("peak RSS", m["peak_rss_gb"], TARGETS.get(size, {}).get("peak_rss_gb"), "GB"),
              ("wall/floor", ratio, FLOOR_RATIO if size in TARGETS else None, "x")]
    for name, val, lim, unit in checks:
        if lim is None:
            continue
        passed = val < lim
        ok &= passed
        print(f"[{size}] target {name} < {lim:g} {unit}: {val:.2f} {unit} {'PASS' if passed else 'FAIL'}", flush=True)
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["100000x20", "1000000x50"])
    ap.add_argument("--smoke", action="store_true", help="one tiny size (2000x3): checks the script runs")
    ap.add_argument("--data-dir", help="keep generated data here and reuse it (default: a temporary folder)")
    ap.add_argument("--extra", default="", help="extra options for benchaudit audit, e.g. '--calibration-sims 0'")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()
    sizes = ["2000x3"] if args.smoke else args.sizes
    extra = shlex.split(args.extra)
    if args.smoke and not args.extra:
        extra = ["--calibration-sims", "2"]  # the smoke run checks the script, not the calibration's cost
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.data_dir) if args.data_dir else Path(tmp)
        results = []
        for size in sizes:
            m = run_size(size, root, extra, args.timeout)
            m["extra"] = extra
            results.append(report(m))
    if args.smoke and not all(results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
