"""A seeded simulator of benchmark runs, shared by the detector tests.

``simulate_frame`` builds questions and runs and passes them through
:meth:`AuditFrame.from_tables` (the validated path), with explicit ``answer``, ``hit`` and
``hit_exact`` columns, so no answer extraction runs.

The null model: every (question, model, arm) outcome is an independent Bernoulli draw with the
model's accuracy for that arm (optionally shifted on the logit scale by an item difficulty shared by
all models and both arms, ``difficulty_sd``); a wrong mc answer is uniform over the wrong options, a
wrong yes/no answer is the other word. Effects are planted on disjoint random item sets:

``planted`` keys (all optional; counts are numbers of items)
    ``blind_solvable``: every model correct in both arms (image-free leakage).
    ``consensus_wrong``: every model in every arm picks the same non-gold option (mc) / the wrong
        word (yes/no): a likely mislabelled gold.
    ``duplicate_distractors``: two distractors have identical text (mc with >= 3 options).
    ``near_duplicate_distractors``: a distractor equals another with one character changed.
    ``gold_position``: probabilities over letter positions for the gold (A, B, ...); a position
        beyond an item's option count is folded back with modulo.
    ``negative_discrimination``: the weaker half of the models (by full-arm accuracy) is correct,
        the stronger half wrong, in the full arm.

The planted question IDs are in ``frame.meta["planted"][key]`` (lists of question IDs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_hub.frame.core import AuditFrame
from audit_hub.schema import LETTERS

_PLANT_KEYS = ("blind_solvable", "consensus_wrong", "duplicate_distractors", "near_duplicate_distractors",
               "negative_discrimination")


def _per_model(value, n_models: int, name: str) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if a.ndim == 0:
        return np.full(n_models, float(a))
    if a.shape != (n_models,):
        raise ValueError(f"{name} must be a scalar or have one value per model ({n_models})")
    return a


def _logit(p):
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p / (1 - p))


def simulate_frame(
    n_questions: int,
    n_models: int,
    *,
    n_options=4,
    answer_type="mc",
    accuracy_full=0.6,
    accuracy_blind=0.4,
    planted: dict | None = None,
    n_categories: int = 3,
    difficulty_sd: float = 0.0,
    missing_rate: float = 0.0,
    judge_flip_rate: float = 0.0,
    blind_models: list[str] | int | None = None,
    yes_bias: float = 0.0,
    guessing: bool = False,
    distractor_attraction: float = 0.0,
    label_errors: int = 0,
    guess_rate=0.0,
    guess_position: int = 0,
    chance_categories=(),
    family=None,
    family_share: float = 0.0,
    seed: int = 0,
) -> AuditFrame:
    """Simulate a benchmark with ``n_questions`` items and ``n_models`` models.

    n_options: int or (Q,) array (ignored for yes/no items). answer_type: "mc", "yesno" or a (Q,)
    array of those. accuracy_full / accuracy_blind: scalar or per-model arrays; ``accuracy_blind=None``
    gives no blind arm. blind_models: which models have a blind run (default all; an int k = the first
    k models; a list of names ``model_XX``; names not among the full-arm models add a blind-only model
    with accuracy_blind[0]). difficulty_sd: SD of a per-item logit shift shared by every model and
    both arms (0 = independent items). missing_rate: share of (question, model, arm) rows dropped.
    judge_flip_rate: share of rows whose ``hit_exact`` disagrees with ``hit`` (an exact-match parser
    that disagrees with the judge). yes_bias: on yes/no items every model's accuracy is raised by this
    amount on yes-gold items and lowered on no-gold items (a shared "say yes" response bias; not an
    item defect, but it makes the gold a covariate shared by all models and arms). guessing: a model
    that does not know the answer guesses, so the success probability is ``1/k + (1 - 1/k) p`` (accuracy
    tied to the option count). distractor_attraction: share of wrong mc answers that go to one
    attractive distractor per item, shared by every model (the rest are uniform over the wrong
    options). label_errors: number of items whose *stated* gold is changed uniformly to another option
    after the runs are drawn (``meta["planted"]["label_errors"]``; the runs keep answering the true one).
    Categories are ``cat0``... assigned at random.

    Real-pool regimes (issue 25): guess_rate (scalar or per model): share of (item, model) answers, in both
    arms, that ignore the item and give option position ``guess_position`` (clipped to the item's options):
    a letter preference shared by the models (``hit`` is then whether that position is the gold).
    chance_categories: category indices (``cat{c}``) where no model knows anything: every answer is right with
    probability 1/K, else uniform over the wrong options (before the letter guesses). family: (n_models,) int
    family of each model (None: none); family_share: share of a family member's wrong answers that go to the
    family's own attractive distractor of the item (correlated errors within a family, beyond difficulty).
    """
    rng = np.random.default_rng(seed)
    planted = dict(planted or {})
    unknown = set(planted) - set(_PLANT_KEYS) - {"gold_position"}
    if unknown:
        raise ValueError(f"unknown planted keys {sorted(unknown)}")
    Q, M = int(n_questions), int(n_models)
    atype = np.asarray(answer_type, dtype=object)
    atype = np.full(Q, str(atype)) if atype.ndim == 0 else atype.astype(str)
    k = np.asarray(n_options)
    k = np.full(Q, int(k), dtype=np.int64) if k.ndim == 0 else k.astype(np.int64)
    is_yn = atype == "yesno"
    k = np.where(is_yn, 2, k)
    if (k[~is_yn] < 2).any():
        raise ValueError("mc items need at least 2 options")

    # ---- gold
    gp = planted.get("gold_position")
    if gp is not None:
        gp = np.asarray(gp, dtype=np.float64)
        gold = rng.choice(len(gp), size=Q, p=gp / gp.sum()) % k
    else:
        gold = (rng.random(Q) * k).astype(np.int64)

    # ---- planted item sets (disjoint)
    counts = {key: int(planted.get(key, 0)) for key in _PLANT_KEYS}
    total = sum(counts.values())
    if total > Q:
        raise ValueError("more planted items than questions")
    perm = rng.permutation(Q)
    sets, start = {}, 0
    for key in _PLANT_KEYS:
        sets[key] = np.sort(perm[start:start + counts[key]])
        start += counts[key]
    for key in ("duplicate_distractors", "near_duplicate_distractors"):
        if counts[key] and ((k[sets[key]] < 3) | is_yn[sets[key]]).any():
            raise ValueError(f"{key} needs mc items with at least 3 options")

    # ---- option texts
    options = []
    for i in range(Q):
        if is_yn[i]:
            options.append([])
        else:
            options.append([f"option {i}-{j}" for j in range(k[i])])
    for key, edit in (("duplicate_distractors", lambda s: s), ("near_duplicate_distractors", lambda s: s + "x")):
        for i in sets[key]:
            wrong = [j for j in range(k[i]) if j != gold[i]]
            options[i][wrong[1]] = edit(options[i][wrong[0]])
    answer_col = np.where(is_yn, np.where(gold == 0, "yes", "no"), np.array(list(LETTERS))[np.minimum(gold, 25)])
    cats = rng.integers(0, max(n_categories, 1), size=Q)
    qids = np.array([f"q{i:06d}" for i in range(Q)], dtype=object)
    questions = pd.DataFrame({
        "question_id": qids,
        "question": [f"Question {i}?" for i in range(Q)],
        "options": options,
        "answer": answer_col,
        "answer_type": atype,
        "category": np.array([f"cat{c}" for c in cats], dtype=object),
    })

    # ---- models and arms
    models = [f"model_{j:02d}" for j in range(M)]
    acc = {"full": _per_model(accuracy_full, M, "accuracy_full")}
    arm_models = {"full": models}
    if accuracy_blind is not None:
        if blind_models is None:
            bm = list(models)
        elif isinstance(blind_models, int):
            bm = models[:blind_models]
        else:
            bm = list(blind_models)
        ab = _per_model(accuracy_blind, M, "accuracy_blind")
        lookup = {m: j for j, m in enumerate(models)}
        acc["blind"] = np.array([ab[lookup[m]] if m in lookup else ab[0] for m in bm])
        arm_models["blind"] = bm
    difficulty = rng.normal(0.0, difficulty_sd, size=Q) if difficulty_sd > 0 else np.zeros(Q)
    attractor = 1 + (rng.random(Q) * (k - 1)).astype(np.int64)  # offset of each item's attractive distractor
    fam = None if family is None else np.asarray(family, np.int64)
    fam_att = (1 + (rng.random((Q, int(fam.max()) + 1)) * (k[:, None] - 1)).astype(np.int64)
               if fam is not None else None)
    at_chance = np.isin(cats, np.asarray(list(chance_categories), np.int64))
    g_rate = _per_model(guess_rate, M, "guess_rate")

    frames = []
    for arm, names in arm_models.items():
        a = acc[arm]
        Mi = len(names)
        p = 1.0 / (1.0 + np.exp(-(_logit(a)[None, :] - difficulty[:, None])))
        if guessing:
            p = 1.0 / k[:, None] + (1.0 - 1.0 / k[:, None]) * p
        if yes_bias:
            shift = np.where(is_yn, np.where(gold == 0, yes_bias, -yes_bias), 0.0)
            p = np.clip(p + shift[:, None], 0.0, 1.0)
        hit = rng.random((Q, Mi)) < p
        # wrong answer: uniform over the k-1 wrong options
        off = 1 + (rng.random((Q, Mi)) * (k[:, None] - 1)).astype(np.int64)
        if distractor_attraction > 0:
            att = rng.random((Q, Mi)) < distractor_attraction
            off = np.where(att, attractor[:, None], off)
        if fam is not None and family_share > 0:
            fm = np.array([fam[int(n.split("_")[1])] if n.split("_")[1].isdigit() and int(n.split("_")[1]) < M
                           else 0 for n in names])
            to_fam = rng.random((Q, Mi)) < family_share
            off = np.where(to_fam, fam_att[:, fm], off)
        if at_chance.any():  # nobody knows: right with probability 1/K
            hit = np.where(at_chance[:, None], rng.random((Q, Mi)) < 1.0 / k[:, None], hit)
        choice = np.where(hit, gold[:, None], (gold[:, None] + off) % k[:, None])
        if np.any(g_rate > 0):  # a shared letter preference: the answer ignores the item
            gi = np.array([g_rate[int(n.split("_")[1])] if n.split("_")[1].isdigit() and int(n.split("_")[1]) < M
                           else g_rate[0] for n in names])
            guess = rng.random((Q, Mi)) < gi[None, :]
            choice = np.where(guess, np.minimum(guess_position, k - 1)[:, None], choice)
            hit = choice == gold[:, None]
        bs = sets["blind_solvable"]
        hit[bs] = True
        choice[bs] = gold[bs, None]
        cw = sets["consensus_wrong"]
        hit[cw] = False
        choice[cw] = ((gold[cw] + 1) % k[cw])[:, None]
        if arm == "full" and counts["negative_discrimination"]:
            nd = sets["negative_discrimination"]
            order = np.argsort(a, kind="stable")  # weakest first
            weak = np.zeros(Mi, dtype=bool)
            weak[order[: Mi // 2]] = True
            hit[nd] = weak[None, :]
            alt = ((gold[nd] + 1) % k[nd])[:, None]
            choice[nd] = np.where(weak[None, :], gold[nd, None], alt)
        qq, mm = np.meshgrid(np.arange(Q), np.arange(Mi), indexing="ij")
        keep = rng.random((Q, Mi)) >= missing_rate
        ch = choice[keep]
        qk = qq[keep]
        ans = np.where(is_yn[qk], np.where(ch == 0, "yes", "no"), np.array(list(LETTERS))[np.minimum(ch, 25)])
        h = hit[keep].astype(np.int8)
        flip = rng.random(h.shape) < judge_flip_rate
        he = np.where(flip, 1 - h, h).astype(np.int8)
        frames.append(pd.DataFrame({
            "question_id": qids[qk],
            "model": np.array(names, dtype=object)[mm[keep]],
            "arm": arm,
            "prediction": np.char.add("Answer: ", ans.astype(str)),
            "answer": ans,
            "hit": h,
            "hit_exact": he,
        }))
    runs = pd.concat(frames, ignore_index=True)
    le = np.sort(rng.choice(np.setdiff1d(np.arange(Q), np.concatenate(list(sets.values()))), size=int(label_errors),
                            replace=False)) if label_errors else np.zeros(0, np.int64)
    if len(le):
        new_gold = (gold[le] + 1 + (rng.random(len(le)) * (k[le] - 1)).astype(np.int64)) % k[le]
        questions.loc[le, "answer"] = np.where(is_yn[le], np.where(new_gold == 0, "yes", "no"),
                                               np.array(list(LETTERS))[np.minimum(new_gold, 25)])
        lab = dict(zip(qids[le], questions.loc[le, "answer"]))
        sel = runs["question_id"].isin(lab)
        runs.loc[sel, "hit"] = (runs.loc[sel, "answer"] == runs.loc[sel, "question_id"].map(lab)).astype(np.int8)
        runs.loc[sel, "hit_exact"] = runs.loc[sel, "hit"]
    meta = {"planted": {key: [str(qids[i]) for i in sets[key]] for key in _PLANT_KEYS if counts[key]}
            | ({"label_errors": [str(qids[i]) for i in le]} if len(le) else {}),
            "simulated": {"seed": seed, "n_questions": Q, "n_models": M}}
    if gp is not None:
        meta["planted"]["gold_position"] = [float(x) for x in gp]
    return AuditFrame.from_tables(questions, runs, questions_source="<simulated>", runs_source="<simulated>",
                                  meta=meta)
