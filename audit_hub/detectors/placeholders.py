"""Placeholder options: option slots whose text is a missing-value marker, not an option.

Released benchmarks carry option texts such as ``nan``, ``None``, ``NaN``, ``null``, ``N/A`` or empty
strings: a pandas round trip turned a real option, or a padding slot (a 2-option item padded to
A-D), into a missing value. Such a slot is not an option a model could reasonably pick:

* the item's **effective option count** excludes placeholders (:func:`real_option_count`, used by
  :func:`audit_hub.detectors.strata.effective_option_count`); chance levels, strata and the gold-position test
  use it;
* a **placeholder gold** makes the item unanswerable as released (severity critical, "relabel");
* **placeholder distractors** are reported (high, "rewrite distractor") instead of being compared
  with each other as "exact duplicates".

The list (:data:`PLACEHOLDER_TEXTS`) is compared after stripping whitespace, case-insensitively.

A **duplicated gold** (:func:`gold_duplicated`) is the other way an option slot fails to be a distinct
option: another option of the item has the gold's text (case and surrounding whitespace aside), so a
model choosing it is right and "wrong" at once. The label model takes both as prior evidence that the
stated gold is wrong.
"""

from __future__ import annotations

import numpy as np

#: option texts that mean "missing" (case-insensitive, whitespace-stripped); the empty string included
PLACEHOLDER_TEXTS: tuple[str, ...] = ("", "nan", "none", "null", "n/a", "<na>", "nat")
_SET = frozenset(PLACEHOLDER_TEXTS)


def is_placeholder(text) -> bool:
    """True for None and for a text in :data:`PLACEHOLDER_TEXTS` (case-insensitive)."""
    if text is None:
        return True
    if isinstance(text, float) and np.isnan(text):
        return True
    return str(text).strip().lower() in _SET


def placeholder_table(frame) -> dict[str, np.ndarray]:
    """Per question: ``n_placeholders`` (int), ``gold_placeholder`` (bool), ``effective_k`` (int).

    Cached in ``frame.cache`` (the options do not change)."""
    return frame.cached("placeholder_table", lambda: _placeholder_table(frame))


def _placeholder_table(frame) -> dict[str, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    q = frame.questions
    Q = len(q)
    K = frame.n_options.astype(np.int64)
    la = pa.array(q["options"], type=pa.list_(pa.string()))
    flat = pc.list_flatten(la)
    parent = pc.list_parent_indices(la).to_numpy().astype(np.int64)
    offsets = la.offsets.to_numpy().astype(np.int64)
    pos = np.arange(len(flat), dtype=np.int64) - offsets[parent]
    enc = pc.dictionary_encode(pc.fill_null(flat, ""))
    dict_ph = np.array([is_placeholder(t) for t in enc.dictionary.to_pylist()], dtype=bool)
    ph = dict_ph[enc.indices.to_numpy().astype(np.int64)] if len(flat) else np.zeros(0, bool)
    n_ph = np.bincount(parent[ph], minlength=Q).astype(np.int64) if len(flat) else np.zeros(Q, np.int64)
    gold = frame.gold_index.astype(np.int64)
    gold_ph = np.zeros(Q, dtype=bool)
    if ph.any():
        hit = ph & (pos == gold[parent])
        gold_ph[parent[hit]] = True
    out = {"n_placeholders": n_ph, "gold_placeholder": gold_ph, "effective_k": np.maximum(K - n_ph, 0),
           "option_is_placeholder": ph, "option_item": parent, "option_pos": pos}
    return out


def real_option_count(frame) -> np.ndarray:
    """(Q,) options per question that are real options (placeholders excluded); the mc part of
    :func:`audit_hub.detectors.strata.effective_option_count`."""
    return placeholder_table(frame)["effective_k"]


def gold_duplicated(frame) -> np.ndarray:
    """(Q,) bool: another option of the item has the gold option's text after case folding and stripping
    surrounding whitespace (placeholder golds excluded: they are their own case). Vectorised in Arrow,
    cached in ``frame.cache``."""
    return frame.cached("gold_duplicated", lambda: _gold_duplicated(frame))


def _gold_duplicated(frame) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    Q = frame.n_questions
    out = np.zeros(Q, dtype=bool)
    ph = placeholder_table(frame)
    parent, pos = ph["option_item"], ph["option_pos"]
    if len(parent):
        la = pa.array(frame.questions["options"], type=pa.list_(pa.string()))
        flat = pc.utf8_lower(pc.utf8_trim_whitespace(pc.fill_null(pc.list_flatten(la), "")))
        code = pc.dictionary_encode(flat).indices.to_numpy().astype(np.int64)
        gold = frame.gold_index.astype(np.int64)
        is_gold = pos == gold[parent]
        gold_code = np.full(Q, -1, np.int64)
        gold_code[parent[is_gold]] = code[is_gold]
        dup = ~is_gold & (code == gold_code[parent]) & ~ph["option_is_placeholder"]
        out[np.unique(parent[dup])] = True
        out &= ~ph["gold_placeholder"]
    return out


__all__ = ["PLACEHOLDER_TEXTS", "gold_duplicated", "is_placeholder", "placeholder_table", "real_option_count"]
