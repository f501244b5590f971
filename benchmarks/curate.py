"""`benchaudit curate` on a simulated MMGist-shaped pool: the issue's target table and the time taken.

Writes a seeded simulated pool (``audit_hub.curate.simulate.simulate_pool``: 2PL items with planted
blind-solvable, saturated, mislabelled and broken-option fractions; every model run with and without the
image; model release dates) as Parquet files, then runs the command a user types, with its defaults plus
``--target-size``, as a child process, and reads its ``summary.json``. Time and peak RSS are the child's.

    python benchmarks/curate.py              # 25,000 items x 30 models (target: < 60 s on 2 cores)
    python benchmarks/curate.py --smoke      # 1,500 items x 12 models (the test runs this)
    python benchmarks/curate.py --items 5000 --models 20 --target-size 1500
    python benchmarks/curate.py --pool /path/to/pool --target-size 600   # a real pool: questions + runs
    python benchmarks/curate.py --pool /path/to/pool --target-size 600 --seeds 0,1,2,3,4   # per seed + summary

With ``--seeds`` the command runs once per seed (one child process each, one after the other) and prints one
line per seed and one summary line per robustness target: the held-out rank figure at or better than the
random-subset mean, the SD of model accuracies not lower than the whole pool's, and the score MAE below
random items' and below the anchors' (met in k of n seeds).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import paired_over_seeds  # noqa: E402

TARGETS = {
    "heldout_spearman_rho": (">=", 0.98),
    "heldout_kendall_tau": (">=", 0.90),
    "reduction": (">=", 0.60),
    "sd_change": (">=", 0.78),
    "junk_survival_50": ("<", 0.05),
    "junk_rho_50": (">=", 0.95),
    "score_mae_points": ("<=", 1.5),
    "seconds": ("<", 60.0),
}


def write_pool(folder: Path, n_items: int, n_models: int, seed: int) -> None:
    import pandas as pd

    from audit_hub.curate.simulate import simulate_pool

    q, r, meta = simulate_pool(n_items, n_models, seed=seed, as_tables=True)
    q.to_parquet(folder / "questions.parquet", index=False)
    r.to_parquet(folder / "runs.parquet", index=False)
    pd.DataFrame({"model": list(meta["model_dates"]), "date": list(meta["model_dates"].values())}).to_csv(
        folder / "model_dates.csv", index=False)
    (folder / "planted.json").write_text(json.dumps(meta["planted"]))


def run(n_items: int, n_models: int, target: int, seed: int, extra: list[str], pool: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="curate-bench-") as td:
        d = Path(td)
        src = pool
        if pool is None:
            write_pool(d, n_items, n_models, seed)
            src = d
        out = d / "curated"
        dates = ["--model-dates", str(d / "model_dates.csv")] if pool is None else []
        cmd = [sys.executable, "-m", "audit_hub", "curate", "--questions", str(src / "questions.parquet"),
               "--runs", str(src / "runs.parquet"), *dates,
               "--target-size", str(target), "--out", str(out), "--seed", str(seed), *extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        secs = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rss = after.ru_maxrss / 1024
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"curate failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        s = json.loads((out / "summary.json").read_text())["curation"]
        planted = json.loads((d / "planted.json").read_text()) if pool is None else {}
        import pandas as pd

        kept = set(pd.read_parquet(out / "data" / "test-00000-of-00001.parquet")["question_id"].astype(str))
        recall = {k: 1 - len(set(v) & kept) / len(v) for k, v in planted.items() if v}
    return {"summary": s, "seconds": secs, "cpu_seconds": cpu, "peak_rss_mb": rss, "recall": recall,
            "stdout": proc.stdout}


def table(res: dict, n_items: int, n_models: int) -> str:
    s = res["summary"]
    j50 = next((j for j in s.get("junk") or [] if abs(j["fraction"] - 0.5) < 1e-9), None)
    se = s.get("score_estimation") or {}
    vals = {
        "heldout_spearman_rho": s.get("heldout_spearman_rho"),
        "heldout_kendall_tau": s.get("heldout_kendall_tau"),
        "reduction": s.get("reduction"),
        "sd_change": (s.get("discrimination_change") or {}).get("sd"),
        "junk_survival_50": j50["junk_survival"] if j50 else None,
        "junk_rho_50": j50["heldout_spearman_rho"] if j50 else None,
        "score_mae_points": se.get("mae_points"),
        "seconds": res["seconds"],
    }
    cis = {"heldout_spearman_rho": s.get("heldout_spearman_rho_ci"), "heldout_kendall_tau": s.get("heldout_kendall_tau_ci"),
           "junk_rho_50": j50["heldout_spearman_rho_ci"] if j50 else None}
    lines = [f"{res.get('pool') or 'simulated MMGist-shaped pool'}: {s['n_before']:,} items x {len(s['models'])} models; kept {s['n_after']:,} "
             f"(removed by stage: {s['removed_by_stage']})",
             f"{'target':<24}{'value':>10}  {'95% CI':<20}{'goal':>10}  met"]
    for k, (op, goal) in TARGETS.items():
        v = vals[k]
        ci = cis.get(k)
        met = None if v is None else (v >= goal if op == ">=" else v < goal if op == "<" else v <= goal)
        cs = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci and ci[0] is not None else ""
        vs = "n/a" if v is None else f"{v:.3f}" if k != "seconds" else f"{v:.1f}"
        lines.append(f"{k:<24}{vs:>10}  {cs:<20}{op + ' ' + str(goal):>10}  {'yes' if met else 'NO' if met is not None else '-'}")
    r = s.get("baselines", {}).get("random_subset", {})
    ri = r.get("spearman_rho_interval")
    ri = f"[{ri[0]:.3f}, {ri[1]:.3f}]" if ri else "n/a"
    if "spearman_rho" in r:
        lines.append(f"random subsets, same size (mean over {r.get('n_draws')} draws/fold): rho {r.get('spearman_rho', float('nan')):.3f} "
                     f"(95% of draws {ri}); curated at or above random mean: "
                     f"{'yes' if (s.get('heldout_spearman_rho') or 0) >= (r.get('spearman_rho') or 1) else 'NO'}")
    lines.append(f"design: {(s.get('heldout_design') or {}).get('why')}")
    lines.append(f"verdict: {s.get('versus_random')}")
    lines.append(f"selection: {(s.get('selection_choice') or {}).get('statement')}")
    if se.get("versus_random"):
        lines.append(f"score estimation: {se['versus_random']}; chosen per split {se.get('chosen_per_split')}")
    for name, b in (s.get("baselines") or {}).items():
        if name != "random_subset" and "spearman_rho" in b:
            lines.append(f"baseline {name:<18} held-out rho {b['spearman_rho']:.3f}  tau {b['kendall_tau']:.3f}")
    if s.get("ibp", {}).get("skipped"):
        lines.append(f"baseline ibp: skipped ({s['ibp']['skipped']})")
    nh = s.get("newest_heldout") or {}
    if nh.get("spearman_rho") is not None:
        lines.append(f"newest {len(nh['test_models'])} models held out: rho {nh['spearman_rho']:.3f}, tau {nh['kendall_tau']:.3f}")
    lines.append("discrimination before -> after: " + ", ".join(
        f"{k} {s['discrimination_before'][k]:.3f} -> {s['discrimination_after'][k]:.3f}" for k in s["discrimination_before"]))
    if se:
        lines.append("score MAE (points) by estimator at " + f"{se.get('n_items')} items: " + ", ".join(
            f"{k} {v:.2f}" for k, v in se.get("mae_points_by_estimator", {}).items()))
    lines.append("planted-defect recall (share removed): " + ", ".join(f"{k} {v:.3f}" for k, v in res["recall"].items()))
    lines.append(f"time {res['seconds']:.1f} s wall, {res['cpu_seconds']:.1f} s CPU (user + sys), peak RSS "
                 f"{res['peak_rss_mb']:.0f} MB (child process); "
                 f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; stage timings {s.get('timings_s')}")
    return "\n".join(lines)


def seed_figures(s: dict) -> dict:
    """The robustness targets of one run's summary: held-out figure vs the random mean (rho, or the
    leave-one-model-out rank displacement where folds would be too small), SD change, score MAE vs random's
    and the anchors'."""
    from audit_hub.curate.estimate import ANCHOR_ESTIMATORS

    se = s.get("score_estimation") or {}
    by = se.get("mae_points_by_estimator") or {}
    lomo = s.get("heldout_lomo")
    if lomo:
        fig, rnd = lomo["mean_rank_displacement"], lomo["random_mean_rank_displacement"]
        kind, ok = "displacement", fig <= rnd + 1e-12
    else:
        fig, rnd = s.get("heldout_spearman_rho"), s.get("random_subset_rho_mean")
        kind, ok = "rho", fig is not None and rnd is not None and fig >= rnd - 1e-12
    sd = (s.get("discrimination_change") or {}).get("sd")
    mae = se.get("mae_points")
    anchors = min(by[k] for k in ANCHOR_ESTIMATORS) if by else None
    return {"kind": kind, "heldout": fig, "random": rnd, "heldout_ok": bool(ok),
            "sd_change": sd, "sd_ok": sd is not None and sd >= -1e-12,
            "mae": mae, "mae_random": by.get("random"), "mae_anchors": anchors,
            "mae_ok_random": mae is not None and by.get("random") is not None and mae < by["random"],
            "mae_ok_anchors": mae is not None and anchors is not None and mae < anchors,
            "mae_by_estimator": dict(by),
            "selection": (s.get("selection_choice") or {}).get("candidate"),
            "selection_per_fold": _counts((s.get("heldout_design") or {}).get("selection_per_fold") or [])}


