"""The answer parser over a whole runs table: :func:`fill_answers_and_exact`.

It factorises the texts with Arrow, reads each distinct text once (memoised), resolves bare letters,
yes/no and numbers with vectorised gathers, and only calls the per-question option rules of
:mod:`audit_hub.answers.rules` for the remaining (text, question) pairs. Its output ids become the
frame's answer codes directly (:func:`audit_hub.answers.codes.encode_ids`); the answer texts it also
returns are for display and the public runs table, never read back.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import ANSWER_TYPES, LETTERS
from .codes import AnswerCodes, encode_ids
from .rules import (
    DEPENDS,
    LOOSE_DROP,
    REL_TOL,
    TYPE_CODE,
    MCParse,
    Options,
    canonical_gold,
    compact_key,
    letter_code,
    num_full,
    resolve_free,
    resolve_mc,
    resolve_numeric,
    resolve_yesno,
    strict_key,
)

# ---------------------------------------------------------------------------------------------
# vectorised fill over a runs table
#: an ``answer`` a harness writes for "could not read the answer" (VLMEvalKit's yes/no ``Unknown``); such a
#: row is unparseable as the harness said, and its prediction is not re-read
UNREADABLE_MARKERS = ("unknown",)
#: a ``prediction`` a harness writes when the model gave no output at all (VLMEvalKit's ``FAIL_MSG`` after an API call
#: failed, in vlmeval/dataset and vlmeval/api). Within a run it is an unparseable, wrong answer, as the harness scores
#: it; a run of nothing else is a failed run (``frame.validate.empty_runs``)
FAILED_CALL_TEXTS = ("Failed to obtain answer via API.",)
#: an ``answer`` in which the harness's own extraction failed and left the squashed sentence it was searching
#: (MATH-V: "\\frac{40}{9}}.theansweris:\\frac{40}{9", 302 of the bundled example's 36,480 rows): not an
#: extraction, so the answer is read again from ``prediction`` (its last number, the 9 of the cut fraction,
#: matched a gold of 9 while the model answered 40/9)
SQUASHED_EXTRACTION = "theansweris"


class _Table:
    """Output strings with integer codes: letters A..Z are codes 0..25, yes 26, no 27."""

    def __init__(self):
        self.strings: list[str] = list(LETTERS) + ["yes", "no"]
        self.index: dict[str, int] = {s: i for i, s in enumerate(self.strings)}

    def code(self, s: str | None) -> int:
        if s is None:
            return -1
        c = self.index.get(s)
        if c is None:
            c = len(self.strings)
            self.strings.append(s)
            self.index[s] = c
        return c


def _as_chunked(col) -> pa.ChunkedArray:
    """A pandas string column (Arrow-backed or not) as a pyarrow ChunkedArray of strings."""
    arr = col.array if isinstance(col, pd.Series) else col
    if isinstance(arr, pd.arrays.ArrowExtensionArray):
        ca = arr.__arrow_array__()
    else:
        vals = [None if (v is None or (isinstance(v, float) and math.isnan(v))) else str(v)
                for v in pd.Series(arr).astype(object).tolist()]
        ca = pa.chunked_array([pa.array(vals, pa.string())])
    if isinstance(ca, pa.Array):
        ca = pa.chunked_array([ca])
    if not (pa.types.is_string(ca.type) or pa.types.is_large_string(ca.type)):
        ca = ca.cast(pa.string())
    return ca


def _factorize(ca: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Codes (int32, -1 for null) and the distinct strings of an Arrow string column."""
    if len(ca) == 0:
        return np.zeros(0, np.int32), []
    enc = pc.dictionary_encode(ca)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.unify_dictionaries()
        chunks = [c for c in enc.chunks if len(c)]
        if not chunks:
            return np.full(len(ca), -1, np.int32), []
        dictionary = chunks[0].dictionary
        parts = [(pc.fill_null(c.indices, -1) if c.null_count else c.indices).to_numpy(zero_copy_only=False)
                 for c in chunks]
        codes = parts[0] if len(parts) == 1 else np.concatenate(parts)
    else:
        dictionary = enc.dictionary
        codes = (pc.fill_null(enc.indices, -1) if enc.null_count else enc.indices).to_numpy(zero_copy_only=False)
    return codes.astype(np.int32, copy=False), dictionary.to_pylist()


