"""The audit a user runs, at scale: ``benchaudit audit`` with its defaults, as a subprocess, on the same
synthetic data written three ways (issue 30).

For each size N questions x M models (both arms for every model, so 2 x N x M run rows), the script
generates synthetic data of the detector benchmark's shape (``detectors.make_data``) once and derives
the other encodings from it, streaming (never the whole table in memory):

* ``dict``: the runs as ``make_data`` writes them: Parquet, every string column dictionary-encoded,
  row groups of ~1e7 rows with one dictionary page each;
* ``plain``: Parquet as pandas writes it: ``question_id`` dictionary-encoded (its dictionary repeated in
  every row group), ``model``, ``arm`` and ``answer`` plain ``string`` columns, row groups of 1,048,576
  rows (pyarrow's default: ~100 row groups at 1M x 50; at least 8 at the small sizes), written row group by row group
  (``pq.ParquetWriter(use_dictionary=["question_id"])``);
* ``jsonl``: one JSON object per run row (~100M lines at 1M x 50), each row group's lines built by
  ``pyarrow.compute.binary_join_element_wise`` and written as one buffer (no per-row Python).

The questions file is the same Parquet file for every encoding. Per encoding the script

* times the best bare read of the same files in a child process (Parquet: ``pq.read_table`` with
  ``read_dictionary=`` for every string column; JSONL: ``pyarrow.json.read_json``), best of 3 (of 1 for a
  file over 1 GB, whose read alone takes tens of seconds);
* runs ``benchaudit audit --questions q.parquet --runs RUNS --out DIR`` in a child process with every
  default (``--extra "--calibration-sims 0"`` adds options) and reports its wall time, CPU time, peak RSS
  (``getrusage(RUSAGE_CHILDREN)`` in a fresh wrapper process: the largest single process, the audit or its
  worker), the ratio wall / bare read, the machine's load, the per-stage timings from manifest.json and
  the memory plan the audit recorded there (its estimate beside the measured peak);
* prints two lower bounds of the wall/read ratio no schedule removes: interpreter start and imports, and
  the longest single detector;
* prints the machine reference first (``_measure.machine_reference``: a fixed single-threaded workload, best
  of 3) and each audit's CPU time as a multiple of it, so that figures from different machines or days can
  be compared (a slower machine and a slower commit look the same in a wall time alone).

Targets (issues 11, 30), each printed PASS or FAIL: 1,000,000 x 50 on each Parquet encoding under 60 s
and 6 GB, JSONL under 3 minutes and 6 GB, each within 4x its bare read; 100,000 x 20 on each Parquet
encoding under 10 s, read on the median of 5 audits (``--repeats``; one above 10M run rows). On a machine shared with other jobs a wall time means little without the load
printed beside it (CPU seconds are the steadier figure).

    python benchmarks/cli_scale.py                               # 100000x20 and 1000000x50, all encodings
    python benchmarks/cli_scale.py --sizes 100000x20 --encodings plain --data-dir /tmp/scale
    python benchmarks/cli_scale.py --smoke                       # 2000 x 3, all encodings; what CI runs
    python benchmarks/cli_scale.py --sizes 5000x150 --encodings dict   # a wide pool (a leaderboard: many models)
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

from _measure import benchaudit_cmd, child_env, machine_reference, measure  # noqa: E402

ENCODINGS = ("dict", "plain", "jsonl")
RUNS_FILE = {"dict": "runs.parquet", "plain": "runs_plain.parquet", "jsonl": "runs.jsonl"}
#: (size, encoding) -> limits; the wall/read ratio applies at 1M x 50 to every encoding
TARGETS = {("1000000x50", "dict"): {"wall_s": 60.0, "peak_rss_gb": 6.0, "ratio": 4.0},
           ("1000000x50", "plain"): {"wall_s": 60.0, "peak_rss_gb": 6.0, "ratio": 4.0},
           ("1000000x50", "jsonl"): {"wall_s": 180.0, "peak_rss_gb": 6.0, "ratio": 4.0},
           ("100000x20", "dict"): {"wall_s": 10.0},
           ("100000x20", "plain"): {"wall_s": 10.0}}
SMALL_REPEATS = 5  # audits per encoding below 10M run rows: the wall target is read on their median
PLAIN_ROW_GROUP = 1 << 20  # pyarrow's (and so pandas') default row group size
STRING_RUN_COLUMNS = ("question_id", "model", "arm", "answer")


# ------------------------------------------------------------------------------------------ the data
def write_plain(src: Path, dst: Path) -> None:
    """``src`` (dictionary Parquet) rewritten as pandas writes it, one row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(src)
    # pyarrow's default row group size; at least 8 row groups at the small sizes, so that they too read
    # a question_id dictionary repeated in several row groups
    group = min(PLAIN_ROW_GROUP, max(1000, -(-pf.metadata.num_rows // 8)))
    writer = None
    tmp = dst.with_suffix(".tmp")
    try:
        for i in range(pf.num_row_groups):
            t = pf.read_row_group(i)
            cols = {}
            for name in t.column_names:
                col = t.column(name)
                if pa.types.is_dictionary(col.type) and name != "question_id":
                    col = col.cast(pa.string())
                cols[name] = col
            t = pa.table(cols)
            if writer is None:
                writer = pq.ParquetWriter(tmp, t.schema, use_dictionary=["question_id"])
            for start in range(0, len(t), group):
                writer.write_table(t.slice(start, group), row_group_size=group)
    finally:
        if writer is not None:
            writer.close()
    tmp.replace(dst)


def jsonl_lines(t):
    """One JSON object per row of ``t`` (string and boolean columns whose strings need no escaping), as
    one string array of lines ending in a newline."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts: list = []
    for j, name in enumerate(t.column_names):
        col = t.column(name)
        if pa.types.is_dictionary(col.type):
            dic = col.chunk(0).dictionary if col.num_chunks else pa.array([], pa.string())
            if pc.any(pc.match_substring_regex(dic.cast(pa.string()), r'["\\\x00-\x1f]')).as_py():
                raise ValueError(f"column {name}: strings that need JSON escaping; this writer does not escape")
            col = col.cast(pa.string())
        elif pa.types.is_boolean(col.type):
            col = col.cast(pa.string())  # true / false
            parts += [("{" if j == 0 else ",") + f'"{name}":', col]
            continue
        elif not pa.types.is_string(col.type):
            raise ValueError(f"column {name}: type {col.type} not written by this JSONL writer")
        parts += [("{" if j == 0 else ",") + f'"{name}":"', col, '"']
    parts.append("}\n")
    return pc.binary_join_element_wise(*parts, "")


def write_jsonl(src: Path, dst: Path) -> None:
    """``src`` (Parquet) as JSONL, 1M rows at a time, each slice's lines written as one data buffer."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(src)
    tmp = dst.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        for i in range(pf.num_row_groups):
            t = pf.read_row_group(i)
            for start in range(0, len(t), 1 << 20):
                lines = jsonl_lines(t.slice(start, 1 << 20))
                for chunk in (lines.chunks if isinstance(lines, pa.ChunkedArray) else [lines]):
                    if len(chunk) == 0:
                        continue
                    off = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                        offset=4 * chunk.offset)
                    fh.write(memoryview(chunk.buffers()[2])[int(off[0]):int(off[-1])])
    tmp.replace(dst)


def ensure_data(size: str, data_root: Path, encodings: list[str]) -> Path:
    from detectors import make_data

    n_q, n_m = (int(x) for x in size.split("x"))
    folder = data_root / size
    q, r = folder / "questions.parquet", folder / RUNS_FILE["dict"]
    if not (q.is_file() and r.is_file()):
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        make_data(folder, n_q, n_m)
        print(f"[{size}] generated {2 * n_q * n_m:,} run rows as dictionary Parquet "
              f"({(q.stat().st_size + r.stat().st_size) / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s", flush=True)
    for enc, write in (("plain", write_plain), ("jsonl", write_jsonl)):
        dst = folder / RUNS_FILE[enc]
        if enc in encodings and not dst.is_file():
            t0 = time.perf_counter()
            write(r, dst)
            print(f"[{size}] wrote the runs as {enc} ({dst.stat().st_size / 1e6:.0f} MB) "
                  f"in {time.perf_counter() - t0:.1f} s", flush=True)
    return folder


# ------------------------------------------------------------------------------------------ floors
_READ_CODE = """
import sys, time, json
import pyarrow.parquet as pq
import pyarrow.json as pj
repeats = int(sys.argv[1])
best = float('inf')
for _ in range(repeats):
    t0 = time.perf_counter()
    tables = []
    for p in sys.argv[2:]:
        if p.endswith('.jsonl'):
            tables.append(pj.read_json(p))
        else:
            names = pq.read_schema(p).names
            strings = [c for c in STRINGS if c in names]
            tables.append(pq.read_table(p, read_dictionary=strings))
    best = min(best, time.perf_counter() - t0)
    del tables
print('FLOOR=' + json.dumps(best))
""".replace("STRINGS", repr(STRING_RUN_COLUMNS + ("question", "category")))


def bare_read(files: list[Path]) -> dict:
    """The best bare pyarrow read of ``files`` (seconds) and that child's peak RSS."""
    repeats = 1 if max(f.stat().st_size for f in files) > 1 << 30 else 3
    m = measure([sys.executable, "-c", _READ_CODE, str(repeats), *map(str, files)])
    if m["rc"] != 0:
        raise RuntimeError(f"bare read failed: {m.get('stderr_tail', '')}")
    floor = float(next(ln for ln in m["stdout_tail"].splitlines() if ln.startswith("FLOOR="))[6:])
    return {"floor_s": floor, "floor_rss_gb": m["peak_rss_gb"], "floor_repeats": repeats}


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
    cost of the command the bare read does not have."""
    import subprocess

    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _IMPORT_CODE], capture_output=True, text=True, check=True,
                       env=child_env(str(ROOT)))
        best = min(best, time.perf_counter() - t0)
    return best


# ------------------------------------------------------------------------------------------ the audit
def default_repeats(size: str) -> int:
    """Audits per (size, encoding): :data:`SMALL_REPEATS` below 10M run rows (seconds each, and on a shared
    machine one wall time of a 10 s command varies by +-20%), else 1."""
    n, m = (int(x) for x in size.split("x"))
    return SMALL_REPEATS if 2 * n * m < 10_000_000 else 1


def run_one(size: str, enc: str, folder: Path, extra: list[str], timeout: float | None, import_s: float,
            repeats: int = 1) -> dict:
    """The audit run ``repeats`` times back to back: the median wall and CPU time (every wall listed), the
    largest peak RSS, the stage timings of the run with the median wall."""
    import statistics

    q, r = folder / "questions.parquet", folder / RUNS_FILE[enc]
    floor = bare_read([q, r])
    runs = []
    for _ in range(max(int(repeats), 1)):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report"
            cmd = [*benchaudit_cmd(), "audit", "--questions", str(q), "--runs", str(r), "--out", str(out), *extra]
            one = measure(cmd, env=child_env(str(ROOT)), timeout=timeout)
            one["manifest"] = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").is_file() \
                else {}
        runs.append(one)
        if one["rc"] != 0:
            break
    ok = [x for x in runs if x["rc"] == 0]
    if len(ok) < len(runs):
        m = runs[-1]
    else:
        walls = [x["wall_s"] for x in ok]
        m = dict(sorted(ok, key=lambda x: x["wall_s"])[(len(ok) - 1) // 2])
        m.update(wall_s=statistics.median(walls), cpu_s=statistics.median(x["cpu_s"] for x in ok),
                 peak_rss_gb=max(x["peak_rss_gb"] for x in ok), walls=walls,
                 load_before=ok[0]["load_before"], load_after=ok[-1]["load_after"])
    manifest = m.pop("manifest", {})
    m.update(floor, size=size, encoding=enc, timings=manifest.get("timings_s", {}),
             memory_plan=manifest.get("memory_plan"), command="benchaudit " + shlex.join(cmd[3:]),
             import_s=import_s, runs_mb=r.stat().st_size / 1e6)
    return m


def report(m: dict) -> bool:
    tag = f"[{m['size']} {m['encoding']}]"
    if m["rc"] != 0:
        print(f"{tag} benchaudit audit FAILED (exit {m['rc']}); stderr tail:\n{m.get('stderr_tail', '')}")
        return False
    ratio = m["wall_s"] / m["floor_s"]
    walls = m.get("walls") or [m["wall_s"]]
    times = (f"wall {m['wall_s']:.1f} s (median of {len(walls)}: {', '.join(f'{w:.1f}' for w in walls)}), CPU "
             f"{m['cpu_s']:.1f} s (median)" if len(walls) > 1 else f"wall {m['wall_s']:.1f} s, CPU {m['cpu_s']:.1f} s")
    print(f"{tag} benchaudit audit{' ' + ' '.join(m['extra']) if m['extra'] else ' (defaults)'} on "
          f"{m['runs_mb']:.0f} MB of runs: {times}, "
          f"peak RSS {m['peak_rss_gb']:.2f} GB; best bare read {m['floor_s']:.2f} s "
          f"(best of {m['floor_repeats']}, {m['floor_rss_gb']:.2f} GB) -> wall/read {ratio:.1f}x; "
          f"load avg before {m['load_before'][0]:.1f}, after {m['load_after'][0]:.1f} (1 min); "
          f"CPU {m['cpu_s'] / m['reference_s']:.1f}x the machine reference", flush=True)
    plan = m.get("memory_plan") or {}
    if plan.get("estimate_bytes"):
        est = plan["estimate_bytes"] / 1e9
        print(f"{tag} memory plan: estimate {est:.2f} GB (limit {plan.get('limit_bytes', 0) / 1e9:.1f} GB), "
              f"measured peak {m['peak_rss_gb'] * 1.073741824:.2f} GB -> "
              f"{'bounded' if est >= m['peak_rss_gb'] * 1.073741824 else 'EXCEEDED'}; "
              f"choices: {json.dumps(plan.get('choices', {}))}", flush=True)
    if m["timings"]:
        print(f"{tag} stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in m["timings"].items()), flush=True)
        det = {k[: -len(" (parallel)")]: v for k, v in m["timings"].items() if k.endswith(" (parallel)")
               and "worker" not in k}
        det = det or {k: v for k, v in m["timings"].items() if k not in ("read", "validate", "calibration",
                                                                         "report", "figures", "card")}
        if det:
            name, longest = max(det.items(), key=lambda kv: kv[1])
            imp = m["import_s"]
            print(f"{tag} lower bounds of the wall/read ratio: interpreter start and imports {imp:.2f} s "
                  f"({imp / m['floor_s']:.1f}x the read); the longest detector, {name}, {longest:.2f} s "
                  f"({longest / m['floor_s']:.1f}x); both ({(imp + longest) / m['floor_s']:.1f}x)", flush=True)
    ok = True
    lim = TARGETS.get((m["size"], m["encoding"]), {})
    for name, val, key, unit in (("wall", m["wall_s"], "wall_s", "s"), ("peak RSS", m["peak_rss_gb"], "peak_rss_gb", "GB"),
                                 ("wall/read", ratio, "ratio", "x")):
        if key not in lim:
            continue
        passed = val < lim[key] if key != "ratio" else val <= lim[key]
        ok &= passed
        print(f"{tag} target {name} {'<' if key != 'ratio' else '<='} {lim[key]:g} {unit}: {val:.2f} {unit} "
              f"{'PASS' if passed else 'FAIL'}", flush=True)
    return ok


KIND = {"dict": "parquet", "plain": "parquet", "jsonl": "text"}


def fit_memory(results: list[dict]) -> None:
    """The memory plan's coefficients (audit_hub.engine.memory.COEFFICIENTS) refitted on these runs: the
    audit's process, peak - 2 x the heaviest detector = base + per_row[file kind] x run rows + per_question x
    questions; the worker, base + per_cell x run rows (non-negative least squares), and the largest
    measured / fitted ratio (the plan's margin must cover it). Prints the table and the fit."""
    import numpy as np
    from scipy.optimize import nnls

    from audit_hub.engine.memory import COEFFICIENTS, InputSize, estimate, heaviest_detector_bytes_per_cell

    rows = []
    for m in results:
        plan = m.get("memory_plan") or {}
        peaks = plan.get("measured_peak_bytes") or {}
        if m["rc"] != 0 or not peaks.get("main"):
            continue
        rows.append((KIND[m["encoding"]], int(plan["run_rows"]), int(plan["questions_rows"]), peaks["main"],
                     peaks.get("worker") or 0, plan["estimate_bytes"], m["size"], m["encoding"], plan["stages_bytes"]))
    if not rows:
        print("fit: no run recorded its measured peaks")
        return
    print("fit: size encoding run_rows | measured main, worker (MB) | plan: main_parallel, worker, estimate (MB)")
    for _k, n, _q, main, worker, est, size, enc, st in rows:
        print(f"fit: {size} {enc} {n:,} | {main / 2**20:.0f}, {worker / 2**20:.0f} | "
              f"{st['main_parallel'] / 2**20:.0f}, {st['worker'] / 2**20:.0f}, {est / 2**20:.0f}")
    bound_lines(rows)
    if len({(r[1], r[2]) for r in rows}) < 3:
        print("fit: coefficients need runs at 3 sizes or more (--sizes A B C --fit-memory)", flush=True)
        return
    kinds = sorted({r[0] for r in rows})
    det = heaviest_detector_bytes_per_cell()
    X = np.array([[1.0] + [float(r[1]) if r[0] == k else 0.0 for k in kinds] + [float(r[2])] for r in rows])
    y = np.array([r[3] - 2 * det * r[1] for r in rows], dtype=float)
    coef = nnls(X, y)[0]
    w = [r for r in rows if r[4]]
    cw = nnls(np.array([[1.0, float(r[1])] for r in w]), np.array([float(r[4]) for r in w]))[0] if len(w) >= 2 \
        else [COEFFICIENTS["base_worker"], COEFFICIENTS["worker_per_cell"]]
    fitted = dict(COEFFICIENTS, base_main=float(coef[0]), per_question=float(coef[-1]), base_worker=float(cw[0]),
                  worker_per_cell=float(cw[1]), margin=1.0)
    for k, c in zip(kinds, coef[1:-1]):
        fitted[f"{k}_per_row"] = float(c)
    worst = 0.0
    for kind, n, q, main, worker, *_ in rows:
        _, _, _, par, wk = estimate([InputSize("x", kind, 0, n, True)], q, detector_bytes_per_cell=det,
                                    coefficients=fitted)
        worst = max(worst, main / par, (worker / wk) if worker else 0.0)
    print("fit: base_main {:.0f} MB, ".format(fitted["base_main"] / 2**20)
          + ", ".join(f"{k}_per_row {fitted[f'{k}_per_row']:.0f} B" for k in kinds)
          + f", per_question {fitted['per_question']:.0f} B, base_worker {fitted['base_worker'] / 2**20:.0f} MB, "
          f"worker_per_cell {fitted['worker_per_cell']:.1f} B; largest measured/fitted {worst:.2f} "
          f"(the plan's margin is {COEFFICIENTS['margin']:.2f})", flush=True)


def bound_lines(rows: list[tuple]) -> None:
    """Per run: the plan's estimates against the peaks measured when the manifest was written."""
    for *_x, main, worker, est, size, enc, st in rows:
        ok = st["main_parallel"] >= main and st["worker"] >= worker and est >= main + worker
        print(f"fit: {size} {enc}: the plan bounds each process (main {st['main_parallel'] / 2**20:.0f} >= "
              f"{main / 2**20:.0f} MB, worker {st['worker'] / 2**20:.0f} >= {worker / 2**20:.0f} MB) and the sum "
              f"({est / 2**20:.0f} >= {(main + worker) / 2**20:.0f} MB): {'yes' if ok else 'NO'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["100000x20", "1000000x50"])
    ap.add_argument("--encodings", default=",".join(ENCODINGS),
                    help="comma-separated, of: dict (dictionary Parquet), plain (as pandas writes it), jsonl")
    ap.add_argument("--smoke", action="store_true", help="one tiny size (2000x3), every encoding: checks the script runs")
    ap.add_argument("--data-dir", help="keep generated data here and reuse it (default: a temporary folder)")
    ap.add_argument("--extra", default="", help="extra options for benchaudit audit, e.g. '--calibration-sims 0'")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"audits per size and encoding (default: {SMALL_REPEATS} below 10M run rows, else 1); "
                         "the median wall is reported and judged, the largest peak RSS")
    ap.add_argument("--fit-memory", action="store_true",
                    help="refit the memory plan's coefficients on the runs measured (prints the fit)")
    args = ap.parse_args()
    encodings = [e.strip() for e in args.encodings.split(",") if e.strip()]
    bad = [e for e in encodings if e not in ENCODINGS]
    if bad or not encodings:
        ap.error(f"--encodings: unknown {bad}; choose from {','.join(ENCODINGS)}")
    sizes = ["2000x3"] if args.smoke else args.sizes
    extra = shlex.split(args.extra)
    if args.smoke and not args.extra:
        extra = ["--calibration-sims", "2"]  # the smoke run checks the script, not the calibration's cost
    import os

    ref = machine_reference()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min); "
          f"{os.cpu_count()} CPUs; machine reference {ref:.3f} s (a fixed single-threaded workload, best of 3: "
          "compare figures across machines by it)", flush=True)
    import_s = import_floor()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.data_dir) if args.data_dir else Path(tmp)
        results, measured = [], []
        for size in sizes:
            folder = ensure_data(size, root, encodings)
            for enc in encodings:
                reps = args.repeats if args.repeats is not None else (2 if args.smoke else default_repeats(size))
                m = run_one(size, enc, folder, extra, args.timeout, import_s, reps)
                m["extra"], m["reference_s"] = extra, ref
                measured.append(m)
                results.append(report(m))
    if args.fit_memory or args.smoke:
        fit_memory(measured)
    if args.smoke and not all(results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
