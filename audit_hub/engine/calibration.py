"""Calibration check: each detector's false-positive rate on simulated benchmarks with no defect.

What a null benchmark keeps. A stratified subsample of ``n_items`` of this benchmark's questions
(default: about 30,000 simulated (item, model, arm) cells, between 200 and 2,000 items; all of them
when the benchmark is smaller) drawn in proportion to the *accuracy
classes* below, with their IDs, categories, answer types and option counts, the yes/no gold answers
as they are (the gold balance), the models and arms and which (question, model, arm) runs exist. The
cost of a simulation therefore does not depend on the number of questions: only the accuracy
tables below are read from the whole benchmark (one pass over the dense correctness matrices).

Accuracy classes: the effective option count (options of an mc item, 2 for yes/no, open items
apart) and, on yes/no items, the gold answer (``condition_on_gold``). Each model has one accuracy per
(arm, class), so a model that says "yes" too often is right more on yes-gold items (a response bias
by gold, not a defect), and 2-option items are easier than 5-option ones when they are in the data.

Outcomes. Blind arm: independent Bernoulli draws with the (arm, model, class) accuracy, i.e. the
blind outcome is independent of the item given its class (the zero-gain audit's null). Full arm:
a Rasch model ``expit(a - sigma z_i)`` whose abilities reproduce the class accuracies and whose
difficulty spread ``sigma`` matches the spread of the benchmark's per-item full-arm counts (moments);
each simulated item draws ``z_i`` from its own posterior given the real item's full-arm outcomes,
so items differ in difficulty as they do in the data, shared by every model. A wrong mc answer is uniform
over the wrong options (no attractive distractors: a unanimous wrong answer is then no more likely
than difficulty makes it); a wrong yes/no answer is the other word. mc gold positions are redrawn
uniformly; option texts are distinct placeholders. All simulations are drawn at once, vectorised.

Open (numeric / free) items: the gold is value 0, a correct run answers it, a wrong run one of ``k_open - 1``
other values, ``k_open`` fitted so that two wrong answers to one item agree as often as in the benchmark
(:func:`open_value_count`).

Regimes (issue 25). The simulations are split over :data:`REGIMES`, simulation ``s`` in ``REGIMES[s % 4]``
(the index alone decides, so the worker split gives the same numbers): ``iid`` (the above), ``letter_bias``
(each model's wrong answers go to option positions by its own preference, fitted per arm and option count),
``chance_categories`` (the categories the identifiability rule finds at chance in this pool answered at chance
by each model's own position frequencies) and ``families`` (models whose wrong answers agree beyond the pool's
typical pair share an attractive distractor per item); see :func:`fit_regimes`. Each entry adds the rate per
regime and the worst regime; a regime out of calibration (Bonferroni level over the regimes, at least
:data:`REGIME_MIN_RUNS` simulations) marks the detector out of calibration.

What it replaces: everything that could carry a defect (gold position bias, duplicate options,
items answerable without the image, wrong gold labels).

Rates. For a detector whose summary has a headline ``p_value``, the false-positive rate is the share
of simulations with ``p <= alpha`` (nominal ``alpha``). For a count-based detector (observed and
expected-under-independence counts in its summary), it is the flagged count per item pooled over
simulations against the expected count per item. Otherwise the per-item flag rate is reported
without a nominal level, with a note on what it means.

``out_of_calibration`` is True when the rate's exact 95% (Clopper-Pearson, :data:`RATE_CI`) interval lies entirely above
``1.5 x nominal`` (too many false positives) or, for p-value tests, entirely below ``0.5 x nominal``
(far too conservative). The margin keeps Monte Carlo noise and discrete p-values from flagging.
That verdict is a test; its False is not evidence of calibration. ``decided`` (:func:`decision`) is True only
where the interval also ends at or below the upper margin (the card's "within calibration"); otherwise the card
says "not decided" with ``sims_to_decide``, the simulations the observed rate would need.
Miscalibration of an unstratified test grows with the number of items, so a subsample understates it
for larger benchmarks (it is still detected: see the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy.special import expit

from .. import detectors
from ..columns import ARROW_STR
from ..errors import DetectorSkipped
from ..frame.core import AuditFrame, category_codes_of
from ..schema import LETTERS
from ..stats.core import clopper_pearson_ci

# (observed key, expected key) for count-based detectors
COUNT_KEYS = (("n_unanimous_non_gold", "expected_under_independence"), ("n_flagged", "expected_flagged"))
MARGIN_HIGH = 1.5
MARGIN_LOW = 0.5
CELL_BUDGET = 30_000   # simulated (item, model, arm) cells per null benchmark
MIN_ITEMS, MAX_ITEMS = 200, 2000
# what a per-item flag rate means for a detector without a nominal rate
FLAG_RATE_NOTE = ("no nominal rate: the share of questions it flags on defect-free benchmarks like this one (same "
                  "option counts, accuracies and difficulty spread; option texts are distinct placeholders, so a "
                  "flag from comparing option texts is a false positive)")


def default_items(n_models: int, n_arms: int) -> int:
    """Subsample size: about ``CELL_BUDGET`` simulated cells, between 200 and 2,000 items."""
    return int(np.clip(CELL_BUDGET // max(n_models * n_arms, 1), MIN_ITEMS, MAX_ITEMS))


def _logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def accuracy_classes(frame: AuditFrame, condition_on_gold: bool = True) -> np.ndarray:
    """Class per question: (effective option count) x (gold answer on yes/no items)."""
    from ..detectors.strata import strata_codes

    return strata_codes(frame, ["n_options", "gold"] if condition_on_gold else ["n_options"])[0]


def class_accuracies(frame: AuditFrame, field: str, cls: np.ndarray, n_cls: int) -> tuple[np.ndarray, np.ndarray]:
    """(2 arms, n_models, n_cls) accuracy in ``field``, per arm (an arm with no value in ``field`` is read in the
    other correctness field; a model's pooled accuracy where a class is
    empty) and the (2, Q, M) int8 dense correctness matrices (-1 unknown / absent run)."""
    M, Q = frame.n_models, frame.n_questions
    other = "hit_exact" if field == "hit" else "hit"
    acc = np.zeros((2, M, n_cls))
    dense = []
    order = np.argsort(cls, kind="stable")
    bounds = np.searchsorted(cls[order], np.arange(n_cls + 1))
    for a, arm in enumerate(("full", "blind")):
        if not frame.has_arm(arm):
            dense.append(np.full((Q, M), -1, np.int8))
            continue
        # an arm without values in ``field`` is simulated from the other field (a judged full arm against
        # `benchaudit blind` reruns, which carry exact matching only, as the audit compares them)
        fld = field if (frame.known_counts(field)[frame.arm_code(arm)] > 0).any() else other
        C = frame.correctness(arm, fld)
        dense.append(C)
        nk = np.zeros((M, n_cls))
        hk = np.zeros((M, n_cls))
        for c in range(n_cls):
            block = C[order[bounds[c]:bounds[c + 1]]]
            nk[:, c] = (block >= 0).sum(axis=0)
            hk[:, c] = (block == 1).sum(axis=0)
        pooled = hk.sum(axis=1) / np.maximum(nk.sum(axis=1), 1)
        acc[a] = np.where(nk > 0, hk / np.maximum(nk, 1), pooled[:, None])
    return np.clip(acc, 0.0, 1.0), dense


def _stratified_subsample(cls: np.ndarray, n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted item indices, ``n_items`` in all, in proportion to the classes (each class at least 2)."""
    Q = len(cls)
    if n_items >= Q:
        return np.arange(Q)
    counts = np.bincount(cls)
    want = np.maximum(np.round(counts * n_items / Q).astype(np.int64), np.minimum(counts, 2))
    keys = rng.random(Q)
    order = np.lexsort((keys, cls))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    take = np.concatenate([order[s:s + w] for s, w in zip(starts, want)])
    return np.sort(take)