class _Context:
    """Per-question facts used by the fill (types, option counts, lazily normalised options)."""

    def __init__(self, questions: pd.DataFrame):
        self.questions = questions
        self.nq = len(questions)
        tc = pd.Categorical(questions["answer_type"].astype(str), categories=list(ANSWER_TYPES)).codes
        self.type_code = np.where(tc < 0, TYPE_CODE["free"], tc).astype(np.int8)
        if "n_options" in questions.columns:
            self.k = questions["n_options"].to_numpy().astype(np.int32)
        else:
            self.k = np.array([len(o) for o in questions["options"]], dtype=np.int32)
        self._options_col = questions["options"].tolist()
        # questions sharing the same option texts share one Options ("option group")
        self._group = np.full(self.nq, -1, dtype=np.int32)
        self._group_ids: dict[tuple, int] = {}
        self._group_opts: list[Options | None] = []
        self._group_keys: list[tuple] = []
        self._letter_flags: np.ndarray | None | bool = False  # not computed yet

    def groups(self, qs: np.ndarray) -> np.ndarray:
        """Option-group id of each question code in ``qs`` (assigned on first use)."""
        g = self._group[qs]
        if (g < 0).any():
            ids, keys, col = self._group_ids, self._group_keys, self._options_col
            for qi in np.unique(qs[g < 0]).tolist():
                key = tuple(col[qi])
                gid = ids.get(key)
                if gid is None:
                    gid = len(keys)
                    ids[key] = gid
                    keys.append(key)
                    self._group_opts.append(None)
                self._group[qi] = gid
            g = self._group[qs]
        return g

    def letter_option_flags(self) -> np.ndarray | None:
        """(n_questions,) bool: some option text is a single letter other than its own position
        ("$S$" as option A, Roman numerals); None when no question has one. A vectorised regex
        pre-selects the few short candidate options; only those are normalised in Python."""
        if self._letter_flags is not False:
            return self._letter_flags
        flags = None
        col = self._options_col
        if self.nq:
            lst = pa.array(col, type=pa.list_(pa.string()))
            flat = lst.flatten()
            if len(flat):
                cand = pc.match_substring_regex(flat, _LETTERISH_OPTION)
                idx = np.flatnonzero(cand.to_numpy(zero_copy_only=False))
                if len(idx):
                    offsets = lst.offsets.to_numpy()
                    qs = np.searchsorted(offsets, idx, side="right") - 1
                    pos = idx - offsets[qs]
                    for qi, j in zip(qs.tolist(), pos.tolist()):
                        lo = LOOSE_DROP.sub("", strict_key(str(col[qi][j])))
                        if len(lo) == 1 and "a" <= lo <= "z" and letter_code(lo) != j:
                            if flags is None:
                                flags = np.zeros(self.nq, dtype=bool)
                            flags[qi] = True
        self._letter_flags = flags
        return flags

    @property
    def n_groups(self) -> int:
        return len(self._group_keys)

    def group_options(self, gid: int) -> Options:
        o = self._group_opts[gid]
        if o is None:
            o = Options([str(x) for x in self._group_keys[gid]])
            self._group_opts[gid] = o
        return o

    def read_accepted_as_gold(self, out: np.ndarray, qrows: np.ndarray, gold_code: np.ndarray, table: _Table) -> None:
        """In place: an answer equal to one of its question's accepted answers (``gold_alternatives``, a gold that
        lists several: "['hello', 'Hello']", "cat<OR>kitten") is read as the gold itself, so that it is right
        and every detector sees the one answer the gold is."""
        if "gold_alternatives" not in self.questions.columns:
            return
        import json

        col = self.questions["gold_alternatives"].to_numpy(dtype=object)
        qs = [i for i, v in enumerate(col.tolist()) if isinstance(v, str) and gold_code[i] >= 0]
        if not qs:
            return
        keys = []
        for qi in qs:
            t = ANSWER_TYPES[int(self.type_code[qi])]
            for alt in json.loads(col[qi]):
                c = table.code(canonical_gold(alt, t))
                if c >= 0 and c != gold_code[qi]:
                    keys.append((qi << 32) | c)
        if not keys:
            return
        row_keys = (qrows.astype(np.int64) << 32) | np.maximum(out, 0).astype(np.int64)
        hit = (out >= 0) & np.isin(row_keys, np.asarray(keys, dtype=np.int64))
        out[hit] = gold_code[qrows[hit]]

    def gold_codes(self, table: _Table) -> np.ndarray:
        """(n_questions,) table code of each canonical gold answer (-1 when unusable)."""
        gold = np.full(self.nq, -1, dtype=np.int32)
        tc = self.type_code
        answers = self.questions["answer"]
        mc = tc == TYPE_CODE["mc"]
        if mc.any():
            if "gold_index" in self.questions.columns:
                gi = self.questions["gold_index"].to_numpy().astype(np.int32)
                gold[mc] = np.where((gi[mc] >= 0) & (gi[mc] < self.k[mc]), gi[mc], -1)
            else:
                gold[mc] = [table.code(canonical_gold(a, "mc")) for a in answers[mc].tolist()]
        yn = tc == TYPE_CODE["yesno"]
        if yn.any():
            low = answers[yn].astype(str).str.strip().str.lower().to_numpy(dtype=object)
            gold[yn] = np.where(low == "yes", table.code("yes"), np.where(low == "no", table.code("no"), -1))
        other = np.flatnonzero(tc >= 2)
        if len(other):
            vals = answers.to_numpy(dtype=object)[other]
            gold[other] = [table.code(canonical_gold(v, ANSWER_TYPES[t])) for v, t in zip(vals, tc[other])]
        return gold


