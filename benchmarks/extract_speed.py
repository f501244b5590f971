"""Speed of the exact-match answer parser (audit_hub.answers.fill_answers_and_exact).

Two workloads, as in the ingest benchmark:

* ``letters``: 50,000,000 run rows (100,000 five-option questions x 500 models) whose predictions
  are bare letters ("B", "(C)", "d", "E." ...) -- the vectorised fast path. Target < 10 s.
* ``free``: 100,000 distinct free-text predictions (chain-of-thought endings, option texts, yes/no
  sentences, numeric statements, refusals) over mixed mc / yesno / numeric questions -- the
  per-text parser. Target < 3 s.

Usage: ``python benchmarks/extract_speed.py [--rows 50000000] [--free 100000] [--seed 0]``.
Prints rows/s for each workload (set-up time is not counted).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import pyarrow as pa

from audit_hub.answers import fill_answers_and_exact
from audit_hub.frame.core import AuditFrame

_STR = pd.ArrowDtype(pa.string())


def _questions(n: int, rng: np.random.Generator, mixed: bool) -> pd.DataFrame:
    """A validated questions table with ``n`` questions (via AuditFrame, so the columns match)."""
    letters = np.array(list("ABCDE"))
    if not mixed:
        df = pd.DataFrame({"question_id": [f"q{i}" for i in range(n)],
                           "question": "Which one?",
                           "options": [["A", "B", "C", "D", "E"]] * n,
                           "answer": letters[rng.integers(0, 5, n)],
                           "answer_type": "mc"})
        return AuditFrame.from_tables(df).questions
    kind = rng.integers(0, 3, n)  # 0 mc, 1 yesno, 2 numeric
    options, answers, types = [], [], []
    for i in range(n):
        if kind[i] == 0:
            base = int(rng.integers(10, 90))
            options.append([f"${base + 5 * j} \\mathrm{{~cm}}$" for j in range(5)])
            answers.append(str(letters[rng.integers(0, 5)]))
            types.append("mc")
        elif kind[i] == 1:
            options.append([])
            answers.append("yes" if rng.random() < 0.5 else "no")
            types.append("yesno")
        else:
            options.append([])
            answers.append(str(int(rng.integers(0, 1000))))
            types.append("numeric")
    df = pd.DataFrame({"question_id": [f"q{i}" for i in range(n)], "question": "?", "options": options,
                       "answer": answers, "answer_type": types})
    return AuditFrame.from_tables(df).questions


def bench_letters(n_rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_q = 100_000 if n_rows >= 1_000_000 else max(n_rows // 10, 1)
    n_m = -(-n_rows // n_q)
    q = _questions(n_q, rng, mixed=False)
    forms = pa.array(["A", "B", "C", "D", "E", "(B)", "d", "E.", "**C**", "F"], pa.string())
    idx = pa.array(rng.integers(0, len(forms), n_rows).astype(np.int8))
    pred = pa.DictionaryArray.from_arrays(idx, forms).cast(pa.string())
    qcode = np.tile(np.arange(n_q, dtype=np.int32), n_m)[:n_rows]
    mcode = np.repeat(np.arange(n_m, dtype=np.int16), n_q)[:n_rows]
    runs = pd.DataFrame({"q": qcode, "m": mcode, "arm": np.zeros(n_rows, np.int8),
                         "prediction": pd.arrays.ArrowExtensionArray(pred),
                         "answer": pd.arrays.ArrowExtensionArray(pa.nulls(n_rows, pa.string()))})
    t0, c0 = time.perf_counter(), time.process_time()
    ans, hit, _ = fill_answers_and_exact(q, runs)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"letters: {n_rows:,} rows in {dt:.2f} s = {n_rows / dt:,.0f} rows/s "
          f"(CPU {cpu:.2f} s; unparseable {float(pd.isna(ans).mean()):.3f}, exact accuracy {float((hit == 1).mean()):.3f})")


_MC_TEMPLATES = [
    "Looking at the figure, the side is {x} cm, so the perimeter is {y} cm. Therefore, the answer is ({L}).",
    "The answer is {L}.",
    "Let's compute step by step. First, {x} + {y} = {z}. Then we divide by 2 to get {h}. "
    "Comparing with the choices, the correct option is {L}.",
    "$\\boxed{{{L}}}$",
    "{x} cm",
    "I think it is ({L}) because the triangle has {x} sides.",
    "The image does not show enough information to determine the length, sorry ({x}).",
    "We have $\\frac{{{x}}}{{{y}}}$ of the square shaded. Hence {L}.",
    "The area is {x} cm$^2$, which matches option {L}.",
]
_YN_TEMPLATES = [
    "Yes, there are {x} birds in the picture.",
    "No. The {x} cars are parked on the left.",
    "The answer is no: only {x} people are visible.",
    "I cannot tell from the image ({x}).",
]
_NUM_TEMPLATES = [
    "Counting the squares gives {x} + {y} = {z}. So the answer is {z}.",
    "The total is $\\boxed{{{z}}}$ apples.",
    "The length is {x},{y:03d} metres.",
    "There are {x} ways in total, but only {y} are valid.",
]


def bench_free(n_rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    n_q = max(n_rows // 10, 1)
    q = _questions(n_q, rng, mixed=True)
    types = q["answer_type"].to_numpy(dtype=object)
    qcode = rng.integers(0, n_q, n_rows).astype(np.int32)
    preds = []
    for i in range(n_rows):
        t = types[qcode[i]]
        tpl = (_MC_TEMPLATES if t == "mc" else _YN_TEMPLATES if t == "yesno" else _NUM_TEMPLATES)
        s = tpl[int(rng.integers(0, len(tpl)))]
        x, y = int(rng.integers(1, 999)), int(rng.integers(1, 999))
        preds.append(s.format(x=x, y=y, z=x + y, h=(x + y) / 2, L="ABCDE"[int(rng.integers(0, 5))]) + f" #{i}")
    runs = pd.DataFrame({"q": qcode, "m": np.zeros(n_rows, np.int16), "arm": np.zeros(n_rows, np.int8),
                         "prediction": pd.array(preds, dtype=_STR),
                         "answer": pd.array([None] * n_rows, dtype=_STR)})
    t0, c0 = time.perf_counter(), time.process_time()
    ans, hit, _ = fill_answers_and_exact(q, runs)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"free text: {n_rows:,} rows in {dt:.2f} s = {n_rows / dt:,.0f} rows/s "
          f"(CPU {cpu:.2f} s; unparseable {float(pd.isna(ans).mean()):.3f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000_000, help="bare-letter rows")
    ap.add_argument("--free", type=int, default=100_000, help="free-text rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="20,000 letter rows and 500 free-text rows (CI)")
    a = ap.parse_args()
    if a.smoke:
        a.rows, a.free = 20_000, 500
    print(f"seed {a.seed}")
    if a.free:
        bench_free(a.free, a.seed)
    if a.rows:
        bench_letters(a.rows, a.seed)


if __name__ == "__main__":
    main()
