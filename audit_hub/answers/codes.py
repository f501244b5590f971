"""The answer code space: each run's extracted answer and each question's gold as comparable ints.

For ``mc`` items the code is the option index (A = 0); yes/no items code yes = 0, no = 1; numeric
and free answers share one code space above the option range (``kmax`` + the index of the value's
canonical form, :func:`audit_hub.schema.normalise_value`). -1 is unparseable or missing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..columns import dictionary_codes
from ..schema import LETTERS, MISSING, normalise_value


def encode_answers(questions: pd.DataFrame, runs: pd.DataFrame, *,
                   answer_dict: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map each run row's extracted answer and each question's gold to comparable int codes.

    Works on the distinct answer strings only (Arrow dictionary encoding), then one gather per row.
    ``answer_dict`` = (codes per row with -1 for null, unique strings), when the caller already has the
    dictionary of ``runs["answer"]`` (a categorical / dictionary-encoded input column): then no string
    is hashed at all.
    """
    kmax = int(questions["n_options"].max()) if len(questions) else 0
    kmax = max(kmax, 2)
    atype = questions["answer_type"].to_numpy(dtype=object)
    gold = np.full(len(questions), MISSING, dtype=np.int32)
    is_mc = atype == "mc"
    gold[is_mc] = questions["gold_index"].to_numpy()[is_mc]
    is_yn = atype == "yesno"
    gold_ans = questions["answer"].astype(str).str.strip().str.lower().to_numpy(dtype=object)
    gold[is_yn] = np.where(gold_ans[is_yn] == "yes", 0, 1)

    n = len(runs)
    codes = np.full(n, MISSING, dtype=np.int32)
    if n == 0:
        return codes, gold
    if answer_dict is not None:
        fcodes, uniq = answer_dict
        # number the values as a dictionary_encode of the rows would (first appearance; unused
        # categories dropped), so codes do not depend on how the input column was encoded
        order = _first_appearance(fcodes, len(uniq))
        remap = np.full(len(uniq) + 1, -1, np.int32)
        remap[order + 1] = np.arange(len(order), dtype=np.int32)
        uniq = [uniq[i] for i in order]
        fcodes_raw = fcodes
    else:
        fcodes, uniq = dictionary_codes(runs["answer"])
        fcodes_raw, remap = None, None
    other_q = (atype == "numeric") | (atype == "free")
    if len(uniq) == 0:
        gold[other_q] = kmax + pd.factorize(pd.Series(_canonical_gold_values(questions, other_q)[other_q]))[0]
        return codes, gold
    uniq_norm = [str(u).strip() for u in uniq]
    letter_idx = np.array([LETTERS.index(u.upper()) if len(u) == 1 and u.upper() in LETTERS else -1
                           for u in uniq_norm], dtype=np.int32)
    yn_idx = np.array([0 if u.lower() == "yes" else (1 if u.lower() == "no" else -1) for u in uniq_norm],
                      dtype=np.int32)
    norm = [normalise_value(u) for u in uniq_norm]
    # free / numeric values share one global code space above the option range; golds go through the
    # parser's canonical form first (e.g. "\\frac{2}{5}" -> "0.4"), as extracted answers did
    g_norm = _canonical_gold_values(questions, other_q)
    free_codes_u, free_uniq = pd.factorize(pd.Series(norm + g_norm.tolist()))
    free_u = free_codes_u[: len(uniq_norm)].astype(np.int32) + kmax
    gold_free = free_codes_u[len(uniq_norm):].astype(np.int32) + kmax
    gold[other_q] = gold_free[other_q]
    # per question: 0 mc, 1 yes/no, 2 numeric/free, 3 other; per (question type, unique answer): the code
    qtype = np.full(len(questions), 3, np.int8)
    qtype[is_mc] = 0
    qtype[is_yn] = 1
    qtype[other_q] = 2
    qk = questions["n_options"].to_numpy().astype(np.int32)
    # one gather per row from a (question type x unique answer) table; an mc letter beyond the item's
    # options is unparseable. Chunked, so no n-long temporaries pile up.
    U1 = len(uniq) + 1
    table = np.full((4, U1), MISSING, np.int32)   # column 0: null / unparseable
    table[0, 1:] = letter_idx
    table[1, 1:] = yn_idx
    table[2, 1:] = free_u
    if remap is not None:  # columns indexed by the input's dictionary codes instead
        table = table[:, np.concatenate([[0], remap[1:] + 1])]
        table[:, 1:][:, remap[1:] < 0] = MISSING
        fcodes = fcodes_raw
    U1 = table.shape[1]
    table = np.ascontiguousarray(table).reshape(-1)
    q_off = (qtype.astype(np.int32) * U1 + 1)   # + 1: code -1 (null) lands in column 0
    limit = np.where(qtype == 0, qk, np.iinfo(np.int32).max).astype(np.int32)
    rq = runs["q"].to_numpy()
    step = 1 << 22
    for lo in range(0, n, step):
        qq = rq[lo:lo + step]
        c = table[q_off[qq] + fcodes[lo:lo + step]]
        c[c >= limit[qq]] = MISSING
        codes[lo:lo + step] = c
    return codes, gold


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


def _first_appearance(codes: np.ndarray, n_values: int, step: int = 1 << 22) -> np.ndarray:
    """The values 0..n_values-1 that occur in ``codes`` (-1 = null), ordered by first occurrence.
    Scans in chunks and stops once every value has been seen (usually within the first chunk)."""
    first = np.full(n_values, np.iinfo(np.int64).max, np.int64)
    seen = np.zeros(n_values, bool)
    for lo in range(0, len(codes), step):
        c = np.asarray(codes[lo:lo + step])
        present = np.bincount(c[c >= 0], minlength=n_values).astype(bool) if n_values else seen
        new = present & ~seen
        if new.any():
            u, pos = np.unique(c, return_index=True)
            keep = u >= 0
            u, pos = u[keep], pos[keep]
            sel = new[u]
            first[u[sel]] = pos[sel] + lo
            seen |= new
            if seen.all():
                break
    present_codes = np.flatnonzero(seen)
    return present_codes[np.argsort(first[present_codes], kind="stable")]
