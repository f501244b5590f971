"""Ingest benchmark: load + validate a synthetic run set, rows per second and peak memory.

Builds (once, under --dir) a synthetic benchmark of N questions x M models:

* ``parquet/questions.parquet`` + ``parquet/runs.parquet`` (the public long format, as written by
  ``AuditFrame.save``, with ``hit`` and ``hit_exact`` so no re-extraction is needed);
* ``sheets/{model}_SYNTH_BENCH.tsv``: VLMEvalKit-style prediction sheets (index, question, A..D,
  answer, category, l2-category, prediction) plus ``SYNTH_BENCH.tsv`` as the dataset file;
* ``xlsx/``: the same sheets as .xlsx for a smaller subset (openpyxl is slow).

Each measurement runs in a fresh child process and reports wall time, rows/s, CPU time (rows per
CPU-second is the figure to compare on a shared, loaded machine) and the child's peak RSS
(``ru_maxrss``). Usage::

    .venv/bin/python benchmarks/ingest.py                       # 100,000 x 50 (5M rows)
    .venv/bin/python benchmarks/ingest.py --questions 10000 --models 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

DATASET = "SYNTH_BENCH"
PREDS = np.array(["A", "B", "C", "D", "The answer is B.", "(C)", "I cannot see the image.", "D. a dog"], dtype=object)


def _questions_table(nq: int, rng: np.random.Generator) -> pa.Table:
    ids = np.array([f"q{i:07d}" for i in range(nq)], dtype=object)
    opts = [["red", "green", "blue", "a dog"]] * nq
    gold = np.array(list("ABCD"), dtype=object)[rng.integers(0, 4, nq)]
    cats = np.array(["perception", "reasoning", "ocr", "math"], dtype=object)[rng.integers(0, 4, nq)]
    return pa.table({
        "question_id": ids, "question": np.array([f"What is shown in picture {i}?" for i in range(nq)], dtype=object),
        "options": opts, "answer": gold, "answer_type": np.full(nq, "mc", dtype=object), "category": cats,
        "l2_category": np.full(nq, "l2", dtype=object), "group_id": pa.nulls(nq, pa.string()),
        "hint": pa.nulls(nq, pa.string())})


def build(directory: str, nq: int, nm: int, xlsx_q: int, xlsx_m: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    pdir = os.path.join(directory, "parquet")
    sdir = os.path.join(directory, "sheets")
    xdir = os.path.join(directory, "xlsx")
    for d in (pdir, sdir, xdir):
        os.makedirs(d, exist_ok=True)
    qt = _questions_table(nq, rng)
    pq.write_table(qt, os.path.join(pdir, "questions.parquet"))
    models = [f"model_{j:02d}" for j in range(nm)]
    n = nq * nm
    qidx = np.tile(np.arange(nq, dtype=np.int32), nm)
    midx = np.repeat(np.arange(nm, dtype=np.int32), nq)
    pcode = rng.integers(0, len(PREDS), n).astype(np.int32)
    hit = rng.random(n) < 0.6
    hit_mask = rng.random(n) < 0.01  # 1% unknown
    runs = pa.table({
        "question_id": pa.DictionaryArray.from_arrays(qidx, qt.column("question_id").combine_chunks()),
        "model": pa.DictionaryArray.from_arrays(midx, pa.array(models)),
        "arm": pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), pa.array(["full"])),
        "prediction": pa.DictionaryArray.from_arrays(pcode, pa.array(PREDS.tolist())).cast(pa.string()),
        "answer": pa.DictionaryArray.from_arrays(pcode, pa.array(["A", "B", "C", "D", "B", "C", None, "D"]))
        .cast(pa.string()),
        "hit": pa.array(hit, mask=hit_mask),
        "hit_exact": pa.array(hit),
    })
    pq.write_table(runs, os.path.join(pdir, "runs.parquet"))
    # VLMEvalKit-style sheets
    import pandas as pd
    qdf = qt.to_pandas()
    base = pd.DataFrame({"index": np.arange(nq), "question": qdf["question"],
                         "A": "red", "B": "green", "C": "blue", "D": "a dog", "answer": qdf["answer"],
                         "category": qdf["category"], "l2-category": "l2", "split": "dev"})
    base.to_csv(os.path.join(sdir, f"{DATASET}.tsv"), sep="\t", index=False)
    for j, m in enumerate(models):
        sheet = base.assign(prediction=PREDS[pcode[j * nq:(j + 1) * nq]])
        sheet.to_csv(os.path.join(sdir, f"{m}_{DATASET}.tsv"), sep="\t", index=False)
        if j < xlsx_m:
            sub = sheet.iloc[:xlsx_q]
            if j == 0:
                sub.drop(columns=["prediction"]).to_csv(os.path.join(xdir, f"{DATASET}.tsv"), sep="\t", index=False)
            sub.to_excel(os.path.join(xdir, f"{m}_{DATASET}.xlsx"), index=False)


def measure(kind: str, directory: str) -> dict:
    """Runs in the child: load + validate, return timings and peak RSS."""
    from audit_hub.frame.core import AuditFrame
    from audit_hub.readers import ingest

    t0 = time.perf_counter()
    c0 = time.process_time()
    if kind == "parquet":
        q = ingest.load_questions(os.path.join(directory, "parquet", "questions.parquet"))
        t1 = time.perf_counter()
        r = ingest.load_runs([os.path.join(directory, "parquet", "runs.parquet")], hash_files=False)
        t2 = time.perf_counter()
        frame = AuditFrame.from_tables(q, r)
        exact = "not needed (runs carry hit_exact)"
    else:
        sub = "sheets" if kind == "tsv" else "xlsx"
        d = os.path.join(directory, sub)
        q = ingest.load_questions(os.path.join(d, f"{DATASET}.tsv"))
        t1 = time.perf_counter()
        files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("model_"))
        r = ingest.load_runs(files, dataset_hint=DATASET, hash_files=False)
        t2 = time.perf_counter()
        try:
            import audit_hub.answers  # noqa: F401
            exact = True
        except ImportError:
            exact = False
        frame = AuditFrame.from_tables(q, r, compute_exact=exact)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    rows = len(frame.runs)
    return {"kind": kind, "rows": rows, "questions": frame.n_questions, "models": frame.n_models,
            "load_questions_s": round(t1 - t0, 3), "load_runs_s": round(t2 - t1, 3),
            "validate_s": round(t3 - t2, 3), "total_s": round(t3 - t0, 3),
            "rows_per_s": round(rows / (t3 - t0)), "cpu_s": round(cpu, 3),
            "rows_per_cpu_s": round(rows / max(cpu, 1e-9)), "peak_rss_mb": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "exact_extraction": exact}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/benchaudit_ingest_bench")
    ap.add_argument("--questions", type=int, default=100_000)
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--xlsx-questions", type=int, default=10_000)
    ap.add_argument("--xlsx-models", type=int, default=5)
    ap.add_argument("--only", choices=["parquet", "tsv", "xlsx"], action="append")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="2,000 x 3 (xlsx 200 x 2) in a temporary folder (CI)")
    args = ap.parse_args()
    if args.smoke and not args.measure:
        import tempfile

        args.questions, args.models, args.xlsx_questions, args.xlsx_models = 2000, 3, 200, 2
        args.dir = tempfile.mkdtemp(prefix="benchaudit_ingest_smoke_")
    if args.measure:
        print(json.dumps(measure(args.measure, args.dir)))
        return
    stamp = os.path.join(args.dir, f"built_{args.questions}x{args.models}_{args.xlsx_questions}x{args.xlsx_models}")
    if not os.path.exists(stamp):
        t = time.perf_counter()
        build(args.dir, args.questions, args.models, args.xlsx_questions, args.xlsx_models)
        open(stamp, "w").close()
        print(f"built synthetic run set in {time.perf_counter() - t:.1f}s under {args.dir}", flush=True)
    failed = False
    for kind in args.only or ["parquet", "tsv", "xlsx"]:
        out = subprocess.run([sys.executable, __file__, "--measure", kind, "--dir", args.dir],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{kind}: FAILED\n{out.stderr[-3000:]}")
            failed = True
            continue
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{kind:8s} {res['rows']:>9,d} run rows ({res['questions']:,d} q x {res['models']} models): "
              f"{res['rows_per_s']:>10,d} rows/s wall ({res['rows_per_cpu_s']:,d} rows per CPU-second)  total {res['total_s']:.2f}s (questions {res['load_questions_s']:.2f}s,"
              f" runs {res['load_runs_s']:.2f}s, validate {res['validate_s']:.2f}s)  peak RSS {res['peak_rss_mb']:,d} MB"
              f"  exact extraction: {res['exact_extraction']}",
              flush=True)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