def _extract_rows(ca: pa.ChunkedArray, qrows: np.ndarray, ctx: _Context, table: _Table) -> np.ndarray:
    """Table codes (int32, -1 unparseable/null) of the answers read from ``ca`` (one per row)."""
    n = len(qrows)
    codes, uniques = _factorize(ca)
    nu = len(uniques)
    if nu == 0:
        return np.full(n, -1, dtype=np.int32)
    has_null = bool((codes < 0).any())
    types_present = np.flatnonzero(np.bincount(ctx.type_code, minlength=4))
    if len(types_present) == 1:
        tcode = None
        present = types_present
    else:
        tcode = ctx.type_code[qrows]
        present = np.flatnonzero(np.bincount(tcode, minlength=4))
    out = None
    for t in present.tolist():
        if tcode is None:
            rows = np.flatnonzero(codes >= 0) if has_null else None
        else:
            rows = np.flatnonzero((tcode == t) & (codes >= 0))
            if len(rows) == 0:
                continue
        ci = codes if rows is None else codes[rows]
        qi = qrows if rows is None else qrows[rows]
        if rows is None and tcode is None:
            uidx = np.arange(nu)  # every distinct text occurs in these rows
        else:
            seen = np.zeros(nu, dtype=bool)
            seen[ci] = True
            uidx = np.flatnonzero(seen)
        if t == TYPE_CODE["mc"]:
            res = _fill_mc(ci, qi, uidx, uniques, ctx)
        else:
            # uncached: each distinct text is read once here, the LRU cache would only churn
            fn = {1: resolve_yesno, 2: resolve_numeric, 3: resolve_free}[t].__wrapped__
            lut = np.full(nu, -1, dtype=np.int32)
            for u in uidx.tolist():
                lut[u] = table.code(fn(uniques[u]))
            res = lut[ci]
        if rows is None:
            return res
        if out is None:
            out = np.full(n, -1, dtype=np.int32)
        out[rows] = res
    return out if out is not None else np.full(n, -1, dtype=np.int32)


# an option that may normalise to a single letter: one letter among non-alphanumerics, or LaTeX
_LETTERISH_OPTION = r"^[^A-Za-z0-9\\]{0,8}[A-Za-z][^A-Za-z0-9]{0,8}$|^.{0,40}\\(?:text|math|mbox)"
_LUT2_MAX = 4_000_000  # entries of the (text, n_options) lookup table before falling back


