"""CircularEval: the option-shifted copies of one question are one question.

MMBench-style benchmarks (VLMEvalKit's MMBench*, CCBench, any ``*circular*`` set) ask each
question several times with its options rotated; copy k of question g has index ``g + k * 1e6`` and
all copies share ``g_index`` (or ``index mod 1e6`` where the sheet has no ``g_index``; the readers put
that into ``group_id``). The harness scores the *question*: right only when every copy is right
(:mod:`audit_hub.readers.vlmevalkit_rules`). Scoring each copy as its own item inflates the item
count and compares two different things between the judged arm (per-question verdicts) and the
exact arm (per copy).

:func:`collapse_circular` turns a frame whose questions are copies into a frame whose questions
are the circular groups:

* a group is circular when its ``group_id`` equals the ``question_id`` of one member (the original,
  VLMEvalKit's ``index == g_index``), it has 2+ members, and every member has the same question
  text and the same option texts in some order; other ``group_id`` values (image or scene groups)
  are left alone;
* the group's question is the original's row;
* per (model, arm), ``hit`` (judged) is 0 if any member's verdict is 0, else 1 if any is 1, else
  unknown (VLMEvalKit's judged ``_result`` sheet carries the group verdict on the original's row
  only); ``hit_exact`` is 1 only when *every* copy was read and right, 0 when any copy is wrong or
  unreadable (VLMEvalKit's exact-matching rule for a group with an unparseable copy), unknown when
  a copy's prediction is missing from the runs (pass the prediction sheet with all copies);
* the group's ``prediction``/``answer`` are the original's; the answer is null (unparseable) when
  any copy's answer could not be read;
* copies of one group that disagree on the gold option *text* (one copy says "green", the others "red") are
  an input defect: the groups are named in ``frame.meta["circular"]["gold_disagreement"]`` and counted in
  ``frame.meta["input_defects"]["circular_gold_disagreement"]`` (summary.json, the card, the CLI); each copy
  is still scored against its own gold, as VLMEvalKit's circular evaluation does;
* the per-copy rows are kept, in ``frame.meta["_circular_copies"]`` (question_id, group_id, model,
  arm, prediction, answer, hit, hit_exact; written to the report as ``circular_copies.parquet``), and the
  counts in ``frame.meta["circular"]``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..frame.core import AuditFrame
from ..schema import ARMS


def circular_groups(questions: pd.DataFrame) -> np.ndarray:
    """(Q,) int64: for each question, the row of its circular group's original; -1 if not circular."""
    n = len(questions)
    out = np.full(n, -1, dtype=np.int64)
    gid = questions["group_id"]
    if gid.isna().all():
        return out
    qid = questions["question_id"].astype(str).to_numpy()
    row_of = {q: i for i, q in enumerate(qid)}
    members: dict[str, list[int]] = {}
    for i, g in enumerate(gid.tolist()):
        if g is not None and not (isinstance(g, float) and np.isnan(g)):
            members.setdefault(str(g).strip(), []).append(i)
    text = questions["question"].astype(str).to_numpy()
    opts = questions["options"].tolist()
    for g, rows in members.items():
        main = row_of.get(g)
        if len(rows) < 2 or main is None or main not in rows:
            continue
        key = sorted(str(o).strip() for o in opts[main])
        if len(key) < 2:
            continue
        if all(text[r] == text[main] and sorted(str(o).strip() for o in opts[r]) == key for r in rows):
            out[rows] = main
    return out


def gold_disagreements(questions: pd.DataFrame, main_of: np.ndarray, limit: int = 100) -> tuple[int, list[dict]]:
    """Circular groups whose copies do not all give the same gold option text (an input defect: the copies of
    one question must agree on its answer). Returns (number of groups, up to ``limit`` of them as
    ``{"group_id", "golds": {copy question_id: gold option text}}``)."""
    if "gold_index" not in questions.columns or not (main_of >= 0).any():
        return 0, []
    gi = pd.to_numeric(questions["gold_index"], errors="coerce").to_numpy(dtype=np.float64)
    opts = questions["options"].tolist()
    qid = questions["question_id"].astype(str).to_numpy()
    gold = np.full(len(questions), None, dtype=object)
    for i in np.flatnonzero(main_of >= 0):
        o = opts[i]
        if np.isfinite(gi[i]) and o is not None and 0 <= int(gi[i]) < len(o):
            gold[i] = str(o[int(gi[i])]).strip()
    bad: list[dict] = []
    n = 0
    for g in np.unique(main_of[main_of >= 0]):
        rows = np.flatnonzero(main_of == g)
        texts = {gold[r] for r in rows}
        if len(texts) > 1:
            n += 1
            if len(bad) < limit:
                bad.append({"group_id": str(qid[g]), "golds": {str(qid[r]): gold[r] for r in rows}})
    return n, bad