OPEN_VALUES_MAX = 200  # wrong values of an open item in the null (their agreement can be no lower than 1 / 199)


def open_value_count(frame: AuditFrame) -> int:
    """``K`` for open (numeric / free) items in the null: 1 + the number of equally likely wrong values that
    makes two wrong full-arm answers to one item agree as often as they do in this benchmark (``1 / p``, ``p`` =
    sum over items and values of n (n - 1) / sum over items of n_wrong (n_wrong - 1), at most 20,000 items);
    2 without open items or pairs of wrong answers. (A single wrong value, the earlier null, made every item
    all models miss a unanimous non-gold answer.)"""
    atype = frame.answer_type
    rows = np.flatnonzero((atype != "mc") & (atype != "yesno"))[:FIT_ROWS]
    if not len(rows) or not frame.has_arm("full"):
        return 2
    A = frame.answer_codes("full")[rows]
    g = frame.gold_codes().astype(np.int64)[rows]
    W = np.where((A >= 0) & (A != g[:, None]), A, -1)
    ok = W >= 0
    n = ok.sum(axis=1).astype(np.float64)
    pairs = float((n * (n - 1)).sum())
    # ordered pairs of two models' wrong answers to one item that agree (self-pairs taken out)
    same = float(sum(((W == W[:, [m]]) & ok[:, [m]]).sum() for m in range(W.shape[1])) - ok.sum())
    if pairs <= 0:
        return 2
    return int(1 + np.clip(np.round(pairs / max(same, 1.0)), 1, OPEN_VALUES_MAX - 1))