def _fill_mc(ci: np.ndarray, qi: np.ndarray, uidx: np.ndarray, uniques: list[str], ctx: _Context) -> np.ndarray:
    """Letter codes for mc rows: vectorised for option-independent texts, per pair otherwise.

    A text whose letter does not depend on the options ("B", "(c)", "The answer is D") resolves
    through a (text, n_options) lookup table; the rest (option texts, trailing conventions,
    letters beyond the option range) are resolved once per (text, option list) pair."""
    nu = len(uniques)
    indep = np.full(nu, DEPENDS, dtype=np.int32)
    pure = np.zeros(nu, dtype=bool)  # the text is nothing but a letter ("B", "(c)", "E.")
    parsed: dict[int, MCParse] = {}
    for u in uidx.tolist():
        p = MCParse(uniques[u])
        indep[u] = p.indep
        pure[u] = p.pure and not p.cands
        parsed[u] = p
    # questions whose option texts are letters in other positions need the per-pair rules
    flagged = ctx.letter_option_flags()
    kmin, kmax = (int(ctx.k.min()), int(ctx.k.max()) + 1) if ctx.nq else (0, 1)
    if nu * kmax <= _LUT2_MAX:
        # res = lut2[text, k]: letter if in range, -1 unparseable, -2 needs the option texts
        kk = np.arange(kmax, dtype=np.int32)[None, :]
        li = indep[:, None]
        # beyond the range: a bare letter is unparseable, other texts may still equal an option text
        beyond = np.where(pure, -1, DEPENDS)[:, None]
        lut2 = np.where(li == DEPENDS, DEPENDS, np.where(li < 0, -1, np.where(li < kk, li, beyond)))
        lut2 = lut2.astype(np.int32)
        if kmin == kmax - 1:  # every question has the same number of options: one gather
            res = lut2[:, kmin][ci]
        else:
            flat = ci * np.int32(kmax)
            flat += ctx.k[qi]
            res = lut2.ravel()[flat]
            del flat
        if flagged is not None:
            res[flagged[qi]] = DEPENDS
        slow = res == DEPENDS
    else:
        kq = ctx.k[qi]
        li = indep[ci]
        res = np.where((li >= 0) & (li < kq), li, -1).astype(np.int32)
        slow = (li == DEPENDS) | ((li >= kq) & ~pure[ci])
        if flagged is not None:
            slow |= flagged[qi]
    if slow.any():
        srows = np.flatnonzero(slow)
        og = ctx.groups(qi[srows])
        ng = max(ctx.n_groups, 1)
        pair = ci[srows].astype(np.int64) * ng + og
        pcodes, puniq = pd.factorize(pair)
        lut = np.empty(len(puniq), dtype=np.int32)
        for j, key in enumerate(puniq.tolist()):
            u, gid = divmod(int(key), ng)
            lut[j] = resolve_mc(parsed[u], ctx.group_options(gid))
        res[srows] = lut[pcodes]
    return res


class ParsedAnswers(NamedTuple):
    """What :func:`fill_answers_and_exact` returns for a runs table."""

    #: the answer each row reads as (a letter, yes / no, or a value's text), Arrow strings, null when none
    answer: pd.api.extensions.ExtensionArray
    #: int8: 1 right, 0 wrong, -1 unknown
    hit_exact: np.ndarray
    #: the frame's answer code space: per-row codes and per-question gold codes
    codes: AnswerCodes


def fill_answers_and_exact(questions: pd.DataFrame, runs: pd.DataFrame) -> ParsedAnswers:
    """Fill the ``answer`` column and compute ``hit_exact`` for a compact runs table.

    ``questions`` is the validated questions table of :class:`audit_hub.frame.core.AuditFrame`; ``runs``
    has columns ``q`` (question code), ``prediction`` and ``answer`` (strings, null when absent).
    A non-null ``answer`` (the harness's own extraction) is normalised by the same rules ("b" ->
    "B", "(C)" -> "C", "Hexagon" -> the matching letter); when it cannot be read, the answer is
    re-extracted from ``prediction``, unless it is one of :data:`UNREADABLE_MARKERS` (the harness's
    own "could not read", kept as unparseable). ``hit_exact`` is 1/0 against the gold (an unparseable
    answer is 0; so is an empty prediction: a model that fails to answer is wrong, as the harnesses
    score it) and -1 only for the rows of a run without any output text (a hit-only table), or when
    the gold itself is unusable.

    Returns :class:`ParsedAnswers`: the answer texts, ``hit_exact`` and the answer codes the frame
    keeps (the parser's own output ids numbered in the frame's code space, not re-read from the texts).
    """
    n = len(runs)
    qrows = runs["q"].to_numpy()
    ctx = _Context(questions)
    table = _Table()
    nulls = pa.chunked_array([pa.nulls(n, pa.string())])
    pred = _as_chunked(runs["prediction"]) if "prediction" in runs.columns else nulls
    ans = _as_chunked(runs["answer"]) if "answer" in runs.columns else nulls
    out = None
    if ans.null_count < n:
        if ans.null_count == 0:
            out = _extract_rows(ans, qrows, ctx, table)
        else:
            out = np.full(n, -1, dtype=np.int32)
            rows = np.flatnonzero(pc.is_valid(ans).to_numpy(zero_copy_only=False))
            out[rows] = _extract_rows(pc.take(ans, pa.array(rows)), qrows[rows], ctx, table)
        squashed = pc.fill_null(pc.match_substring(ans, SQUASHED_EXTRACTION, ignore_case=True), False)
        if pc.any(squashed).as_py():  # a failed harness extraction: read the prediction instead
            out[squashed.to_numpy(zero_copy_only=False)] = -1
    if pred.null_count < n:
        if out is None and pred.null_count == 0:
            out = _extract_rows(pred, qrows, ctx, table)
        else:
            need = out < 0 if out is not None else np.ones(n, dtype=bool)
            if out is not None:  # the harness said it could not read the answer: final, not re-read
                need &= ~pc.fill_null(pc.is_in(pc.utf8_lower(pc.utf8_trim_whitespace(ans)),
                                               pa.array(UNREADABLE_MARKERS)), False).to_numpy(zero_copy_only=False)
            if pred.null_count:
                need &= pc.is_valid(pred).to_numpy(zero_copy_only=False)
            if need.any():
                if out is None:
                    out = np.full(n, -1, dtype=np.int32)
                rows = np.flatnonzero(need)
                out[rows] = _extract_rows(pc.take(pred, pa.array(rows)), qrows[rows], ctx, table)
    if out is None:
        out = np.full(n, -1, dtype=np.int32)
    # --- hit_exact
    gold_code = ctx.gold_codes(table)
    ctx.read_accepted_as_gold(out, qrows, gold_code, table)
    g = gold_code[qrows]
    hit = (out == g).view(np.int8)  # out = -1 never equals a usable gold (>= 0)
    numlike = ctx.type_code >= 2
    if numlike.any():
        rows = np.flatnonzero(numlike[qrows] & (out >= 0) & (hit == 0))
        if len(rows):
            _numeric_hits(rows, out, qrows, gold_code, ctx, table, hit)
    if (gold_code < 0).any():
        hit[g < 0] = -1
    if ans.null_count and pred.null_count:
        no_output = ~pc.is_valid(ans).to_numpy(zero_copy_only=False)
        no_output &= ~pc.is_valid(pred).to_numpy(zero_copy_only=False)
        # an empty prediction of a model whose run carries predictions is a wrong answer, as the harnesses
        # score it (VLMEvalKit, lmms-eval); only a run without any output text (a hit-only table) is unknown
        hit[no_output & ~has_outputs(runs, no_output)] = -1
    # --- the frame's answer codes, from the parser's ids; the texts only for display
    codes = encode_ids(questions, qrows, out, table.strings, recoverable=True)
    dictionary = pa.array(table.strings, pa.string())
    idx = pa.array(out, type=pa.int32(), mask=out < 0)
    answer = pd.arrays.ArrowExtensionArray(pc.take(dictionary, idx))
    return ParsedAnswers(answer, hit, codes)


