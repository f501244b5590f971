"""A VLMEvalKit results folder of xlsx sheets: the whole audit against openpyxl's read-only reading.

Generates (once per --data-dir) a folder of ``--models`` prediction sheets ``{model}_{DATASET}.xlsx``
with ``--rows`` rows each, in the column layout of VLMEvalKit's MCQ prediction sheets (``index``,
``question``, ``hint``, ``A``-``D``, ``answer``, ``category``, ``l2-category``, ``split``,
``prediction``), written by ``pandas.DataFrame.to_excel`` (openpyxl). Then it measures, each in a
child process:

* openpyxl read-only mode reading every sheet's cell values (``load_workbook(read_only=True)``,
  ``iter_rows(values_only=True)``): the reference the issue names;
* python-calamine reading the same cells (for scale: the Rust reader's floor);
* ``benchaudit audit --runs FOLDER --dataset DATASET --out DIR`` with its defaults, as a subprocess
  (wall, CPU, peak RSS via ``getrusage(RUSAGE_CHILDREN)``).

It prints the audit / openpyxl wall-time ratio (the target: under 0.6) and, for information, the CPU-time
ratio (the audit reads, audits and simulates on two processes, so its CPU time exceeds its wall time);
the machine's load is printed too.

    python benchmarks/xlsx_read.py                      # 50 sheets x 1,500 rows
    python benchmarks/xlsx_read.py --extra "--calibration-sims 0"
    python benchmarks/xlsx_read.py --smoke              # 3 sheets x 100 rows (CI)
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _measure import benchaudit_cmd, child_env, measure  # noqa: E402

DATASET = "SYNTH_MCQ"
TARGET_RATIO = 0.6

_READ_CODE = """
import sys, time, json, os
engine, folder = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith('.xlsx'))
t0, c0 = time.perf_counter(), time.process_time()
cells = 0
if engine == 'openpyxl':
    import openpyxl
    for f in files:
        wb = openpyxl.load_workbook(f, read_only=True)
        for row in wb.worksheets[0].iter_rows(values_only=True):
            cells += len(row)
        wb.close()
else:
    from python_calamine import CalamineWorkbook
    for f in files:
        rows = CalamineWorkbook.from_path(f).get_sheet_by_index(0).to_python()
        cells += sum(len(r) for r in rows)
print('READ=' + json.dumps({'wall_s': time.perf_counter() - t0, 'cpu_s': time.process_time() - c0,
                            'cells': cells, 'files': len(files)}))
"""


def make_folder(folder: Path, n_models: int, n_rows: int, seed: int = 0) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    gold = np.array(list("ABCD"))[rng.integers(0, 4, n_rows)]
    cats = np.array(["coarse perception", "fine-grained perception", "instance reasoning", "logical reasoning",
                     "math", "science & technology"])[rng.integers(0, 6, n_rows)]
    base = pd.DataFrame({
        "index": np.arange(n_rows),
        "question": [f"Which option best describes object {i} in the image?" for i in range(n_rows)],
        "hint": np.where(rng.random(n_rows) < 0.3, "Look at the left side of the picture.", None),
        "A": [f"a red cube {i % 17}" for i in range(n_rows)], "B": [f"a blue ball {i % 13}" for i in range(n_rows)],
        "C": [f"a green cone {i % 11}" for i in range(n_rows)], "D": [f"nothing {i % 7}" for i in range(n_rows)],
        "answer": gold, "category": cats, "l2-category": np.where(rng.random(n_rows) < 0.5, "perception", "reasoning"),
        "split": "dev",
    })
    skill = rng.uniform(0.3, 0.9, n_models)
    for m in range(n_models):
        hit = rng.random(n_rows) < skill[m]
        wrong = np.array(list("ABCD"))[rng.integers(0, 4, n_rows)]
        letter = np.where(hit, gold, wrong)
        style = rng.integers(0, 3, n_rows)
        pred = np.where(style == 0, letter, np.where(style == 1, np.char.add("The answer is ", letter),
                                                    np.char.add(np.char.add("(", letter), ")")))
        base.assign(prediction=pred).to_excel(folder / f"model-{m:02d}_{DATASET}.xlsx", index=False)


def read_floor(engine: str, folder: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", _READ_CODE, engine, str(folder)], capture_output=True, text=True,
                       check=True)
    return json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("READ="))[5:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--smoke", action="store_true", help="3 sheets x 100 rows, 2 calibration sims (CI)")
    ap.add_argument("--data-dir", help="keep the generated folder here and reuse it (default: temporary)")
    ap.add_argument("--extra", default="", help="extra options for benchaudit audit")
    args = ap.parse_args()
    extra = shlex.split(args.extra)
    if args.smoke:
        args.models, args.rows = 3, 100
        extra = extra or ["--calibration-sims", "2"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.data_dir or tmp) / f"vlmevalkit_{args.models}x{args.rows}"
        if not folder.is_dir() or len(list(folder.glob("*.xlsx"))) != args.models:
            t0 = time.perf_counter()
            make_folder(folder, args.models, args.rows)
            print(f"generated {args.models} sheets x {args.rows} rows in {time.perf_counter() - t0:.1f} s", flush=True)
        opx = read_floor("openpyxl", folder)
        cal = read_floor("calamine", folder)
        out = Path(tmp) / "report"
        cmd = [*benchaudit_cmd(), "audit", "--runs", str(folder), "--dataset", DATASET, "--out", str(out), *extra]
        m = measure(cmd, env=child_env(str(ROOT)))
        label = f"{args.models} sheets x {args.rows} rows"
        print(f"[{label}] openpyxl read-only: {opx['wall_s']:.2f} s wall, {opx['cpu_s']:.2f} s CPU "
              f"({opx['cells']:,} cells); python-calamine: {cal['wall_s']:.2f} s wall, {cal['cpu_s']:.2f} s CPU")
        if m["rc"] != 0:
            print(f"[{label}] benchaudit audit FAILED (exit {m['rc']}):\n{m['stderr_tail']}")
            raise SystemExit(1)
        timings = json.loads((out / "manifest.json").read_text())["timings_s"]
        ratio, cpu_ratio = m["wall_s"] / opx["wall_s"], m["cpu_s"] / opx["cpu_s"]
        print(f"[{label}] benchaudit audit{' ' + ' '.join(extra) if extra else ' (defaults)'}: wall {m['wall_s']:.2f} s, "
              f"CPU {m['cpu_s']:.2f} s, peak RSS {m['peak_rss_gb']:.2f} GB; load avg {m['load_before'][0]:.1f} -> "
              f"{m['load_after'][0]:.1f} (1 min)")
        print(f"[{label}] stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
        print(f"[{label}] audit / openpyxl read-only: wall {ratio:.2f}x (target < {TARGET_RATIO}): "
              f"{'PASS' if ratio < TARGET_RATIO else 'FAIL'}; CPU {cpu_ratio:.2f}x (for information: the audit "
              "runs on two processes, openpyxl on one)")


if __name__ == "__main__":
    main()
