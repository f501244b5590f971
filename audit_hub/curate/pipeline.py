"""Curation end to end: audit findings -> stages -> selection -> held-out evaluation -> summary.

:func:`run_curation` is pure (frame in, :class:`CurationResult` out; no I/O). What it measures:

* **In pool**: the curated set selected with every model; Spearman rho / Kendall tau between each model's
  accuracy on the curated set and on the whole pool (``spearman_rho``; optimistic: the same models chose
  the items).
* **Held out**: k-fold over models (seeded shuffle). In each fold the audit's detectors are re-run on the
  training models only, the stages and the selection use those findings, and the held-out models' accuracy
  on the curated set is compared with their accuracy on the whole pool. ``heldout_spearman_rho`` is the
  mean over folds; its interval is a percentile bootstrap over items (Poisson(1) item weights, the same
  replicate weights in every fold, rho averaged over folds per replicate) and so covers item sampling
  given the selection, not the selection's own variability (the per-fold values show that). A "newest
  models held out" split runs as well when model dates or an order are given.
* Top-1 and top-k agreement among held-out models, and the held-out models whose removal changes the
  curated leader but not the full-pool one (``leader_changes_on_drop``).
* Discrimination before and after, three ways; visual dependency before and after.
* Baselines at the same size from the same training models, with the same held-out metrics.
* Junk injection (:mod:`.junk`): survival and held-out rho against the clean pool's accuracies.
* Score estimation: each held-out model's full-pool accuracy from ``score_budget`` anchor items with a
  2PL fitted to the training models (:mod:`.irt`), mean absolute error in accuracy points.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..readers.pairing import truncated_by_arm
from ..stats.coverage import coverage_left_out_units
from . import baselines as bl
from .choose import EXPLICIT_METHODS, build, choose
from .filters import (
    DOUBTED,
    STAGES,
    StageThresholds,
    apply_stages,
    evidence_notes,
    saturation,
    stage_flags,
    stage_order,
)
from .findings import audit_findings, text_columns
from .measures import (
    discrimination,
    kendall_tau_b,
    leader_change_on_drop,
    relative_change,
    spearman,
    top_agreement,
    weighted_accuracy,
)
from .select import METHODS, select, size_for_rank_loss

BASELINES = ("random_subset", "lime_pass_count", "kmeans_anchors", "point_biserial", "ibp")


@dataclass
class CurateConfig:
    """Everything that changes the numbers; recorded verbatim in summary.json."""

    stages: tuple[str, ...] = STAGES
    thresholds: StageThresholds = field(default_factory=StageThresholds)
    target_size: int | None = None
    max_rank_loss: float | None = None
    method: str = "auto"            # auto: chosen by inner cross-validation among candidates (.choose)
    floor_share: float = 0.5
    n_folds: int = 3
    newest_share: float = 1 / 3
    n_boot: int = 1000
    n_random: int = 200
    top_k: int = 3
    baselines: tuple[str, ...] = BASELINES
    ibp: str = "auto"               # auto: only when the pool has <= ibp_max_items items
    ibp_max_items: int = 10_000
    junk_fractions: tuple[float, ...] = (0.5,)
    score_budget: int = 100
    pair_boot: int = 300
    seed: int = 0
    rank_tolerance: float = 0.01    # auto: inner held-out pair tau within this of the best ties (then the SD)
    inner_folds: int = 3
    inner_draws: int = 50
    min_heldout_models: int = 6     # fewer per fold: leave-one-model-out instead of a fold-level rank correlation
    # BLAS / OpenMP threads while curating (threadpoolctl). One: the work is many modest matrix products and
    # element-wise passes, where extra threads spin-wait; on the 2-core reference machine under load, two
    # threads doubled the wall time of the benchmark (docs/curate.md)
    threads: int = 1

    def validate(self, n_items: int) -> None:
        from ..bounds import check_range

        for name, value in (("--n-boot", self.n_boot), ("--random-draws", self.n_random),
                            ("--score-budget", self.score_budget), ("--seed", self.seed), ("--folds", self.n_folds),
                            ("--category-floor", self.floor_share), ("--threads", self.threads)):
            check_range(name, value)
        for f in self.junk_fractions:
            check_range("--junk", f)
        self.thresholds.validate()
        bad = [s for s in self.stages if s not in STAGES]
        if bad or len(set(self.stages)) != len(self.stages):
            raise InputError(f"stages must be distinct names among {', '.join(STAGES)}; got {list(self.stages)}")
        if not self.stages and self.target_size is None and self.max_rank_loss is None:
            raise InputError("no stages and no final selection: nothing would be curated")
        if self.target_size is not None and self.max_rank_loss is not None:
            raise InputError("give either --target-size or --max-rank-loss, not both")
        if self.target_size is not None and not 1 <= self.target_size <= n_items:
            raise InputError(f"--target-size must be between 1 and the pool size ({n_items}), got {self.target_size}")
        if self.max_rank_loss is not None and not 0 <= self.max_rank_loss < 1:
            raise InputError(f"--max-rank-loss must be in [0, 1), got {self.max_rank_loss}")
        if self.method not in ("auto", *EXPLICIT_METHODS):
            raise InputError(f"--method must be one of auto, {', '.join(EXPLICIT_METHODS)}, got {self.method!r}")
        if not 0 <= self.floor_share <= 1:
            raise InputError(f"--category-floor must be in [0, 1], got {self.floor_share}")
        if self.n_folds < 2:
            raise InputError("--folds must be at least 2")
        bad = [b for b in self.baselines if b not in BASELINES]
        if bad:
            raise InputError(f"unknown baselines {bad}; known: {', '.join(BASELINES)}")
        if any(not 0 <= f <= 1 for f in self.junk_fractions):
            raise InputError("junk fractions must be in [0, 1]")
        if self.ibp not in ("auto", "on", "off"):
            raise InputError("--ibp must be auto, on or off")
        if self.threads < 1:
            raise InputError(f"--threads must be at least 1, got {self.threads}")

    @property
    def order(self) -> tuple[str, ...]:
        """The stages as applied (:func:`.filters.stage_order`: the doubted-gold rule after the anomaly stage)."""
        return stage_order(tuple(self.stages), self.thresholds)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["thresholds"] = self.thresholds.as_dict()
        return d


@dataclass
class CurationResult:
    frame: Any
    config: CurateConfig
    kept: np.ndarray               # (Q,) bool
    kept_by: np.ndarray            # (Q,) str ('' for removed)
    removed: pd.DataFrame          # question_id, stage, reason
    findings: pd.DataFrame         # per-question findings used (question-code order)
    summary: dict
    model_scores: pd.DataFrame     # model, full, curated (in pool) and held-out curated accuracy
    timings: dict


# ---------------------------------------------------------------------------------------- helpers
class _Pool:
    """Correctness matrices and per-item facts shared by every split."""

    def __init__(self, frame, field: str, left_out: list[str] | None = None):
        """``left_out``: the models to leave out of the ranking pool (another pool's choice, so that both rank the
        same models); None: chosen here by coverage."""
        self.frame = frame
        self.models = frame.models_in("full")
        if len(self.models) < 3:
            raise InputError(f"curation needs correctness of at least 3 models with the image; got {len(self.models)}")
        x = frame.correctness("full", field, self.models)
        # a model that covers few items (a run stopped early) would be ranked on those items alone, on the whole
        # benchmark and on every subset: it leaves the ranking pool (stats.coverage), named in the summary
        if left_out is not None:
            named = set(left_out)
            gone = [j for j, m in enumerate(self.models) if m in named]
        else:
            gone = coverage_left_out_units(x < 0, keep_per_group=3)[0] if x.min(initial=0) < 0 else []
        self.left_out = [{"model": self.models[j], "items_known": int((x[:, j] >= 0).sum())} for j in gone]
        if gone:
            keep = [j for j in range(len(self.models)) if j not in gone]
            self.models, x = [self.models[j] for j in keep], x[:, keep]
        self.known = (x >= 0).astype(np.float64)
        self.right = (x == 1).astype(np.float64)
        self.cat, self.cat_labels = frame.category_codes("category")
        self.cat = self.cat.astype(np.int64)
        self.Q = frame.n_questions
        self.full_acc = weighted_accuracy(np.ones((1, self.Q)), self.right, self.known)[0]
        self.right32 = self.right.astype(np.float32)
        self.known32 = self.known.astype(np.float32)
        self.xk32 = self.right32 * self.known32
        self._random: dict = {}

    def random_accuracy(self, size: int, n_draws: int, seed: int) -> np.ndarray:
        """(n_draws, M) accuracies of every model on ``n_draws`` stratified random subsets of ``size`` items
        (seed key ``[seed, 5]``). One set of draws serves every split (each takes its models' columns)."""
        key = (int(size), int(n_draws), int(seed))
        if key not in self._random:
            masks = bl.stratified_random(self.cat, size, n_draws, np.random.default_rng([seed, 5]))
            m32 = masks.astype(np.float32)  # float32 products of 0/1 matrices: exact integer counts
            num, den = (m32 @ self.xk32).astype(np.float64), (m32 @ self.known32).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                self._random[key] = np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)
        return self._random[key]


