"""How often the audit's default calibration decides each detector's verdict, against a long reference run.

    python benchmarks/calibration_power.py                     # 3 real pools, 10 seeds at 50, reference 400
    python benchmarks/calibration_power.py --pools mathv --seeds 20 --reference-sims 800
    python benchmarks/calibration_power.py --smoke             # MathVista, 2 seeds at 20, reference 40 (CI)

Each run is the product: ``benchaudit audit --calibration-sims N --seed S --no-figures`` in a subprocess, read
back from its ``summary.json``. The reference is one audit with ``--reference-sims`` simulations (seed 1000);
the default runs use ``--calibration-sims`` (50, the audit's default) with seeds 0, 1, ... Printed per pool and
detector with a nominal rate: the reference's pooled rate, its worst regime and its status word; then, over the
default runs, how often the card says each status word ("out of calibration", "within calibration",
"conservative", "not decided") and how often it says the reference's word where the reference decides (out,
within or conservative). The words are the card's own (``report.card.calibration_word``).

Pools: the bundled MATH-V runs (``mathv``), BLINK and MathVista under ``tests/fixtures/real_pools`` (their
NOTICE.md gives source and licence).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import pool_files  # noqa: E402

POOLS = ("mathv", "blink", "mathvista")
WORDS = ("out of calibration", "within calibration", "conservative", "not decided")


def pool_args(name: str) -> list[str]:
    if name == "mathv":
        return []  # no inputs: the bundled example
    q, r = pool_files(name)
    return ["--questions", str(q), "--runs", str(r)]


def audit_calibration(name: str, n_sims: int, seed: int, work: Path) -> tuple[dict, float]:
    """The calibration entries of one ``benchaudit audit`` (a subprocess) and its wall time."""
    out = work / f"{name}-{n_sims}-{seed}"
    cmd = [sys.executable, "-m", "audit_hub.cli", "audit", *pool_args(name), "--out", str(out),
           "--calibration-sims", str(n_sims), "--seed", str(seed), "--no-figures"]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text())["calibration"], wall


def word(entry: dict) -> str:
    from audit_hub.report.card import calibration_word

    return calibration_word(entry)


def _decided_elsewhere(runs: list, det: str, ref_word: str) -> list[tuple[int, str, str]]:
    """(seed, word, why) of the default-size audits that decide a verdict other than the reference's; ``why`` names
    the regime (its rejections of its simulations) when a regime made the verdict."""
    out = []
    for s, (cal, _) in enumerate(runs):
        e = cal.get(det)
        if not e:
            continue
        w = word(e)
        if w == ref_word or w == "not decided":
            continue
        why = ""
        worst = e.get("worst_regime")
        r = (e.get("regimes") or {}).get(worst) or {}
        if w == "out of calibration" and r.get("out_of_calibration"):
            why = f" ({worst}: {r['fpr'] * r['n_runs']:.0f} of {r['n_runs']})"
        elif w == "out of calibration":
            why = f" (pooled {100 * e['fpr']:.1f}%)"
        out.append((s, w, why))
    return out


def pool_lines(name: str, seeds: int, n_sims: int, ref_sims: int, work: Path) -> list[str]:
    ref, ref_wall = audit_calibration(name, ref_sims, 1000, work)
    runs = [audit_calibration(name, n_sims, s, work) for s in range(seeds)]
    walls = [w for _, w in runs]
    lines = [f"{name}: reference {ref_sims} simulations (seed 1000, {ref_wall:.1f} s); {seeds} audits at "
             f"{n_sims} (seeds 0-{seeds - 1}, median {sorted(walls)[len(walls) // 2]:.1f} s each)"]
    for det, e in ref.items():
        if not isinstance(e, dict) or e.get("nominal") is None or e.get("kind") not in ("p_value", "count"):
            continue
        rw = word(e)
        worst = e.get("worst_regime")
        wr = (e.get("regimes") or {}).get(worst) or {}
        words = Counter(word(cal[det]) for cal, _ in runs if det in cal)
        decided_ref = rw in ("out of calibration", "within calibration", "conservative")
        agree = sum(1 for cal, _ in runs if det in cal and word(cal[det]) == rw) if decided_ref else None
        lines.append(
            f"  {name} {det}: reference {100 * e['fpr']:.2f}% [{100 * e['fpr_ci'][0]:.2f}, {100 * e['fpr_ci'][1]:.2f}]% "
            f"vs nominal {100 * e['nominal']:.2f}%, worst regime {worst} {100 * (wr.get('fpr') or 0):.1f}% "
            f"({wr.get('n_runs')} simulations): {rw}; at {n_sims}: "
            + ", ".join(f"{w} {words.get(w, 0)}" for w in WORDS)
            + (f"; agrees with the reference in {agree} of {seeds}" if agree is not None
               else "; the reference does not decide it either")
            + "".join(f"; seed {s} {w}{why}" for s, w, why in _decided_elsewhere(runs, det, rw)))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--seeds", type=int, default=10, help="audits at the default size")
    ap.add_argument("--calibration-sims", type=int, default=50)
    ap.add_argument("--reference-sims", type=int, default=400)
    ap.add_argument("--smoke", action="store_true", help="MathVista, 2 seeds at 20, reference 40 (CI)")
    a = ap.parse_args(argv)
    pools = ["mathvista"] if a.smoke else [p for p in a.pools.split(",") if p]
    seeds, n, ref = (2, 20, 40) if a.smoke else (a.seeds, a.calibration_sims, a.reference_sims)
    unknown = [p for p in pools if p not in POOLS]
    if unknown:
        raise SystemExit(f"unknown pool(s) {unknown}; known: {', '.join(POOLS)}")
    with tempfile.TemporaryDirectory() as tmp:
        for p in pools:
            for line in pool_lines(p, seeds, n, ref, Path(tmp)):
                print(line, flush=True)


if __name__ == "__main__":
    main()
