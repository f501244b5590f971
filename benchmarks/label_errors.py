"""Planted label errors: consensus_error's posterior ranking against cleanlab.

    python benchmarks/label_errors.py            # full: 20 plantings per setting
    python benchmarks/label_errors.py --smoke    # a few seconds (run by the test suite)

Settings (3% of the gold labels of mc items changed uniformly to another option, the runs untouched):

(a) a simulated strong pool: 8 models with accuracies 0.75..0.90, 1,000 four-option items, item
    difficulty N(0, 1) on the logit scale shared by every model, and one attractive distractor per
    item (shared by every model) that takes a share ~ U(0.3, 0.9) of the wrong answers;
(a') as (a) with 2-5 options per item;
(c) a harder pool closer to the issue's description (800 items, 8 models at 75-90% accuracy over the
    benchmark, difficulty N(0, 2^2), attractor share ~ U(0.6, 1.0)): chosen before it was run and
    reported as it came out;
(b) the bundled MATH-Vision runs (11 image models and GPT-4 text-only), mc items only.

Real pools (the bundled MATH-V runs; BLINK and MathVista under ``tests/fixtures/real_pools``), two planting
rules, each swapping the gold of 3% of the *eligible* items (mc, a letter gold, a category that passes the
identifiability test) uniformly to another option: (i) uniform over the eligible items; (ii) the issue's rule,
uniform over the eligible items *whose pool is informative*: the 3 models with the highest accuracy against
the released gold over the item's category all give the released gold (``informative_items``; model-free).
Under rule (ii) a reference ranking that is told the rule (``rule_aware_scores``) is scored on the same answers,
with the count of unplanted items that look like a swap to it: what the answers allow under this planting.
Under rule (ii) also: classifiers *told which items were planted* (``supervised_reference``: gradient boosting on
the answers, trained item-disjoint over the plantings, with and without the item's category and with the tool's
log odds added): how much a learner of this planting finds in the same answers.
Also reported: the wrong-gold share of the closed items of identifiable categories, as the maximum-likelihood
estimate with its 95% profile-likelihood interval (``label_model.wrong_gold_rate``), that estimate calibrated by
the held-out-model check (``consensus_error.checked_wrong_gold_rate``; the one the <= 5% target reads) and as the
mean posterior; and consensus_error's calibration by the audit's own null simulator on each real pool, per regime
of that null (iid, letter bias, categories at chance, families; ``--cal-sims`` simulations split over them):
flagged share and headline rejection rate on those defect-free benchmarks. ``--only-real`` runs the real pools
only.

On (a), (a') and (c) the **Bayes oracle** is reported too: the posterior that the gold is wrong under the
TRUE generator (abilities, difficulty law, attractor mechanism, planting rate), with the item's
difficulty, attractor and share integrated out numerically. No ranking of the same answers beats it in
expectation, so it says which targets are attainable at all.

Null calibration of the headline likelihood-ratio test: its false-positive rate at alpha 0.05 on
``--null-sims`` (default 1,000) defect-free benchmarks per regime, with an exact binomial interval.

Methods, each given the same answers and the (partly wrong) gold:

* ``benchaudit``: ``consensus_error.run`` (the product; posterior that the gold is wrong, blind arm
  used when present). Flags: ``p_gold_wrong >= 0.5``. Ranking: ``p_gold_wrong``.
* ``cleanlab``: ``pred_probs`` = vote fractions of the full-arm answers over each item's options with
  light smoothing (+0.1 per option), ``find_label_issues`` (default arguments) for the flags and the
  self-confidence ranking (``get_label_quality_scores(method="self_confidence")``) for AP.

Reported: precision and recall of the flags, average precision (AP) of the ranking, as mean and
[min, max] over plantings; the paired AP difference (tool - cleanlab) with a sign test. Targets on (a):
AP >= 0.85 and >= cleanlab + 0.15; on (b): never below cleanlab; null false-positive rate within 2 pp of 0.05.
cleanlab is a benchmark-only dependency (``pip install benchaudit[bench]``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import pool_files  # noqa: E402

from audit_hub.detectors import consensus_error  # noqa: E402
from audit_hub.frame.core import AuditFrame  # noqa: E402
from audit_hub.schema import LETTERS  # noqa: E402
from audit_hub.stats.label_model import average_precision  # noqa: E402

SMOOTH = 0.1


@dataclass(frozen=True)
class PoolSpec:
    """A simulated pool: model ``m`` answers item ``i`` correctly with probability
    ``expit(ability_m - sd * z_i)``, ``z_i ~ N(0, 1)`` shared by every model (item difficulty). A wrong
    answer goes to the item's attractive distractor (one wrong option, uniform) with probability
    ``share_i ~ U(share_lo, share_hi)`` shared by every model, else uniformly to a wrong option (the
    attractor included). ``ability_m = logit(acc_m)`` (``marginal=False``: ``acc`` is the accuracy on an
    item of average difficulty) or solves ``E_z[expit(ability_m - sd z)] = acc_m`` (``marginal=True``:
    ``acc`` is the model's accuracy over the benchmark). ``acc`` is evenly spaced over [acc_lo, acc_hi]."""

    n_items: int = 1000
    n_models: int = 8
    acc_lo: float = 0.75
    acc_hi: float = 0.90
    sd: float = 1.0
    share_lo: float = 0.3
    share_hi: float = 0.9
    options: tuple = (4,)
    marginal: bool = False

    def ability(self) -> np.ndarray:
        acc = np.linspace(self.acc_lo, self.acc_hi, self.n_models)
        if not self.marginal:
            return np.log(acc / (1 - acc))
        from audit_hub.stats.label_model import solve_ability

        return solve_ability(acc, self.sd)


def simulate_strong_pool(spec: PoolSpec, rng: np.random.Generator):
    """(questions, runs, answer codes (Q, M)) of a pool drawn from ``spec``, without label errors."""
    n_items, n_models = spec.n_items, spec.n_models
    k = rng.choice(np.asarray(spec.options), n_items)
    d = spec.sd * rng.normal(0, 1.0, n_items)
    p = 1 / (1 + np.exp(-(spec.ability()[None, :] - d[:, None])))
    gold = rng.integers(0, k, n_items)
    attractor = (gold + 1 + (rng.random(n_items) * (k - 1)).astype(np.int64)) % k
    share = rng.uniform(spec.share_lo, spec.share_hi, n_items)
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
    return questions, runs, choice


def oracle_log_odds(A: np.ndarray, k: np.ndarray, gold: np.ndarray, spec: PoolSpec, rate: float,
                    n_d: int = 40, n_s: int = 24) -> np.ndarray:
    """(Q,) Bayes-oracle log posterior odds that the stated gold is wrong: the posterior under the TRUE
    generator of ``spec`` (its abilities, the N(0, sd^2) difficulty, the one-attractor mechanism with
    share ~ U(share_lo, share_hi), a uniform attractor, ``rate`` of golds changed uniformly), with the
    item's difficulty (Gauss-Hermite, ``n_d`` nodes), attractor (summed) and share (Gauss-Legendre,
    ``n_s`` nodes) integrated out. No ranking of these answers can beat it in expectation."""
    from scipy.special import expit, logsumexp

    z, wz = np.polynomial.hermite_e.hermegauss(n_d)
    lwz = np.log(wz / np.sqrt(2 * np.pi))
    x, wx = np.polynomial.legendre.leggauss(n_s)
    s = spec.share_lo + (spec.share_hi - spec.share_lo) * (x + 1) / 2
    lws = np.log(wx / 2)
    p = expit(spec.ability()[:, None] - spec.sd * z[None, :])           # (M, n_d)
    lp, l1p = np.log(p), np.log1p(-p)
    M = A.shape[1]
    out = np.zeros(len(k))
    for kv in np.unique(k):
        sel = np.flatnonzero(k == kv)
        As = A[sel]
        n = np.stack([(As == t).sum(axis=1) for t in range(kv)], axis=1)
        la1, la0 = np.log(s + (1 - s) / (kv - 1)), np.log((1 - s) / (kv - 1))
        ll = np.empty((len(sel), kv))
        for t in range(kv):
            ld = logsumexp(l1p.sum(axis=0)[None, :] + (As == t).astype(float) @ (lp - l1p) + lwz, axis=1)
            W = (M - n[:, t])[:, None]
            la = [logsumexp(n[:, a][:, None] * la1 + (W - n[:, a][:, None]) * la0 + lws, axis=1)
                  for a in range(kv) if a != t]
            ll[:, t] = ld + logsumexp(np.stack(la, axis=1), axis=1) - np.log(kv - 1)
        g = gold[sel]
        lg = ll[np.arange(len(sel)), g] + np.log1p(-rate)
        ll[np.arange(len(sel)), g] = -np.inf
        out[sel] = logsumexp(ll, axis=1) + np.log(rate / (kv - 1)) - lg
    return out


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


def crowdlab_scores(frame: AuditFrame, items: np.ndarray) -> np.ndarray:
    """Suspicion score of the stated gold by cleanlab's CROWDLAB (``cleanlab.multiannotator``): the models
    and the stated gold are the annotators, ``pred_probs`` the models' smoothed vote fractions (no
    classifier exists here); the score is 1 - CROWDLAB's quality of the gold annotator's label."""
    from cleanlab.multiannotator import get_label_quality_multiannotator

    A = frame.answer_codes("full", models=frame.models_in("full"))[items].astype(np.float64)
    k = np.where(frame.answer_type[items] == "yesno", 2, frame.n_options.astype(np.int64)[items])
    K = int(k.max())
    A = np.where((A >= 0) & (A < k[:, None]), A, np.nan)
    counts = np.stack([(A == t).sum(axis=1) for t in range(K)], axis=1).astype(np.float64)
    valid = np.arange(K)[None, :] < k[:, None]
    pp = np.where(valid, counts + SMOOTH, 1e-6)
    pp /= pp.sum(axis=1, keepdims=True)
    gold = frame.gold_codes().astype(np.float64)[items]
    labels = np.column_stack([A, gold])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = get_label_quality_multiannotator(labels, pp, verbose=False, return_annotator_stats=False)
    q = res["detailed_label_quality"].to_numpy()[:, -1]
    return 1.0 - np.nan_to_num(q, nan=1.0)


def evaluate(frame: AuditFrame, planted: np.ndarray, seed: int, oracle: np.ndarray | None = None,
             keep_scores: bool = False) -> dict:
    """Precision, recall and AP of the tool and cleanlab (and AP of the oracle's log odds, if given);
    ``keep_scores``: also the tool's log odds on the mc items (``row["scores"]``, for the supervised reference)."""
    items = np.flatnonzero(frame.answer_type == "mc")
    y = planted[items]
    t = time.perf_counter()
    res = consensus_error.run(frame, seed=seed, recall_sims=0)
    iss = res.per_question["is_consensus_error_issue"].to_numpy()[items]
    t_ours = time.perf_counter() - t
    pw = np.nan_to_num(res.per_question["consensus_error_p_gold_wrong"].to_numpy()[items], nan=0.0)
    # the tool's ranking is its review order, consensus_error_score = P(gold right) (the posterior where the category
    # is identifiable, the prior elsewhere), read back as log odds that the gold is wrong (-1e9 where it is 1.0)
    sc = res.per_question["consensus_error_score"].to_numpy()[items]
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.nan_to_num(np.log1p(-sc) - np.log(sc), nan=-1e9, neginf=-1e9, posinf=1e9)
    ours_flag = iss  # the findings: posterior >= 0.5, identifiable category, supported by the held-out check
    t = time.perf_counter()
    cl_flag, cl_score = cleanlab_scores(frame, items)
    t_cl = time.perf_counter() - t
    t = time.perf_counter()
    cw_score = crowdlab_scores(frame, items)
    t_cw = time.perf_counter() - t

    def pr(flag):
        tp = int((flag & y).sum())
        return (tp / flag.sum() if flag.any() else float("nan")), tp / y.sum()

    p1, r1 = pr(ours_flag)
    p2, r2 = pr(cl_flag)
    out = {"ours": {"precision": p1, "recall": r1, "ap": average_precision(lo, y), "seconds": t_ours},
           "cleanlab": {"precision": p2, "recall": r2, "ap": average_precision(cl_score, y), "seconds": t_cl},
           "crowdlab": {"precision": float("nan"), "recall": float("nan"), "ap": average_precision(cw_score, y),
                        "seconds": t_cw},
           "flagged_share": float(iss.mean()), "check_supported": res.summary.get("flags_supported"),
           "posterior_flags": int(np.nansum(pw >= 0.5)),
           "n_planted": int(y.sum()), "n_items": len(items),
           "test_p": res.summary.get("p_value"), "detection": res.summary.get("detection")}
    if keep_scores:
        out["scores"] = lo
    if oracle is not None:
        p3, r3 = pr(oracle[items] >= 0)
        out["oracle"] = {"precision": p3, "recall": r3, "ap": average_precision(oracle[items], y)}
    return out


def summarise(name: str, rows: list[dict]) -> dict:
    out = {"setting": name, "n_plantings": len(rows), "n_items": rows[0]["n_items"],
           "n_planted_each": rows[0]["n_planted"]}
    for m in ("ours", "cleanlab", "crowdlab", "oracle", "rule_aware", *SUPERVISED):
        if m not in rows[0]:
            continue
        for k in ("precision", "recall", "ap"):
            v = np.array([r[m][k] for r in rows], dtype=np.float64)
            out[f"{m}_{k}"] = [round(float(np.nanmean(v)), 3), round(float(np.nanmin(v)), 3), round(float(np.nanmax(v)), 3)]
    if "lookalikes" in rows[0]:
        v = [r["lookalikes"] for r in rows]
        out["lookalikes"] = [round(float(np.mean(v)), 1), int(min(v)), int(max(v))]
        out["plantings_ours_ap_ge_rule_aware"] = int(sum(r["ours"]["ap"] >= r["rule_aware"]["ap"] for r in rows))
    out["plantings_ours_ap_ge_cleanlab"] = int(sum(r["ours"]["ap"] >= r["cleanlab"]["ap"] for r in rows))
    out["plantings_ours_ap_ge_crowdlab"] = int(sum(r["ours"]["ap"] >= r["crowdlab"]["ap"] for r in rows))
    out["flagged_share_max"] = round(max(r.get("flagged_share", 0.0) for r in rows), 4)
    out["plantings_check_supported"] = int(sum(bool(r.get("check_supported")) for r in rows))
    diff = np.array([r["ours"]["ap"] - r["cleanlab"]["ap"] for r in rows])
    from scipy.stats import binomtest

    n_pos, n_nz = int((diff > 0).sum()), int((diff != 0).sum())
    out["paired_ap_difference_mean"] = round(float(diff.mean()), 4)
    # two-sided sign test of "ours and cleanlab are equally likely to have the higher AP"
    out["sign_test_p"] = round(float(binomtest(n_pos, n_nz).pvalue), 4) if n_nz else None
    return out


SETTINGS = {
    "a": ("a: simulated strong pool (8 models, 75-90% at average difficulty, difficulty sd 1, attractor share "
          "U(0.3, 0.9), 4 options)", PoolSpec()),
    "a'": ("a': as (a), mixed 2-5 option items", PoolSpec(options=(2, 3, 4, 5))),
    "c": ("c: issue-like harder pool (800 items, 8 models at 75-90% marginal accuracy, difficulty sd 2, "
          "attractor share U(0.6, 1.0), 4 options)",
          PoolSpec(n_items=800, sd=2.0, share_lo=0.6, share_hi=1.0, marginal=True)),
}


def run_simulated(key: str, n_plantings: int, rate: float, seed: int, rng: np.random.Generator,
                  n_items: int | None = None) -> dict:
    """Plant ``rate`` wrong golds into ``n_plantings`` fresh pools of setting ``key``: tool, cleanlab, oracle."""
    name, spec = SETTINGS[key]
    if n_items:
        spec = PoolSpec(**{**spec.__dict__, "n_items": n_items})
    rows = []
    for i in range(n_plantings):
        q, r, choice = simulate_strong_pool(spec, rng)
        q2, planted = plant(q, rate, rng)
        f = AuditFrame.from_tables(q2, r)
        k = np.array([len(o) for o in q2["options"]])
        gold = np.array([LETTERS.index(a) for a in q2["answer"]])
        rows.append(evaluate(f, planted, seed + i, oracle_log_odds(choice, k, gold, spec, rate)))
    return summarise(name, rows)


def shared_difficulty_null(n: int, m: int, rng: np.random.Generator):
    """Answer codes of a defect-free benchmark (the issue's shared-difficulty regime): ``n`` items with
    2, 4 or 5 options, ``m`` models at 50-85% on an item of average difficulty, difficulty N(0, 1.5^2)
    shared by every model, wrong answers uniform; no gold is wrong."""
    from audit_hub.stats.label_model import LabelData

    k = rng.choice([2, 4, 5], n)
    acc = np.linspace(0.5, 0.85, m)
    d = rng.normal(0, 1.5, n)
    p = 1 / (1 + np.exp(-(np.log(acc / (1 - acc))[None, :] - d[:, None])))
    gold = (rng.random(n) * k).astype(np.int64)
    hit = rng.random((n, m)) < p
    off = 1 + (rng.random((n, m)) * (k[:, None] - 1)).astype(np.int64)
    A = np.where(hit, gold[:, None], (gold[:, None] + off) % k[:, None])
    return LabelData([A], k, np.zeros(n, bool), gold)


def null_fpr(n_sims: int, seed: int, alpha: float = 0.05) -> list[dict]:
    """False-positive rate of the headline likelihood-ratio test at ``alpha`` on ``n_sims`` defect-free
    benchmarks per regime: (i) the issue's shared difficulty (540 items x 6 models, mixed 2/4/5 options);
    (ii) the pool of setting (a) (attractive distractors), without planted errors. Fitted and tested as the
    detector does (``label_model.fit_and_test`` with its defaults). Exact (Clopper-Pearson) 95% interval."""
    from scipy.stats import binomtest

    from audit_hub.stats import label_model as lm

    out = []
    regimes = {"shared difficulty, 540 items x 6 models, 2/4/5 options": lambda r: shared_difficulty_null(540, 6, r),
               "pool (a) without label errors": lambda r: _codes_of(SETTINGS["a"][1], r)}
    for j, (name, draw) in enumerate(regimes.items()):
        t = time.perf_counter()
        rej = 0
        for s in range(n_sims):
            d = draw(np.random.default_rng([seed, 7, j, s]))
            rej += lm.fit_and_test(d, seed=s)[1]["p_value"] <= alpha
        ci = binomtest(int(rej), n_sims).proportion_ci(0.95, method="exact")
        fpr = rej / n_sims
        out.append({"null_regime": name, "n_sims": n_sims, "alpha": alpha, "fpr": round(fpr, 4),
                    "fpr_ci95": [round(ci.low, 4), round(ci.high, 4)],
                    "within_2pp": bool(abs(fpr - alpha) <= 0.02), "seconds": round(time.perf_counter() - t, 1)})
    return out


def _codes_of(spec: PoolSpec, rng: np.random.Generator):
    """:class:`LabelData` of one pool of ``spec`` (no label errors)."""
    from audit_hub.stats.label_model import LabelData

    q, _, choice = simulate_strong_pool(spec, rng)
    k = np.array([len(o) for o in q["options"]])
    return LabelData([choice], k, np.zeros(len(k), bool), np.array([LETTERS.index(a) for a in q["answer"]]))


#: real-pool regimes of the simulator (tests/sim.py; the same as tests/test_label_regimes.py), 600 items x 8
REGIMES = {
    "letter_bias": dict(accuracy_full=list(np.linspace(0.45, 0.9, 8)), guess_rate=[0, 0, 0, 0, 0.3, 0.4, 0.5, 0.6],
                        difficulty_sd=1.0),
    "chance_category": dict(accuracy_full=list(np.linspace(0.6, 0.9, 8)), guess_rate=0.4, chance_categories=[0],
                            difficulty_sd=1.0),
    "families": dict(accuracy_full=list(np.linspace(0.55, 0.9, 8)), family=[0, 0, 0, 1, 1, 1, 2, 2],
                     family_share=0.6, difficulty_sd=1.0),
    "mixed_strong_weak": dict(accuracy_full=[0.92, 0.9, 0.88, 0.4, 0.35, 0.3, 0.3, 0.3], difficulty_sd=1.0),
}


def run_regime(name: str, n_sims: int, rate: float, seed: int, n_items: int = 600) -> dict:
    """Defect-free flagged share and, with ``rate`` planted wrong golds, tool / self-confidence / CROWDLAB."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from sim import simulate_frame

    null_share, rows = [], []
    for i in range(n_sims):
        f0 = simulate_frame(n_items, 8, accuracy_blind=None, n_categories=3, seed=1000 * seed + i, **REGIMES[name])
        null_share.append(float(consensus_error.run(f0, seed=seed, recall_sims=0)
                                .per_question["is_consensus_error_issue"].mean()))
        n_le = int(round(rate * n_items))
        f = simulate_frame(n_items, 8, accuracy_blind=None, n_categories=3, label_errors=n_le,
                           seed=1000 * seed + i, **REGIMES[name])
        planted = f.questions["question_id"].isin(f.meta["planted"]["label_errors"]).to_numpy()
        rows.append(evaluate(f, planted, seed + i))
    out = summarise(f"regime {name} ({n_items} items x 8 models, {100 * rate:.0f}% planted)", rows)
    out["defect_free_flagged_share_max"] = round(max(null_share), 4)
    return out


REAL_POOLS = ("blink", "mathvista")
#: the strongest models of a category whose answers make an item "informative" (the issue's planting rule)
INFORMATIVE_TOP = 3


def top_consensus(q: pd.DataFrame, r: pd.DataFrame, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item, the answer code on which the :data:`INFORMATIVE_TOP` models with the highest accuracy against the
    stated gold over the item's category (among the ``eligible`` items: mc, a letter gold, identifiable category)
    all agree (-1 where they differ or the item is not eligible), with the stated gold's code and the (Q, M)
    answer codes of the full arm. Model-free; shared by the planting rule and the rule-aware reference ranking."""
    f = AuditFrame.from_tables(q, r)
    A = f.answer_codes("full", models=f.models_in("full"))
    gold = f.gold_codes().astype(np.int64)
    cat = q["category"].astype(str).to_numpy()
    out = np.full(len(q), -1, np.int64)
    for c in np.unique(cat[eligible]):
        s = np.flatnonzero((cat == c) & eligible)
        acc = (A[s] == gold[s, None]).mean(axis=0)
        top = A[s][:, np.argsort(-acc, kind="stable")[:INFORMATIVE_TOP]]
        out[s] = np.where((top == top[:, :1]).all(axis=1) & (top[:, 0] >= 0), top[:, 0], -1)
    return out, gold, A


def informative_items(q: pd.DataFrame, r: pd.DataFrame, eligible: np.ndarray) -> np.ndarray:
    """(Q,) the items whose pool is informative, the issue's planting rule: an ``eligible`` item (mc, a letter
    gold, identifiable category) on which the :data:`INFORMATIVE_TOP` models with the highest accuracy against
    the released gold over its category all give the released gold. Model-free (no label-model fit): it says
    the pool's strongest models point at the gold, so a swapped gold is visible in the answers at all."""
    top, gold, _ = top_consensus(q, r, eligible)
    return (top >= 0) & (top == gold)


def rule_aware_scores(q: pd.DataFrame, r: pd.DataFrame, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A reference ranking that knows how the informative planting chose its items (not a method: it is told
    the rule). On the benchmark as planted, the items where the category's :data:`INFORMATIVE_TOP` strongest
    models (by accuracy against the stated, partly planted, gold) agree on one answer that is not the stated
    gold come first, by (votes for that answer - votes for the gold); every other item after them by -(votes
    for the gold). Returns (score, mask of the items the rule puts first). The rule's items that were not
    planted are the benchmark's own look-alikes: the top models' answers alone cannot tell them from a planted
    swap, so they hold down what AP the answers allow under this planting (evidence, not a bound: a ranking
    may use the rest of the pool)."""
    top, gold, A = top_consensus(q, r, eligible)
    rule = (top >= 0) & (top != gold)
    votes_gold = (A == gold[:, None]).sum(axis=1)
    votes_top = (A == np.where(rule, top, -2)[:, None]).sum(axis=1)
    score = np.where(rule, 1000.0 + votes_top - votes_gold, -votes_gold.astype(np.float64))
    return score, rule


#: the supervised references (:func:`supervised_reference`): name -> (category one-hot, the tool's log odds)
SUPERVISED = {"supervised": (True, False), "supervised_no_category": (False, False),
              "supervised_with_tool": (True, True)}
#: item-disjoint folds of the supervised references
SUPERVISED_FOLDS = 5


def answer_features(frame: AuditFrame, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(features, category one-hot) of the ``items`` (mc rows) on a benchmark as stated (golds partly planted):
    per model, ordered by its accuracy against the stated gold over the items, whether it gives the stated gold,
    whether it gives the most-voted other option and whether its answer is unparsed; the votes for both; the
    option count; the stated gold's position. Model-free; the supervised references' inputs."""
    A = frame.answer_codes("full", models=frame.models_in("full")).astype(np.int64)[items]
    gold = frame.gold_codes().astype(np.int64)[items]
    k = frame.n_options.astype(np.int64)[items]
    K = int(k.max())
    counts = np.stack([(A == t).sum(axis=1) for t in range(K)], axis=1)
    counts[np.arange(len(items)), np.clip(gold, 0, K - 1)] = -1
    other = counts.argmax(axis=1)
    g, o = A == gold[:, None], A == other[:, None]
    order = np.argsort(-g.mean(axis=0), kind="stable")
    X = np.column_stack([g[:, order], o[:, order], (A < 0)[:, order], g.sum(axis=1), o.sum(axis=1), k, gold])
    cat = pd.Categorical(frame.questions["category"].astype(str).to_numpy()[items]).codes
    return X.astype(np.float64), np.eye(int(cat.max()) + 1)[cat]


def supervised_reference(rows: list[dict], features: list[tuple], seed: int) -> None:
    """Adds to each planting's row the AP of classifiers *told which items were planted*, on the same answers: a
    gradient-boosted classifier (scikit-learn's ``HistGradientBoostingClassifier``, 200 rounds at rate 0.05) is
    trained on every planting's items of :data:`SUPERVISED_FOLDS` - 1 item folds and scores the items of the
    held-out fold (item-disjoint: no item is scored by a classifier that saw it, planted or not). Variants
    (:data:`SUPERVISED`): the answers with the item's category, without it, and with the tool's log odds as one
    more feature. Not methods: they learn the planting rule (which items it could choose, which categories hold
    them) from the plantings; they say how much a learner of this planting finds in the answers."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    n = len(rows)
    y = np.concatenate([r["planted_mc"] for r in rows])
    which = np.repeat(np.arange(n), [len(r["planted_mc"]) for r in rows])
    n_items = len(rows[0]["planted_mc"])
    fold = np.tile(np.random.default_rng([seed, 5]).integers(0, SUPERVISED_FOLDS, n_items), n)
    for name, (with_cat, with_tool) in SUPERVISED.items():
        X = np.concatenate([np.column_stack([f[0]] + ([f[1]] if with_cat else [])
                                            + ([np.clip(r["scores"], -50, 50)[:, None]] if with_tool else []))
                            for f, r in zip(features, rows)])
        pred = np.zeros(len(y))
        for fo in range(SUPERVISED_FOLDS):
            tr, te = fold != fo, fold == fo
            if y[tr].any():
                clf = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, random_state=seed)
                pred[te] = clf.fit(X[tr], y[tr]).predict_proba(X[te])[:, 1]
        for i, r in enumerate(rows):
            r[name] = {"precision": float("nan"), "recall": float("nan"),
                       "ap": average_precision(pred[which == i], y[which == i])}


def run_real(name: str, q: pd.DataFrame, r: pd.DataFrame, n_plantings: int, rate: float, seed: int,
             cal_sims: int = 40) -> dict:
    """A real pool as released (flagged share, estimated wrong-gold share, identifiability, the check, the
    audit's calibration of consensus_error per regime of its null simulator) and with ``rate`` planted wrong
    golds on the mc items of its identifiable categories (tool / cleanlab / CROWDLAB)."""
    from audit_hub.engine.calibration import calibrate

    f0 = AuditFrame.from_tables(q, r)
    s0 = consensus_error.run(f0, seed=seed, recall_sims=2).summary
    cal = calibrate(f0, ["consensus_error"], n_sims=cal_sims, seed=seed)["consensus_error"]
    bad = s0["categories_not_identifiable"]
    chk = s0["predictive_check"] or {}
    out = {"pool": name, "n_items": int(len(q)), "n_models_full": int(len(f0.models_in("full"))),
           "flagged_share": round(s0["n_flagged"] / len(q), 4),
           "posterior_flags": s0["n_posterior_gold_wrong"],
           "estimated_wrong_gold_share": round(s0["expected_wrong_gold_share"], 4),
           "wrong_gold_share_ml": s0.get("wrong_gold_share"),
           "wrong_gold_share_checked": s0.get("wrong_gold_share_checked"),
           "calibration": {"n_sims": cal_sims, "kind": cal["kind"], "fpr": cal["fpr"],
                           "worst_regime": cal.get("worst_regime"),
                           "regimes": {k: {"fpr": v["fpr"], "flag_rate": v["flag_rate"], "n_runs": v["n_runs"]}
                                       for k, v in (cal.get("regimes") or {}).items()},
                           "regime_fit": cal["simulator"].get("regime_fit")},
           "check_supported": chk.get("supported"), "check": {k: (round(v, 3) if isinstance(v, float) else v)
                                                              for k, v in chk.items() if k != "units"},
           "categories_not_identifiable": bad, "simulated_detection": s0["detection"]}
    k_all = q["options"].map(len).to_numpy()
    ok_gold = np.array([len(str(g)) == 1 and str(g) in LETTERS[:kk] for g, kk in zip(q["answer"], k_all)])
    mc = (q["answer_type"] == "mc").to_numpy() & ~q["category"].isin(list(bad)).to_numpy() & ok_gold
    out["planted"] = out["planted_informative"] = None
    if mc.sum() < 20:
        return out
    inf = informative_items(q, r, mc)
    out["informative_share_of_eligible"] = round(float(inf.sum() / mc.sum()), 4)
    n_plant = max(1, int(round(rate * mc.sum())))  # 3% of the eligible items under both rules
    for key, pool, label in (("planted", mc, "identifiable mc items"),
                             ("planted_informative", inf, f"informative items (top {INFORMATIVE_TOP} agree)")):
        if pool.sum() < n_plant:
            continue
        rows, feats = [], []
        for i in range(n_plantings):
            rng = np.random.default_rng([seed, 77, i])
            sel = np.sort(rng.choice(np.flatnonzero(pool), n_plant, replace=False))
            k = q["options"].map(len).to_numpy()
            ans = q["answer"].to_numpy()
            q2 = q.copy()
            q2.loc[q2.index[sel], "answer"] = [LETTERS[(LETTERS.index(str(ans[j])) + rng.integers(1, k[j])) % k[j]]
                                               for j in sel]
            planted = np.zeros(len(q), bool)
            planted[sel] = True
            f2 = AuditFrame.from_tables(q2, r)
            row = evaluate(f2, planted, seed + i, keep_scores=key == "planted_informative")
            if key == "planted_informative":  # what a ranking told the planting rule reaches on the same answers
                items = np.flatnonzero((q2["answer_type"] == "mc").to_numpy())
                feats.append(answer_features(f2, items))
                row["planted_mc"] = planted[items]
                score, rule = rule_aware_scores(q2, r, mc)
                tp = int((rule & planted).sum())
                row["rule_aware"] = {"precision": tp / rule.sum() if rule.any() else float("nan"),
                                     "recall": tp / planted.sum(), "ap": average_precision(score[items], planted[items])}
                row["lookalikes"] = int((rule & ~planted).sum())
            rows.append(row)
        if feats:
            supervised_reference(rows, feats, seed)
        out[key] = summarise(f"{name} with {n_plant} golds ({100 * rate:.0f}% of the eligible) planted on {label}",
                             rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plantings", type=int, default=20)
    ap.add_argument("--items", type=int, default=None, help="items of the simulated pools (default: per setting)")
    ap.add_argument("--rate", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--null-sims", type=int, default=1000, help="defect-free benchmarks per null regime")
    ap.add_argument("--cal-sims", type=int, default=40,
                    help="the audit's calibration simulations per real pool (split over the null's regimes)")
    ap.add_argument("--only-real", action="store_true", help="only the real pools (development)")
    ap.add_argument("--real-pools", default=",".join(REAL_POOLS),
                    help="with --only-real: comma-separated names under tests/fixtures/real_pools, or folders holding "
                         "questions.parquet and runs.parquet (e.g. the VisOnlyQA pool scripts/build_visonlyqa_pool.py "
                         "writes)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.plantings, args.items, args.null_sims = 2, 300, 10
    if args.only_real:
        names = [n.strip() for n in args.real_pools.split(",") if n.strip()]
        reals = [run_real(name, *(pd.read_parquet(f) for f in pool_files(name)), args.plantings, args.rate,
                          args.seed, args.cal_sims) for name in names]
        for s in reals:
            print(json.dumps(s, default=str))
        report_real(reals)
        return
    # one generator per setting: adding a setting does not change the others' draws
    results = [run_simulated(key, args.plantings, args.rate, args.seed, np.random.default_rng([args.seed, j]),
                             args.items) for j, key in enumerate(SETTINGS)]
    rng = np.random.default_rng([args.seed, 99])
    # (b) bundled MATH-Vision runs
    from audit_hub.readers.example import example_paths

    p = example_paths()
    qv, rv = pd.read_parquet(p["questions"]), pd.read_parquet(p["runs"])
    rows = []
    for i in range(args.plantings):
        q2, planted = plant(qv, args.rate, rng)
        f = AuditFrame.from_tables(q2, rv)
        rows.append(evaluate(f, planted, args.seed + i))
    s = summarise("b: bundled MATH-Vision runs (11 image models + GPT-4 text-only)", rows)
    f0 = AuditFrame.from_tables(qv, rv)
    det = consensus_error.run(f0, seed=args.seed, recall_sims=1 if args.smoke else 4).summary
    s["tool_estimated_recall_at_3pct"] = det.get("detection")
    s["tool_pool_too_weak"] = det.get("pool_too_weak")
    results.append(s)
    for s in results:
        print(json.dumps(s))
    regimes = [run_regime(name, 1 if args.smoke else max(2, args.plantings // 4), args.rate, args.seed,
                          300 if args.smoke else 600) for name in REGIMES]
    for s in regimes:
        print(json.dumps(s))
    n_cal = 4 if args.smoke else args.cal_sims
    reals = [run_real("mathv (bundled)", qv, rv, 1 if args.smoke else 3, args.rate, args.seed, n_cal)]
    for name in REAL_POOLS if not args.smoke else REAL_POOLS[:1]:
        reals.append(run_real(name, *(pd.read_parquet(f) for f in pool_files(name)), 1 if args.smoke else 3,
                              args.rate, args.seed, n_cal))
    for s in reals:
        print(json.dumps(s, default=str))
    nulls = null_fpr(args.null_sims, args.seed)
    for s in nulls:
        print(json.dumps(s))
    a, c, b = results[0], results[2], results[-1]
    print(f"target (a) AP >= 0.85: {'met' if a['ours_ap'][0] >= 0.85 else 'NOT met'} ({a['ours_ap'][0]:.3f}); "
          f"AP >= cleanlab + 0.15: {'met' if a['ours_ap'][0] >= a['cleanlab_ap'][0] + 0.15 else 'NOT met'} "
          f"({a['ours_ap'][0]:.3f} vs {a['cleanlab_ap'][0]:.3f}); Bayes oracle on this generator "
          f"{a['oracle_ap'][0]:.3f}, so cleanlab + 0.15 = {a['cleanlab_ap'][0] + 0.15:.3f} is "
          f"{'above' if a['cleanlab_ap'][0] + 0.15 > a['oracle_ap'][0] else 'within'} what any ranking can reach")
    print(f"setting (c): ours {c['ours_ap'][0]:.3f}, cleanlab {c['cleanlab_ap'][0]:.3f}, oracle {c['oracle_ap'][0]:.3f}; "
          f"AP >= cleanlab + 0.15 {'met' if c['ours_ap'][0] >= c['cleanlab_ap'][0] + 0.15 else 'NOT met'}")
    for s in nulls:
        print(f"headline test false-positive rate at alpha 0.05, {s['null_regime']}: {s['fpr']:.3f} "
              f"(95% CI {s['fpr_ci95'][0]:.3f}-{s['fpr_ci95'][1]:.3f}, {s['n_sims']} simulations); within +-2 pp: "
              f"{'met' if s['within_2pp'] else 'NOT met'}")
    print(f"target (a) AP >= CROWDLAB + 0.05: {'met' if a['ours_ap'][0] >= a['crowdlab_ap'][0] + 0.05 else 'NOT met'} "
          f"({a['ours_ap'][0]:.3f} vs CROWDLAB {a['crowdlab_ap'][0]:.3f})")
    for s in results[1:] + regimes:
        print(f"{s['setting']}: AP ours {s['ours_ap'][0]:.3f}, self-confidence {s['cleanlab_ap'][0]:.3f}, CROWDLAB "
              f"{s['crowdlab_ap'][0]:.3f} (>= CROWDLAB: {'met' if s['ours_ap'][0] >= s['crowdlab_ap'][0] else 'NOT met'})"
              + (f"; defect-free flagged share max {s['defect_free_flagged_share_max']:.3f} (<= 0.01: "
                 f"{'met' if s['defect_free_flagged_share_max'] <= 0.01 else 'NOT met'})"
                 if "defect_free_flagged_share_max" in s else ""))
    print(f"target (a): the Bayes oracle (true generator) reaches {a['oracle_ap'][0]:.3f}, so CROWDLAB + 0.05 = "
          f"{a['crowdlab_ap'][0] + 0.05:.3f} is {'above' if a['crowdlab_ap'][0] + 0.05 > a['oracle_ap'][0] else 'within'} "
          f"what any ranking of these answers can reach; on the strong pools with what real pools have (regime "
          f"families: correlated model families; setting c: shared attractors, difficulty sd 2) the gap is "
          f"{regimes[2]['ours_ap'][0] - regimes[2]['crowdlab_ap'][0]:+.3f} and "
          f"{c['ours_ap'][0] - c['crowdlab_ap'][0]:+.3f}")
    report_real(reals)
    n_b, w_b = b["n_plantings"], b["plantings_ours_ap_ge_cleanlab"]
    print(f"target (b) AP never below cleanlab: {'met' if w_b == n_b else 'NOT met'}: ours >= cleanlab in {w_b} of "
          f"{n_b} plantings (mean {b['ours_ap'][0]:.3f} vs {b['cleanlab_ap'][0]:.3f}, paired difference "
          f"{b['paired_ap_difference_mean']:+.3f}, sign test p = {b['sign_test_p']}; chance = planted share 0.03)")


def report_real(reals: list[dict]) -> None:
    """The real-pool target lines."""
    nan3 = {"ours_ap": [float("nan")], "cleanlab_ap": [float("nan")], "crowdlab_ap": [float("nan")],
            "ours_recall": [float("nan")]}
    for s in reals:
        wg = s.get("wrong_gold_share_ml") or {}
        wc = s.get("wrong_gold_share_checked") or {}
        if wc.get("estimate") is not None:
            rs = wc.get("realised_share")
            held = (f"model ML {wg['estimate']:.3f} (profile CI {wg['ci'][0]:.3f}-{wg['ci'][1]:.3f}) x realised share "
                    f"{'n/a' if rs is None else f'{rs:.2f}'}")
            if wc.get("family_robust_estimate") is not None:  # the smaller of the two checks is reported
                held = (f"the smaller of {held} = {wc['held_out_estimate']:.3f} and the family-robust share "
                        f"{wc['family_robust_estimate']:.3f} ({wc['family_robust_ci'][0]:.3f}-"
                        f"{wc['family_robust_ci'][1]:.3f})")
            print(f"real pool {s['pool']}: estimated wrong-gold share of the closed items of identifiable categories "
                  f"({wc['n_items']}), checked: {wc['estimate']:.3f} (95% "
                  f"{wc['ci'][0]:.3f}-{wc['ci'][1]:.3f}; <= 0.05: {'met' if wc['estimate'] <= 0.05 else 'NOT met'}) "
                  f"= {held}; posterior mean {s['estimated_wrong_gold_share']:.3f}")
        c = s.get("calibration") or {}
        if c.get("regimes"):
            print(f"real pool {s['pool']}: consensus_error on the audit's defect-free nulls ({c['n_sims']} sims): "
                  + "; ".join(f"{k} flagged share {v['flag_rate']:.4f}, headline {c['kind']} rate {v['fpr']:.2f}"
                              for k, v in c["regimes"].items() if v["flag_rate"] is not None)
                  + f" (flagged <= 0.01 in every regime: "
                  f"{'met' if all((v['flag_rate'] or 0) <= 0.01 for v in c['regimes'].values()) else 'NOT met'})")
        if not s.get("planted_informative") and len(s["categories_not_identifiable"]) and wc.get("estimate") is None:
            print(f"real pool {s['pool']}: no category is identifiable with this pool "
                  f"({len(s['categories_not_identifiable'])} not): no wrong-gold share to estimate and no eligible item "
                  "to plant on (the targets do not apply)")
            continue
        pi = s.get("planted_informative") or nan3
        print(f"real pool {s['pool']}: planting on informative items (share {s.get('informative_share_of_eligible')} "
              f"of the eligible): AP ours {pi['ours_ap'][0]:.3f} (>= 0.5: {'met' if pi['ours_ap'][0] >= 0.5 else 'NOT met'}), "
              f"self-confidence {pi['cleanlab_ap'][0]:.3f}, CROWDLAB {pi['crowdlab_ap'][0]:.3f}"
              + (f"; a ranking told the planting rule {pi['rule_aware_ap'][0]:.3f} (ours at least as high in "
                 f"{pi['plantings_ours_ap_ge_rule_aware']} of {pi['n_plantings']} plantings): "
                 f"{pi['lookalikes'][0]:.0f} unplanted items ({pi['lookalikes'][1]}-{pi['lookalikes'][2]}) "
                 f"look like a swap to it (the category's {INFORMATIVE_TOP} strongest models agree on one non-gold "
                 f"answer) beside the {pi['n_planted_each']} planted" if "rule_aware_ap" in pi else ""))
        if "supervised_ap" in pi:
            print(f"real pool {s['pool']}: classifiers told which items were planted (gradient boosting on the answers, "
                  f"item-disjoint {SUPERVISED_FOLDS}-fold over the {pi['n_plantings']} plantings): AP "
                  f"{pi['supervised_ap'][0]:.3f} with the item's category, {pi['supervised_no_category_ap'][0]:.3f} "
                  f"without it, {pi['supervised_with_tool_ap'][0]:.3f} with the tool's log odds added (the tool: "
                  f"{pi['ours_ap'][0]:.3f})")
    for s in reals:
        if s.get("planted") is None and (s.get("wrong_gold_share_checked") or {}).get("estimate") is None:
            print(f"real pool {s['pool']}: flagged share {s['flagged_share']:.3f} (<= 0.03: "
                  f"{'met' if s['flagged_share'] <= 0.03 else 'NOT met'}); nothing identifiable to estimate or plant on")
            continue
        pl = s.get("planted") or nan3
        est = (s.get("wrong_gold_share_checked") or {}).get("estimate")
        est = float("nan") if est is None else est
        print(f"real pool {s['pool']}: flagged share {s['flagged_share']:.3f} (<= 0.03: "
              f"{'met' if s['flagged_share'] <= 0.03 else 'NOT met'}), estimated wrong-gold share (checked) "
              f"{est:.3f} (<= 0.05: {'met' if est <= 0.05 else 'NOT met'}), "
              f"{s['posterior_flags']} posterior flags, check supported: {s['check_supported']}, "
              f"{len(s['categories_not_identifiable'])} categories not identifiable; planted 3%: AP ours "
              f"{pl['ours_ap'][0]:.3f} (>= 0.5: {'met' if pl['ours_ap'][0] >= 0.5 else 'NOT met'}), self-confidence "
              f"{pl['cleanlab_ap'][0]:.3f}, CROWDLAB {pl['crowdlab_ap'][0]:.3f}; findings recall {pl['ours_recall'][0]:.2f}")


if __name__ == "__main__":
    main()