def _counts(names: list[str]) -> str:
    from collections import Counter

    return ", ".join(f"{k} x{v}" for k, v in Counter(names).most_common())


def seeds_table(rows: list[tuple[int, dict, float]], label: str) -> str:
    yn = lambda b: "yes" if b else "NO"  # noqa: E731
    lines = [f"{label}: robustness over seeds {', '.join(str(r[0]) for r in rows)}",
             f"{'seed':>4}  {'held-out':>9} {'random':>7} {'ok':>3}  {'SD chg':>7} {'ok':>3}  "
             f"{'MAE':>5} {'rand':>5} {'anch':>5} {'ok':>3}  {'secs':>5}  selection (in pool; per fold)"]
    for seed, f, secs in rows:
        lines.append(f"{seed:>4}  {f['heldout']:>9.3f} {f['random']:>7.3f} {yn(f['heldout_ok']):>3}  "
                     f"{100 * f['sd_change']:>+6.0f}% {yn(f['sd_ok']):>3}  {f['mae']:>5.2f} {f['mae_random']:>5.2f} "
                     f"{f['mae_anchors']:>5.2f} {yn(f['mae_ok_random'] and f['mae_ok_anchors']):>3}  {secs:>5.1f}  "
                     f"{f['selection']}; {f['selection_per_fold']}")
    n = len(rows)
    kind = rows[0][1]["kind"]
    word = "rho >= random mean" if kind == "rho" else "rank displacement <= random mean"
    for name, key in ((f"held-out {word}", "heldout_ok"), ("SD not below the whole pool's", "sd_ok"),
                      ("score MAE below random's", "mae_ok_random"), ("score MAE below anchors'", "mae_ok_anchors")):
        k = sum(bool(r[1][key]) for r in rows)
        lines.append(f"target {name:<40} met in {k} of {n} seeds")
    lines.extend(margin_lines([r[1] for r in rows]))
    return "\n".join(lines)


