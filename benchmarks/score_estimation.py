"""Score estimation on real pools: every estimator's held-out MAE, the reported one under other replacement
margins, and the reported MAE paired with each anchor estimator over seeds (issue 26).

    python benchmarks/score_estimation.py                    # 3 real pools x 20 seeds (about 22 CPU-minutes)
    python benchmarks/score_estimation.py --pools blink --seeds 0,1,2,3
    python benchmarks/score_estimation.py --smoke            # MathVista, one seed (run by the test suite)

A diagnosis of one step, not the product's figure: ``benchmarks/curate.py --pool DIR --seeds ...`` runs the
``benchaudit curate`` command and reports the same MAE from its summary. Here the step is called directly, with
the splits ``curate`` makes (``pipeline._splits``: 3 folds over models, or leave-one-model-out for small pools)
and ``estimate.score_split`` on each, so that the choice between estimators can be replayed under other margins
(``estimate.choose_estimator``) on the very same inner and outer errors. The margin the product uses is
``estimate.REPLACE_MARGIN_SE``; ``inf`` never replaces the ensemble.

Pools: the bundled MATH-V runs (``mathv``: 11 image models), BLINK (19) and MathVista (8) under
``tests/fixtures/real_pools`` (their NOTICE.md gives source and licence), or a folder of your own holding
``questions.parquet`` and ``runs.parquet`` (e.g. VisOnlyQA's 20 models, built by ``scripts/build_visonlyqa_pool.py``).

Printed per pool: each estimator's MAE in points (mean over seeds of the pooled MAE over held-out models); the
reported MAE under each margin; and, for the product's margin, the reported MAE paired with ``random`` and each
anchor estimator on its own and with their smaller MAE picked per seed (the "anchors'" of ``curate``'s summary),
as mean difference and its standard error over seeds (a negative difference is in the reported MAE's favour).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import paired_over_seeds, pool_files  # noqa: E402

POOLS = ("mathv", "blink", "mathvista")


def load_pool(name: str):
    import pandas as pd

    from audit_hub.curate.findings import audit_findings
    from audit_hub.curate.pipeline import _Pool
    from audit_hub.frame.core import AuditFrame
    q, r = pool_files(name)
    frame = AuditFrame.from_tables(pd.read_parquet(q), pd.read_parquet(r))
    return _Pool(frame, audit_findings(frame, seed=0).field)


def run_pool(name: str, seeds: list[int], margins: list[float], budget: int) -> dict:
    """Per seed: every estimator's pooled MAE (points) and the reported MAE under each margin."""
    import numpy as np

    from audit_hub.curate.estimate import ESTIMATORS, choose_estimator, score_split
    from audit_hub.curate.pipeline import CurateConfig, _splits

    pool = load_pool(name)
    M = len(pool.models)
    per_seed = []
    for seed in seeds:
        cfg = CurateConfig(seed=seed)
        errs: dict[str, list] = {k: [] for k in ESTIMATORS}
        rep: dict[float, list] = {m: [] for m in margins}
        for _name, test in _splits(pool.models, cfg, None):
            train = np.setdiff1d(np.arange(M), test)
            s = score_split(pool.right, pool.known, train, test, budget, seed, pool.cat)
            for k in ESTIMATORS:
                errs[k].append(s["abs_err"][k])
            for m in margins:
                ch, _rule = choose_estimator(s["inner_abs_err"], s["eligible"], len(train), margin_se=m)
                rep[m].append(s["abs_err"][ch])
        per_seed.append({"by": {k: 100 * float(np.concatenate(v).mean()) for k, v in errs.items()},
                         "reported": {m: 100 * float(np.concatenate(v).mean()) for m, v in rep.items()}})
    return {"pool": name, "n_models": M, "n_items": int(pool.Q), "seeds": seeds, "per_seed": per_seed}


def report(res: dict, margins: list[float], product_margin: float) -> list[str]:
    import numpy as np

    from audit_hub.curate.estimate import ANCHOR_ESTIMATORS, ESTIMATORS

    ps = res["per_seed"]
    n = len(ps)
    out = [f"{res['pool']} ({res['n_models']} models, {res['n_items']} items, {n} seed{'s' if n > 1 else ''}): MAE "
           "by estimator (points)  " + ", ".join(f"{k} {np.mean([p['by'][k] for p in ps]):.2f}" for k in ESTIMATORS)]
    out.append(f"{res['pool']}: reported MAE by replacement margin (standard errors)  " + ", ".join(
        f"{m:g}{' (product)' if m == product_margin else ''} {np.mean([p['reported'][m] for p in ps]):.2f}"
        for m in margins))
    rep = [p["reported"][product_margin] for p in ps]
    refs = [(k, [p["by"][k] for p in ps]) for k in ("random", *ANCHOR_ESTIMATORS)]
    refs.append(("the smaller anchor MAE per seed", [min(p["by"][k] for k in ANCHOR_ESTIMATORS) for p in ps]))
    for label, b in refs:
        ma, mb, d, se = paired_over_seeds(rep, b)
        out.append(f"{res['pool']}: reported {ma:.2f} vs {label} {mb:.2f}: difference {d:+.2f} (SE {se:.2f} over "
                   f"{n} seeds)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", default=",".join(POOLS),
                    help=f"comma-separated, of {', '.join(POOLS)}, or a folder with questions.parquet and runs.parquet")
    ap.add_argument("--seeds", default=",".join(str(i) for i in range(20)))
    ap.add_argument("--margins", default="0,0.5,1,1.5,2,3,inf")
    ap.add_argument("--budget", type=int, default=100, help="items each held-out model answers (curate's default)")
    ap.add_argument("--smoke", action="store_true", help="MathVista, seed 0, margins 0, 1, inf")
    a = ap.parse_args(argv)
    from audit_hub.curate.estimate import REPLACE_MARGIN_SE

    pools = ["mathvista"] if a.smoke else [p.strip() for p in a.pools.split(",") if p.strip()]
    bad = [p for p in pools if p not in POOLS and not Path(p).is_dir()]
    if bad:
        ap.error(f"unknown pool {bad[0]!r}; one of {', '.join(POOLS)}")
    seeds = [0] if a.smoke else [int(s) for s in a.seeds.split(",")]
    margins = [0.0, REPLACE_MARGIN_SE, float("inf")] if a.smoke else [float(m) for m in a.margins.split(",")]
    if REPLACE_MARGIN_SE not in margins:
        margins.append(REPLACE_MARGIN_SE)
    for name in pools:
        t0 = time.perf_counter()
        res = run_pool(name, seeds, margins, a.budget)
        for line in report(res, margins, REPLACE_MARGIN_SE):
            print(line)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
