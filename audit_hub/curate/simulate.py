"""A seeded simulated pool shaped like MMGist's, for the curation benchmark and tests.

MMGist pooled 23,250 items from 18 benchmarks (seven capability dimensions) and ran 27 models with and
without the image. This simulator draws a pool of that shape from a two-parameter logistic (2PL) item
response model, ``P(model m right on item i) = sigmoid(a_i (theta_m - b_i))``, with item kinds planted
on disjoint random item sets (fractions of the pool):

* ``good``: 2PL items, ``b ~ N(0, 1.2)``, ``a ~ LogNormal(0.3, 0.35)``; a wrong answer is uniform over the
  wrong options; blind (text-only) runs guess: right with ``1/K`` plus a small per-model boost.
* ``blind_solvable``: answerable from the text: each model is right with probability 0.97 with the image
  and 0.95 without it.
* ``saturated``: every model right with the image (blind: guessing), no information about ranking.
* ``mislabelled``: the gold key is wrong. Models pick the *true* option by the 2PL of an easy item
  (``b ~ N(-1, 0.5)``), so they agree on a non-gold option; the gold is hit only by a wrong guess.
* ``broken_options``: half carry a placeholder gold option text (``"nan"``, a pandas round trip), half a
  distractor that duplicates the gold text; models split between the duplicates or guess.

Model abilities ``theta ~ N(0, 1)``; each model gets a release date whose order follows ability plus
noise (newer models tend to be stronger), for the newest-models-held-out split. Questions carry
``category`` (seven dimensions), options ``A``-``D`` (some items have 5) and the gold letter.

``frame.meta["planted"]`` lists the question IDs of each planted kind; ``frame.meta["model_dates"]`` maps
model -> ISO date; ``frame.meta["simulated"]`` holds the parameters and the true abilities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import LETTERS

KINDS = ("good", "blind_solvable", "saturated", "mislabelled", "broken_options")
DEFAULT_MIX = {"blind_solvable": 0.28, "saturated": 0.25, "mislabelled": 0.05, "broken_options": 0.02}
CATEGORIES = ("coarse perception", "fine-grained perception", "visual reasoning", "visual logic",
              "math", "science & expert knowledge", "OCR & charts")
LETTER_ARRAY = np.array(list(LETTERS))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@dataclass
class _Items:
    """The simulated items (planted kind, option count, gold, category, 2PL parameters) and models."""

    kind: np.ndarray
    K: np.ndarray
    gold: np.ndarray
    cat: np.ndarray
    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    dates: np.ndarray
    models: list[str]


def _draw_items(rng: np.random.Generator, Q: int, M: int, mix: dict[str, float]) -> _Items:
    counts = {k: int(round(mix.get(k, 0.0) * Q)) for k in KINDS[1:]}
    if sum(counts.values()) > Q:
        raise ValueError("planted fractions add up to more than the pool")
    kind = np.zeros(Q, dtype=np.int8)
    perm = rng.permutation(Q)
    start = 0
    for j, k in enumerate(KINDS[1:], start=1):
        kind[perm[start:start + counts[k]]] = j
        start += counts[k]
    K = np.where(rng.random(Q) < 0.15, 5, 4).astype(np.int64)
    gold = (rng.random(Q) * K).astype(np.int64)
    cat = rng.integers(0, len(CATEGORIES), Q)
    # per-category difficulty shift: dimensions differ in how hard they are ("visual logic" hardest)
    cat_shift = np.linspace(-0.6, 0.9, len(CATEGORIES))[rng.permutation(len(CATEGORIES))]
    b = rng.normal(0.0, 1.2, Q) + cat_shift[cat]
    a = rng.lognormal(0.3, 0.35, Q)
    theta = np.sort(rng.normal(0.0, 1.0, M))
    # release order: ability rank plus noise (newer tends to be stronger)
    order = np.argsort(np.arange(M) + rng.normal(0.0, M / 6, M), kind="stable")
    dates = np.empty(M, dtype=object)
    base = np.datetime64("2023-01-01")
    dates[order] = [str(base + np.timedelta64(int(25 * r), "D")) for r in range(M)]
    return _Items(kind, K, gold, cat, a, b, theta, dates, [f"sim-model-{j:02d}" for j in range(M)])


def _full_arm(rng: np.random.Generator, it: _Items) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Full-arm choices; the placeholder-gold items, the duplicated-gold items and their duplicate option."""
    Q, M = len(it.kind), len(it.theta)
    K, gold, a, theta = it.K, it.gold, it.a, it.theta
    p_full = _sigmoid(a[:, None] * (theta[None, :] - it.b[:, None]))
    is_bs, is_sat = it.kind == 1, it.kind == 2
    is_mis, is_brk = it.kind == 3, it.kind == 4
    p_full[is_bs] = 0.97
    p_full[is_sat] = 1.0
    right = rng.random((Q, M)) < p_full
    off = 1 + (rng.random((Q, M)) * (K[:, None] - 1)).astype(np.int64)
    choice = np.where(right, gold[:, None], (gold[:, None] + off) % K[:, None])
    # mislabelled: the true option is gold + 1 (mod K); models find it by an easy-item 2PL
    true_opt = (gold + 1) % K
    mi = np.flatnonzero(is_mis)
    p_true = _sigmoid(a[mi, None] * (theta[None, :] - rng.normal(-1.0, 0.5, len(mi))[:, None]))
    finds = rng.random((len(mi), M)) < p_true
    guess = (rng.random((len(mi), M)) * K[mi, None]).astype(np.int64)
    choice[mi] = np.where(finds, true_opt[mi, None], guess)
    # broken options: placeholder gold -> guess; duplicated gold -> pick one of the two equal texts
    bi = np.flatnonzero(is_brk)
    pi_, di = bi[: len(bi) // 2], bi[len(bi) // 2:]
    choice[pi_] = (rng.random((len(pi_), M)) * K[pi_, None]).astype(np.int64)
    dup_opt = (gold + 1) % K
    knows = rng.random((len(di), M)) < _sigmoid(a[di, None] * (theta[None, :] - it.b[di, None]))
    coin = rng.random((len(di), M)) < 0.5
    choice[di] = np.where(knows, np.where(coin, gold[di, None], dup_opt[di, None]), choice[di])
    return choice, pi_, di, dup_opt


def _blind_arm(rng: np.random.Generator, it: _Items, pi_: np.ndarray) -> np.ndarray:
    """Blind-arm choices: guessing plus a small per-model boost; blind-solvable items answered from the text."""
    Q, M, K, gold = len(it.kind), len(it.theta), it.K, it.gold
    boost = rng.uniform(0.0, 0.08, M)
    p_blind = np.minimum(1.0 / K[:, None] + boost[None, :], 1.0) * np.ones((Q, M))
    p_blind[it.kind == 1] = 0.95
    rb = rng.random((Q, M)) < p_blind
    offb = 1 + (rng.random((Q, M)) * (K[:, None] - 1)).astype(np.int64)
    choice_b = np.where(rb, gold[:, None], (gold[:, None] + offb) % K[:, None])
    choice_b[pi_] = (rng.random((len(pi_), M)) * K[pi_, None]).astype(np.int64)
    return choice_b


def _pool_tables(it: _Items, arms: list[tuple[str, np.ndarray]], pi_: np.ndarray, di: np.ndarray,
                 dup_opt: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The questions and runs tables (and the question IDs)."""
    Q, M, K, gold = len(it.kind), len(it.theta), it.K, it.gold
    qids = np.char.add("sim-", np.char.zfill(np.arange(Q).astype(str), 6)).astype(object)
    opt_text = [[f"option {i}-{j}" for j in range(K[i])] for i in range(Q)]
    for i in pi_:
        opt_text[i][gold[i]] = "nan"
    for i in di:
        opt_text[i][dup_opt[i]] = opt_text[i][gold[i]]
    questions = pd.DataFrame({
        "question_id": qids,
        "question": [f"Item {i}: what does the image show?" for i in range(Q)],
        "options": opt_text,
        "answer": LETTER_ARRAY[gold],
        "answer_type": "mc",
        "category": np.array(CATEGORIES, dtype=object)[it.cat],
    })
    parts = []
    for arm, ch in arms:
        hit = ch == gold[:, None]
        letters = LETTER_ARRAY[ch.T.reshape(-1)]
        parts.append(pd.DataFrame({
            "question_id": np.tile(qids, M),
            "model": np.repeat(np.array(it.models, dtype=object), Q),
            "arm": arm,
            "prediction": letters,
            "answer": letters,
            "hit": hit.T.reshape(-1).astype(np.int8),
            "hit_exact": hit.T.reshape(-1).astype(np.int8),
        }))
    return questions, pd.concat(parts, ignore_index=True), qids


def simulate_pool(n_items: int = 25_000, n_models: int = 30, *, mix: dict[str, float] | None = None,
                  seed: int = 0, blind: bool = True, as_tables: bool = False):
    """Simulate an MMGist-shaped pool; returns an AuditFrame (or ``(questions, runs, meta)``)."""
    rng = np.random.default_rng(seed)
    mix = dict(DEFAULT_MIX if mix is None else mix)
    bad = set(mix) - set(KINDS[1:])
    if bad:
        raise ValueError(f"unknown planted kinds {sorted(bad)}; known: {KINDS[1:]}")
    Q, M = int(n_items), int(n_models)
    it = _draw_items(rng, Q, M, mix)
    choice, pi_, di, dup_opt = _full_arm(rng, it)
    arms = [("full", choice)]
    if blind:
        arms.append(("blind", _blind_arm(rng, it, pi_)))
    questions, runs, qids = _pool_tables(it, arms, pi_, di, dup_opt)
    meta = {
        "planted": {k: [str(qids[i]) for i in np.flatnonzero(it.kind == j)] for j, k in enumerate(KINDS) if j > 0},
        "model_dates": dict(zip(it.models, it.dates.tolist())),
        "simulated": {"seed": seed, "n_items": Q, "n_models": M, "mix": mix,
                      "theta": dict(zip(it.models, it.theta.round(6).tolist()))},
        "benchmark": f"simulated MMGist-shaped pool ({Q:,} items x {M} models)",
    }
    if as_tables:
        return questions, runs, meta
    from ..frame.core import AuditFrame

    return AuditFrame.from_tables(questions, runs, questions_source="<simulated>", runs_source="<simulated>",
                                  meta=meta)