def _variant_stages(cfg: CurateConfig) -> dict[str, tuple[str, ...]]:
    """The stage combinations the automatic choice compares: every configured stage (``stages``), and the
    anomaly stage alone (``anomaly``: broken keys and options are never worth keeping; with its doubted-gold
    rule unless that is kept) or, without it, no stage (``none``)."""
    out: dict[str, tuple[str, ...]] = {}
    if cfg.stages:
        out["stages"] = cfg.order
    if "anomaly" in cfg.stages:
        if len(cfg.stages) > 1:
            out["anomaly"] = stage_order(("anomaly",), cfg.thresholds)
    else:
        out["none"] = ()
    return out


def _variant_masks(flags: dict, cfg: CurateConfig, Q: int) -> dict[str, np.ndarray]:
    return {v: apply_stages({s_: flags[s_] for s_ in st}, st, Q)["kept"] for v, st in _variant_stages(cfg).items()}


def _inner_variants(pool: _Pool, flags: dict, cfg: CurateConfig, cols: np.ndarray):
    """``variants_for`` of :func:`.choose.choose`: the variants with the saturation stage re-run on the inner
    training models (its counts are the correctness profile's: models right / models known, per item); the
    text-ablation and anomaly flags are those of the selecting models (re-auditing per inner fold would
    multiply the audit's cost by the inner folds)."""
    from . import roles

    def variants_for(tr: np.ndarray) -> dict:
        if "saturation" not in cfg.stages:
            return _variant_masks(flags, cfg, pool.Q)
        c = cols[tr]
        t = pd.DataFrame({roles.column(roles.CORRECTNESS_PROFILE, "n_correct"): (pool.right[:, c] * pool.known[:, c]).sum(1),
                          roles.column(roles.CORRECTNESS_PROFILE, "n_models"): pool.known[:, c].sum(1)})
        return _variant_masks({**flags, "saturation": saturation(t, cfg.thresholds)}, cfg, pool.Q)

    return variants_for


def _curate(pool: _Pool, findings, cfg: CurateConfig, cols: np.ndarray, tst_excess, *, seed: int) -> dict:
    """Stages + selection with the models ``cols`` (column indices of the pool's models).

    ``method="auto"``: the selection is chosen among candidates (on the stage output and on the whole pool)
    by inner cross-validation over these models (:func:`.choose.choose`); an explicit method selects within
    the stage output as before."""
    flags = stage_flags(findings.table, cfg.thresholds, tst_excess, cfg.order)
    applied = apply_stages(flags, cfg.order, pool.Q)
    cand = applied["kept"]
    r, k = pool.right[:, cols], pool.known[:, cols]
    trace = None
    size = None
    if cfg.target_size is not None:
        size = int(cfg.target_size)
    elif cfg.max_rank_loss is not None:
        size, trace = size_for_rank_loss(cfg.method if cfg.method in METHODS else "random", r, k, cand, pool.cat,
                                         cfg.max_rank_loss, cfg.floor_share, seed=seed)
    choice = None
    variant, used = "stages", cfg.method
    if cfg.method == "auto":
        S = int(size) if size is not None else int(cand.sum())
        variants = _variant_masks(flags, cfg, pool.Q)
        choice = choose(r, k, pool.cat, variants, S, cfg.floor_share, seed,
                        selected=size is not None and size < cand.sum(), k=cfg.inner_folds, n_draws=cfg.inner_draws,
                        tolerance=cfg.rank_tolerance, variants_for=_inner_variants(pool, flags, cfg, cols))
        mask, scores = choice["mask"], choice["scores"]
        variant, used = choice["variant"], choice["method"]
        selected = used != "all" and int(mask.sum()) < int(variants[variant].sum())
    elif size is not None and size < cand.sum():
        if cfg.method in METHODS:
            mask, scores = select(cfg.method, r, k, cand, pool.cat, size, cfg.floor_share)
        else:
            full = weighted_accuracy(np.ones((1, pool.Q)), r, k)[0]
            mask, scores = build(cfg.method, r, k, cand, pool.cat, size, cfg.floor_share, seed, full_acc=full)
        selected = True
    else:
        mask, scores, selected = cand.copy(), None, False
    if variant != "stages":
        # the chosen selection applies only some stages: the others remove nothing, their flags stay reported
        st = _variant_stages(cfg)[variant]
        sub = apply_stages({s_: flags[s_] for s_ in st}, st, pool.Q)
        applied = {**applied, "stage": sub["stage"], "reason": sub["reason"], "kept": sub["kept"],
                   "removed_by_stage": {s_: sub["removed_by_stage"].get(s_, 0) for s_ in cfg.order}}
        cand = sub["kept"]
    return {"flags": flags, "applied": applied, "candidates": cand, "mask": mask, "scores": scores,
            "size_trace": trace, "selected": bool(selected), "choice": choice, "variant": variant,
            "method_used": used}


def _choice_brief(cur: dict) -> dict | None:
    c = cur.get("choice")
    if c is None:
        return None
    return {k: c[k] for k in ("candidate", "variant", "method", "beats_random_inner", "random_inner_tau",
                              "inner_folds", "inner_pairs", "sd_full", "sd_constraint_applied", "statement", "tolerance", "candidates")}


def _rank_metrics(cur: np.ndarray, full: np.ndarray, names: list[str], top_k: int) -> dict:
    top1, topk = top_agreement(cur, full, top_k)
    return {"spearman_rho": float(spearman(cur, full)), "kendall_tau": float(kendall_tau_b(cur, full)),
            "top1_agreement": top1, "topk_agreement": topk, "top_k": int(min(top_k, len(names))),
            "leader_changes_on_drop": leader_change_on_drop(cur, full, names)}


