"""Calibration check: each detector's false-positive rate on simulated benchmarks with no defect.

A null benchmark keeps this benchmark's questions (IDs, categories, answer types, option counts),
its models and arms and which (question, model, arm) runs exist, and each model's accuracy per arm
(in the audited correctness field). It replaces everything that could carry a defect: the gold is
drawn uniformly over the options (mc) or yes/no, option texts are distinct placeholders, and every
outcome is an independent Bernoulli draw (a wrong mc answer is uniform over the wrong options).
On yes/no items the accuracy is taken per gold answer (``condition_on_gold``): a model that says
"yes" too often is right more on yes-gold items, a property of the model and not a planted defect.
That response bias makes the gold answer a covariate shared by every model and both arms; it is
why the detectors drift out of calibration on binary benchmarks (the item-matched null of
the zero-gain audit does not condition on it, and the consensus count's independence expectation
ignores it), as the audit paper reports for HallusionBench.

Rates. For a detector whose summary has a headline ``p_value``, the false-positive rate is the share
of simulations with ``p <= alpha`` (nominal ``alpha``). For a count-based detector (observed and
expected-under-independence counts in its summary, e.g. the consensus count), it is the flagged count per
item pooled over simulations against the expected count per item. Otherwise the per-item flag rate is
reported without a nominal level.

``out_of_calibration`` is True when the rate's 95% Wilson interval lies entirely above
``1.5 x nominal`` (too many false positives) or, for p-value tests, entirely below ``0.5 x nominal``
(far too conservative). The margin keeps Monte Carlo noise and discrete p-values from flagging.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from . import detectors
from .columns import ARROW_STR
from .errors import DetectorSkipped
from .frame import AuditFrame
from .schema import LETTERS
from .stats import wilson_ci

# (observed key, expected key) for count-based detectors
COUNT_KEYS = (("n_unanimous_non_gold", "expected_under_independence"), ("n_flagged", "expected_flagged"))
MARGIN_HIGH = 1.5
MARGIN_LOW = 0.5


def _accuracies(frame: AuditFrame, field: str, cls: np.ndarray, n_cls: int) -> np.ndarray:
    """(2 arms, n_models, n_cls) accuracy in ``field`` (pooled over classes where a class is empty)."""
    r = frame.runs
    v = r[field].to_numpy()
    if not (v >= 0).any():
        v = r["hit_exact" if field == "hit" else "hit"].to_numpy()
    ok = v >= 0
    key = (r["arm"].to_numpy().astype(np.int64) * frame.n_models + r["m"].to_numpy()) * n_cls + cls[r["q"].to_numpy()]
    size = 2 * frame.n_models * n_cls
    nk = np.bincount(key[ok], minlength=size).reshape(2, frame.n_models, n_cls)
    hk = np.bincount(key[ok], weights=v[ok] == 1, minlength=size).reshape(2, frame.n_models, n_cls)
    pooled = hk.sum(axis=2) / np.maximum(nk.sum(axis=2), 1)
    acc = np.where(nk > 0, hk / np.maximum(nk, 1), pooled[:, :, None])
    return np.clip(acc, 0.0, 1.0)


class NullSimulator:
    """Draw null frames for one benchmark cheaply (arrays only; the frame is assembled directly)."""

    def __init__(self, frame: AuditFrame, *, field: str = "hit", condition_on_gold: bool = True):
        self.frame = frame
        q = frame.questions
        self.k = q["n_options"].to_numpy().astype(np.int64)
        self.atype = q["answer_type"].to_numpy(dtype=object)
        self.is_mc = self.atype == "mc"
        self.is_yn = self.atype == "yesno"
        self.k_eff = np.where(self.is_mc, self.k, 2)
        gold_yes = q["answer"].astype(str).str.lower().to_numpy() == "yes"
        # accuracy classes: 0 = mc / other, 1 = yes-gold, 2 = no-gold (yes/no items)
        cls = np.zeros(frame.n_questions, dtype=np.int64)
        if condition_on_gold:
            cls[self.is_yn & gold_yes] = 1
            cls[self.is_yn & ~gold_yes] = 2
        self.cls = cls
        self.acc = _accuracies(frame, field, cls, 3)
        self.yes_gold_share = float(gold_yes[self.is_yn].mean()) if self.is_yn.any() else 0.5
        r = frame.runs
        self.rq = r["q"].to_numpy()
        self.rm = r["m"].to_numpy()
        self.ra = r["arm"].to_numpy()
        qs = q[["question_id", "question", "answer_type", "category", "l2_category", "group_id", "hint",
                "n_options"]].copy()
        qs["options"] = [[f"option {j}" for j in range(kk)] if mc else [] for kk, mc in zip(self.k, self.is_mc)]
        self.q_base = qs

    def draw(self, rng: np.random.Generator) -> AuditFrame:
        """One null frame."""
        Q = self.frame.n_questions
        gold = (rng.random(Q) * self.k_eff).astype(np.int64)
        # yes/no: keep the benchmark's yes share (gold balance is not a defect of items)
        gold = np.where(self.is_yn, (rng.random(Q) >= self.yes_gold_share).astype(np.int64), gold)
        cls = self.cls.copy()
        cls[self.is_yn] = np.where(gold[self.is_yn] == 0, 1, 2) if (self.cls[self.is_yn] > 0).any() else 0
        p = self.acc[self.ra, self.rm, cls[self.rq]]
        hit = rng.random(len(p)) < p
        kq = self.k_eff[self.rq]
        off = 1 + (rng.random(len(p)) * (kq - 1)).astype(np.int64)
        choice = np.where(hit, gold[self.rq], (gold[self.rq] + off) % kq)
        q = self.q_base.copy()
        letters = np.array(list(LETTERS))
        other = ~self.is_mc & ~self.is_yn
        q["answer"] = np.where(self.is_mc, letters[np.minimum(gold, 25)],
                               np.where(self.is_yn, np.where(gold == 0, "yes", "no"), "v0"))
        q["gold_index"] = np.where(self.is_mc, gold, -1).astype(np.int16)
        q["n_options"] = self.k.astype(np.int16)
        qt = self.atype[self.rq]
        ans = np.where(qt == "mc", letters[np.minimum(choice, 25)],
                       np.where(qt == "yesno", np.where(choice == 0, "yes", "no"), np.char.add("v", choice.astype(str))))
        h = hit.astype(np.int8)
        runs = pd.DataFrame({
            "q": self.rq.astype(np.int32), "m": self.rm.astype(np.int16), "arm": self.ra.astype(np.int8),
            "prediction": pd.array(ans, dtype=ARROW_STR), "answer": pd.array(ans, dtype=ARROW_STR),
            "hit": h, "hit_exact": h.copy(),
        })
        # answer codes in the frame's code space (mc: option index; yes=0/no=1; other: 2 + value)
        kmax = max(int(self.k.max()) if len(self.k) else 0, 2)
        codes = np.where(np.isin(qt, ("mc", "yesno")), choice, kmax + choice).astype(np.int32)
        gcodes = np.where(other, kmax, gold).astype(np.int32)
        cols = ["question_id", "question", "options", "answer", "answer_type", "category", "l2_category",
                "group_id", "hint", "n_options", "gold_index"]
        return AuditFrame(questions=q[cols], runs=runs, models=self.frame.models,
                          meta={"simulated_null": True}, cache={"answer_codes": codes, "gold_codes": gcodes})


def _resolve(names: dict[str, Callable] | Iterable[str] | None) -> dict[str, Callable]:
    if isinstance(names, dict):
        return dict(names)
    return {name: detectors.get(name).load().run for name in (detectors.names() if names is None else names)}


def _verdict(rate_k: float, rate_n: float, nominal: float | None, two_sided: bool) -> tuple[list, bool | None, str]:
    lo, hi = wilson_ci(rate_k, rate_n)
    ci = [float(lo), float(hi)]
    if nominal is None or rate_n == 0:
        return ci, None, ""
    if nominal <= 0:
        return ci, bool(rate_k > 0), "anti-conservative" if rate_k > 0 else ""
    if lo > MARGIN_HIGH * nominal:
        return ci, True, "anti-conservative"
    if two_sided and hi < MARGIN_LOW * nominal:
        return ci, True, "conservative"
    return ci, False, ""


def calibrate(frame: AuditFrame, names: dict[str, Callable] | Iterable[str] | None = None, *,
              n_sims: int = 200, seed: int = 0, field: str = "hit", alpha: float = 0.05,
              params: dict[str, dict] | None = None, condition_on_gold: bool = True,
              progress: Callable[[int, int], None] | None = None) -> dict[str, dict]:
    """False-positive rate of each detector on ``n_sims`` null versions of ``frame``.

    names: registered detector names, None for all of them, or {name: run function}. params: per-detector keyword
    arguments (the audit's); each detector's registered ``calibration_params`` override them (steps
    such as a leave-one-out or a bootstrap that do not change the headline test are switched off). Returns {name: {fpr, fpr_ci, nominal, n_sims, n_runs, kind,
    out_of_calibration, direction, note}}.
    """
    runs = _resolve(names)
    registered = detectors.names()
    overrides = {n: detectors.get(n).calibration_params if n in registered else {} for n in runs}
    params = params or {}
    sim = NullSimulator(frame, field=field, condition_on_gold=condition_on_gold)
    rng = np.random.default_rng(seed)
    pvals: dict[str, list] = {n: [] for n in runs}
    counts: dict[str, list] = {n: [] for n in runs}
    flags: dict[str, list] = {n: [] for n in runs}
    skipped: dict[str, str] = {}
    for s in range(n_sims):
        f = sim.draw(rng)
        for name, fn in runs.items():
            kw = dict(params.get(name, {})) | dict(overrides[name])
            try:
                res = fn(f, field="hit", seed=seed + s, **kw)
            except DetectorSkipped as e:
                skipped[name] = str(e)
                continue
            sm = res.summary
            p = sm.get("p_value")
            if p is not None and not (isinstance(p, float) and np.isnan(p)):
                pvals[name].append(float(p))
            for ok, ek in COUNT_KEYS:
                if sm.get(ok) is not None and sm.get(ek) is not None:
                    counts[name].append((float(sm[ok]), float(sm[ek])))
                    break
            col = f"is_{res.name}_issue"
            if col in res.per_question.columns:
                flags[name].append(int(res.per_question[col].sum()))
        if progress:
            progress(s + 1, n_sims)
    out: dict[str, dict] = {}
    Q = frame.n_questions
    for name in runs:
        entry: dict[str, Any] = {"n_sims": n_sims, "alpha": alpha, "condition_on_gold": condition_on_gold,
                                 "seed": seed}
        if pvals[name]:
            pv = np.array(pvals[name])
            k = int((pv <= alpha).sum())
            ci, out_cal, direction = _verdict(k, len(pv), alpha, two_sided=True)
            entry.update(kind="p_value", fpr=k / len(pv), fpr_ci=ci, nominal=alpha, n_runs=len(pv),
                         out_of_calibration=out_cal, direction=direction,
                         note=f"share of {len(pv)} null simulations with headline p <= {alpha}")
        elif counts[name]:
            obs = sum(c[0] for c in counts[name])
            exp = sum(c[1] for c in counts[name])
            n_items = Q * len(counts[name])
            ci, out_cal, direction = _verdict(obs, n_items, exp / n_items, two_sided=False)
            entry.update(kind="count", fpr=obs / n_items, fpr_ci=ci, nominal=exp / n_items,
                         n_runs=len(counts[name]), observed_total=obs, expected_total=exp,
                         out_of_calibration=out_cal, direction=direction,
                         note=(f"flagged per item over {len(counts[name])} null simulations vs the count the "
                               f"detector expects under independence ({obs:.0f} observed, {exp:.1f} expected)"))
        elif flags[name]:
            tot = sum(flags[name])
            n_items = Q * len(flags[name])
            ci, _, _ = _verdict(tot, n_items, None, two_sided=False)
            entry.update(kind="flag_rate", fpr=tot / n_items, fpr_ci=ci, nominal=None, n_runs=len(flags[name]),
                         out_of_calibration=None, direction="",
                         note="per-item flag rate on null simulations; the detector defines no nominal rate")
        else:
            entry.update(kind="skipped", fpr=None, fpr_ci=None, nominal=None, n_runs=0, out_of_calibration=None,
                         direction="", note=f"skipped on null simulations: {skipped.get(name, 'no output')}")
        out[name] = entry
    return out