def margin_lines(figs: list[dict]) -> list[str]:
    """Mean over seeds and the paired margin with its standard error (over seeds), for the held-out figure
    against the random mean and the reported MAE against random's and the anchors': how far, on average, the
    default is from each reference, beside how often a single seed meets it."""
    import numpy as np

    from audit_hub.curate.estimate import ANCHOR_ESTIMATORS

    def pair(a_key: str, b_key: str, sign: float, rows: list[dict] = figs) -> tuple[float, float, float, float] | None:
        ab = np.array([(f[a_key], f[b_key]) for f in rows if f[a_key] is not None and f[b_key] is not None], float)
        if not len(ab):
            return None
        ma, mb, d, se = paired_over_seeds(ab[:, 0], ab[:, 1])
        return ma, mb, sign * d, se

    kind = figs[0]["kind"]
    out = []
    # a margin > 0 is in the default's favour: higher rho, lower displacement, lower MAE
    for label, a, b, sign, fmt in ((f"held-out {kind} vs random mean", "heldout", "random", 1.0 if kind == "rho" else -1.0, ".3f"),
                                   ("score MAE vs random items'", "mae", "mae_random", -1.0, ".2f"),
                                   ("score MAE vs the anchors'", "mae", "mae_anchors", -1.0, ".2f")):
        p = pair(a, b, sign)
        if p is not None:
            out.append(f"mean over seeds: {label:<32} {p[0]:{fmt}} vs {p[1]:{fmt}}; margin in the default's favour "
                       f"{p[2]:+{fmt}} (SE {p[3]:{fmt}} over {len(figs)} seeds)")
    # every estimator's own mean MAE over the seeds: the "anchors'" column is the smaller of two estimators' MAE
    # picked per seed after the fact, so each of the two is shown on its own too, paired with the reported MAE
    by = [f.get("mae_by_estimator") or {} for f in figs]
    for est in ANCHOR_ESTIMATORS:
        rows = [dict(f, _a=(f.get("mae_by_estimator") or {}).get(est)) for f in figs]
        p = pair("mae", "_a", -1.0, rows)
        if p is not None:
            out.append(f"mean over seeds: {f'score MAE vs {est} alone':<32} {p[0]:.2f} vs {p[1]:.2f}; margin "
                       f"in the default's favour {p[2]:+.2f} (SE {p[3]:.2f} over {len(figs)} seeds)")
    names = [k for k in by[0] if all(k in b and b[k] is not None for b in by)] if by else []
    if names:
        out.append("mean over seeds: score MAE by estimator (points)  " + ", ".join(
            f"{k} {np.mean([b[k] for b in by]):.2f}" for k in names)
            + f"; reported {np.mean([f['mae'] for f in figs if f['mae'] is not None]):.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="1,500 items x 12 models (for the test suite)")
    ap.add_argument("--items", type=int, default=25_000)
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--target-size", type=int, default=None, help="default: 30%% of the pool (MMGist kept 31%%)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=str, default=None,
                    help="comma-separated seeds (e.g. 0,1,2,3,4): one run per seed, per-seed lines and a summary")
    ap.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    ap.add_argument("--pool", type=Path, default=None,
                    help="a real pool folder (questions.parquet, runs.parquet) instead of the simulated one")
    ap.add_argument("extra", nargs="*", help="extra arguments passed to `benchaudit curate` (after --)")
    a = ap.parse_args(argv)
    n_items, n_models = (1_500, 12) if a.smoke else (a.items, a.models)
    if a.pool is not None:
        import pandas as pd

        n_items = int(pd.read_parquet(a.pool / "questions.parquet", columns=["question_id"]).shape[0])
    target = a.target_size or int(round(0.30 * n_items))
    extra = list(a.extra) + (["--n-boot", "200", "--no-figures"] if a.smoke else [])
    if a.seeds:
        seeds = [int(x) for x in a.seeds.split(",") if x.strip()]
        rows, dump = [], []
        for sd in seeds:
            r = run(n_items, n_models, target, sd, extra, pool=a.pool)
            rows.append((sd, seed_figures(r["summary"]), r["seconds"]))
            dump.append({"seed": sd, **rows[-1][1], "seconds": r["seconds"]})
            print(f"seed {sd} done in {r['seconds']:.1f} s", flush=True)
        label = f"{a.pool or 'simulated pool'} ({n_items:,} items, target size {target:,})"
        print(seeds_table(rows, label))
        os.system("uptime")
        if a.json:
            a.json.write_text(json.dumps(dump, indent=2, default=str))
        return 0
    res = run(n_items, n_models, target, a.seed, extra, pool=a.pool)
    res["pool"] = str(a.pool) if a.pool is not None else None
    print(table(res, n_items, n_models))
    if a.json:
        a.json.write_text(json.dumps({k: v for k, v in res.items() if k != "stdout"}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