def options_rotated(questions: pd.DataFrame, main_of: np.ndarray) -> np.ndarray:
    """(Q,) bool per question, True for every copy of a group whose copies list their options in different orders:
    CircularEval rotates the real options only, so every option of such an item is an answer, wherever the copy
    the audit keeps puts it (MMBench's "warm, cool, neutral, none" keeps "none" last there; the placeholder rule,
    :mod:`audit_hub.detectors.placeholders`, reads the flag)."""
    Q = len(questions)
    in_group = np.flatnonzero(main_of >= 0)
    if not len(in_group):
        return np.zeros(Q, dtype=bool)
    opts = questions["options"].to_numpy(dtype=object)
    moved = np.zeros(Q, dtype=bool)
    for i in in_group:
        g = main_of[i]
        a, b = opts[i], opts[g]
        if a is not None and b is not None and len(a) and list(a) != list(b):
            moved[g] = True
    return moved[np.where(main_of >= 0, main_of, 0)] & (main_of >= 0)


def collapse_circular(frame: AuditFrame) -> AuditFrame:
    """The frame with each circular group as one question (see the module docstring); unchanged if none."""
    main_of = circular_groups(frame.questions)
    if not (main_of >= 0).any():
        return frame
    Q = frame.n_questions
    group_size = np.bincount(main_of[main_of >= 0], minlength=Q)
    r = frame.runs
    q = r["q"].to_numpy().astype(np.int64)
    gq = np.where(main_of[q] >= 0, main_of[q], q)  # the group's original (or the question itself)
    M = max(len(frame.models), 1)
    key = (gq * M + r["m"].to_numpy().astype(np.int64)) * len(ARMS) + r["arm"].to_numpy().astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    K = len(uniq)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(inv, weights=mask.astype(np.float64), minlength=K).astype(np.int64)

    h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()
    unread = r["answer"].isna().to_numpy()
    hit = np.where(count(h == 0) > 0, 0, np.where(count(h == 1) > 0, 1, -1)).astype(np.int8)
    ukey_q = uniq // (M * len(ARMS))
    need = np.maximum(group_size[ukey_q], 1)
    e_right = count(e == 1)
    hit_exact = np.where(count(e == 0) > 0, 0, np.where(e_right >= need, 1, -1)).astype(np.int8)
    any_unread = count(unread) > 0
    # one row per key: the original's row where present, else the first copy's
    is_main = q == gq
    order = np.lexsort((~is_main, inv))
    first = order[np.r_[True, inv[order][1:] != inv[order][:-1]]]
    base = r.iloc[first].reset_index(drop=True)
    keep_q = (main_of < 0) | (main_of == np.arange(Q))
    new_code = np.full(Q, -1, dtype=np.int64)
    new_code[keep_q] = np.arange(int(keep_q.sum()))
    base["q"] = new_code[ukey_q].astype(np.int32)
    base["hit"] = hit
    base["hit_exact"] = hit_exact
    ans = base["answer"].copy()
    ans[any_unread] = None
    base["answer"] = ans
    base = base[base["q"] >= 0].reset_index(drop=True)
    questions = frame.questions[keep_q].reset_index(drop=True)
    rotated = options_rotated(frame.questions, main_of)
    if rotated.any():  # "none" at B in a rotated copy is an option, wherever the kept copy puts it
        questions["options_rotated"] = rotated[keep_q]
    copies = pd.DataFrame({
        "question_id": frame.questions["question_id"].to_numpy(dtype=object)[q],
        "group_id": frame.questions["question_id"].to_numpy(dtype=object)[gq],
        "model": np.asarray(frame.models, dtype=object)[r["m"].to_numpy()],
        "arm": np.asarray(ARMS, dtype=object)[r["arm"].to_numpy()],
        "prediction": r["prediction"].to_numpy(dtype=object),
        "answer": r["answer"].to_numpy(dtype=object),
        "hit": r["hit"].to_numpy(), "hit_exact": r["hit_exact"].to_numpy(),
    })[main_of[q] >= 0].reset_index(drop=True)
    meta = {k: v for k, v in frame.meta.items() if not str(k).startswith("_")}
    meta["circular"] = {
        "n_groups": int(((main_of >= 0) & (main_of == np.arange(Q))).sum()),
        "n_copies": int((main_of >= 0).sum()),
        "n_questions_before": int(Q),
        "rule": "a circular question is right only when every option-shifted copy is right and readable",
    }
    n_bad, bad = gold_disagreements(frame.questions, main_of)
    if n_bad:  # each copy is still scored against its own gold (as the harness does); the group is named
        meta["circular"]["gold_disagreement"] = {"n_groups": n_bad, "groups": bad}
        meta["input_defects"] = {**(meta.get("input_defects") or {}), "circular_gold_disagreement": n_bad}
    meta["_circular_copies"] = copies
    return AuditFrame(questions=questions, runs=base, models=frame.models, sources=frame.sources, meta=meta)


__all__ = ["circular_groups", "collapse_circular"]