def _boot_rho(pool: _Pool, jobs: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
              cfg: CurateConfig) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bootstrap replicates (n_boot,) of rho and tau for every split at once.

    ``jobs``: (item mask, test model columns, reference accuracies or None = the models' bootstrap
    accuracy on the whole pool). Poisson(1) item weights shared by every split of the run (seed key
    ``[seed, 7]``); per batch of replicates one float32 matrix product gives every model's whole-pool
    numerator and denominator and every split's curated ones (the masked columns stacked side by side)."""
    from .measures import boot_weights

    cols, spans = [], []
    at = 2 * len(pool.models)
    for mask, test, _ref in jobs:
        m = np.asarray(mask, dtype=np.float32)[:, None]
        cols += [pool.xk32[:, test] * m, pool.known32[:, test] * m]
        spans.append((at, len(test)))
        at += 2 * len(test)
    z = np.concatenate([pool.xk32, pool.known32, *cols], axis=1)
    M = len(pool.models)
    rho: list[list[np.ndarray]] = [[] for _ in jobs]
    tau: list[list[np.ndarray]] = [[] for _ in jobs]
    for w8 in boot_weights((cfg.seed, 7), pool.Q, cfg.n_boot):
        prod = (w8.astype(np.float32) @ z).astype(np.float64)  # exact integer sums (< 2^24) in float32
        with np.errstate(invalid="ignore", divide="ignore"):
            full_all = np.where(prod[:, M:2 * M] > 0, prod[:, :M] / np.maximum(prod[:, M:2 * M], 1e-30), np.nan)
            for j, ((_m, test, ref), (a, n)) in enumerate(zip(jobs, spans)):
                num, den = prod[:, a:a + n], prod[:, a + n:a + 2 * n]
                cur = np.where(den > 0, num / np.maximum(den, 1e-30), np.nan)
                full = full_all[:, test] if ref is None else np.broadcast_to(ref, cur.shape)
                rho[j].append(spearman(cur, full))
                tau[j].append(kendall_tau_b(cur, full))
    return [(np.concatenate(r), np.concatenate(t)) for r, t in zip(rho, tau)]


def _score_estimation(pool: _Pool, train: np.ndarray, test: np.ndarray, budget: int, seed: int) -> dict:
    """Every estimator's absolute error on the held-out models and the one chosen by inner CV (:mod:`.estimate`)."""
    from .estimate import score_split

    return score_split(pool.right, pool.known, train, test, budget, seed, pool.cat)


