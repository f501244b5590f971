"""Synthetic benchmarks with (or without) a planted shortcut, for tests and benchmarks."""

from __future__ import annotations

import numpy as np
import pandas as pd

OBJECTS = ["chair", "table", "lamp", "sofa", "bed", "door", "window", "plant", "cup", "book", "clock", "rug",
           "shelf", "sink", "oven", "fridge", "desk", "mirror", "towel", "pillow"]
TEMPLATES = [
    "How many {o} are visible in the scene?",
    "Which value is the height of the {o} in centimetres?",
    "What is the distance between the {o} and the door in metres?",
    "Estimate the number of {o} items on the shelf.",
    "Which option gives the width of the {o}?",
    "How long is the {o} measured along its longest side?",
    "What is the area covered by the {o} in square metres?",
    "How far is the {o} from the camera?",
]


def make_synthetic(n: int, *, planted: bool = True, planted_templates: int = 1, n_options: int = 4,
                   numeric_share: float = 0.0, seed: int = 0, groups: int | None = None) -> pd.DataFrame:
    """A questions table (public format) of ``n`` template-generated questions.

    Multiple-choice options are distinct random integers. With ``planted``, for questions of the first
    ``planted_templates`` templates the gold is always the numerically largest option; otherwise the
    gold position is uniform and independent of everything. ``category`` is the template name
    (``t0``, ``t1``, ...). A ``numeric_share`` of the questions are numeric with a log-uniform gold.
    ``groups``: number of image groups (``group_id``), or None for none.
    """
    rng = np.random.default_rng(seed)
    tmpl = rng.integers(0, len(TEMPLATES), size=n)
    obj = rng.integers(0, len(OBJECTS), size=n)
    is_num = rng.random(n) < numeric_share
    vals = np.stack([rng.choice(np.arange(1, 500), size=n_options, replace=False) for _ in range(n)])
    gold = rng.integers(0, n_options, size=n)
    if planted:
        p = tmpl < planted_templates
        gold[p] = vals[p].argmax(axis=1)
    letters = "ABCDEFGHIJ"
    rows = []
    for i in range(n):
        question = TEMPLATES[tmpl[i]].format(o=OBJECTS[obj[i]])
        if is_num[i]:
            rows.append({"question_id": f"q{i:06d}", "question": question, "options": [],
                         "answer": str(int(np.exp(rng.uniform(0, 6)))), "answer_type": "numeric",
                         "category": f"t{tmpl[i]}"})
        else:
            rows.append({"question_id": f"q{i:06d}", "question": question,
                         "options": [str(v) for v in vals[i]], "answer": letters[gold[i]],
                         "answer_type": "mc", "category": f"t{tmpl[i]}"})
    df = pd.DataFrame(rows)
    if groups is not None:
        df["group_id"] = [f"img{g}" for g in rng.integers(0, groups, size=n)]
    return df
