"""Synthetic junk items injected into a pool, to measure whether curation removes them.

Three kinds, each built from a randomly chosen multiple-choice item of the pool (its text, options and
category are copied, with a new question ID ``junk-<kind>-<n>``):

* ``wrong_key``: the gold key is moved to another option; every model keeps its answer, so a model is
  right only where it picked the new (wrong) key: an "always wrong" key.
* ``blind_copy``: every model is right in both arms (blind-solvable copy).
* ``random_answer``: every model's answer is uniform over the options in both arms (an item that
  measures nothing).

``inject_junk(frame, fraction)`` adds ``round(fraction * n)`` junk items split equally over the kinds and
returns the new frame and the junk question IDs per kind.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import LETTERS

KINDS = ("wrong_key", "blind_copy", "random_answer")
LETTER_ARRAY = np.array(list(LETTERS))


def inject_junk(frame, fraction: float, seed: int = 0):
    from ..frame.core import AuditFrame

    rng = np.random.default_rng(seed)
    mc = np.flatnonzero((frame.answer_type == "mc") & (frame.n_options >= 2) & (frame.gold_index >= 0))
    n_junk = int(round(fraction * frame.n_questions))
    if n_junk == 0 or len(mc) == 0:
        return frame, {k: [] for k in KINDS}
    src = mc[rng.integers(0, len(mc), n_junk)]
    kind = np.arange(n_junk) % len(KINDS)
    K = frame.n_options[src].astype(np.int64)
    gold = frame.gold_index[src].astype(np.int64)
    new_gold = np.where(kind == 0, (gold + 1 + (rng.random(n_junk) * (K - 1)).astype(np.int64)) % K, gold)
    ids = np.array([f"junk-{KINDS[k]}-{i:06d}" for i, k in enumerate(kind)], dtype=object)
    base = frame.questions_table().iloc[src].reset_index(drop=True)
    base["question_id"] = ids
    base["answer"] = LETTER_ARRAY[new_gold]
    questions = pd.concat([frame.questions_table(), base], ignore_index=True)

    parts = [frame.runs_table()]
    for arm in ("full", "blind"):
        models = frame.models_in(arm)
        if not models:
            continue
        codes = frame.answer_codes(arm, models)[src].astype(np.int64)  # option index for mc items, -1 unknown
        M = len(models)
        rand = (rng.random((n_junk, M)) * K[:, None]).astype(np.int64)
        choice = np.where(kind[:, None] == 2, rand, np.where(kind[:, None] == 1, new_gold[:, None], codes))
        valid = choice >= 0
        rows, cols = np.nonzero(valid)
        ch = choice[rows, cols]
        hit = (ch == new_gold[rows]).astype(np.int8)
        letters = LETTER_ARRAY[np.clip(ch, 0, 25)]
        parts.append(pd.DataFrame({"question_id": ids[rows], "model": np.array(models, dtype=object)[cols],
                                   "arm": arm, "prediction": letters, "answer": letters, "hit": hit,
                                   "hit_exact": hit}))
    runs = pd.concat(parts, ignore_index=True)
    meta = {k: v for k, v in frame.meta.items() if isinstance(k, str) and not k.startswith("_")}
    new = AuditFrame.from_tables(questions, runs, questions_source="<pool + junk>", runs_source="<pool + junk>",
                                 meta=meta)
    return new, {k: [str(x) for x in ids[kind == j]] for j, k in enumerate(KINDS)}