# ---------------------------------------------------------------------------------------- splits
def _design(M: int, cfg: CurateConfig) -> tuple[str, int, str]:
    """(mode, folds, why): k-fold over models when every fold holds at least ``min_heldout_models`` models
    (``--folds`` lowered to fit if needed), leave-one-model-out otherwise."""
    need = int(cfg.min_heldout_models)
    k = int(min(cfg.n_folds, M // need))
    if k >= 2:
        why = (f"{k}-fold over models (at least {need} held-out models per fold)" if k == cfg.n_folds else
               f"{k}-fold over models instead of {cfg.n_folds}: {cfg.n_folds} folds of {M} models would hold fewer "
               f"than {need} models each")
        return "folds", k, why
    return "leave_one_model_out", M, (
        f"leave-one-model-out: {M} models cannot make 2 folds of at least {need} held-out models, and a rank "
        f"correlation over fewer models moves in coarse steps (over 3 models rho is -1, -0.5, 0.5 or 1), so no "
        f"fold-level rho is presented; each model is left out in turn, the selection is rebuilt from the others, "
        f"and its rank among all models on the curated set is compared with its rank on the whole pool")


def _splits(models: list[str], cfg: CurateConfig, model_dates: dict[str, Any] | None) -> list[tuple[str, np.ndarray]]:
    M = len(models)
    rng = np.random.default_rng([cfg.seed, 3])
    mode, k, _why = _design(M, cfg)
    out = []
    if mode == "folds":
        for i, te in enumerate(np.array_split(rng.permutation(M), k)):
            out.append((f"fold_{i + 1}", np.sort(te)))
    else:
        out = [(f"lomo_{j + 1}", np.array([j])) for j in range(M)]
    if model_dates:
        known = [j for j, m in enumerate(models) if m in model_dates and model_dates[m] is not None]
        if len(known) >= 4:
            order = sorted(known, key=lambda j: (str(model_dates[models[j]]), models[j]))
            n_new = max(2, int(round(cfg.newest_share * len(order))))
            if len(order) - n_new >= 2 and n_new >= cfg.min_heldout_models:
                out.append(("newest", np.sort(np.array(order[-n_new:]))))
    return out


def _ranks_desc(acc: np.ndarray) -> np.ndarray:
    """Rank 1 = highest accuracy (ties share the mean rank), along the last axis."""
    from scipy.stats import rankdata

    return rankdata(-np.nan_to_num(np.asarray(acc, dtype=np.float64), nan=-1.0), method="average", axis=-1)


def _evaluate_split(pool: _Pool, cfg: CurateConfig, test: np.ndarray, tst_excess, text_cache, *,
                    ref_full: np.ndarray | None = None, with_baselines: bool = True, ibp_mask=None,
                    score_estimation: bool = True, lomo: bool = False) -> dict:
    M = len(pool.models)
    train = np.setdiff1d(np.arange(M), test)
    sub = pool.frame.without_models([pool.models[j] for j in test])
    fnd = audit_findings(sub, seed=cfg.seed, text_cache=text_cache)
    cur = _curate(pool, fnd, cfg, train, tst_excess, seed=cfg.seed)
    mask = cur["mask"]
    names = [pool.models[j] for j in test]
    ref = pool.full_acc[test] if ref_full is None else ref_full
    r_te, k_te = pool.right[:, test], pool.known[:, test]
    acc_cur = weighted_accuracy(mask[None, :].astype(np.float64), r_te, k_te)[0]
    ch = cur.get("choice")
    out = {"test_models": names, "n_train_models": int(len(train)), "n_after": int(mask.sum()),
           "n_after_stages": int(cur["candidates"].sum()), "removed_by_stage": cur["applied"]["removed_by_stage"],
           "selection": ch["candidate"] if ch else f"{cur['variant']}/{cur['method_used']}",
           "selection_beats_random_inner": ch["beats_random_inner"] if ch else None,
           "curated_accuracy": dict(zip(names, acc_cur.tolist()))}
    if lomo:
        out.update(_lomo_metrics(pool, cfg, mask, int(test[0])))
    else:
        out.update(_rank_metrics(acc_cur, ref, names, cfg.top_k))
        out["_job"] = (mask, test, ref_full)
    if with_baselines and mask.sum() > 0:
        out["baselines"] = _baselines(pool, cfg, train, test, int(mask.sum()), ref, names, ibp_mask, lomo=lomo)
    if score_estimation and cfg.score_budget > 0 and len(train) >= 3:
        out["_score"] = _score_estimation(pool, train, test, cfg.score_budget, cfg.seed)
    return out


def _lomo_metrics(pool: _Pool, cfg: CurateConfig, weights: np.ndarray, j: int) -> dict:
    """The left-out model's rank among all models on the selection vs on the whole pool, and the same for
    every random stratified draw of the same size (the draws do not depend on the models)."""
    w = np.asarray(weights, dtype=np.float64)
    acc = weighted_accuracy(w[None, :], pool.right, pool.known)[0]
    full_rank = _ranks_desc(pool.full_acc)
    rank = _ranks_desc(acc)
    out = {"rank_full": float(full_rank[j]), "rank_curated": float(rank[j]),
           "rank_displacement": float(abs(rank[j] - full_rank[j])),
           "curated_accuracy_all": float(acc[j])}
    size = int((w > 0).sum())
    ra = pool.random_accuracy(size, cfg.n_random, cfg.seed)
    out["_rand_disp"] = np.abs(_ranks_desc(ra)[:, j] - full_rank[j])
    return out


def _baselines(pool: _Pool, cfg: CurateConfig, train, test, size: int, ref, names, ibp_mask, *,
               lomo: bool = False) -> dict:
    r_tr, k_tr = pool.right[:, train], pool.known[:, train]
    r_te, k_te = pool.right[:, test], pool.known[:, test]
    out: dict[str, Any] = {}
    for b in cfg.baselines:
        if b == "random_subset":
            if lomo:
                continue  # the random draws are in every left-out model's own figures (_rand_disp)
            acc = pool.random_accuracy(size, cfg.n_random, cfg.seed)[:, test]
            rho = spearman(acc, np.broadcast_to(ref, acc.shape))
            tau = kendall_tau_b(acc, np.broadcast_to(ref, acc.shape))
            lo, hi = np.nanquantile(rho, [0.025, 0.975])
            out[b] = {"spearman_rho": float(np.nanmean(rho)), "spearman_rho_interval": [float(lo), float(hi)],
                      "kendall_tau": float(np.nanmean(tau)), "n_draws": int(cfg.n_random), "_rho_draws": rho}
            continue
        if b == "lime_pass_count":
            w = bl.lime_pass_count(r_tr, k_tr, size)
        elif b == "kmeans_anchors":
            w = bl.kmeans_anchors(r_tr, k_tr, size, cfg.seed)
        elif b == "point_biserial":
            w = bl.top_point_biserial(r_tr, k_tr, pool.cat, size, cfg.floor_share)
        elif b == "ibp":
            if ibp_mask is None:
                continue
            w = ibp_mask
        else:  # pragma: no cover - validated in the config
            continue
        if lomo:
            m = _lomo_metrics(pool, cfg, w, int(test[0]))
            out[b] = {"rank_displacement": m["rank_displacement"], "n_items": int((w > 0).sum())}
            continue
        acc = weighted_accuracy(w[None, :], r_te, k_te)[0]
        out[b] = {**_rank_metrics(acc, ref, names, cfg.top_k), "n_items": int((w > 0).sum())}
    return out


def _mean_ci(err: np.ndarray, seed_key: tuple, n_boot: int = 2000) -> list[float]:
    """Percentile bootstrap interval (over models) of the mean absolute error, in points."""
    rng = np.random.default_rng(list(seed_key))
    idx = rng.integers(0, len(err), size=(n_boot, len(err)))
    lo, hi = np.quantile(100 * err[idx].mean(axis=1), [0.025, 0.975])
    return [float(lo), float(hi)]


def _mean_over(splits: list[dict], key: str) -> float | None:
    v = [s[key] for s in splits if s.get(key) is not None and np.isfinite(s[key])]
    return float(np.mean(v)) if v else None


def _aggregate(folds: list[dict], cfg: CurateConfig) -> dict:
    """Mean over folds with the bootstrap interval of the mean; baselines likewise."""
    rho_b = np.nanmean(np.stack([f["_boot"][0] for f in folds]), axis=0)
    tau_b = np.nanmean(np.stack([f["_boot"][1] for f in folds]), axis=0)
    agg = {
        "heldout_spearman_rho": _mean_over(folds, "spearman_rho"),
        "heldout_spearman_rho_ci": [float(x) for x in np.nanquantile(rho_b, [0.025, 0.975])],
        "heldout_kendall_tau": _mean_over(folds, "kendall_tau"),
        "heldout_kendall_tau_ci": [float(x) for x in np.nanquantile(tau_b, [0.025, 0.975])],
        "heldout_spearman_rho_min_fold": float(np.nanmin([f["spearman_rho"] for f in folds])),
        "heldout_top1_agreement": float(np.mean([f["top1_agreement"] for f in folds])),
        "heldout_topk_agreement": float(np.mean([f["topk_agreement"] for f in folds])),
        "heldout_leader_changes_on_drop": sorted({m for f in folds for m in f["leader_changes_on_drop"]}),
    }
    base: dict[str, Any] = {}
    names = [b for b in cfg.baselines if all(b in f.get("baselines", {}) for f in folds)]
    for b in names:
        fs = [f["baselines"][b] for f in folds]
        if b == "random_subset":
            draws = np.nanmean(np.stack([x["_rho_draws"] for x in fs]), axis=0)
            lo, hi = np.nanquantile(draws, [0.025, 0.975])
            cur = agg["heldout_spearman_rho"]
            base[b] = {"spearman_rho": float(np.nanmean(draws)), "spearman_rho_interval": [float(lo), float(hi)],
                       "kendall_tau": float(np.mean([x["kendall_tau"] for x in fs])), "n_draws": int(cfg.n_random),
                       "share_draws_at_least_curated": float(np.mean(draws >= cur - 1e-12)) if cur is not None else None,
                       "draw_rule": f"numpy default_rng([seed, 5]) per fold, {cfg.n_random} stratified draws"}
        else:
            base[b] = {"spearman_rho": _mean_over(fs, "spearman_rho"), "kendall_tau": _mean_over(fs, "kendall_tau"),
                       "top1_agreement": float(np.mean([x["top1_agreement"] for x in fs])),
                       "topk_agreement": float(np.mean([x["topk_agreement"] for x in fs])),
                       "n_items": int(np.mean([x["n_items"] for x in fs]))}
    agg["baselines"] = base
    if "random_subset" in base:
        r = base["random_subset"]
        agg["random_subset_rho_mean"] = r["spearman_rho"]
        agg["random_subset_rho_interval"] = r["spearman_rho_interval"]
        cur = agg["heldout_spearman_rho"]
        lo, hi = r["spearman_rho_interval"]
        ci = agg["heldout_spearman_rho_ci"]
        figs = (f"held-out rho {cur:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] vs {r['spearman_rho']:.3f} for random stratified "
                f"subsets of the same size (95% of draws [{lo:.3f}, {hi:.3f}])" if cur is not None else "")
        if cur is None:
            verdict = "not measured"
        elif cur > hi:
            verdict = f"better than random: {figs}"
        elif cur < lo:
            verdict = (f"worse than random: {figs}; the curated set ranks unseen models less faithfully than a random "
                       f"subset would")
        else:
            side = "above" if cur > r["spearman_rho"] else "below" if cur < r["spearman_rho"] else "at"
            verdict = (f"not distinguishable from random: {figs}; the point estimate is {side} the random mean, "
                       "within the spread of random draws")
        agg["versus_random"] = verdict
        agg["worse_than_random"] = bool(cur is not None and cur < lo)
    return agg


def _aggregate_lomo(splits: list[dict], pool: _Pool, cfg: CurateConfig) -> dict:
    """Leave-one-model-out: mean rank displacement of the left-out model, against random subsets."""
    disp = np.array([s["rank_displacement"] for s in splits], dtype=np.float64)
    rand = np.stack([s.pop("_rand_disp") for s in splits])          # (M, draws)
    per_draw = rand.mean(axis=0)
    lo, hi = (float(x) for x in np.quantile(per_draw, [0.025, 0.975]))
    cur = float(disp.mean())
    idx = np.random.default_rng([cfg.seed, 43]).integers(0, len(disp), size=(2000, len(disp)))
    ci = [float(x) for x in np.quantile(disp[idx].mean(axis=1), [0.025, 0.975])]
    figs = (f"left-out model's mean rank displacement {cur:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] ranks vs {per_draw.mean():.2f} "
            f"for random stratified subsets of the same size (95% of draws [{lo:.2f}, {hi:.2f}]; lower is better)")
    if cur < lo:
        verdict = f"better than random: {figs}"
    elif cur > hi:
        verdict = f"worse than random: {figs}"
    else:
        side = "better than" if cur < per_draw.mean() else "worse than" if cur > per_draw.mean() else "at"
        verdict = (f"not distinguishable from random: {figs}; the point estimate is {side} the random mean, "
                   "within the spread of random draws")
    base = {}
    for b in cfg.baselines:
        v = [s["baselines"][b]["rank_displacement"] for s in splits if b in s.get("baselines", {})]
        if len(v) == len(splits):
            base[b] = {"mean_rank_displacement": float(np.mean(v))}
    base["random_subset"] = {"mean_rank_displacement": float(per_draw.mean()), "interval": [lo, hi],
                             "n_draws": int(cfg.n_random)}
    return {"models": [s["test_models"][0] for s in splits], "rank_displacement": disp.tolist(),
            "rank_full": [s["rank_full"] for s in splits], "rank_curated": [s["rank_curated"] for s in splits],
            "mean_rank_displacement": cur, "mean_rank_displacement_ci": ci,
            "exact_rank_share": float(np.mean(disp == 0)),
            "random_mean_rank_displacement": float(per_draw.mean()), "random_interval": [lo, hi],
            "baselines": base, "versus_random": verdict, "worse_than_random": bool(cur > hi),
            "interval": "percentile bootstrap over the left-out models (2000 replicates, seed key [seed, 43])",
            "selections": [s["selection"] for s in splits]}


# ---------------------------------------------------------------------------------------- main entry
#: pools of at least this many (item, model) cells re-curate the pool with junk (:func:`_junk`) in a worker
#: process beside the held-out splits, when ``parallel`` and a second CPU is free: the worker's start (a spawned
#: interpreter, about 1.5 s of imports on the second CPU) overlaps the first audit, and the junk stage is about
#: as long as the held-out splits (5,000 x 150: 17.4 s and 17.1 s). Smaller pools curate in a few seconds, where
#: the start would cost more than it saves. The numbers are the same either way.
WORKER_MIN_CELLS = 30_000


def run_curation(frame, config: CurateConfig | None = None, *, tst_excess: np.ndarray | None = None,
                 model_dates: dict[str, Any] | None = None,
                 progress: Callable[[str], None] | None = None, parallel: bool = False) -> CurationResult:
    """Curate ``frame`` and measure the curated set (see the module docstring). ``parallel``: the junk-injection
    stage runs in a worker process beside the held-out splits on pools of :data:`WORKER_MIN_CELLS` cells or
    more (``benchaudit curate`` does; the result is the same)."""
    from threadpoolctl import threadpool_limits

    from ..engine.worker import start_worker

    cfg = config or CurateConfig()
    cfg.validate(frame.n_questions)
    wants = (parallel and any(f > 0 for f in cfg.junk_fractions)
             and frame.n_questions * len(frame.models_in("full")) >= WORKER_MIN_CELLS)
    worker = start_worker(wants)
    try:
        with threadpool_limits(limits=cfg.threads):
            return _run_curation(frame, cfg, tst_excess=tst_excess, model_dates=model_dates, progress=progress,
                                 worker=worker)
    finally:
        if worker is not None:
            worker.close()


def _junk_job(frame, field: str, cfg: CurateConfig, frac: float, model_dates, chosen) -> tuple[dict, float]:
    """:func:`_junk` in the worker process (its own BLAS thread limit; the clean pool rebuilt from ``frame``), and
    the seconds it took there."""
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    with threadpool_limits(limits=cfg.threads):
        res = _junk(frame, _Pool(frame, field), cfg, frac, model_dates, chosen)
    return res, time.perf_counter() - t0


def _run_curation(frame, cfg: CurateConfig, *, tst_excess, model_dates, progress, worker=None) -> CurationResult:
    step = progress or (lambda _m: None)
    t_all = time.perf_counter()
    timings: dict[str, float] = {}

    def tick(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 3)

    t0 = time.perf_counter()
    step("audit findings (all models)")
    fnd = audit_findings(frame, seed=cfg.seed)
    pool = _Pool(frame, fnd.field)
    text_cache = text_columns(fnd)
    tick("findings", t0)

    # ---- in pool
    t0 = time.perf_counter()
    step("stages and selection")
    M = len(pool.models)
    cur = _curate(pool, fnd, cfg, np.arange(M), tst_excess, seed=cfg.seed)
    kept = cur["mask"]
    applied = cur["applied"]
    acc_cur = weighted_accuracy(kept[None, :].astype(np.float64), pool.right, pool.known)[0]
    inpool = _rank_metrics(acc_cur, pool.full_acc, pool.models, cfg.top_k)
    tick("in_pool", t0)

    # ---- discrimination and visual dependency, before / after
    t0 = time.perf_counter()
    step("discrimination")
    allm = np.ones(pool.Q, dtype=bool)
    d_before = discrimination(allm, pool.right, pool.known, seed_key=(cfg.seed, 13), n_boot=cfg.pair_boot)
    d_after = discrimination(kept, pool.right, pool.known, seed_key=(cfg.seed, 13), n_boot=cfg.pair_boot)
    vd = _visual(fnd.table, cfg.thresholds, allm, kept)
    tick("discrimination", t0)

    # ---- junk injection, started in the worker (when there is one) beside the IBP baseline and the held-out splits
    chosen = (cur["variant"], cur["method_used"])
    fracs = [f for f in cfg.junk_fractions if f > 0]
    jobs = [worker.submit(_junk_job, frame, fnd.field, cfg, frac, model_dates, chosen) if worker is not None else None
            for frac in fracs]
    if any(j is not None for j in jobs):
        step("junk injection (in a worker process, beside the held-out splits)")

    # ---- IBP (text only: one selection for every split)
    ibp, ibp_info = _ibp_baseline(frame, pool, cfg, kept, step, tick)

    # ---- held-out splits and bootstrap intervals (the in-pool selection's first)
    folds, newest, (rho_b, tau_b), heldout, heldout_acc = _heldout_splits(
        pool, cfg, kept, model_dates, tst_excess, text_cache, ibp, step, tick, worker=worker, field=fnd.field)

    score = _pooled_score_error(folds, pool, cfg)
    if "heldout_lomo" in heldout and folds and all("_score" in f for f in folds):
        # leave-one-model-out: each left-out model's accuracy error beside its rank displacement
        heldout["heldout_lomo"]["accuracy_error_points"] = [
            float(100 * f["_score"]["abs_err"][f["_score"]["chosen"]][0]) for f in folds]

    # ---- junk injection: the worker's results, or run here (no worker, or it died: its result is lost)
    junk, t_junk, t_wait = [], 0.0, 0.0
    for frac, job in zip(fracs, jobs):
        t0 = time.perf_counter()
        if job is not None and worker.wait(job):
            res, secs = job.get()
            junk.append(res)
            t_junk += secs
            t_wait += time.perf_counter() - t0
            continue
        step(f"junk injection {frac:.0%}")
        junk.append(_junk(frame, pool, cfg, frac, model_dates, chosen=chosen))
        t_junk += time.perf_counter() - t0
    if junk:
        timings["junk"] = round(t_junk, 3)  # the stage's own seconds, wherever it ran
    if any(j is not None for j in jobs):
        timings["junk_wait"] = round(t_wait, 3)  # what this process waited for the worker's share

    # ---- outputs
    kept_by, removed = _explain(pool, cur, cfg)
    summary = _summary(pool, cfg, cur, applied, inpool, rho_b, tau_b, d_before, d_after, vd, heldout, folds, newest,
                       score, junk, ibp_info, fnd, tst_excess)
    timings["total"] = round(time.perf_counter() - t_all, 3)
    summary["timings_s"] = timings
    scores = pd.DataFrame({"model": pool.models, "accuracy_full": pool.full_acc, "accuracy_curated": acc_cur,
                           "accuracy_curated_heldout": [heldout_acc.get(m, np.nan) for m in pool.models]})
    findings = fnd.table.copy()
    findings.insert(0, "question_id", frame.questions["question_id"].astype(str).to_numpy())
    return CurationResult(frame=frame, config=cfg, kept=kept, kept_by=kept_by, removed=removed, findings=findings,
                          summary=summary, model_scores=scores, timings=timings)


def _split(pool: _Pool, cfg: CurateConfig, name: str, test: np.ndarray, tst_excess, text_cache, ibp) -> dict:
    """One held-out split (:func:`_evaluate_split`), named."""
    res = _evaluate_split(pool, cfg, test, tst_excess, text_cache, ibp_mask=ibp,
                          score_estimation=name != "newest",  # the score MAE is over the folds
                          lomo=name.startswith("lomo_"))
    res["split"] = name
    return res


def _splits_job(frame, field: str, cfg: CurateConfig, splits: list, tst_excess, text_cache, ibp) -> dict[int, dict]:
    """In the worker process: the held-out splits it claims (indices into ``splits``, handed out once each by the
    worker's shared counter, :class:`~audit_hub.engine.calibration.SimClaims`, to whichever process asks first)."""
    from threadpoolctl import threadpool_limits

    from ..engine import worker as worker_state
    from ..engine.calibration import SimClaims

    claims = SimClaims(worker_state.SIM_COUNTER, len(splits))
    pool, out = None, {}
    with threadpool_limits(limits=cfg.threads):
        while (i := claims.next()) is not None:
            pool = pool or _Pool(frame, field)
            out[i] = _split(pool, cfg, *splits[i], tst_excess, text_cache, ibp)
    return out


def _split_results(pool: _Pool, cfg: CurateConfig, splits: list, tst_excess, text_cache, ibp, step, worker,
                   field: str | None) -> list[dict]:
    """Every split's result, in order. With a worker, both processes claim splits from one shared counter (each
    split's result depends on the split alone, so not on who ran it); the splits of a worker that died are run here."""
    from ..engine.calibration import SimClaims

    job = None
    if worker is not None and field is not None and len(splits) > 1:
        with worker.counter.get_lock():
            worker.counter.value = 0
        job = worker.submit(_splits_job, pool.frame, field, cfg, splits, tst_excess, text_cache, ibp)
    claims = SimClaims(worker.counter if job is not None else None, len(splits))
    done: dict[int, dict] = {}
    while (i := claims.next()) is not None:
        step(f"held-out split {splits[i][0]}")
        done[i] = _split(pool, cfg, *splits[i], tst_excess, text_cache, ibp)
    if job is not None and worker.wait(job):
        done.update(job.get())
    for i, (name, test) in enumerate(splits):
        if i not in done:  # claimed by a worker that is gone
            step(f"held-out split {name}")
            done[i] = _split(pool, cfg, name, test, tst_excess, text_cache, ibp)
    return [done[i] for i in range(len(splits))]


def _heldout_splits(pool: _Pool, cfg: CurateConfig, kept: np.ndarray, model_dates, tst_excess, text_cache, ibp,
                    step, tick, worker=None, field: str | None = None):
    """Select with the training models of each split, evaluate on the held-out ones; bootstrap every split at once.
    ``worker``: a :class:`~audit_hub.engine.worker.WorkerProcess` that runs some of the splits (``field``: the
    correctness field of ``pool``)."""
    M = len(pool.models)
    t0 = time.perf_counter()
    splits = _splits(pool.models, cfg, model_dates)
    folds, newest = [], None
    mode, _k, _why = _design(M, cfg)
    done = _split_results(pool, cfg, splits, tst_excess, text_cache, ibp, step, worker, field)
    for (name, _test), res in zip(splits, done):
        if name == "newest":
            newest = res
        else:
            folds.append(res)
    tick("heldout", t0)
    t0 = time.perf_counter()
    step("bootstrap intervals")
    splits_run = [f for f in [*folds, *([newest] if newest is not None else [])] if "_job" in f]
    boots = _boot_rho(pool, [(kept, np.arange(M), None)] + [f.pop("_job") for f in splits_run], cfg)
    rho_b, tau_b = boots[0]
    for f, b in zip(splits_run, boots[1:]):
        f["_boot"] = b
    tick("bootstrap", t0)
    if mode == "folds":
        heldout = _aggregate(folds, cfg) if folds else {}
    else:
        lomo = _aggregate_lomo(folds, pool, cfg)
        heldout = {"heldout_spearman_rho": None, "heldout_lomo": lomo, "versus_random": lomo["versus_random"],
                   "worse_than_random": lomo["worse_than_random"], "baselines": lomo["baselines"]}
    heldout_acc = {}
    for f in folds:
        heldout_acc.update(f["curated_accuracy"])

    return folds, newest, (rho_b, tau_b), heldout, heldout_acc


def _ibp_baseline(frame, pool: _Pool, cfg: CurateConfig, kept: np.ndarray, step, tick):
    """Iterative Bias Pruning at the curated size (text only: one selection serves every split)."""
    ibp = None
    ibp_info: dict[str, Any] = {}
    want_ibp = "ibp" in cfg.baselines and (cfg.ibp == "on" or (cfg.ibp == "auto" and pool.Q <= cfg.ibp_max_items))
    if "ibp" in cfg.baselines and not want_ibp:
        ibp_info = {"skipped": f"pool has {pool.Q:,} items > {cfg.ibp_max_items:,} (--ibp on runs it)"
                    if cfg.ibp == "auto" else "--ibp off"}
    elif want_ibp and kept.sum() < pool.Q:
        t0 = time.perf_counter()
        step("iterative bias pruning baseline")
        try:
            ibp, ibp_info = bl.ibp_mask(frame, int(kept.sum()), cfg.seed)
        except InputError as e:
            ibp_info = {"skipped": str(e)}
        tick("ibp", t0)
    return ibp, ibp_info


def _pooled_score_error(folds: list[dict], pool: _Pool, cfg: CurateConfig) -> dict | None:
    """Each held-out model's whole-pool accuracy estimated from a small item budget, pooled over the splits:
    every estimator's MAE with a bootstrap-over-models interval, and the reported one (each split's estimator
    chosen by inner cross-validation on its training models)."""
    from .estimate import ANCHOR_ESTIMATORS, ENSEMBLE_PARTS, ESTIMATORS, LOO_MAX_TRAIN, margin_words

    if not folds or not all("_score" in f for f in folds):
        return None
    sc = [f["_score"] for f in folds]
    errs = {k: np.concatenate([x["abs_err"][k] for x in sc]) for k in ESTIMATORS}
    chosen = np.concatenate([x["abs_err"][x["chosen"]] for x in sc])
    by = {k: {"mae_points": float(100 * v.mean()), "mae_points_ci": _mean_ci(v, (cfg.seed, 19, i))}
          for i, (k, v) in enumerate(errs.items())}
    mae = float(100 * chosen.mean())
    rnd = by["random"]["mae_points"]
    anchors = min(by[k]["mae_points"] for k in ANCHOR_ESTIMATORS)
    word = "below" if mae < rnd else "above" if mae > rnd else "equal to"
    names = sorted({x["chosen"] for x in sc})
    return {"n_items": int(min(cfg.score_budget, pool.Q)),
            "method": "per split, the ensemble of the estimators on one stratified random draw of the budget ("
                      f"{', '.join(ENSEMBLE_PARTS)}; weights 1 / inner MAE^2) unless an estimator on other items has an inner "
                      f"cross-validated MAE (leave one training model out up to {LOO_MAX_TRAIN} training models, 3 "
                      "folds above) "
                      f"is lower by more than {margin_words()} of the paired difference "
                      f"(chosen: {', '.join(names)}); every estimator reads the held-out model's answers on "
                      "budget items only",
            "mae_points": mae, "mae_points_ci": _mean_ci(chosen, (cfg.seed, 19)),
            "mae_points_by_estimator": {k: v["mae_points"] for k, v in by.items()},
            "by_estimator": by,
            "chosen_per_split": [x["chosen"] for x in sc],
            "inner_mae_points_per_split": [x["inner_mae_points"] for x in sc],
            "inner_folds_per_split": [x["inner_folds"] for x in sc],
            "versus_random": (f"reported MAE {mae:.2f} points is {word} plain random items' {rnd:.2f} at the same size "
                              f"(anchors: {anchors:.2f})"),
            "beats_random": bool(mae < rnd), "beats_anchors": bool(mae < anchors),
            "max_abs_error_points": float(100 * chosen.max()),
            "lambda_per_fold": [x["lambda"] for x in sc],
            "ensemble_weights_per_split": [x.get("ensemble_weights") for x in sc],
            "irt_converged_per_fold": [bool(x["irt_converged"]) for x in sc],
            "irt_iterations_per_fold": [x["irt_iterations"] for x in sc],
            "irt_not_eligible_because": [x["irt_not_eligible_because"] for x in sc],
            "n_models": int(len(chosen)), "target": "each held-out model's accuracy on the whole pool"}


def _visual(t: pd.DataFrame, th: StageThresholds, before: np.ndarray, after: np.ndarray) -> dict:
    from . import roles
    from .filters import image_counts

    if roles.column(roles.IMAGE_GAIN, "f") not in t.columns:
        return {"computed": False, "reason": "no blind runs (the image-gain detector was skipped)"}
    f, b, mf, mb = image_counts(t)
    ok = (f >= 0) & (b >= 0)
    bs = np.where(ok, b / np.maximum(mb, 1), np.nan)
    gain = np.where(ok, f / np.maximum(mf, 1) - bs, np.nan)
    solvable = ok & (bs >= th.blind_min_share) & (gain <= th.max_gain)

    def part(m):
        m = m & ok
        n = int(m.sum())
        return {"n_items": n, "blind_solvable_share": float(solvable[m].mean()) if n else None,
                "mean_gain_from_image": float(np.mean(gain[m])) if n else None,
                "blind_accuracy": float(np.mean(bs[m])) if n else None}

    return {"computed": True, "definition": f"blind-solvable: blind share >= {th.blind_min_share:g} and gain "
                                            f"<= {th.max_gain:g}; gain = f/Mf - b/Mb (the image-gain detector's counts)",
            "before": part(before), "after": part(after)}


def _explain(pool: _Pool, cur: dict, cfg: CurateConfig) -> tuple[np.ndarray, pd.DataFrame]:
    applied = cur["applied"]
    kept = cur["mask"]
    if not cfg.stages:
        passed = "no stages run"
    elif cur["variant"] != "stages":
        st = _variant_stages(cfg)[cur["variant"]]
        passed = (("passed " + ", ".join(st)) if st else "no stage applied") + \
            " (the chosen selection applies only these stages)"
    else:
        passed = "passed " + ", ".join(cfg.order)
    kept_by = np.where(kept, passed, "").astype(object)
    ids = pool.frame.questions["question_id"].astype(str).to_numpy()
    stage = applied["stage"].copy()
    reason = applied["reason"].copy()
    if cur["selected"] and cur["scores"] is None:
        label = f"{cur['variant']}/{cur['method_used']}".replace("_", "-")
        how = " (chosen by inner cross-validation)" if cur.get("choice") else ""
        kept_by[kept] = f"{passed}; selected by {label}{how}"
        dropped = cur["candidates"] & ~kept
        stage[dropped] = "selection"
        reason[dropped] = f"not selected by {label}{how} at the target size {int(kept.sum()):,}"
    elif cur["selected"]:
        sc = cur["scores"]
        cand = cur["candidates"]
        order = np.flatnonzero(cand)[np.lexsort((np.flatnonzero(cand), -np.nan_to_num(sc[cand], nan=-np.inf)))]
        rank = np.zeros(pool.Q, dtype=np.int64)
        rank[order] = np.arange(1, len(order) + 1)
        from .select import select_top

        _, via_floor = select_top(sc, cand, pool.cat, int(kept.sum()), cfg.floor_share, with_floor=True)
        label = cur["method_used"].replace("_", "-")
        k_idx = np.flatnonzero(kept)
        kept_by[k_idx] = [f"{passed}; selected: {label} rank {rank[i]:,} of {len(order):,} (score {sc[i]:.3f})"
                          + (" via its category's floor" if via_floor[i] else "") for i in k_idx]
        dropped = cand & ~kept
        stage[dropped] = "selection"
        reason[dropped] = [f"not selected: {label} rank {rank[i]:,} of {len(order):,} (score {sc[i]:.3f}) below "
                           f"the target size {int(kept.sum()):,}" for i in np.flatnonzero(dropped)]
    rm = ~kept
    flags = cur["flags"]
    also = np.full(pool.Q, "", dtype=object)
    for s in cfg.order:
        m = flags[s][0] & rm & (stage != s)
        also[m] = np.where(also[m] == "", s, also[m] + ", " + s)
    removed = pd.DataFrame({"question_id": ids[rm], "stage": stage[rm].astype(str), "reason": reason[rm].astype(str),
                            "also_flagged_by": also[rm].astype(str),
                            "category": np.array(pool.cat_labels, dtype=object)[pool.cat[rm]]})
    return kept_by, removed


def _junk(frame, pool: _Pool, cfg: CurateConfig, frac: float, model_dates, chosen=None) -> dict:
    """Curation re-run on the pool with junk. With ``method="auto"`` the candidate chosen on the clean pool is
    applied as an explicit method (no inner cross-validation on the junk pool: it would double the cost)."""
    from dataclasses import replace

    from .junk import inject_junk

    if cfg.method == "auto" and chosen is not None:
        variant, method = chosen
        cfg = replace(cfg, stages=tuple(s_ for s_ in _variant_stages(cfg).get(variant, cfg.stages) if s_ != DOUBTED),
                      method="point_biserial" if method == "all" else method)

    t0 = time.perf_counter()
    jf, ids = inject_junk(frame, frac, seed=cfg.seed)
    t_inject = time.perf_counter() - t0
    jpool = _Pool(jf, "hit" if jf.has_judged("full") else "hit_exact", left_out=[d["model"] for d in pool.left_out])
    fnd = audit_findings(jf, seed=cfg.seed)
    cur = _curate(jpool, fnd, cfg, np.arange(len(jpool.models)), None, seed=cfg.seed)
    qid = jf.questions["question_id"].astype(str).to_numpy()
    pos = {q: i for i, q in enumerate(qid)}
    surv = {}
    total_j, kept_j = 0, 0
    for kind, lst in ids.items():
        idx = np.array([pos[q] for q in lst], dtype=np.int64)
        k = int(cur["mask"][idx].sum()) if len(idx) else 0
        surv[kind] = {"injected": len(idx), "kept": k, "survival": k / len(idx) if len(idx) else None}
        total_j += len(idx)
        kept_j += k
    # held-out rho with junk present, against the clean pool's full accuracies
    text_cache = text_columns(fnd)
    model_pos = {m: j for j, m in enumerate(pool.models)}
    folds = []
    lomo = _design(len(jpool.models), cfg)[0] != "folds"
    for _name, test in ([] if lomo else _splits(jpool.models, cfg, None)):
        ref = pool.full_acc[[model_pos[jpool.models[j]] for j in test]]
        res = _evaluate_split(jpool, cfg, test, None, text_cache, ref_full=ref, with_baselines=False,
                              score_estimation=False)
        folds.append(res)
    boots = _boot_rho(jpool, [f.pop("_job") for f in folds], cfg) if folds else []
    rho_b = np.nanmean(np.stack([b[0] for b in boots]), axis=0) if folds else np.array([np.nan])
    kept_n = int(cur["mask"].sum())
    return {"fraction": frac, "n_junk": total_j, "n_pool_with_junk": int(jf.n_questions),
            "n_after": kept_n, "junk_kept": kept_j,
            "junk_survival": kept_j / total_j if total_j else None,
            "junk_share_of_curated": kept_j / kept_n if kept_n else None,
            "by_kind": surv, "heldout_spearman_rho": _mean_over(folds, "spearman_rho"),
            "heldout_spearman_rho_ci": [float(x) for x in np.nanquantile(rho_b, [0.025, 0.975])] if folds else None,
            "heldout_kendall_tau": _mean_over(folds, "kendall_tau"),
            "heldout_not_presented": ("too few models for folds of at least "
                                      f"{cfg.min_heldout_models} held-out models: survival only") if lomo else None,
            "reference": "held-out models' accuracy on the clean pool (without junk)",
            "seconds_building_pool": round(t_inject, 3), "selection": f"{cfg.method} after {', '.join(cfg.order) or 'no stage'}",
            "removed_by_stage": cur["applied"]["removed_by_stage"]}


def _in_pool_note(rho: float | None, rho_b: np.ndarray) -> str | None:
    """Why the in-pool rho can lie above its own bootstrap interval (None when it does not)."""
    hi = float(np.nanquantile(rho_b, 0.975)) if np.isfinite(rho_b).any() else None
    if rho is None or hi is None or not np.isfinite(rho) or rho <= hi:
        return None
    return ("the in-pool rho lies above its bootstrap interval: the selection was built to keep these models' "
            "order on these very items, which resampling the items undoes; the interval is what item noise alone "
            "leaves of it, and the held-out figure is the one to read")


def _summary(pool, cfg, cur, applied, inpool, rho_b, tau_b, d_before, d_after, vd, heldout, folds, newest, score,
             junk, ibp_info, fnd, tst_excess=None) -> dict:
    kept = cur["mask"]
    cut = truncated_by_arm(pool.frame.meta.get("pairing"))  # text-only runs that answered cut prompts
    strip = lambda d: {k: v for k, v in d.items() if not k.startswith("_")}  # noqa: E731
    fold_rows = []
    for f in folds:
        row = strip(f)
        if "baselines" in row:
            row["baselines"] = {b: strip(v) for b, v in row["baselines"].items()}
        fold_rows.append(row)
    if newest is not None:
        newest = strip(newest)
        if "baselines" in newest:
            newest["baselines"] = {b: strip(v) for b, v in newest["baselines"].items()}
    n_before = pool.Q
    n_after = int(kept.sum())
    disc_change = {k: relative_change(d_after.get(k), d_before.get(k)) for k in ("sd", "point_biserial", "significant_pairs")}
    out = {
        "n_before": n_before,
        "n_after": n_after,
        "reduction": 1 - n_after / n_before if n_before else None,
        "n_after_stages": int(cur["candidates"].sum()),
        "removed_by_stage": {**applied["removed_by_stage"],
                             **({"selection": int(cur["candidates"].sum() - n_after)} if cur["selected"] else {})},
        "flagged_by_stage": applied["flagged_by_stage"],
        "stage_overlaps": applied["overlaps"],
        "stage_order": list(cfg.order),
        "thresholds": cfg.thresholds.as_dict(),
        "selection": {"method": cur["method_used"] if cur["selected"] else None, "variant": cur["variant"],
                      "requested": cfg.method, "target_size": cfg.target_size,
                      "max_rank_loss": cfg.max_rank_loss, "category_floor_share": cfg.floor_share,
                      "size_search": cur["size_trace"]},
        "selection_choice": _choice_brief(cur),
        "stage_evidence": evidence_notes(fnd.table, tst_excess, cfg.stages, cut.get("blind")),
        "truncated_prompts": cut,
        "models": pool.models,
        "named_roles": dict(pool.frame.meta.get("named_roles") or {}),
        "empty_runs": list(pool.frame.meta.get("empty_runs") or []),
        "models_left_out": list(pool.left_out),
        "spearman_rho": inpool["spearman_rho"],
        "spearman_rho_ci": [float(x) for x in np.nanquantile(rho_b, [0.025, 0.975])],
        "kendall_tau": inpool["kendall_tau"],
        "kendall_tau_ci": [float(x) for x in np.nanquantile(tau_b, [0.025, 0.975])],
        "in_pool_interval_note": _in_pool_note(inpool["spearman_rho"], rho_b),
        "top1_agreement": inpool["top1_agreement"],
        "leader_changes_on_drop": inpool["leader_changes_on_drop"],
        **{k: v for k, v in heldout.items() if k != "baselines"},
        "heldout_design": {"mode": _design(len(pool.models), cfg)[0], "why": _design(len(pool.models), cfg)[2],
                           "folds": len(folds), "models_per_fold": [len(f["test_models"]) for f in folds],
                           "selection_per_fold": [f["selection"] for f in folds],
                           "fold_rule": f"numpy default_rng([seed, 3]).permutation over models, {len(folds)} folds",
                           "interval": "percentile bootstrap over items (Poisson(1) weights shared by the folds, n_boot="
                                       f"{cfg.n_boot}); covers item sampling given each fold's selection"},
        "folds": fold_rows,
        "newest_heldout": newest if newest is not None else {
            "computed": False, "reason": f"no model dates or order given, or the newest third holds fewer than "
                                         f"{cfg.min_heldout_models} models"},
        "baselines": heldout.get("baselines", {}),
        "ibp": ibp_info,
        "discrimination_before": {k: d_before[k] for k in ("sd", "point_biserial", "significant_pairs")},
        "discrimination_after": {k: d_after[k] for k in ("sd", "point_biserial", "significant_pairs")},
        "discrimination_change": disc_change,
        "discrimination_definitions": {
            "sd": "standard deviation (ddof=1) of the models' accuracies on the item set",
            "point_biserial": "mean over items of the item-rest point-biserial correlation across models",
            "significant_pairs": f"share of model pairs whose accuracy difference has a paired-bootstrap 95% "
                                 f"interval (over items, {cfg.pair_boot} replicates) excluding 0"},
        "image_dependency": vd,
        "junk": junk,
        "score_estimation": score or {"computed": False},
        "audit_skipped": fnd.skipped,
        "primary_field": fnd.field,
        "config": cfg.as_dict(),
        "seeds": {"seed": cfg.seed, "folds": [cfg.seed, 3], "random_subsets": [cfg.seed, 5],
                  "bootstrap": [cfg.seed, 7, "batch"], "pair_bootstrap": [cfg.seed, 13, "batch"],
                  "score_random_baseline": [cfg.seed, 11], "score_mae_interval": [cfg.seed, 19],
                  "inner_folds": [cfg.seed, 29], "inner_random_draws": [cfg.seed, 23, "variant"],
                  "stratified_difficulty_draw": [cfg.seed, 37], "balanced_draw_swaps": [cfg.seed, 47], "score_inner_folds": [cfg.seed, 31],
                  "lomo_interval": [cfg.seed, 43],
                  "rule": "numpy.random.default_rng(list) with the listed entropy"},
        "statement": ("This is a selection of the original items by the audit, not a new ground truth: gold answers "
                      "are unchanged, and items were removed on evidence from the evaluated models' runs."),
    }
    return out
