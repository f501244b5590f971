"""Iterative Bias Pruning (IBP) and its random-removal baseline.

IBP repeats {run TsT on the remaining questions; remove the top-``step`` questions by calibrated
s(x) - chance (per-format z when a group mixes formats, :data:`RANK_SCALE`)} until the budget is spent, the largest score falls below ``threshold``, or the
per-category floors stop it. Ties are broken by question ID (scores compared at 12 decimals), so
given the scores the ranking does not depend on row order. Budgets can be global, per answer
format (``choice`` = mc + yes/no, ``numeric``) or per category; with per-format / per-category
allocation each group is pruned on its own, TsT running on that group's questions only.

The result is an *audit selection*: which questions a text-only diagnostic found learnable, to be
inspected. It is not "the" debiased benchmark; a different diagnostic, allocation or seed selects a
different set. Every comparison is reported beside random removal at the same rates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError

ALLOCATIONS = ("global", "per_format", "per_category")


@dataclass
class PruneResult:
    """What IBP returns (pure data; see :mod:`audit_hub.tst.output` for the writer).

    ``removed``: one row per removed question in removal order (``order``, ``question_id``, ``group``,
    ``iteration``, ``score`` = s(x) - chance at removal, ``tst_s``, ``category``, ``answer_type``).
    ``kept_ids``: kept question IDs in frame order. ``trace``: one row per iteration.
    ``first_scores``: per question, s(x) from the first iteration of its group.
    ``gap``: vision-blind gap per paired model on the original / pruned / randomly pruned sets
    (None without full and blind runs). ``random``: the random-removal baseline summary.
    """

    removed: pd.DataFrame
    kept_ids: list[str]
    trace: pd.DataFrame
    first_scores: pd.DataFrame
    settings: dict
    stop_reasons: dict[str, str]
    group_budgets: dict[str, int]
    random: dict = field(default_factory=dict)
    gap: pd.DataFrame | None = None
    tst_after: dict = field(default_factory=dict)
    keep_mask: np.ndarray | None = None
    random_keep: np.ndarray | None = None


# ---------------------------------------------------------------------------------------- budgets
def largest_remainder(total: int, sizes: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` in proportion to ``sizes`` (Hamilton / largest remainder; ties by name)."""
    names = sorted(sizes)
    n = sum(sizes.values())
    if n == 0:
        return {k: 0 for k in names}
    raw = {k: total * sizes[k] / n for k in names}
    out = {k: int(np.floor(raw[k])) for k in names}
    left = total - sum(out.values())
    for k in sorted(names, key=lambda k: (-(raw[k] - out[k]), k))[:left]:
        out[k] += 1
    return out


def _groups(frame, allocation: str, scorable: np.ndarray) -> dict[str, np.ndarray]:
    """Question-code arrays of each allocation group (scorable questions only)."""
    q = frame.questions
    atype = q["answer_type"].to_numpy(dtype=object)
    if allocation == "global":
        return {"all": np.flatnonzero(scorable)}
    if allocation == "per_format":
        fmt = np.where(atype == "numeric", "numeric", "choice")
        return {f: np.flatnonzero(scorable & (fmt == f)) for f in ("choice", "numeric")
                if (scorable & (fmt == f)).any()}
    if allocation == "per_category":
        cat = q["category"].astype(str).to_numpy(dtype=object)
        return {c: np.flatnonzero(scorable & (cat == c)) for c in sorted(set(cat[scorable]))}
    raise InputError(f"unknown allocation {allocation!r}; use one of {ALLOCATIONS}")


def _floors(frame, floors: int | Mapping[str, int]) -> tuple[np.ndarray, list[str], np.ndarray]:
    codes, labels = frame.category_codes("category")
    if isinstance(floors, Mapping):
        unknown = sorted(set(floors) - set(labels))
        if unknown:
            raise InputError(f"floors name unknown categories {unknown}; categories: {labels}")
        f = np.array([int(floors.get(c, 0)) for c in labels], dtype=np.int64)
    else:
        f = np.full(len(labels), int(floors), dtype=np.int64)
    if (f < 0).any():
        raise InputError("floors must be >= 0")
    return codes.astype(np.int64), labels, f


