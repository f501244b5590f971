"""The answer code space: each run's answer and each question's gold as comparable ints, built once.

For ``mc`` items the code is the option index (A = 0); yes/no items code yes = 0, no = 1; numeric
and free answers share one code space above the option range: ``kmax`` + the index of the value's
canonical form (:func:`audit_hub.schema.normalise_value`), values numbered by first appearance in
the run rows, then the golds. -1 is unparseable or missing.

One function builds the codes, :func:`encode_ids`: from per-row ids into a list of answer strings.
Its three callers:

* the parser (:func:`audit_hub.answers.fill.fill_answers_and_exact`) passes its own output ids, so
  parsed answers are never turned into text and hashed again;
* answers that arrive as text (a harness's own extraction with ``hit_exact``, the metric adapter's
  predictions, frames built directly) go through :func:`encode_text`, which dictionary-encodes the
  column once;
* a frame derived from a parsed frame (fewer questions or models) renumbers the parent's codes
  (:func:`renumber`) exactly as encoding its rows afresh would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..columns import dictionary_codes
from ..schema import LETTERS, MISSING, normalise_value


@dataclass(frozen=True)
class AnswerCodes:
    """The code space of one frame: per-row ``codes`` (int32), per-question ``gold`` (int32).

    ``values[i]`` is the canonical value of code ``kmax + i``; it is None when the rows' answers are not
    recoverable from their codes (answers given as text, where an unreadable text still takes a value
    number), and then a derived frame encodes its text afresh instead of calling :func:`renumber`.
    """

    codes: np.ndarray
    gold: np.ndarray
    kmax: int
    values: tuple[str, ...] | None


def option_range(questions: pd.DataFrame) -> int:
    """``kmax``: the first code above every option index and the yes/no codes."""
    return max(int(questions["n_options"].max()) if len(questions) else 0, 2)


def encode_ids(questions: pd.DataFrame, q_rows: np.ndarray, ids: np.ndarray, strings: Sequence[str],
               *, recoverable: bool = False) -> AnswerCodes:
    """Codes of run rows whose answer is ``strings[ids[i]]`` (``ids[i] = -1``: no answer).

    ``q_rows`` are the rows' question codes. ``strings`` may list texts no row uses; values are
    numbered by the first row that uses them. ``recoverable``: the caller guarantees every answer
    text is a function of its code (the parser's output), so :attr:`AnswerCodes.values` is kept.
    """
    kmax = option_range(questions)
    atype = questions["answer_type"].to_numpy(dtype=object)
    is_mc, is_yn = atype == "mc", atype == "yesno"
    other_q = (atype == "numeric") | (atype == "free")
    gold = np.full(len(questions), MISSING, dtype=np.int32)
    gold[is_mc] = questions["gold_index"].to_numpy()[is_mc]
    gold_ans = questions["answer"].astype(str).str.strip().str.lower().to_numpy(dtype=object)
    gold[is_yn] = np.where(gold_ans[is_yn] == "yes", 0, 1)
    n = len(ids)
    if n == 0:  # no run rows: numeric / free golds stay unknown
        return AnswerCodes(np.zeros(0, np.int32), gold, kmax, () if recoverable else None)
    # the strings in numbering order (first appearance in the rows); only numeric / free values need it
    order = first_appearance(ids, len(strings)) if other_q.any() else np.arange(len(strings))
    if len(order) == 0:  # no row has an answer: the golds alone number the values
        g_codes, g_uniq = pd.factorize(pd.Series(_canonical_gold_values(questions, other_q)[other_q], dtype=object))
        gold[other_q] = kmax + g_codes
        return AnswerCodes(np.full(n, MISSING, np.int32), gold, kmax, tuple(g_uniq) if recoverable else None)
    col = np.full(len(strings) + 1, 0, np.int64)  # column of each id (+1) in the table below
    col[order + 1] = np.arange(1, len(order) + 1)
    uniq = [str(strings[i]).strip() for i in order]
    letter_idx = np.array([LETTERS.index(u.upper()) if len(u) == 1 and u.upper() in LETTERS else -1
                           for u in uniq], dtype=np.int32)
    yn_idx = np.array([0 if u.lower() == "yes" else (1 if u.lower() == "no" else -1) for u in uniq], dtype=np.int32)
    values: tuple[str, ...] = ()
    free_u = np.full(len(uniq), MISSING, np.int32)
    if other_q.any():
        # golds go through the parser's canonical form first (e.g. "\\frac{2}{5}" -> "0.4")
        g_norm = _canonical_gold_values(questions, other_q)
        free_codes_u, free_uniq = pd.factorize(pd.Series([normalise_value(u) for u in uniq] + g_norm.tolist()))
        free_u = free_codes_u[: len(uniq)].astype(np.int32) + kmax
        gold[other_q] = free_codes_u[len(uniq):].astype(np.int32)[other_q] + kmax
        values = tuple(free_uniq)
    # (question type x string) table: 0 mc, 1 yes/no, 2 numeric/free, 3 other; column 0 = no answer
    table = np.full((4, len(uniq) + 1), MISSING, np.int32)
    table[0, 1:], table[1, 1:], table[2, 1:] = letter_idx, yn_idx, free_u
    table = np.ascontiguousarray(table[:, col]).reshape(-1)  # columns indexed by id + 1
    codes = _gather(questions, q_rows, ids, table, len(col), is_mc, is_yn, other_q)
    if recoverable and bool(((ids >= 0) & (codes < 0)).any()):
        recoverable = False  # an answer text without a code (an mc letter beyond the options)
    return AnswerCodes(codes, gold, kmax, values if recoverable else None)


def _gather(questions: pd.DataFrame, q_rows: np.ndarray, ids: np.ndarray, table: np.ndarray, width: int,
            is_mc: np.ndarray, is_yn: np.ndarray, other_q: np.ndarray) -> np.ndarray:
    """One gather per row from the flattened (question type x id) table; an mc letter beyond the
    item's options is unparseable. Chunked, so no n-long temporaries pile up."""
    n = len(ids)
    qk = questions["n_options"].to_numpy().astype(np.int32)
    if is_mc.all() and n:
        # every item mc and every id a letter within every item's options, in letter order (the
        # parser's bare-letter output): the ids are the codes
        hi = int(ids.max())
        if hi < int(qk.min()) and hi + 2 <= width and (table[: hi + 2] == np.arange(-1, hi + 1)).all():
            return ids.astype(np.int32, copy=False)
    qtype = np.full(len(questions), 3, np.int32)
    qtype[is_mc], qtype[is_yn], qtype[other_q] = 0, 1, 2
    q_off = qtype * np.int32(width) + 1  # + 1: id -1 (no answer) lands in column 0
    limit = np.where(qtype == 0, qk, np.iinfo(np.int32).max).astype(np.int32)
    codes = np.empty(n, np.int32)
    step = 1 << 22
    for lo in range(0, n, step):
        qq = q_rows[lo:lo + step]
        c = table[q_off[qq] + ids[lo:lo + step]]
        c[c >= limit[qq]] = MISSING
        codes[lo:lo + step] = c
    return codes


def encode_text(questions: pd.DataFrame, runs: pd.DataFrame, *,
                answer_dict: tuple[np.ndarray, Sequence[str]] | None = None) -> AnswerCodes:
    """Codes of answers given as text (``runs["answer"]``, one row per run row, ``runs["q"]`` codes).

    ``answer_dict`` = (ids per row with -1 for null, distinct strings) when the caller already has the
    dictionary of the column (a categorical / dictionary-encoded input): then no string is hashed.
    """
    if answer_dict is None:
        answer_dict = dictionary_codes(runs["answer"]) if len(runs) else (np.zeros(0, np.int64), [])
    ids, strings = answer_dict
    return encode_ids(questions, runs["q"].to_numpy(), np.asarray(ids), strings)


def renumber(parent: AnswerCodes, questions: pd.DataFrame, q_rows: np.ndarray, codes: np.ndarray) -> AnswerCodes:
    """The code space of a frame derived from a parsed frame (a subset of its questions or models):
    ``codes`` are the parent's codes of the kept rows, ``q_rows`` their new question codes.

    Equal to :func:`encode_ids` over the kept rows' answer texts: each row's canonical value is read
    back from its parent code (a letter, yes / no, or ``parent.values``) and numbered afresh."""
    if parent.values is None:
        raise ValueError("the parent's answers are not recoverable from its codes; encode the text instead")
    values = list(parent.values)
    index = {v: i for i, v in enumerate(values)}
    # the letters and yes / no are canonical texts of their own: ``parent.values`` holds them only when the
    # benchmark has open items whose answers happen to include them (a frame of mc and yes/no items only has
    # no values at all, and every answer of a derived frame read as missing)
    for text in [c.casefold() for c in LETTERS[: parent.kmax]] + ["yes", "no"]:
        if text not in index:
            index[text] = len(values)
            values.append(text)
    width = parent.kmax + len(values) + 1
    # (question type x parent code) -> index into values (-1: no answer); column 0 is code -1
    key = np.full((4, width), MISSING, np.int64)
    letters = [index.get(c.casefold(), MISSING) for c in LETTERS[: parent.kmax]]
    key[0, 1:len(letters) + 1] = letters
    key[1, 1:3] = [index.get("yes", MISSING), index.get("no", MISSING)]
    key[2, parent.kmax + 1:] = np.arange(len(values))
    atype = questions["answer_type"].to_numpy(dtype=object)
    qtype = np.full(len(questions), 3, np.int64)
    qtype[atype == "mc"], qtype[atype == "yesno"] = 0, 1
    qtype[(atype == "numeric") | (atype == "free")] = 2
    ids = key.reshape(-1)[qtype[q_rows] * width + codes.astype(np.int64) + 1]
    return encode_ids(questions, q_rows, ids, values, recoverable=True)


def _canonical_gold_values(questions: pd.DataFrame, other_q: np.ndarray) -> np.ndarray:
    """(Q,) object array: for numeric / free items the gold in the exact-match parser's canonical form
    passed through :func:`normalise_value`; "" elsewhere. Computed once per distinct (gold, type)."""
    from .rules import canonical_gold

    out = np.full(len(questions), "", dtype=object)
    if not other_q.any():
        return out
    gold = questions["answer"].astype(str).to_numpy(dtype=object)[other_q]
    typ = questions["answer_type"].to_numpy(dtype=object)[other_q]
    pairs = pd.MultiIndex.from_arrays([gold, typ])
    codes, uniq = pd.factorize(pairs)
    vals = []
    for g, t in uniq:
        c = canonical_gold(g, t)
        vals.append(normalise_value(c if c is not None else g))
    out[other_q] = np.asarray(vals, dtype=object)[codes]
    return out


def first_appearance(codes: np.ndarray, n_values: int, step: int = 1 << 22) -> np.ndarray:
    """The values 0..n_values-1 that occur in ``codes`` (-1 = null), ordered by first occurrence.
    Scans in chunks and stops once every value has been seen (usually within the first chunk). A value
    first occurs at a chunk's start or where the value changes, so only those positions are sorted
    (few, when the rows come in runs such as one model's block after another)."""
    first = np.full(n_values, np.iinfo(np.int64).max, np.int64)
    seen = np.zeros(n_values, bool)
    for lo in range(0, len(codes), step):
        c = np.asarray(codes[lo:lo + step])
        if not len(c):
            break
        cand = np.concatenate(([0], np.flatnonzero(c[1:] != c[:-1]) + 1))
        u, pos = np.unique(c[cand], return_index=True)
        keep = u >= 0
        u, pos = u[keep], pos[keep]
        sel = ~seen[u]
        if sel.any():
            first[u[sel]] = cand[pos[sel]] + lo
            seen[u[sel]] = True
            if seen.all():
                break
    present_codes = np.flatnonzero(seen)
    return present_codes[np.argsort(first[present_codes], kind="stable")]