def item_difficulty(C: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Random-effect (Rasch) difficulty of the full arm, fitted by moments, and each item's posterior.

    ``C``: (n, M) 0/1/-1 correctness; ``acc``: (n, M) each cell's class accuracy. Model:
    ``P(correct) = expit(a_im - sigma z_i)``, ``z_i ~ N(0, 1)``, with ``a`` solved so that the marginal
    accuracy is ``acc``. ``sigma`` makes the spread of the per-item correct counts match the model's
    (beyond binomial). Returns (ability a (n, M), posterior over the quadrature nodes (n, nq), sigma).
    """
    from ..stats.label_model import LOGW, NODES, solve_ability

    known = (C >= 0).astype(np.float64)
    y = (C == 1).astype(np.float64)
    f = y.sum(axis=1)
    w = np.exp(LOGW)

    def gap(sig):
        a = solve_ability(acc, sig)
        p = expit(a[:, :, None] - sig * NODES)                          # (n, M, nq)
        S = np.einsum("nm,nmq->nq", known, p)
        V = np.einsum("nm,nmq->nq", known, p * (1 - p))
        e = S @ w
        return float(((f - e) ** 2).sum() - (V @ w + (S * S) @ w - e * e).sum()), a, p

    grid = np.linspace(0.0, 4.0, 17)
    sig, (g0, a, p) = 0.0, gap(0.0)
    if C.shape[1] >= 2 and g0 > 0:
        prev = (0.0, g0)
        for s in grid[1:]:
            g, a_s, p_s = gap(s)
            if g <= 0:
                sig = prev[0] + (s - prev[0]) * prev[1] / (prev[1] - g)
                break
            prev = (s, g)
        else:
            sig = grid[-1]
        _, a, p = gap(sig)
    lp = (known[:, :, None] * (y[:, :, None] * np.log(np.clip(p, 1e-12, 1)) + (1 - y[:, :, None]) * np.log(np.clip(1 - p, 1e-12, 1)))
          ).sum(axis=1) + LOGW
    post = np.exp(lp - lp.max(axis=1, keepdims=True))
    return a, post / post.sum(axis=1, keepdims=True), float(sig)


#: the real-pool regimes of the null (issue 25); simulation ``s`` is drawn in ``REGIMES[s % len(REGIMES)]``
REGIMES = ("iid", "letter_bias", "chance_categories", "families")
FIT_ROWS = 20_000         # items of the benchmark the regimes are fitted on (a random subsample when larger)
REGIME_MIN_RUNS = 10      # simulations a regime needs for its own verdict (fewer: its rate is reported only)


def fit_regimes(frame: AuditFrame, sim: NullSimulator, dense: list, rng: np.random.Generator) -> dict:
    """What the real-pool regimes draw, fitted on (a subsample of) this benchmark's answers:

    * ``letter_bias``: each (arm, model, option count)'s wrong-answer preference over option positions:
      ``w_j`` proportional to (wrong answers at j + 1) / (its wrong answers on items whose gold is not j + K - 1);
    * ``chance_categories``: the categories the identifiability rule (:func:`~audit_hub.stats.label_checks.identifiability`)
      finds at chance in this pool (none: the regime is the iid one); each model answers there, in both arms,
      by its own answer-position (yes/no) frequencies, independently of the gold;
    * ``families``: groups of linked models (components of
      :func:`~audit_hub.stats.label_checks.family_links`: near-duplicate answers, or wrong answers that agree
      beyond the pool's typical pair); none:
      models sharing a name prefix; none: the whole pool. A member's wrong answer goes to its family's
      attractive distractor of the item with probability ``sqrt(mean excess agreement in the family)``.

    Returns per-run tables for :func:`_apply_regime` and a ``describe`` entry for the summary."""

    from ..detectors.strata import effective_option_count
    from ..stats import label_checks as lc

    M, Q = frame.n_models, frame.n_questions
    rows = np.arange(Q) if Q <= FIT_ROWS else np.sort(rng.choice(Q, FIT_ROWS, replace=False))
    keff = np.maximum(effective_option_count(frame), 0).astype(np.int64)[rows]
    atype = frame.answer_type[rows]
    gold = frame.gold_codes().astype(np.int64)[rows]
    is_mc = (atype == "mc") & (keff >= 2) & (gold >= 0) & (gold < keff)
    is_yn = (atype == "yesno") & (gold >= 0) & (gold <= 1)
    kmax = int(max(sim.k_eff[sim.is_mc].max() if sim.is_mc.any() else 2, keff[is_mc].max() if is_mc.any() else 2, 2))
    codes = [frame.answer_codes(arm)[rows] if frame.has_arm(arm) else np.full((len(rows), M), -1, np.int32)
             for arm in ("full", "blind")]
    pref = np.zeros((2, M, kmax + 1, kmax))
    freq = np.zeros((2, M, kmax + 1, kmax))
    for K in range(2, kmax + 1):
        pref[:, :, K, :K] = 1.0 / K
        freq[:, :, K, :K] = 1.0 / K
    best = (0.0, "", 0)
    for a, C in enumerate(codes):
        for K in np.unique(keff[is_mc]):
            K = int(K)
            sel = np.flatnonzero(is_mc & (keff == K))
            A, g = C[sel], gold[sel]
            valid = (A >= 0) & (A < K)
            wrong = valid & (A != g[:, None])
            n = np.stack([(wrong & (A == j)).sum(axis=0) for j in range(K)], axis=1).astype(np.float64)
            o = np.stack([(wrong & (g[:, None] != j)).sum(axis=0) for j in range(K)], axis=1).astype(np.float64)
            r = (n + 1.0) / (o + K - 1.0)
            pref[a, :, K, :K] = r / r.sum(axis=1, keepdims=True)
            f = np.stack([(valid & (A == j)).sum(axis=0) for j in range(K)], axis=1) + 0.5
            freq[a, :, K, :K] = f / f.sum(axis=1, keepdims=True)
            if a == 0 and K >= 3 and (wrong.sum(axis=0) >= 20).any():
                w = np.where(wrong.sum(axis=0)[:, None] >= 20, pref[a, :, K, :K], 0.0)
                if w.max() > best[0]:
                    best = (float(w.max()), str(frame.models[int(w.max(axis=1).argmax())]), K)
        if is_yn.any():
            A = C[is_yn]
            yes = ((A == 0).sum(axis=0) + 0.5) / (((A == 0) | (A == 1)).sum(axis=0) + 1.0)
            freq[a, :, 2, 0], freq[a, :, 2, 1] = yes, 1 - yes
    # per run: the weights of its arm, model and option count (yes/no runs: the yes/no frequencies)
    kq = np.where(sim.run_kind <= 1, sim.k_eff[sim.rq], 2)
    pref_run = np.zeros((len(sim.rq), kmax))
    pref_run[:] = pref[sim.ra, sim.rm, np.minimum(kq, kmax)]
    freq_run = freq[sim.ra, sim.rm, np.minimum(kq, kmax)]
    yn_run = sim.run_kind == 1
    freq_run[yn_run] = 0.0
    freq_run[yn_run, :2] = freq[sim.ra[yn_run], sim.rm[yn_run], 2, :2]

    # categories at chance: the identifiability rule on the closed items
    closed = is_mc | is_yn
    cat_all, labels = frame.category_codes("category")
    kk = np.where(is_yn, 2, keff)[closed]
    Af = codes[0][closed]
    Af = np.where((Af >= 0) & (Af < kk[:, None]), Af, -1)
    ident = lc.identifiability(Af, gold[closed], kk, np.asarray(cat_all, np.int64)[rows][closed],
                               [str(x) for x in labels]) if closed.sum() else {}
    tested = {c: r for c, r in ident.items() if "p_value" in r}
    chance = sorted(c for c, r in tested.items() if not r["identifiable"])
    source = ("the identifiability rule finds them at chance in this pool" if chance else
              "the identifiability rule finds no category at chance in this pool: drawn as iid")
    chance_item = sim.q_base["category"].astype(object).where(sim.q_base["category"].notna(), "(none)").astype(
        str).isin(chance).to_numpy()

    # model families: the one definition of label_checks.family_links (near-duplicate answers, or wrong answers that
    # agree beyond the pool's typical pair)
    links = lc.family_links(codes[0], gold, keff, is_mc)
    X, off = links["excess"], links["comparable"]
    med = links["median"] if links["median"] is not None else 0.0
    fams = lc.family_components(links["adjacency"])
    fam_source = "near-duplicate answers or wrong-answer agreement above the pool's typical pair"
    if not fams:
        fams = lc.name_families(frame.models)
        fam_source = "models sharing a name prefix (no family in the answers)"
    if not fams and M >= 2:
        fams, fam_source = [list(range(M))], "the whole pool (no family in the answers or the model names)"
    family = np.full(M, -1, np.int64)
    share = np.zeros(max(len(fams), 1))
    for f, members in enumerate(fams):
        family[members] = f
        inside = off[np.ix_(members, members)]
        x = float(np.mean(X[np.ix_(members, members)][inside])) if inside.any() else med
        share[f] = float(np.sqrt(np.clip(x, 0.04, 0.9)))
    describe = {
        "letter_bias": {"what": "each model's wrong answers go to option positions by its own preference, "
                                "fitted per arm and option count from where its wrong answers go in this benchmark",
                        "largest_preference": {"share_of_wrong_answers": round(best[0], 3), "model": best[1],
                                               "n_options": best[2]} if best[1] else None},
        "chance_categories": {"what": "every model answers at chance (its own answer-position frequencies, "
                                      "independent of the gold) in these categories", "categories": chance,
                              "source": source, "share_of_items_simulated": float(chance_item.mean())
                              if len(chance_item) else 0.0},
        "families": {"what": "a family's wrong answers share one attractive distractor per item",
                     "families": [[str(frame.models[j]) for j in m] for m in fams],
                     "attractor_share": [round(float(x), 3) for x in share[:len(fams)]], "source": fam_source},
    }
    return {"pref_run": pref_run, "freq_run": freq_run, "chance_item": chance_item, "family": family,
            "family_share": share, "n_families": len(fams), "describe": describe}


def _apply_regime(sim: NullSimulator, regime: str, gq: np.ndarray, hit: np.ndarray, choice: np.ndarray,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One simulation's (hit, choice) per run, redrawn where ``regime`` changes them (see :func:`fit_regimes`).
    The number of generator calls depends on the regime only, so a simulation's draw depends on its index."""
    fit = sim.regime_fit
    kq = sim.k_eff[sim.rq]
    R = len(sim.rq)
    if regime == "letter_bias":
        sel = np.flatnonzero((sim.run_kind == 0) & ~hit)
        W = fit["pref_run"][sel].copy()
        W[np.arange(len(sel)), gq[sel]] = 0.0
        u = rng.random(R)[sel] * W.sum(axis=1)
        j = (np.cumsum(W, axis=1) < u[:, None]).sum(axis=1)
        choice = choice.copy()
        choice[sel] = np.minimum(j, kq[sel] - 1)
    elif regime == "chance_categories":
        sel = np.flatnonzero(fit["chance_item"][sim.rq] & (sim.run_kind <= 1))
        F = fit["freq_run"][sel]
        u = rng.random(R)[sel] * F.sum(axis=1)
        j = (np.cumsum(F, axis=1) < u[:, None]).sum(axis=1)
        choice = choice.copy()
        choice[sel] = np.minimum(j, np.where(sim.run_kind[sel] == 1, 1, kq[sel] - 1))
        hit = choice == gq
    elif regime == "families" and fit["n_families"]:
        F = fit["n_families"]
        att = 1 + (rng.random((sim.n_items, F)) * (sim.k_eff[:, None] - 1)).astype(np.int64)
        fam = fit["family"][sim.rm]
        to = rng.random(R) < fit["family_share"][np.maximum(fam, 0)]
        sel = np.flatnonzero((fam >= 0) & (sim.run_kind == 0) & ~hit & (kq >= 3) & to)
        choice = choice.copy()
        choice[sel] = (gq[sel] + att[sim.rq[sel], fam[sel]]) % kq[sel]
    return hit, choice


class NullSimulator:
    """Draw null frames for one benchmark on a fixed stratified subsample of its items."""

    def __init__(self, frame: AuditFrame, *, field: str = "hit", condition_on_gold: bool = True,
                 n_items: int | str | None = "auto", seed: int = 0, difficulty: bool = True,
                 regimes: bool = True):
        from ..detectors.strata import effective_option_count

        # questions in ID order, models in name order: the draws depend on the data and the seed, not on the order
        # the rows, files or models came in (AuditFrame.canonical)
        frame = frame.canonical()[0]
        self.models = frame.models
        self.n_benchmark = frame.n_questions
        rng = np.random.default_rng([seed, 7])
        cls_all = accuracy_classes(frame, condition_on_gold)
        n_cls = int(cls_all.max()) + 1 if len(cls_all) else 1
        self.acc, dense = class_accuracies(frame, field, cls_all, n_cls)
        if n_items == "auto":
            n_items = default_items(frame.n_models, int(frame.has_arm("full")) + int(frame.has_arm("blind")))
        items = _stratified_subsample(cls_all, frame.n_questions if n_items is None else int(n_items), rng)
        self.items = items
        self.n_items = len(items)
        self.cls = cls_all[items]
        q = frame.questions.iloc[items].reset_index(drop=True)
        self.k = q["n_options"].to_numpy().astype(np.int64)
        self.atype = q["answer_type"].to_numpy(dtype=object)
        self.is_mc = self.atype == "mc"
        self.is_yn = self.atype == "yesno"
        self.k_eff = np.maximum(effective_option_count(frame)[items], 2)
        # open items: the gold is value 0, a wrong answer one of ``k_open - 1`` other values (fitted: two wrong
        # answers to an open item agree as often as in this benchmark)
        self.k_open = open_value_count(frame)
        self.k_eff = np.where(self.is_mc | self.is_yn, self.k_eff, self.k_open)
        gcode = frame.gold_codes()[items].astype(np.int64)
        self.gold_yn = np.clip(gcode, 0, 1)  # yes = 0, no = 1, kept as in the benchmark
        self.exists = np.stack([d[items] >= 0 for d in dense])  # (2, n, M): which runs exist
        M = frame.n_models
        acc_full = self.acc[0][np.arange(M)[None, :], self.cls[:, None]]   # (n, M)
        if difficulty:
            self.ability, self.node_post, self.difficulty_sd = item_difficulty(dense[0][items], acc_full)
        else:
            self.ability, self.node_post, self.difficulty_sd = _logit(acc_full), None, 0.0
        self.p_blind = self.acc[1][np.arange(M)[None, :], self.cls[:, None]]
        self.condition_on_gold = condition_on_gold
        qs = q[["question_id", "question", "answer_type", "category", "l2_category", "group_id", "hint",
                "n_options"]].copy()
        qs["options"] = [[f"option {j}" for j in range(kk)] if mc else [] for kk, mc in zip(self.k, self.is_mc)]
        self.q_base = qs
        rows = np.argwhere(self.exists.transpose(0, 2, 1))  # (arm, m, item) in run order
        self.ra, self.rm, self.rq = rows[:, 0], rows[:, 1], rows[:, 2]
        qt = self.atype[self.rq]
        self.run_kind = np.where(qt == "mc", 0, np.where(qt == "yesno", 1, 2)).astype(np.int8)
        # what every simulated frame shares with the others (the questions' categories do not change)
        codes, labels = category_codes_of(q["category"])
        codes.setflags(write=False)
        self.shared_cache: dict = {("category_codes", "category"): (codes, labels)}
        self.regimes = REGIMES if regimes else ("iid",)
        self.regime_fit = fit_regimes(frame, self, dense, rng) if regimes else {}

    def describe(self) -> dict:
        out = {"n_items": self.n_items, "n_items_benchmark": self.n_benchmark,
               "subsample": "stratified by effective option count x yes/no gold" if self.n_items < self.n_benchmark
               else "all items", "difficulty_sd": self.difficulty_sd, "condition_on_gold": self.condition_on_gold,
               "regimes": list(self.regimes), "regime_of_simulation": "simulation s is regime s mod "
               f"{len(self.regimes)} in this order"}
        if self.regime_fit:
            out["regime_fit"] = {k: v for k, v in self.regime_fit.get("describe", {}).items()}
        return out

    def regime_of(self, s: int) -> str:
        """The regime of simulation ``s`` (its index alone decides, whoever runs it)."""
        return self.regimes[int(s) % len(self.regimes)]

    def draw_many(self, n_sims: int, rng: np.random.Generator, first: int = 0) -> list[AuditFrame]:
        """``n_sims`` null frames (simulations ``first``, ``first + 1``, ... and their regimes), drawn together
        (one vectorised draw per array)."""
        gold, hit, choice = self.draw_arrays(n_sims, rng, first)
        return [self._frame(gold[s], hit[s], choice[s]) for s in range(len(gold))]

    def draw_arrays(self, n_sims: int, rng: np.random.Generator, first: int = 0
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What :meth:`draw_many` builds its frames from: (gold (S, n), hit (S, runs), choice (S, runs)).
        Simulation ``first + s`` is drawn in regime :meth:`regime_of` (``first + s``): the iid draw first (the
        same generator calls whatever the regimes), then the regime's own draws, in simulation order."""
        n, S = self.n_items, int(n_sims)
        gold = (rng.random((S, n)) * self.k_eff).astype(np.int64)
        gold = np.where(self.is_yn, self.gold_yn, np.where(self.is_mc, gold, 0))
        gq = gold[:, self.rq]
        from ..stats.label_model import NODES

        # full arm: each item's difficulty drawn from its posterior (keeps which items are hard)
        if self.node_post is not None:
            cdf = np.cumsum(self.node_post, axis=1)
            node = (rng.random((S, n, 1)) > cdf[None]).sum(axis=2).clip(0, len(NODES) - 1)
            u = self.difficulty_sd * NODES[node]                                     # (S, n)
        else:
            u = np.zeros((S, n))
        full = self.ra == 0
        p = np.empty((S, len(self.rq)))
        # expit, not 1 / (1 + exp(-x)): an extreme ability (an arm every model gets right) overflowed exp
        p[:, full] = expit(self.ability[self.rq[full], self.rm[full]] - u[:, self.rq[full]])
        p[:, ~full] = self.p_blind[self.rq[~full], self.rm[~full]]
        hit = rng.random((S, len(self.rq))) < p
        kq = self.k_eff[self.rq]
        off = 1 + (rng.random((S, len(self.rq))) * (kq - 1)).astype(np.int64)
        choice = np.where(hit, gq, (gq + off) % kq)
        for i in range(S):
            regime = self.regime_of(first + i)
            if regime != "iid" and self.regime_fit:
                hit[i], choice[i] = _apply_regime(self, regime, gq[i], hit[i], choice[i], rng)
        return gold, hit, choice

    def draw(self, rng: np.random.Generator) -> AuditFrame:
        """One null frame."""
        return self.draw_many(1, rng)[0]

    def _answer_vocab(self) -> tuple[pa.Array, int]:
        """The answer texts a simulated run can give (letters, yes/no, "v<j>" for open items) and the
        offset of the open items' texts in that list."""
        kmax = max(int(self.k_eff.max()) if len(self.k_eff) else 0, 2)
        vocab = list(LETTERS) + ["yes", "no"] + [f"v{j}" for j in range(kmax)]
        return pa.array(vocab, pa.string()), len(LETTERS) + 2

    def _frame(self, gold: np.ndarray, hit: np.ndarray, choice: np.ndarray) -> AuditFrame:
        q = self.q_base.copy()
        letters = np.array(list(LETTERS))
        other = ~self.is_mc & ~self.is_yn
        q["answer"] = np.where(self.is_mc, letters[np.minimum(gold, 25)],
                               np.where(self.is_yn, np.where(gold == 0, "yes", "no"), "v0"))
        q["gold_index"] = np.where(self.is_mc, gold, -1).astype(np.int16)
        q["n_options"] = self.k.astype(np.int16)
        # answer texts by index into one small vocabulary (an Arrow take, no per-row Python strings)
        vocab, open_at = self._answer_vocab()
        kind = self.run_kind  # 0 mc, 1 yes/no, 2 other
        vidx = np.where(kind == 0, np.minimum(choice, 25),
                        np.where(kind == 1, len(LETTERS) + (choice != 0), open_at + choice)).astype(np.int32)
        ans = pd.array(pd.arrays.ArrowExtensionArray(vocab.take(pa.array(vidx))), dtype=ARROW_STR)
        h = hit.astype(np.int8)
        runs = pd.DataFrame({
            "q": self.rq.astype(np.int32), "m": self.rm.astype(np.int16), "arm": self.ra.astype(np.int8),
            "prediction": ans, "answer": ans.copy(),
            "hit": h, "hit_exact": h.copy(),
        })
        # answer codes in the frame's code space (mc: option index; yes=0/no=1; other: kmax + value)
        kmax = max(int(self.k.max()) if len(self.k) else 0, 2)
        codes = np.where(kind <= 1, choice, kmax + choice).astype(np.int32)
        gcodes = np.where(other, kmax, gold).astype(np.int32)
        cols = ["question_id", "question", "options", "answer", "answer_type", "category", "l2_category",
                "group_id", "hint", "n_options", "gold_index"]
        return AuditFrame(questions=q[cols], runs=runs, models=self.models,
                          meta={"simulated_null": True},
                          cache={"answer_codes": codes, "gold_codes": gcodes, **self.shared_cache})


def _resolve(names: dict[str, Callable] | Iterable[str] | None) -> dict[str, Callable]:
    if isinstance(names, dict):
        return dict(names)
    return {name: detectors.get(name).load().run for name in (detectors.names() if names is None else names)}


#: the interval of a false-positive rate and so of its verdict: exact, because a regime's rate rests on 10-13
#: simulations, where a Wilson interval's lower end is too high (4 of 12 at the regimes' Bonferroni level:
#: Wilson 0.109, exact 0.066; a true rate of 7.5% gives 4 or more of 12 in 0.96% of audits, not 0.625%)
RATE_CI = clopper_pearson_ci


def _verdict(rate_k: float, rate_n: float, nominal: float | None, two_sided: bool, ci_alpha: float = 0.05
             ) -> tuple[list, bool | None, str]:
    lo, hi = RATE_CI(rate_k, rate_n, ci_alpha)
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


def decision(k: float, n: float, nominal: float | None, out_of_calibration: bool | None, ci_alpha: float = 0.05,
             per_run: float = 1.0) -> dict:
    """Whether the simulations decide the rate's side of the margin, and how many would.

    ``out_of_calibration`` (:func:`_verdict`) is a test: it is True only when the rate's interval lies above
    ``MARGIN_HIGH x nominal``, so a True holds at any number of simulations. Its False is not the converse: a
    rate of 1 in 12 has an interval reaching 38%. ``decided`` is True when the verdict is out of calibration or
    the interval's upper end is at most ``MARGIN_HIGH x nominal`` (then "within calibration" is shown, not
    merely not refuted). Otherwise ``sims_to_decide`` is how many simulations the observed rate would need for
    its interval to end below that margin (``per_run``: trials per simulation, the simulated items for a
    per-item count), or None when the observed rate itself is at or above the margin (more simulations would
    rather decide it out)."""
    if nominal is None or n <= 0:
        return {"decided": None, "sims_to_decide": None}
    if out_of_calibration or nominal <= 0:
        return {"decided": True, "sims_to_decide": None}
    margin = MARGIN_HIGH * nominal
    hi = float(RATE_CI(k, n, ci_alpha)[1])
    if hi <= margin:
        return {"decided": True, "sims_to_decide": None}
    p = k / n
    if p >= margin:
        return {"decided": False, "sims_to_decide": None}
    # the smallest trial count (a power of 2 times n) whose interval at the observed rate ends below the margin
    grid = n * 2.0 ** np.arange(1, 31)
    ok = np.flatnonzero(RATE_CI(p * grid, grid, ci_alpha)[1] <= margin)
    need = float(grid[ok[0]]) if len(ok) else float("inf")
    # refine between the last failing power and the first passing one
    if len(ok):
        lo_n = grid[ok[0] - 1] if ok[0] > 0 else n
        cand = np.linspace(lo_n, need, 65)
        need = float(cand[np.flatnonzero(RATE_CI(p * cand, cand, ci_alpha)[1] <= margin)[0]])
    sims = int(np.ceil(need / per_run)) if np.isfinite(need) else None
    return {"decided": False, "sims_to_decide": sims}


def calibrate(frame: AuditFrame, names: dict[str, Callable] | Iterable[str] | None = None, *,
              n_sims: int = 200, seed: int = 0, field: str = "hit", alpha: float = 0.05,
              params: dict[str, dict] | None = None, condition_on_gold: bool = True,
              n_items: int | str | None = "auto", difficulty: bool = True,
              progress: Callable[[int, int], None] | None = None) -> dict[str, dict]:
    """False-positive rate of each detector on ``n_sims`` null versions of ``frame``.

    names: registered detector names, None for all of them, or {name: run function}. params: per-detector
    keyword arguments (the audit's); each detector's registered ``calibration_params`` override them
    (steps that do not change the headline test, such as a leave-one-out, a bootstrap, a power or
    recall simulation, are switched off). n_items: size of the stratified subsample the nulls are
    drawn on ("auto": about 30,000 simulated cells, 200 to 2,000 items; None = every item). Returns
    {name: {fpr, fpr_ci, nominal, n_sims, n_runs, kind, out_of_calibration, direction, note, simulator}}.
    """
    return Calibration(frame, names, n_sims=n_sims, seed=seed, field=field, alpha=alpha, params=params,
                       condition_on_gold=condition_on_gold, n_items=n_items, difficulty=difficulty,
                       background=False, progress=progress).result()


def _in_worker(sim: NullSimulator, names: list[str], n_sims: int, seed: int, params: dict[str, dict]):
    """The simulations this worker claims (see :class:`SimClaims`), in a worker process: what
    :func:`_simulate` returns for them, its seconds and peak RSS (bytes)."""
    import resource
    import time

    from threadpoolctl import threadpool_limits

    from . import worker as worker_state

    t0 = time.perf_counter()
    with threadpool_limits(limits=1):
        out = _simulate(sim, _resolve(names), n_sims=n_sims, seed=seed, params=params, progress=None,
                        claims=SimClaims(worker_state.SIM_COUNTER, n_sims))
    return out, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class SimClaims:
    """Simulation indices handed out once each, in increasing order, to whichever process asks first: the
    calibration worker and, once its detectors are done, the audit's own process (a counter in shared
    memory). Every simulation's null frame and seed depend on its index only, so the results do not
    depend on who ran which."""

    def __init__(self, counter, n_sims: int) -> None:
        self.counter, self.n_sims = counter, int(n_sims)

    def next(self) -> int | None:
        if self.counter is None:  # one process: a plain count
            self.counter = _LocalCounter()
        with self.counter.get_lock():
            s = int(self.counter.value)
            if s >= self.n_sims:
                return None
            self.counter.value = s + 1
        return s


class _LocalCounter:
    def __init__(self) -> None:
        import threading

        self.value, self._lock = 0, threading.Lock()

    def get_lock(self):
        return self._lock


from .worker import WorkerProcess, new_worker  # noqa: E402  (the worker process is engine.worker's)


class Calibration:
    """One calibration run. With ``background``, the null simulations run in a worker process (spawned:
    a fresh interpreter, no fork of the caller's threads) from the moment this is built, so that they
    overlap the caller's own work (the audit's detectors); :meth:`result` waits for them. The numbers
    are identical either way: the worker gets the same simulator, seeds and parameters. Only registered
    detectors run in a worker; run functions passed in directly run in this process."""

    def __init__(self, frame: AuditFrame, names: dict[str, Callable] | Iterable[str] | None = None, *,
                 n_sims: int = 200, seed: int = 0, field: str = "hit", alpha: float = 0.05,
                 params: dict[str, dict] | None = None, condition_on_gold: bool = True,
                 n_items: int | str | None = "auto", difficulty: bool = True, background: bool = False,
                 worker: WorkerProcess | None = None, progress: Callable[[int, int], None] | None = None):
        from threadpoolctl import threadpool_limits

        self.runs = _resolve(names)
        self.n_sims, self.seed, self.alpha, self.params = n_sims, seed, alpha, params or {}
        self.condition_on_gold, self.progress = condition_on_gold, progress
        # one BLAS / OpenMP thread: a simulation's matrices are small, and threads spin-waiting on them cost
        # more CPU than they save (3x on the label model's products on 2 shared cores)
        with threadpool_limits(limits=1):
            self.sim = NullSimulator(frame, field=field, condition_on_gold=condition_on_gold, n_items=n_items,
                                     seed=seed, difficulty=difficulty)
        self.worker: dict[str, float] = {}
        self._job = self._submitter = self._counter = self._wp = None
        self._own_worker = worker is None
        registered = set(detectors.names())
        if (background or worker is not None) and n_sims > 0 and not isinstance(names, dict) \
                and set(self.runs) <= registered:
            # no process here (or a script a second process would run again): simulate in this one
            wp = worker if worker is not None else new_worker()
            if wp is not None and wp.pool is not None and wp.alive():
                self._wp, self._counter = wp, wp.counter
                with self._counter.get_lock():
                    self._counter.value = 0
                self._submit_after(worker.after if worker is not None else None,
                                   getattr(worker, "warm_report", None))
            elif wp is not None and worker is None:
                wp.close()

    def _submit_after(self, after: Callable[[], None] | None, warm_report: Callable[[], None] | None = None) -> None:
        """Submit the simulations now, or on a helper thread once ``after()`` returns."""
        import threading

        args = (self.sim, list(self.runs), self.n_sims, self.seed, self.params)
        wp = self._wp

        def submit() -> None:
            if after is not None:
                after()
            self._job = wp.submit(_in_worker, *args)  # None: the worker was stopped meanwhile
            if warm_report is not None:  # the figures' imports, behind the simulations
                warm_report()

        if after is None:
            submit()
        else:
            self._submitter = threading.Thread(target=submit, name="benchaudit-calibration-submit", daemon=True)
            self._submitter.start()

    @property
    def in_worker(self) -> bool:
        """The simulations run (or will run) in a worker process beside the caller."""
        return self._wp is not None

    def wait_worker(self) -> None:
        """Block until the worker has run every simulation it will claim (at once without a worker)."""
        if self._submitter is not None:
            self._submitter.join()
        job, wp = self._job, self._wp
        if job is not None and wp is not None:
            wp.wait(job)  # returns when the worker is done, or dead (result() then reruns its share)

    def close(self) -> None:
        """Stop the worker this run started (a worker passed in is its owner's to stop); safe to call twice."""
        if self._wp is not None and self._own_worker:
            self._wp.close()
        self._wp = None

    def result(self) -> dict[str, dict]:
        """{name: calibration entry}. With a worker, this process runs the simulations it has not yet claimed
        (sharing the rest of the work) and then collects the worker's; without one, it runs them all."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            mine = _simulate(self.sim, self.runs, n_sims=self.n_sims, seed=self.seed, params=self.params,
                             progress=self.progress if self._wp is None else None,
                             claims=SimClaims(self._counter, self.n_sims))
        if self._submitter is not None:
            self._submitter.join()
            self._submitter = None
        theirs: dict[int, dict] = {}
        if self._job is not None:
            try:
                # a worker that died (killed, out of memory) never answers: its simulations are rerun below
                if self._wp is not None and self._wp.wait(self._job):
                    theirs, seconds, rss = self._job.get()
                    self.worker = {"seconds": seconds, "peak_rss_bytes": float(rss), "n_sims": len(theirs)}
            finally:
                self.close()
                self._job = None
        per_sim = {**theirs, **mine}
        missing = set(range(self.n_sims)) - set(per_sim)
        if missing:  # claimed by a worker that died, or was stopped, before it returned them
            with threadpool_limits(limits=1):
                per_sim |= _simulate(self.sim, self.runs, n_sims=self.n_sims, seed=self.seed, params=self.params,
                                     progress=None, claims=_ListClaims(missing))
        return _entries(per_sim, self.sim, list(self.runs), n_sims=self.n_sims, alpha=self.alpha,
                        condition_on_gold=self.condition_on_gold, seed=self.seed)


class _FrameSource:
    """Null frame number ``s`` of a calibration run: the frames are drawn ``batch`` at a time from one
    generator seeded with ``seed``; asking for a later frame draws (without building) the batches before it,
    so frame ``s`` is the same whichever frames this process skipped. Indices must not decrease."""

    def __init__(self, sim: NullSimulator, seed: int, n_sims: int, batch: int = 10) -> None:
        self.sim, self.n_sims, self.batch = sim, n_sims, batch
        self.rng = np.random.default_rng(seed)
        self.drawn = 0          # batches drawn so far
        self.arrays = None      # the last one's arrays

    def frame(self, s: int) -> AuditFrame:
        b = s // self.batch
        while self.drawn <= b:
            self.arrays = self.sim.draw_arrays(min(self.batch, self.n_sims - self.drawn * self.batch), self.rng,
                                               self.drawn * self.batch)
            self.drawn += 1
        gold, hit, choice = self.arrays
        i = s - b * self.batch
        return self.sim._frame(gold[i], hit[i], choice[i])  # noqa: SLF001 (the simulator's own frame builder)


class _ListClaims:
    """Claims from a fixed increasing list (the simulations left to run here)."""

    def __init__(self, items) -> None:
        self.items = iter(sorted(items))

    def next(self) -> int | None:
        return next(self.items, None)


def _simulate(sim: NullSimulator, runs: dict[str, Callable], *, n_sims: int, seed: int, params: dict[str, dict],
              progress: Callable[[int, int], None] | None, claims=None) -> dict[int, dict]:
    """Run every detector on the null frames of the simulations this process claims (all ``n_sims`` by
    default) and keep what the rates need: {simulation: {detector: (headline p-value, (observed,
    expected) counts, flagged items, skip reason)}}; :func:`_collect` orders them into the rates' inputs."""
    registered = detectors.names()
    overrides = {n: detectors.get(n).calibration_params if n in registered else {} for n in runs}
    chance_item = (sim.regime_fit or {}).get("chance_item")
    scoped = chance_item is not None and bool(np.any(chance_item))
    claims = claims if claims is not None else SimClaims(None, n_sims)
    source = _FrameSource(sim, seed, n_sims)
    out: dict[int, dict] = {}
    from ..clock import progress as stage_progress

    while (s := claims.next()) is not None:
        # claims are handed out in index order across processes: s + 1 simulations are under way or done
        stage_progress(s, n_sims)
        f = source.frame(s)
        row: dict[str, tuple] = {}
        for name, fn in runs.items():
            kw = dict(params.get(name, {})) | dict(overrides[name])
            try:
                res = fn(f, field="hit", seed=seed + s, **kw)
            except DetectorSkipped as e:
                row[name] = (None, None, None, str(e), None)
                continue
            sm = res.summary
            p = sm.get("p_value")
            p = float(p) if p is not None and not (isinstance(p, float) and np.isnan(p)) else None
            count = next(((float(sm[ok]), float(sm[ek])) for ok, ek in COUNT_KEYS
                          if sm.get(ok) is not None and sm.get(ek) is not None), None)
            col = f"is_{res.name}_issue"
            flag = int(res.per_question[col].sum()) if col in res.per_question.columns else None
            # in the chance-categories regime, the flags on the items of those categories (the null of a flag
            # rate there: :func:`chance_scope`)
            in_scope = (int(res.per_question[col].to_numpy(dtype=bool, na_value=False)[chance_item].sum())
                        if flag is not None and scoped and sim.regime_of(s) == "chance_categories" else None)
            row[name] = (p, count, flag, None, in_scope)
        out[s] = row
        if progress:
            progress(len(out), n_sims)
    return out


def _entries(per_sim: dict[int, dict], sim: NullSimulator, names: list[str], *, n_sims: int, alpha: float,
             condition_on_gold: bool, seed: int) -> dict[str, dict]:
    """Each detector's calibration entry: the rate pooled over every simulation, the rate in each regime
    (``regimes``; its verdict at a Bonferroni level over the regimes, so that four looks at one detector keep
    the pooled level, and only with at least :data:`REGIME_MIN_RUNS` simulations) and the regime with the highest rate (``worst_regime``). ``out_of_calibration`` is
    the pooled verdict or any regime's: a miscalibration that one regime produces is not averaged away."""
    pvals, counts, flags, skipped = _collect(per_sim, names)
    base = {"n_sims": n_sims, "alpha": alpha, "condition_on_gold": condition_on_gold,
            "seed": seed, "n_items_simulated": sim.n_items, "simulator": sim.describe()}
    out = {name: base | _rates(pvals[name], counts[name], flags[name], sim.n_items, alpha,
                               skipped.get(name, "no output")) for name in names}
    for name in names:  # the share of items each detector flags on these defect-free benchmarks, whatever its kind
        if flags[name]:
            out[name]["flag_rate"] = _flag_share(flags[name], sim.n_items)
            # the calibration's exact interval: the card prints this rate in the lede and in the calibration
            # table, one number with one interval (HallusionBench's 81.1% had [78.8, 83.2]% and [78.8, 83.3]%)
            out[name]["flag_rate_ci"] = [float(x) for x in RATE_CI(sum(flags[name]),
                                                                   sim.n_items * len(flags[name]), 0.05)]
    if len(sim.regimes) < 2:
        return out
    ci_alpha = 0.05 / len(sim.regimes)
    by = {r: _collect({s: v for s, v in per_sim.items() if sim.regime_of(s) == r}, names) for r in sim.regimes}
    for name in names:
        e = out[name]
        reg = {}
        for r, (pv, ct, fl, sk) in by.items():
            x = _rates(pv[name], ct[name], fl[name], sim.n_items, alpha, sk.get(name, "no output"), ci_alpha)
            reg[r] = {k: x[k] for k in ("kind", "fpr", "fpr_ci", "nominal", "n_runs", "out_of_calibration",
                                        "direction")}
            reg[r]["flag_rate"] = _flag_share(fl[name], sim.n_items) if fl[name] else None
            if x["n_runs"] < REGIME_MIN_RUNS and x["out_of_calibration"] is not None:  # too few for a verdict
                reg[r]["out_of_calibration"], reg[r]["direction"] = None, f"fewer than {REGIME_MIN_RUNS} simulations"
        e["regimes"] = reg
        rated = {r: v for r, v in reg.items() if v["fpr"] is not None and v["kind"] == e["kind"]}
        if rated:
            # the worst: out of calibration first, then the highest rate against the regime's own nominal rate
            # (a count-kind detector's nominal differs per regime: the raw rate named iid on MMStar while its
            # families regime was the one above its margin)
            worst = max(rated, key=lambda r, rated=rated: (
                bool(rated[r]["out_of_calibration"]),
                rated[r]["fpr"] / rated[r]["nominal"] if rated[r]["nominal"] else rated[r]["fpr"]))
            e["worst_regime"] = worst
            e["worst_regime_fpr"] = rated[worst]["fpr"]
            if rated[worst]["out_of_calibration"] and not e.get("out_of_calibration"):
                e["out_of_calibration"], e["direction"] = True, rated[worst]["direction"]
                e["decided"], e["sims_to_decide"] = True, None
                e["note"] = (e.get("note", "") + f"; out of calibration in the {worst} regime "
                             f"({rated[worst]['fpr']:.3f} vs nominal {rated[worst]['nominal']})")
        # "within calibration" is a claim about every regime: a regime whose own rate is above the margin
        # (too few simulations to call it out) leaves the detector not decided, whatever the pooled rate says,
        # and is what the card names (more simulations would decide that regime first)
        high = [r for r, v in rated.items() if not v["out_of_calibration"] and v["nominal"] is not None
                and v["fpr"] >= MARGIN_HIGH * v["nominal"] > 0]
        if e.get("decided") is not None and not e.get("out_of_calibration") and high:
            r = max(high, key=lambda x: rated[x]["fpr"])
            e["decided"], e["sims_to_decide"], e["undecided_regime"] = False, None, r
        fr = {r: v["flag_rate"] for r, v in reg.items() if v["flag_rate"] is not None}
        if fr:
            e["worst_regime_flag_rate"] = max(fr.values())
        scope = chance_scope(per_sim, sim, name)
        if scope:
            e["chance_categories_null"] = scope
    return out


def chance_scope(per_sim: dict[int, dict], sim: NullSimulator, name: str) -> dict | None:
    """The null of a detector's flag rate on the items of the categories the pool answers at chance: the share
    of those items it flags in the ``chance_categories`` regime, where every model answers them at chance with
    its own position frequencies (so whatever it flags there is what chance answers look like to it). None
    without such categories or flags. ``flags_vs_null`` compares the audited benchmark's flag rate on the same
    categories with it."""
    chance_item = (sim.regime_fit or {}).get("chance_item")
    if chance_item is None or not np.any(chance_item):
        return None
    vals = [v[name][4] for s, v in sorted(per_sim.items())
            if sim.regime_of(s) == "chance_categories" and v[name][4] is not None]
    if not vals:
        return None
    n_items = int(np.sum(chance_item))
    k, n = int(sum(vals)), n_items * len(vals)
    return {"categories": list(sim.regime_fit["describe"]["chance_categories"]["categories"]),
            "n_items_simulated": n_items, "n_sims": len(vals), "flag_rate": k / n,
            "flag_rate_ci": [float(x) for x in RATE_CI(k, n, 0.05)],
            "what": "share of the simulated items of these categories flagged in the chance-categories regime "
                    "(every model answers them at chance by its own position frequencies; golds right)"}


def _flag_share(flags: list, n_items: int) -> float:
    """The share of simulated items flagged, pooled over the simulations (``flags``: flagged count per one)."""
    return float(sum(flags) / (n_items * len(flags)))


def _collect(per_sim: dict[int, dict], names) -> tuple[dict, dict, dict, dict]:
    """(p-values, counts, flagged counts, skip reasons) per detector, in simulation order."""
    pvals: dict[str, list] = {n: [] for n in names}
    counts: dict[str, list] = {n: [] for n in names}
    flags: dict[str, list] = {n: [] for n in names}
    skipped: dict[str, str] = {}
    for s in sorted(per_sim):
        for name in names:
            p, count, flag, skip = per_sim[s][name][:4]
            if skip is not None:
                skipped[name] = skip
                continue
            if p is not None:
                pvals[name].append(p)
            if count is not None:
                counts[name].append(count)
            if flag is not None:
                flags[name].append(flag)
    return pvals, counts, flags, skipped


def _rates(pvals: list, counts: list, flags: list, n_items_sim: int, alpha: float, skip_reason: str,
           ci_alpha: float = 0.05) -> dict:
    """One detector's calibration entry from what :func:`_simulate` collected (``ci_alpha``: the level of the
    rate's exact interval and so of the verdict)."""
    Q = n_items_sim
    entry: dict[str, Any] = {}
    if pvals:
        pv = np.array(pvals)
        k = int((pv <= alpha).sum())
        ci, out_cal, direction = _verdict(k, len(pv), alpha, two_sided=True, ci_alpha=ci_alpha)
        entry.update(kind="p_value", fpr=k / len(pv), fpr_ci=ci, nominal=alpha, n_runs=len(pv),
                     out_of_calibration=out_cal, direction=direction,
                     note=f"share of {len(pv)} null simulations with headline p <= {alpha}")
        entry.update(decision(k, len(pv), alpha, out_cal, ci_alpha))
    elif counts:
        obs = sum(c[0] for c in counts)
        exp = sum(c[1] for c in counts)
        n_items = Q * len(counts)
        ci, out_cal, direction = _verdict(obs, n_items, exp / n_items, two_sided=False, ci_alpha=ci_alpha)
        entry.update(kind="count", fpr=obs / n_items, fpr_ci=ci, nominal=exp / n_items,
                     n_runs=len(counts), observed_total=obs, expected_total=exp,
                     out_of_calibration=out_cal, direction=direction,
                     note=(f"flagged per item over {len(counts)} null simulations vs the count the "
                           f"detector expects under independence ({obs:.0f} observed, {exp:.1f} expected)"))
        entry.update(decision(obs, n_items, exp / n_items, out_cal, ci_alpha, per_run=Q))
    elif flags:
        tot = sum(flags)
        n_items = Q * len(flags)
        ci, _, _ = _verdict(tot, n_items, None, two_sided=False, ci_alpha=ci_alpha)
        entry.update(kind="flag_rate", fpr=tot / n_items, fpr_ci=ci, nominal=None, n_runs=len(flags),
                     out_of_calibration=None, direction="", note=FLAG_RATE_NOTE, decided=None, sims_to_decide=None)
    else:
        entry.update(kind="skipped", fpr=None, fpr_ci=None, nominal=None, n_runs=0, out_of_calibration=None,
                     direction="", note=f"skipped on null simulations: {skip_reason}", decided=None,
                     sims_to_decide=None)
    return entry
