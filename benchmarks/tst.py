"""TsT-RF wall time and peak memory on synthetic benchmarks (k = 5, 3 repeats).

    .venv/bin/python benchmarks/tst.py [--sizes 5000 50000] [--n-jobs 2]

Each size runs in a fresh subprocess so that peak RSS (``ru_maxrss``) is per size. Target: 50,000
questions in under 60 s on the 2-core development machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from audit_hub.frame import AuditFrame
from audit_hub.tst.rf import run_tst_rf
from audit_hub.tst.synthetic import make_synthetic
n, n_jobs = int(sys.argv[1]), int(sys.argv[2])
t0 = time.perf_counter()
frame = AuditFrame.from_tables(make_synthetic(n, planted=True, numeric_share=0.1, seed=0))
t1 = time.perf_counter()
res = run_tst_rf(frame, k=5, repeats=3, seed=0, n_jobs=n_jobs)
t2 = time.perf_counter()
cat = frame.questions["category"].to_numpy()
s = res.per_question["tst_s"].to_numpy()
print(json.dumps({"n_questions": n, "n_jobs": n_jobs, "build_frame_s": round(t1 - t0, 2),
                  "tst_rf_s": round(t2 - t1, 2), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "cpu_s": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime, 1),
                  "accuracy": res.summary["accuracy"], "mean_p_gold": res.summary["mean_p_gold"],
                  "chance": res.summary["chance"], "planted_mean_s": float(s[cat == "t0"].mean()),
                  "other_mean_s_choice": float(s[(cat != "t0") & (res.per_question["tst_format"] == "choice").to_numpy()].mean())}))
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    p.add_argument("--n-jobs", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="one small size (500 questions; CI checks the script runs)")
    a = p.parse_args()
    if a.smoke:
        a.sizes = [500]
    for n in a.sizes:
        out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(a.n_jobs)], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(out.returncode)
        print(json.dumps(json.loads(out.stdout.strip().splitlines()[-1])))


if __name__ == "__main__":
    main()
