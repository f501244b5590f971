"""Planted label errors: consensus_error's posterior ranking against cleanlab.

    python benchmarks/label_errors.py            # full: 20 plantings per setting
    python benchmarks/label_errors.py --smoke    # a few seconds (run by the test suite)

Settings (3% of the gold labels of mc items changed uniformly to another option, the runs untouched):

(a) a simulated strong pool: 8 models with accuracies 0.75..0.90, 1,000 four-option items, item
    difficulty N(0, 1) on the logit scale shared by every model, and one attractive distractor per
    item (shared by every model) that takes a share ~ U(0.3, 0.9) of the wrong answers;
(b) the bundled MATH-Vision runs (11 image models and GPT-4 text-only), mc items only.

Methods, each given the same answers and the (partly wrong) gold:

* ``benchaudit``: ``consensus_error.run`` (the product; posterior that the gold is wrong, blind arm
  used when present). Flags: ``p_gold_wrong >= 0.5``. Ranking: ``p_gold_wrong``.
* ``cleanlab``: ``pred_probs`` = vote fractions of the full-arm answers over each item's options with
  light smoothing (+0.1 per option), ``find_label_issues`` (default arguments) for the flags and the
  self-confidence ranking (``get_label_quality_scores(method="self_confidence")``) for AP.

Reported: precision and recall of the flags, average precision (AP) of the ranking, as mean and
[min, max] over plantings. Targets on (a): AP >= 0.85 and >= cleanlab + 0.15; on (b): never below cleanlab.
cleanlab is a benchmark-only dependency (``pip install benchaudit[bench]``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit_hub.detectors import consensus_error  # noqa: E402
from audit_hub.frame import AuditFrame  # noqa: E402
from audit_hub.label_model import average_precision  # noqa: E402
from audit_hub.schema import LETTERS  # noqa: E402

SMOOTH = 0.1


def simulate_strong_pool(n_items: int, rng: np.random.Generator, n_models: int = 8, options=(4,)):
    """Questions and runs of setting (a), without label errors (option counts drawn from ``options``)."""
    acc = np.linspace(0.75, 0.90, n_models)
    k = rng.choice(np.asarray(options), n_items)
    d = rng.normal(0, 1.0, n_items)
    p = 1 / (1 + np.exp(-(np.log(acc / (1 - acc))[None, :] - d[:, None])))
    gold = rng.integers(0, k, n_items)
    attractor = (gold + 1 + (rng.random(n_items) * (k - 1)).astype(np.int64)) % k
    share = rng.uniform(0.3, 0.9, n_items)
    hit = rng.random((n_items, n_models)) < p
    to_att = rng.random((n_items, n_models)) < share[:, None]
    other = (gold[:, None] + 1 + (rng.random((n_items, n_models)) * (k[:, None] - 1)).astype(np.int64)) % k[:, None]
    choice = np.where(hit, gold[:, None], np.where(to_att, attractor[:, None], other))
    letters = np.array(list(LETTERS))
    qids = np.array([f"q{i:05d}" for i in range(n_items)], dtype=object)
    questions = pd.DataFrame({"question_id": qids, "question": [f"Q{i}?" for i in range(n_items)],
                              "options": [[f"opt {i}-{j}" for j in range(kk)] for i, kk in enumerate(k)],
                              "answer": letters[gold], "answer_type": "mc", "category": "all"})
    qq, mm = np.meshgrid(np.arange(n_items), np.arange(n_models), indexing="ij")
    runs = pd.DataFrame({"question_id": qids[qq.ravel()], "model": [f"m{j}" for j in mm.ravel()], "arm": "full",
                         "prediction": letters[choice.ravel()], "answer": letters[choice.ravel()],
                         "hit": hit.ravel()})
    return questions, runs


def plant(questions: pd.DataFrame, rate: float, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """Change ``rate`` of the mc golds uniformly to another option; returns (questions, planted mask)."""
    q = questions.copy()
    mc = np.flatnonzero((q["answer_type"] == "mc").to_numpy())
    n = max(1, int(round(rate * len(mc))))
    sel = np.sort(rng.choice(mc, n, replace=False))
    letters = list(LETTERS)
    k = np.array([len(o) for o in q["options"].iloc[sel]])
    old = np.array([letters.index(str(a).strip().upper()) for a in q["answer"].iloc[sel]])
    new = (old + rng.integers(1, np.maximum(k, 2))) % k
    q.loc[q.index[sel], "answer"] = np.array(letters)[new]
    planted = np.zeros(len(q), bool)
    planted[sel] = True
    return q, planted


def cleanlab_scores(frame: AuditFrame, items: np.ndarray):
    """(flags, suspicion score) of cleanlab on ``items`` (mc rows of the frame)."""
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores

    A = frame.answer_codes("full", models=frame.models_in("full"))[items]
    k = frame.n_options.astype(np.int64)[items]
    K = int(k.max())
    counts = np.stack([(A == t).sum(axis=1) for t in range(K)], axis=1).astype(np.float64)
    valid = np.arange(K)[None, :] < k[:, None]
    pp = np.where(valid, counts + SMOOTH, 0.0)
    pp /= pp.sum(axis=1, keepdims=True)
    labels = frame.gold_codes().astype(np.int64)[items]
    flags = find_label_issues(labels, pp)
    q = get_label_quality_scores(labels, pp, method="self_confidence")
    return np.asarray(flags, bool), 1.0 - q


def evaluate(frame: AuditFrame, planted: np.ndarray, seed: int) -> dict:
    items = np.flatnonzero(frame.answer_type == "mc")
    y = planted[items]
    t = time.perf_counter()
    res = consensus_error.run(frame, seed=seed, recall_sims=0)
    t_ours = time.perf_counter() - t
    pw = np.nan_to_num(res.per_question["consensus_error_p_gold_wrong"].to_numpy()[items], nan=0.0)
    lo = np.nan_to_num(res.per_question["consensus_error_log_odds_gold_wrong"].to_numpy()[items], nan=-1e9)
    ours_flag = pw >= 0.5
    t = time.perf_counter()
    cl_flag, cl_score = cleanlab_scores(frame, items)
    t_cl = time.perf_counter() - t

    def pr(flag):
        tp = int((flag & y).sum())
        return (tp / flag.sum() if flag.any() else float("nan")), tp / y.sum()

    p1, r1 = pr(ours_flag)
    p2, r2 = pr(cl_flag)
    return {"ours": {"precision": p1, "recall": r1, "ap": average_precision(lo, y), "seconds": t_ours},
            "cleanlab": {"precision": p2, "recall": r2, "ap": average_precision(cl_score, y), "seconds": t_cl},
            "n_planted": int(y.sum()), "n_items": len(items),
            "test_p": res.summary.get("p_value"), "detection": res.summary.get("detection")}


def summarise(name: str, rows: list[dict]) -> dict:
    out = {"setting": name, "n_plantings": len(rows), "n_items": rows[0]["n_items"],
           "n_planted_each": rows[0]["n_planted"]}
    for m in ("ours", "cleanlab"):
        for k in ("precision", "recall", "ap"):
            v = np.array([r[m][k] for r in rows], dtype=np.float64)
            out[f"{m}_{k}"] = [round(float(np.nanmean(v)), 3), round(float(np.nanmin(v)), 3), round(float(np.nanmax(v)), 3)]
    out["plantings_ours_ap_ge_cleanlab"] = int(sum(r["ours"]["ap"] >= r["cleanlab"]["ap"] for r in rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plantings", type=int, default=20)
    ap.add_argument("--items", type=int, default=1000, help="items of the simulated pool (a)")
    ap.add_argument("--rate", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.plantings, args.items = 2, 300
    rng = np.random.default_rng(args.seed)
    results = []
    # (a) simulated strong pool
    rows = []
    for i in range(args.plantings):
        q, r = simulate_strong_pool(args.items, rng)
        q2, planted = plant(q, args.rate, rng)
        f = AuditFrame.from_tables(q2, r)
        rows.append(evaluate(f, planted, args.seed + i))
    results.append(summarise("a: simulated strong pool (8 models, 75-90%, attractive distractors, 4 options)", rows))
    # (a') the same pool with mixed 2-5 option items (harder for every method)
    rows = []
    for i in range(args.plantings):
        q, r = simulate_strong_pool(args.items, rng, options=(2, 3, 4, 5))
        q2, planted = plant(q, args.rate, rng)
        rows.append(evaluate(AuditFrame.from_tables(q2, r), planted, args.seed + i))
    results.append(summarise("a': simulated strong pool, mixed 2-5 option items", rows))
    # (b) bundled MATH-Vision runs
    from audit_hub.example import example_paths

    p = example_paths()
    qv, rv = pd.read_parquet(p["questions"]), pd.read_parquet(p["runs"])
    rows = []
    for i in range(args.plantings):
        q2, planted = plant(qv, args.rate, rng)
        f = AuditFrame.from_tables(q2, rv)
        rows.append(evaluate(f, planted, args.seed + i))
    s = summarise("b: bundled MATH-Vision runs (11 image models + GPT-4 text-only)", rows)
    f0 = AuditFrame.from_tables(qv, rv)
    det = consensus_error.run(f0, seed=args.seed, recall_sims=1 if args.smoke else 4).summary.get("detection")
    s["tool_estimated_recall_at_3pct"] = det
    results.append(s)
    for s in results:
        print(json.dumps(s))
    a, _, b = results
    print(f"target (a) AP >= 0.85: {'met' if a['ours_ap'][0] >= 0.85 else 'NOT met'} ({a['ours_ap'][0]:.3f}); "
          f"AP >= cleanlab + 0.15: {'met' if a['ours_ap'][0] >= a['cleanlab_ap'][0] + 0.15 else 'NOT met'} "
          f"({a['ours_ap'][0]:.3f} vs {a['cleanlab_ap'][0]:.3f})")
    n_b, w_b = b["n_plantings"], b["plantings_ours_ap_ge_cleanlab"]
    print(f"target (b) AP never below cleanlab: {'met' if w_b == n_b else 'NOT met'} in {w_b} of {n_b} plantings "
          f"(mean {b['ours_ap'][0]:.3f} vs {b['cleanlab_ap'][0]:.3f}; chance = planted share)")


if __name__ == "__main__":
    main()