RANK_SCALE = ("within one format: s(x) - chance; when a group holds both formats, each question's s(x) - chance "
              "is divided by the standard deviation of s(x) - chance over its format's scored questions in that "
              "iteration (per-format z about the chance line), so multiple-choice and numeric questions are "
              "ranked on one unit-free scale")


def rank_scale(sc: np.ndarray, fmt: np.ndarray | None) -> np.ndarray:
    """Ranking score of IBP (see :data:`RANK_SCALE`): ``sc`` itself for one format; per-format
    ``sc / sd_format(sc)`` when both ``choice`` and ``numeric`` questions are present."""
    sc = np.asarray(sc, dtype=np.float64)
    if fmt is None:
        return sc
    fmt = np.asarray(fmt, dtype=object)
    ok = np.isfinite(sc)
    present = [f for f in ("choice", "numeric") if (ok & (fmt == f)).any()]
    if len(present) < 2:
        return sc
    out = np.full(len(sc), np.nan)
    for f in present:
        m = ok & (fmt == f)
        sd = float(np.std(sc[m], ddof=1)) if m.sum() > 1 else 0.0
        out[m] = sc[m] / sd if sd > 0 else sc[m]
    return out


def _rank(scores: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Indices sorted by (-score rounded to 12 decimals, question ID); NaN scores excluded."""
    ok = np.flatnonzero(np.isfinite(scores))
    key = -np.round(scores[ok], 12)
    order = np.lexsort((ids[ok].astype(str), key))
    return ok[order]


# ---------------------------------------------------------------------------------------- IBP
def _group_budgets(groups: Mapping[str, np.ndarray], allocation: str, budget: int | None,
                   budgets: Mapping[str, int] | None, frac: float | None) -> tuple[dict[str, int], str]:
    """How many questions to remove from each group, and a phrase saying where that came from."""
    sizes = {g: len(v) for g, v in groups.items()}
    given = [o for o, v in (("--budget", budget), ("--budgets", budgets), ("--frac", frac)) if v is not None]
    if len(given) > 1:  # one of them was silently taken ("--budget 50 --frac 0.2" removed 200)
        raise InputError(f"{' and '.join(given)} both say how many questions to remove; give one of them")
    if budgets is not None:
        unknown = sorted(set(budgets) - set(groups))
        if unknown:
            raise InputError(f"budgets name unknown groups {unknown}; groups for {allocation}: {sorted(groups)}")
        gb, source = {g: int(budgets.get(g, 0)) for g in groups}, "explicit"
    elif frac is not None:
        if not 0 <= frac <= 1:
            raise InputError("frac must be in [0, 1]")
        gb, source = {g: int(round(frac * s)) for g, s in sizes.items()}, f"frac={frac}"
    elif budget is not None:
        gb = largest_remainder(int(budget), sizes)
        source = f"budget={budget} split by largest remainder" if len(groups) > 1 else f"budget={budget}"
    else:
        raise InputError("give a budget, per-group budgets or a fraction")
    if any(b < 0 for b in gb.values()):
        raise InputError("budgets must be >= 0")
    total, n = sum(min(b, sizes[g]) for g, b in gb.items()), sum(sizes.values())
    if n and total >= n:  # nothing would be left to keep: an empty benchmark is no audit selection
        opt = {"explicit": "--budgets"}.get(source, "--frac" if frac is not None else "--budget")
        raise InputError(f"{opt} would remove all {n:,} scored questions ({source}); an audit selection keeps at least one")
    return gb, source


class _Pruner:
    """The state of one IBP run: what is kept, what was removed and why, iteration by iteration."""

    def __init__(self, frame, tst_fn: Callable, kw: dict, threshold: float | None, step: int,
                 cat: np.ndarray, cat_labels: list[str], floor: np.ndarray, progress):
        q = frame.questions
        self.frame, self.tst_fn, self.kw, self.threshold, self.step = frame, tst_fn, kw, threshold, step
        self.cat, self.cat_labels, self.floor, self.progress = cat, cat_labels, floor, progress
        self.n_q = len(q)
        self.ids = q["question_id"].astype(str).to_numpy(dtype=object)
        self.atype = q["answer_type"].to_numpy(dtype=object)
        self.kept_cat = np.bincount(cat, minlength=len(cat_labels)).astype(np.int64)
        self.keep = np.ones(self.n_q, dtype=bool)
        self.removed_rows: list[dict] = []
        self.trace_rows: list[dict] = []
        self.first_s = np.full(self.n_q, np.nan)
        self.first_sc = np.full(self.n_q, np.nan)

    def _pick(self, cand: np.ndarray, remaining: np.ndarray, b: int) -> list[int]:
        """Up to ``b`` of the best-ranked candidates whose category stays above its floor."""
        picked = []
        for j in _rank(cand, self.ids[remaining]):
            c = self.cat[remaining[j]]
            if self.kept_cat[c] > self.floor[c]:
                picked.append(j)
                self.kept_cat[c] -= 1
                if len(picked) == b:
                    break
        return picked

    def prune_group(self, g: str, members: np.ndarray, n_remove: int) -> str:
        """Prune one group until its budget is spent; the reason it stopped."""
        import time

        kmin = int(self.kw.get("k", 5))
        remaining, removed_g, it = members.copy(), 0, 0
        t0 = time.perf_counter()
        if self.progress is not None:
            self.progress(f"{g}: iteration 1 (TsT-RF diagnosis), removed 0/{n_remove}")
        while removed_g < n_remove:
            it += 1
            if len(remaining) < 2 * kmin:
                return "too_few_questions"
            mask = np.zeros(self.n_q, dtype=bool)
            mask[remaining] = True
            res = self.tst_fn(self.frame.subset_questions(mask), **self.kw)
            pq = res.per_question
            sc = pq["tst_s_minus_chance"].to_numpy(dtype=np.float64)
            rank_sc = rank_scale(sc, pq["tst_format"].to_numpy() if "tst_format" in pq else None)
            s_raw = pq["tst_s"].to_numpy(dtype=np.float64)
            if it == 1:
                self.first_s[remaining] = s_raw
                self.first_sc[remaining] = sc
            fin = np.isfinite(sc)
            max_s = float(np.max(sc[fin])) if fin.any() else float("nan")
            row = {"group": g, "iteration": it, "n_before": int(len(remaining)), "n_ranked": int(fin.sum()),
                   "max_score": max_s, "mean_score": float(np.mean(sc[fin])) if fin.any() else float("nan"),
                   "mean_tst_s": float(np.nanmean(s_raw)) if fin.any() else float("nan"),
                   "tst_accuracy": res.summary.get("accuracy"), "n_removed": 0}
            self.trace_rows.append(row)
            if not fin.any():
                return "nothing_scored"
            if self.threshold is not None and max_s < self.threshold:
                return "threshold"
            cand = rank_sc if self.threshold is None else np.where(sc >= self.threshold, rank_sc, np.nan)
            picked = self._pick(cand, remaining, min(self.step, n_remove - removed_g))
            if not picked:
                return "floors"
            for j in picked:
                qc = remaining[j]
                self.removed_rows.append({"order": len(self.removed_rows) + 1, "question_id": self.ids[qc],
                                          "group": g, "iteration": it, "score": float(sc[j]),
                                          "rank_score": float(rank_sc[j]), "tst_s": float(s_raw[j]),
                                          "category": self.cat_labels[self.cat[qc]], "answer_type": self.atype[qc]})
            row["n_removed"] = len(picked)
            row["removed_ids"] = [self.ids[remaining[j]] for j in picked]
            self.keep[remaining[picked]] = False
            remaining = np.delete(remaining, picked)
            removed_g += len(picked)
            if self.progress is not None:
                # an estimate from this group's pace so far (each iteration is one TsT-RF diagnosis)
                left = (time.perf_counter() - t0) / removed_g * (n_remove - removed_g)
                self.progress(f"{g}: iteration {it + 1}, removed {removed_g}/{n_remove}"
                              + (f", about {left:.0f} s left" if removed_g < n_remove else ""))
        return "budget"

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """The removed questions, the per-iteration trace and the first iteration's scores."""
        removed = pd.DataFrame(self.removed_rows, columns=["order", "question_id", "group", "iteration", "score",
                                                           "rank_score", "tst_s", "category", "answer_type"])
        trace = pd.DataFrame(self.trace_rows)
        if "removed_ids" in trace.columns:
            trace["removed_ids"] = [list(v) if isinstance(v, list) else [] for v in trace["removed_ids"]]
        first = pd.DataFrame({"question_id": self.ids, "tst_s": self.first_s, "tst_s_minus_chance": self.first_sc})
        return removed, trace, first


def _tst_after(frame, keep: np.ndarray, rkeep: np.ndarray, n_random: int, tst_fn: Callable, kw: dict) -> dict:
    """TsT after pruning versus after random removal at the same rates."""
    after = {}
    for name, m in [("pruned", keep)] + [(f"random_{i}", rkeep[i]) for i in range(min(n_random, len(rkeep)))]:
        try:
            r = tst_fn(frame.subset_questions(m), **kw)
            after[name] = {k_: r.summary.get(k_) for k_ in ("accuracy", "mean_p_gold", "chance", "majority_baseline")}
            after[name]["mean_s_minus_chance"] = float(np.nanmean(r.per_question["tst_s_minus_chance"]))
        except InputError as e:
            after[name] = {"error": str(e)}
    rnd = [v for k_, v in after.items() if k_.startswith("random_") and "error" not in v]
    if rnd:
        after["random_mean"] = {k_: float(np.mean([v[k_] for v in rnd if v.get(k_) is not None]))
                                for k_ in ("accuracy", "mean_p_gold", "mean_s_minus_chance")
                                if any(v.get(k_) is not None for v in rnd)}
    return after


def iterative_bias_pruning(frame, *, budget: int | None = None, step: int = 50, threshold: float | None = None,
                           floors: int | Mapping[str, int] = 0, allocation: str = "global",
                           budgets: Mapping[str, int] | None = None, frac: float | None = None,
                           random_seeds: int = 200, random_tst_seeds: int = 3, seed: int = 0,
                           field: str | None = None, tst_kwargs: dict | None = None,
                           tst_fn: Callable | None = None,
                           progress: Callable[[str], None] | None = None) -> PruneResult:
    """Run IBP with TsT-RF (or any ``tst_fn(frame, **tst_kwargs) -> TstResult``).

    Budgets: ``budget`` (total, split over groups by largest remainder for per-format / per-category
    allocation), or ``budgets`` ({group: n}), or ``frac`` (remove round(frac * n) from every group).
    ``floors``: minimum questions kept per category (int for all, or {category: n}).
    ``threshold``: on the calibrated scale; only questions with s(x) - chance >= threshold are removed,
    and a group stops when its largest s(x) - chance is below it. Mixed-format groups are ranked on
    per-format z (:data:`RANK_SCALE`).
    ``random_seeds``: random-removal baseline seeds (same number removed per group, same floors).
    ``random_tst_seeds``: how many of those random sets also get a TsT run (for the TsT comparison).
    """
    from .rf import run_tst_rf

    tst_fn = tst_fn or run_tst_rf
    kw = {"k": 5, "repeats": 3, "seed": seed, "importances": False, "both_groupings": False,
          "null_permutations": 0}
    kw.update(tst_kwargs or {})
    if step < 1:
        raise InputError("step must be >= 1")
    if allocation not in ALLOCATIONS:
        raise InputError(f"unknown allocation {allocation!r}; use one of {ALLOCATIONS}")
    q = frame.questions
    n_q = len(q)
    scorable = np.isin(q["answer_type"].to_numpy(dtype=object), ("mc", "yesno", "numeric"))
    groups = _groups(frame, allocation, scorable)
    gb, source = _group_budgets(groups, allocation, budget, budgets, frac)
    cat, cat_labels, floor = _floors(frame, floors)
    pruner = _Pruner(frame, tst_fn, kw, threshold, step, cat, cat_labels, floor, progress)
    stop = {g: pruner.prune_group(g, members, gb[g]) for g, members in groups.items()}
    removed, trace, first = pruner.tables()
    keep, ids = pruner.keep, pruner.ids

    # ---- random removal at the same rates (same number per group, same floors)
    n_removed_g = {g: int((removed["group"] == g).sum()) for g in groups}
    rkeep = random_removal(frame, groups, n_removed_g, cat, floor, seeds=random_seeds, seed=seed)
    settings = {
        "allocation": allocation, "budget": budget, "budgets": dict(gb), "budget_source": source, "frac": frac,
        "step": step, "threshold": threshold,
        "threshold_rule": "only questions with calibrated s(x) - chance >= threshold are removed; a group stops "
                          "when none is left",
        "floors": dict(floors) if isinstance(floors, Mapping) else int(floors),
        "score": "tst_s_minus_chance: calibrated s(x) - 1/K (numeric: MRA - out-of-fold baseline MRA of the "
                 "question's category)",
        "rank_scale": RANK_SCALE,
        "tie_break": "(-score rounded to 12 decimals, question_id)",
        "random_seeds": random_seeds, "random_seed_rule": f"numpy default_rng(seed={seed} + i), i < random_seeds",
        "tst": {k_: v for k_, v in kw.items()}, "seed": seed, "n_questions": n_q,
        "n_removed": int(len(removed)), "n_kept": int(keep.sum()),
    }
    result = PruneResult(removed=removed, kept_ids=[str(x) for x in ids[keep]], trace=trace, first_scores=first,
                         settings=settings, stop_reasons=stop, group_budgets=gb, keep_mask=keep, random_keep=rkeep)
    rs = 1 - rkeep.mean(axis=1) if len(rkeep) else np.array([])
    result.random = {"n_seeds": int(len(rkeep)), "removed_share": float(1 - keep.mean()),
                     "random_removed_share_mean": float(rs.mean()) if len(rs) else None}
    result.gap = gap_table(frame, keep, rkeep, field=field)  # the vision-blind gap, where both arms exist
    if random_tst_seeds > 0 and len(removed):
        result.tst_after = _tst_after(frame, keep, rkeep, random_tst_seeds, tst_fn, kw)
    return result


def random_removal(frame, groups: Mapping[str, np.ndarray], n_remove: Mapping[str, int], cat: np.ndarray,
                   floor: np.ndarray, *, seeds: int, seed: int = 0) -> np.ndarray:
    """(seeds, Q) keep masks: remove ``n_remove[g]`` random questions of each group under the floors.

    Seed ``i`` uses ``np.random.default_rng(seed + i)``; groups are processed in the same order as IBP.
    """
    n_q = frame.n_questions
    out = np.ones((seeds, n_q), dtype=bool)
    base_cnt = np.bincount(cat, minlength=len(floor)).astype(np.int64)
    for i in range(seeds):
        rng = np.random.default_rng(seed + i)
        kept = base_cnt.copy()
        for g, members in groups.items():
            n = int(n_remove.get(g, 0))
            if n == 0:
                continue
            order = members[rng.permutation(len(members))]
            c = cat[order]
            # rank of each question within its category along the random order
            srt = np.argsort(c, kind="stable")
            starts = np.searchsorted(c[srt], c[srt], side="left")
            rank = np.empty(len(order), dtype=np.int64)
            rank[srt] = np.arange(len(order)) - starts
            eligible = rank < (kept[c] - floor[c])
            chosen = order[eligible][:n]
            out[i, chosen] = False
            np.subtract.at(kept, cat[chosen], 1)
    return out


def gap_table(frame, keep: np.ndarray, random_keep: np.ndarray, *, field: str | None = None) -> pd.DataFrame | None:
    """Vision (full) and blind accuracy and their gap on the original, pruned and randomly pruned
    question sets (the paper's Tables 2, 8 and 10 in form), one row per model present in both arms, each on the
    questions both of its arms scored (``n_original``, ``n_pruned``: how many).

    When no model is in both arms but both arms have runs, one ``(pool)`` row compares the mean
    accuracy of the full-arm models with that of the blind-arm models. None without both arms.
    """
    full_models = frame.models_in("full") if hasattr(frame, "models_in") else []
    blind_models = frame.models_in("blind") if hasattr(frame, "models_in") else []
    if not full_models or not blind_models:
        return None
    paired = frame.paired_models()
    if field is None:  # the field the audit compares the arms on: judged only where every compared model has it
        from ..frame.fields import arm_field

        field = arm_field(frame)["field"]

    def acc(masks: np.ndarray, mat: np.ndarray) -> np.ndarray:
        m = masks.astype(np.float64)
        num = m @ (mat == 1).astype(np.float64)
        den = m @ (mat >= 0).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / den, np.nan)

    masks = np.vstack([np.ones(frame.n_questions, dtype=bool), keep])
    # every gap on the items both arms scored (as the audit's image gain): a blind run of 80 of 1,000 questions
    # was compared with its full run on all 1,000
    if paired:
        names = list(paired)
        full = frame.correctness("full", field, models=paired)
        blind = frame.correctness("blind", field, models=paired)
        both = (full >= 0) & (blind >= 0)
        full, blind = np.where(both, full, -1), np.where(both, blind, -1)
        n_orig, n_pr = both.sum(axis=0), (both & keep[:, None]).sum(axis=0)
        vf, vb = acc(masks, full), acc(masks, blind)
        rf_, rb = acc(random_keep, full), acc(random_keep, blind)
    else:  # pool level: mean over the models of each arm
        names = ["(pool)"]
        full = frame.correctness("full", field, models=full_models)
        blind = frame.correctness("blind", field, models=blind_models)
        shared = (full >= 0).any(axis=1) & (blind >= 0).any(axis=1)
        full, blind = np.where(shared[:, None], full, -1), np.where(shared[:, None], blind, -1)
        n_orig, n_pr = np.array([shared.sum()]), np.array([(shared & keep).sum()])
        vf, vb = np.nanmean(acc(masks, full), 1, keepdims=True), np.nanmean(acc(masks, blind), 1, keepdims=True)
        rf_ = np.nanmean(acc(random_keep, full), 1, keepdims=True)
        rb = np.nanmean(acc(random_keep, blind), 1, keepdims=True)
    rg = rf_ - rb
    pruned_gap = vf[1] - vb[1]
    rows = []
    for j, m in enumerate(names):
        g = rg[:, j]
        g = g[np.isfinite(g)]
        rows.append({
            "model": m, "field": field,
            "full_models": ", ".join(full_models) if m == "(pool)" else m,
            "blind_models": ", ".join(blind_models) if m == "(pool)" else m,
            "n_original": int(n_orig[j]), "vision_original": vf[0, j], "blind_original": vb[0, j],
            "gap_original": vf[0, j] - vb[0, j],
            "n_pruned": int(n_pr[j]), "vision_pruned": vf[1, j], "blind_pruned": vb[1, j],
            "gap_pruned": pruned_gap[j],
            "vision_random_mean": float(np.nanmean(rf_[:, j])) if len(rf_) else np.nan,
            "blind_random_mean": float(np.nanmean(rb[:, j])) if len(rb) else np.nan,
            "gap_random_mean": float(g.mean()) if len(g) else np.nan,
            "gap_random_sd": float(g.std(ddof=1)) if len(g) > 1 else np.nan,
            "gap_random_min": float(g.min()) if len(g) else np.nan,
            "gap_random_max": float(g.max()) if len(g) else np.nan,
            "n_random_seeds": int(len(g)),
            "share_random_gap_ge_pruned": float((g >= pruned_gap[j] - 1e-12).mean()) if len(g) else np.nan,
        })
    return pd.DataFrame(rows)


def as_dict(result: PruneResult) -> dict[str, Any]:
    """JSON-serialisable summary of an IBP run."""
    return {
        "settings": result.settings, "stop_reasons": result.stop_reasons, "group_budgets": result.group_budgets,
        "n_removed": int(len(result.removed)), "n_kept": len(result.kept_ids),
        "removed_by_category": result.removed.groupby("category").size().to_dict() if len(result.removed) else {},
        "random_baseline": result.random, "tst_after": result.tst_after,
        "gap": result.gap.to_dict(orient="records") if result.gap is not None else None,
        "n_iterations": int(len(result.trace)),
    }