def has_outputs(runs: pd.DataFrame, no_output: np.ndarray) -> np.ndarray:
    """Per row: does the row's (model, arm) have any prediction or answer text at all?"""
    if "m" not in runs.columns or "arm" not in runs.columns:
        return np.full(len(runs), not no_output.all())
    key = runs["m"].to_numpy().astype(np.int64) * 4 + runs["arm"].to_numpy().astype(np.int64)
    size = int(key.max()) + 1 if len(key) else 0
    with_text = np.bincount(key, weights=~no_output, minlength=size) > 0
    return with_text[key]


def _numeric_hits(rows: np.ndarray, out: np.ndarray, qrows: np.ndarray, gold_code: np.ndarray,
                  ctx: _Context, table: _Table, hit: np.ndarray) -> None:
    """Set ``hit`` to 1 on numeric/free rows whose answer equals the gold numerically (relative
    tolerance REL_TOL) or by the math-safe compact key ("27000 - 4500\\pi" == "27000-4500\\pi")."""
    answers = ctx.questions["answer"].to_numpy(dtype=object)
    tnum = np.array([num_full(s) if i >= 28 else None for i, s in enumerate(table.strings)], dtype=np.float64)
    gnum = np.full(ctx.nq, np.nan)
    qs = np.unique(qrows[rows])
    for q in qs.tolist():
        x = num_full(str(answers[q]).strip(), allow_unit=bool(ctx.type_code[q] == TYPE_CODE["numeric"]))
        if x is not None:
            gnum[q] = x
    a, b = tnum[out[rows]], gnum[qrows[rows]]
    ok = np.isfinite(a) & np.isfinite(b)
    close = np.zeros(len(rows), dtype=bool)
    close[ok] = np.abs(a[ok] - b[ok]) <= np.maximum(REL_TOL * np.maximum(np.abs(a[ok]), np.abs(b[ok])), 1e-12)
    keys: dict[str, int] = {}
    tkey = np.array([keys.setdefault(compact_key(x), len(keys)) for x in table.strings], dtype=np.int64)
    gk = gold_code[qrows[rows]]
    close |= (gk >= 0) & (tkey[out[rows]] == tkey[np.maximum(gk, 0)])
    hit[rows[close]] = 1
