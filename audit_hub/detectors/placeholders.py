"""Placeholder options: option slots whose text is a missing-value marker, not an option.

A placeholder is a *missing value* in an option slot, not a word: a null or NaN cell, an empty or
whitespace-only string, or the literal text a pandas round trip leaves behind (``nan``, ``<NA>``,
``NaT``) -- these are placeholders wherever they stand (:data:`MISSING_TEXTS`). The words ``None``,
``null`` and ``N/A`` (:data:`AMBIGUOUS_TEXTS`) are also what ``str(None)`` and spreadsheet exports write
for a padding slot, but they are real answers too ("How many of the flags ...?" -- "None, One, Two,
Three, Four"). The data decides (:func:`placeholder_mask`): such a word is a placeholder only as
**trailing padding** -- every slot after it is a placeholder as well -- and then only when the trailing
run is two slots or longer, or the item's real options are not quantities (numbers or number words,
among which "None" means zero). "None" before a real option, or a single "None" after "One, Two,
Three", is an answer; and so is such a word in an item whose CircularEval copies rotate its options (the copies
rotate only real options: :func:`audit_hub.readers.circular.options_rotated`). So:

* the item's **effective option count** excludes placeholders (:func:`real_option_count`, used by
  :func:`audit_hub.detectors.strata.effective_option_count`); chance levels, strata and the gold-position test
  use it;
* a **placeholder gold** makes the item unanswerable as released (severity critical, "relabel");
* **placeholder distractors** are reported (high, "rewrite distractor") instead of being compared
  with each other as "exact duplicates".

Texts are compared after stripping whitespace, case-insensitively.

A **duplicated gold** (:func:`gold_duplicated`) is the other way an option slot fails to be a distinct
option: another option of the item has the gold's text (case and surrounding whitespace aside), so a
model choosing it is right and "wrong" at once. The label model takes both as prior evidence that the
stated gold is wrong.
"""

from __future__ import annotations

import re

import numpy as np

#: texts that are a missing value wherever they stand (case-insensitive, whitespace-stripped)
MISSING_TEXTS: tuple[str, ...] = ("", "nan", "<na>", "nat")
#: words that are padding only in context (see the module docstring and :func:`placeholder_mask`)
AMBIGUOUS_TEXTS: tuple[str, ...] = ("none", "null", "n/a")
#: every text that can be a placeholder (missing values and, in context, the ambiguous words)
PLACEHOLDER_TEXTS: tuple[str, ...] = MISSING_TEXTS + AMBIGUOUS_TEXTS
_MISSING_SET = frozenset(MISSING_TEXTS)
_AMBIGUOUS_SET = frozenset(AMBIGUOUS_TEXTS)
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty hundred thousand once twice all every".split())
_QUANTITY_RE = re.compile(r"^[+-]?(\d+([.,]\d+)?|\d*[.,]\d+|\d+/\d+)(\s*%)?$")


def _kind(text) -> int:
    """0 a real text, 1 a missing value (:data:`MISSING_TEXTS`, None, NaN), 2 an ambiguous word."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return 1
    t = str(text).strip().lower()
    return 1 if t in _MISSING_SET else 2 if t in _AMBIGUOUS_SET else 0


def is_missing(text) -> bool:
    """True for a value that is missing wherever it stands: None, NaN, an empty or whitespace string, or a
    text in :data:`MISSING_TEXTS` (case-insensitive)."""
    return _kind(text) == 1


def is_placeholder(text) -> bool:
    """True for a text that *can* be a placeholder (a missing value or an ambiguous word); whether an
    ambiguous word in a given item is one is :func:`placeholder_mask`'s decision."""
    return _kind(text) > 0


def _is_quantity(text) -> bool:
    t = str(text).strip().lower()
    return bool(_QUANTITY_RE.match(t)) or t in _NUMBER_WORDS


def placeholder_mask(options) -> list[bool]:
    """Per option slot of one item: is it a placeholder (see the module docstring)?

    >>> placeholder_mask(["None", "One", "Two", "Three", "Four"])
    [False, False, False, False, False]
    >>> placeholder_mask(["cat", "dog", "None", "None"])
    [False, False, True, True]
    >>> placeholder_mask(["1", "2", "3", "None"]), placeholder_mask(["cat", "dog", "None"])
    ([False, False, False, False], [False, False, True])
    """
    kinds = [_kind(t) for t in options]
    out = [k == 1 for k in kinds]
    if 2 not in kinds:
        return out
    n = len(kinds)
    tail = n
    while tail > 0 and kinds[tail - 1] > 0:
        tail -= 1
    real = [t for t, k in zip(options, kinds) if k == 0]
    quantities = bool(real) and all(_is_quantity(t) for t in real)
    padding = (n - tail) >= 2 or not quantities
    for i in range(tail, n):
        if kinds[i] == 2:
            out[i] = padding
    return out


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
    texts = enc.dictionary.to_pylist()
    kind = np.array([_kind(t) for t in texts], dtype=np.int8)
    codes = enc.indices.to_numpy().astype(np.int64)
    ph = kind[codes] == 1 if len(flat) else np.zeros(0, bool)
    if len(flat) and (kind == 2).any():
        # an ambiguous word ("None", "null", "N/A") is decided from its item's options (rare: per item), and is an
        # answer in an item whose CircularEval copies rotate its options (readers.circular.options_rotated)
        real = q["options_rotated"].to_numpy(dtype=bool) if "options_rotated" in q.columns else None
        for i in np.unique(parent[kind[codes] == 2]):
            if real is not None and real[i]:
                continue
            lo, hi = offsets[i], offsets[i + 1]
            ph[lo:hi] = placeholder_mask([texts[c] for c in codes[lo:hi]])
    n_ph = np.bincount(parent[ph], minlength=Q).astype(np.int64) if len(flat) else np.zeros(Q, np.int64)
    gold = frame.gold_index.astype(np.int64)
    gold_ph = np.zeros(Q, dtype=bool)
    if ph.any():
        hit = ph & (pos == gold[parent])
        gold_ph[parent[hit]] = True
    out = {"n_placeholders": n_ph, "gold_placeholder": gold_ph, "effective_k": np.maximum(K - n_ph, 0),
           "option_is_placeholder": ph, "option_item": parent, "option_pos": pos,
           "option_code": codes, "option_dictionary": enc.dictionary}
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
    import pyarrow.compute as pc

    Q = frame.n_questions
    out = np.zeros(Q, dtype=bool)
    ph = placeholder_table(frame)
    parent, pos = ph["option_item"], ph["option_pos"]
    if len(parent):
        # the options' texts as placeholder_table encoded them: normalised once per distinct text
        norm = pc.utf8_lower(pc.utf8_trim_whitespace(ph["option_dictionary"]))
        code = pc.dictionary_encode(norm).indices.to_numpy().astype(np.int64)[ph["option_code"]]
        gold = frame.gold_index.astype(np.int64)
        is_gold = pos == gold[parent]
        gold_code = np.full(Q, -1, np.int64)
        gold_code[parent[is_gold]] = code[is_gold]
        dup = ~is_gold & (code == gold_code[parent]) & ~ph["option_is_placeholder"]
        out[np.unique(parent[dup])] = True
        out &= ~ph["gold_placeholder"]
    return out


__all__ = ["AMBIGUOUS_TEXTS", "MISSING_TEXTS", "PLACEHOLDER_TEXTS", "gold_duplicated", "is_missing", "is_placeholder",
           "placeholder_mask", "placeholder_table", "real_option_count"]
