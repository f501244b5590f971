"""Validation of the two input tables of the audit frame: questions and runs.

:func:`validate_questions` checks and normalises the question table (IDs unique and non-empty, answer
types known, options parsed, the gold inside the options); :func:`validate_runs` checks the runs
against it (every question ID known, arms known, correctness cells in :data:`audit_hub.schema`'s
truth table), encodes them as integer codes and fills the exact-match columns with the answer
parser. Every error names the file, the row and the column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..columns import ARROW_STR, arrow_chunks, null_string_array, small_int, to_arrow_strings, to_codes
from ..errors import InputError
from ..fmt import count
from ..schema import (
    ANSWER_TYPES,
    ARMS,
    LETTERS,
    MISSING,
    NUMBER_RE,
    hit_code,
    infer_answer_type,
    is_null,
    options_cell,
)


def _row_of(src_rows: np.ndarray | None, i: int) -> int:
    return int(src_rows[i]) if src_rows is not None else i + 1


def _question_ids(qid: pd.Series, file: str, src_rows) -> pd.Series:
    """The question IDs stripped; an empty or repeated ID is an error naming its row."""
    null_id = qid.isna().to_numpy()
    if null_id.any():
        i = int(np.flatnonzero(null_id)[0])
        raise InputError("question_id is empty", file=file, row=_row_of(src_rows, i), column="question_id")
    qid = qid.astype(str).str.strip()
    dup = qid.duplicated(keep="first").to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((qid == qid.iloc[i]).to_numpy())[0])
        raise InputError(f"duplicate question_id {qid.iloc[i]!r} (first seen at row {_row_of(src_rows, first)})",
                         file=file, row=_row_of(src_rows, i), column="question_id")
    return qid


def _row_gold(a, t, options: list[str], file: str, row: int | None) -> tuple[str, str, int | None]:
    """One question's (gold answer, answer type, gold option index or None) by the row-level rules: the
    type inferred when absent, an mc gold as a letter within the options (or an option's exact text),
    a yes/no gold as yes or no; anything else is an error naming the row."""
    if is_null(a) or str(a).strip() == "":
        raise InputError("gold answer is empty", file=file, row=row, column="answer")
    a = str(a).strip()
    t = infer_answer_type(options, a) if is_null(t) or str(t) == "" else str(t).strip().lower()
    if t not in ANSWER_TYPES:
        raise InputError(f"unknown answer_type {t!r}; expected one of {ANSWER_TYPES}",
                         file=file, row=row, column="answer_type")
    if t == "yesno":
        if a.lower() not in ("yes", "no"):
            raise InputError(f"yes/no gold must be 'yes' or 'no', got {a!r}", file=file, row=row, column="answer")
        return a.lower(), t, None
    if t != "mc":
        return a, t, None
    k = len(options)
    if k == 0:
        raise InputError("answer_type is 'mc' but the question has no options", file=file, row=row,
                         column="options")
    if k > len(LETTERS):
        raise InputError(f"{k} options; at most 26 are supported", file=file, row=row, column="options")
    letter = a.upper()
    if len(letter) != 1 or letter not in LETTERS[:k]:
        # gold given as the option text instead of a letter?
        matches = [j for j, o in enumerate(options) if o.strip() == a]
        if len(matches) != 1:
            raise InputError(f"gold {a!r} is not one of the option letters {LETTERS[:k]!r}",
                             file=file, row=row, column="answer")
        letter = LETTERS[matches[0]]
    return letter, t, LETTERS.index(letter)


def validate_questions(df: pd.DataFrame, file: str) -> pd.DataFrame:
    if df is None or len(df) == 0:
        raise InputError("the questions table is empty", file=file)
    missing = [c for c in ("question_id", "answer") if c not in df.columns]
    if missing:
        raise InputError(f"missing required column(s) {missing}; found {list(df.columns)}", file=file,
                         column=missing[0])
    src_rows = df["source_row"].to_numpy() if "source_row" in df.columns else None
    if "source_file" in df.columns and len(df):
        file = str(df["source_file"].iloc[0])
    qid = _question_ids(df["question_id"], file, src_rows)
    n = len(df)

    def col(name, default=None):
        if name in df.columns:
            return df[name].tolist()
        return [default] * n

    fast = _options_fast(df["options"]) if "options" in df.columns else ([[] for _ in range(n)], np.zeros(n, np.int64))
    if fast is None:
        options = [options_cell(v, file, _row_of(src_rows, i)) for i, v in enumerate(col("options"))]
        n_opt = np.fromiter((len(o) for o in options), dtype=np.int64, count=n)
    else:
        options, n_opt = fast
    answers, types, gold_idx, simple = _answers_fast(df, n_opt)
    answers_in = types_in = None
    for i in np.flatnonzero(~simple):
        # the rows the vectorised pass could not settle (errors, gold given as option text, ...),
        # one by one with the row-level rules; simple rows never raise, so the first error is the same
        if answers_in is None:
            answers_in, types_in = col("answer"), col("answer_type")
        answers[i], types[i], g = _row_gold(answers_in[i], types_in[i], options[i], file, _row_of(src_rows, i))
        if g is not None:
            gold_idx[i] = g

    def text_col(name):
        if name not in df.columns:
            return pd.Series([None] * n, dtype=object)
        return _text_series(df[name])

    out = pd.DataFrame({
        "question_id": qid.array,  # (the stripped IDs as they are: no round trip through Python objects)
        "question": text_col("question").fillna(""),
        "options": options,
        "answer": answers,
        "answer_type": types,
        "category": text_col("category").fillna("(none)"),
        "l2_category": text_col("l2_category"),
        "group_id": text_col("group_id"),
        "hint": text_col("hint"),
    })
    out["n_options"] = n_opt.astype(np.int16)
    out["gold_index"] = gold_idx
    if "gold_alternatives" in df.columns:  # the accepted answers of a gold that lists several (JSON text)
        out["gold_alternatives"] = _text_series(df["gold_alternatives"])
    from .question_meta import as_text, metadata_columns

    for c in metadata_columns(df.columns):  # question metadata (kept as text)
        if c not in out.columns:
            out[c] = pd.Series(as_text(df[c].tolist()), dtype=object)
    return out


def _text_series(s: pd.Series) -> pd.Series:
    """Object Series of ``str`` values with None for missing (str() of non-string values)."""
    s = s.reset_index(drop=True)
    null = s.isna().to_numpy()
    obj = s.astype(object)
    if pd.api.types.infer_dtype(obj, skipna=True) not in ("string", "empty"):
        obj = obj.map(lambda v: v if isinstance(v, str) else str(v))
    return obj.where(~null, None)


def _options_fast(s: pd.Series) -> tuple[list[list[str]], np.ndarray] | None:
    """Option lists through Arrow when the column is a list of strings (Parquet / Arrow / Python lists),
    with their lengths (int64); None when a row needs the row-level parser (JSON strings, scalars,
    non-string elements)."""
    import pyarrow.compute as pc

    try:
        chunks = arrow_chunks(s)
        arr = chunks.combine_chunks() if chunks is not None else pa.array(s, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_null(t):
        return [[] for _ in range(len(arr))], np.zeros(len(arr), np.int64)
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return None
    vt = t.value_type
    if not (pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_null(vt)):
        return None
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(arr)
    values = pc.fill_null(values.cast(pa.string()), "") if len(values) else values
    import gc

    ends = np.cumsum(lengths).tolist()
    starts = [0] + ends[:-1]
    was = gc.isenabled()
    gc.disable()  # millions of new lists: the cyclic collector would rescan them over and over
    try:
        vals = values.to_pylist()
        return [vals[a:b] for a, b in zip(starts, ends)], lengths
    finally:
        if was:
            gc.enable()


_LETTER_INDEX = {c: i for i, c in enumerate(LETTERS)}


def _answers_fast(df: pd.DataFrame, n_opt: np.ndarray) -> tuple[list, list, np.ndarray, np.ndarray]:
    """Vectorised gold answers / answer types / gold letters for the rows that follow the plain rules.

    String work is done once per distinct (answer, answer_type) value, then gathered back. Returns
    (answers, types, gold_index, simple); rows with ``simple`` False are left for the row-level loop
    (which raises the errors)."""
    n = len(df)
    gold_idx = np.full(n, MISSING, dtype=np.int16)
    ans = df["answer"].reset_index(drop=True)
    null_a = ans.isna().to_numpy()
    a_codes, a_uniq = pd.factorize(_text_series(ans).fillna(""), use_na_sentinel=False)
    a_u = pd.Series(np.asarray(a_uniq, dtype=object), dtype=object).str.strip()
    low_u = a_u.str.lower().to_numpy(dtype=object)
    a_u = a_u.to_numpy(dtype=object)
    ok = ~null_a & (np.fromiter((len(x) > 0 for x in a_u), bool, count=len(a_u))[a_codes] if len(a_u) else True)
    if "answer_type" in df.columns:
        tcol = df["answer_type"].reset_index(drop=True)
        t_codes, t_uniq = pd.factorize(_text_series(tcol).fillna(""), use_na_sentinel=False)
        t_u = np.asarray(t_uniq, dtype=object)
        given = ~(tcol.isna().to_numpy() | (t_u == "")[t_codes])
        t = np.array([x.strip().lower() for x in t_u], dtype=object)[t_codes]
    else:
        given = np.zeros(n, bool)
        t = np.full(n, "", dtype=object)
    # inferred types where none is given: per distinct answer text
    yn_u = np.isin(low_u, ["yes", "no"])
    num_u = np.array([bool(NUMBER_RE.match(x.replace(",", ""))) for x in low_u], dtype=bool)
    is_yn, is_num = yn_u[a_codes], num_u[a_codes]
    inferred = np.where(n_opt > 0, "mc", np.where(is_yn, "yesno", np.where(is_num, "numeric", "free"))).astype(object)
    types = np.where(given, t, inferred).astype(object)
    ok &= np.isin(types, ANSWER_TYPES)
    answers = a_u[a_codes] if len(a_u) else np.full(n, "", dtype=object)
    # mc: a single letter within the item's options
    mc = ok & (types == "mc")
    if mc.any():
        up_u = np.array([x.upper() for x in a_u], dtype=object)
        li_u = np.array([_LETTER_INDEX.get(x, -1) for x in up_u], dtype=np.int64)
        li = li_u[a_codes[mc]]
        k = n_opt[mc]
        good = (li >= 0) & (k >= 1) & (k <= len(LETTERS)) & (li < k)
        idx = np.flatnonzero(mc)
        gi = idx[good]
        gold_idx[gi] = li[good].astype(np.int16)
        answers[gi] = up_u[a_codes[gi]]
        ok[idx[~good]] = False
    yn = ok & (types == "yesno")
    if yn.any():
        good = yn_u[a_codes]
        answers[yn & good] = low_u[a_codes[yn & good]]
        ok[yn & ~good] = False
    return answers.tolist(), types.tolist(), gold_idx, ok


def _hit_to_int8(series: pd.Series | None, n: int, where, col: str) -> np.ndarray:
    """A correctness column -> int8 (1/0/-1). ``where(i)`` gives the file and row of run row ``i``."""
    if series is None:
        return np.full(n, MISSING, dtype=np.int8)
    s = series
    if s.dtype == bool:
        return s.to_numpy().view(np.int8).copy()
    chunks = arrow_chunks(s)
    if chunks is not None and (pa.types.is_boolean(chunks.type) or pa.types.is_integer(chunks.type)):
        import pyarrow.compute as pc

        if pa.types.is_integer(chunks.type):
            bad = pc.and_(pc.not_equal(chunks, 0), pc.not_equal(chunks, 1))
            if pc.any(bad).as_py():
                i = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False) == True)[0])  # noqa: E712
                raise InputError(f"{col} must be 0/1/true/false or empty, got {chunks[i].as_py()!r}",
                                 **where(i), column=col)
        out = np.empty(n, dtype=np.int8)  # chunk by chunk into one array: no n-long temporaries
        pos = 0
        for ch in chunks.chunks:
            m = len(ch)
            v = pc.cast(ch, pa.int8())
            out[pos:pos + m] = (pc.fill_null(v, MISSING) if ch.null_count else v).to_numpy()
            pos += m
        return out
    if pd.api.types.is_bool_dtype(s.dtype):
        out = np.full(n, MISSING, dtype=np.int8)
        v = s.to_numpy(dtype=object, na_value=None)
        mask = pd.notna(s).to_numpy()
        out[mask] = np.asarray(v[mask], dtype=bool).astype(np.int8)
        return out
    if pd.api.types.is_numeric_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isnan(v) & (v != 0) & (v != 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{col} must be 0/1/true/false or empty, got {v[i]!r}",
                             **where(i), column=col)
        out = np.full(n, MISSING, dtype=np.int8)
        ok = ~np.isnan(v)
        out[ok] = v[ok].astype(np.int8)
        return out
    # strings / objects: map via unique values
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    table = np.empty(len(uniques), dtype=np.int8)
    for j, u in enumerate(uniques):
        code = hit_code(u)
        if code is None:
            i = int(np.flatnonzero(codes == j)[0])
            raise InputError(f"{col} must be 0/1/true/false or empty, got {u!r}",
                             **where(i), column=col)
        table[j] = code
    out = np.full(n, MISSING, dtype=np.int8)
    ok = codes >= 0
    out[ok] = table[codes[ok]]
    return out


def _question_codes(ids: pd.Series, q: pd.DataFrame, where) -> np.ndarray:
    """Each run row's question code (int32 / int16 / int8 throughout: 1e8 rows must stay within a few
    GB); an empty or unknown question ID is an error naming the row."""
    qcodes_raw, quniq = to_codes(ids)
    if (qcodes_raw < 0).any():
        i = int(np.flatnonzero(qcodes_raw < 0)[0])
        raise InputError("question_id is empty", **where(i), column="question_id")
    quniq = np.array([s.strip() for s in quniq], dtype=object)
    if len(quniq) == len(q) and bool((quniq == q["question_id"].to_numpy(dtype=object)).all()):
        return qcodes_raw  # the runs' dictionary is the questions table in order: codes are final
    # (the question IDs are unique: validate_questions checked them)
    lookup = pd.Index(q["question_id"].astype(str)).get_indexer(quniq).astype(np.int32)
    qcodes = lookup[qcodes_raw]
    unknown = qcodes < 0
    if unknown.any():
        bad_ids = pd.unique(quniq[qcodes_raw[unknown]])
        i = int(np.flatnonzero(unknown)[0])
        raise InputError(
            f"{count(len(bad_ids), 'question ID')} in the runs {'is' if len(bad_ids) == 1 else 'are'} not in the "
            f"questions table of {count(len(q), 'question')} ({count(int(unknown.sum()), 'run row')}; first five: "
            f"{list(map(str, bad_ids[:5]))}); questions file and runs must be of the same benchmark (the folder "
            "`benchaudit curate` or `prune` wrote, given as --questions, keeps its questions' rows by itself; "
            "another subset: keep only its questions' rows in the runs)",
            **where(i), column="question_id")
    return qcodes


def _model_codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, names) of the model column with models numbered by first appearance in the rows; names
    no row uses (unused categories) are dropped. One scan that usually stops in the first chunk, and a
    renumbering gather only when the column's own order differs."""
    from ..answers.codes import first_appearance

    codes, names = to_codes(col)
    order = first_appearance(codes, len(names))
    if len(order) == len(names) and (order == np.arange(len(order))).all():
        return codes, names
    table = np.full(len(names) + 1, -1, dtype=small_int(len(order)))  # last slot: null (-1) stays -1
    table[order] = np.arange(len(order))
    return table[codes], np.asarray(names, dtype=object)[order]


def _arm_codes(runs: pd.DataFrame, n: int, where) -> np.ndarray:
    """Each run row's arm code (0 full, 1 blind; all full without an ``arm`` column)."""
    if "arm" in runs.columns:
        acodes_raw, auniq = to_codes(runs["arm"])
        amap = np.array([ARMS.index(a.strip().lower()) if a.strip().lower() in ARMS else -1 for a in auniq],
                        dtype=np.int8)
        if (acodes_raw < 0).any():
            i = int(np.flatnonzero(acodes_raw < 0)[0])
            raise InputError(f"arm is empty; expected one of {ARMS}", **where(i), column="arm")
        if len(amap) and (amap == np.arange(len(amap))).all() and acodes_raw.dtype == np.int8:
            acodes = acodes_raw  # the column's own codes are the ARMS positions already
        else:
            acodes = amap[acodes_raw] if len(amap) else np.zeros(n, np.int8)
        del acodes_raw
        if (acodes < 0).any():
            i = int(np.flatnonzero(acodes < 0)[0])
            raise InputError(f"unknown arm {auniq[to_codes(runs['arm'])[0][i]]!r}; expected one of {ARMS}",
                             **where(i), column="arm")
    else:
        acodes = np.zeros(n, dtype=np.int8)
    return acodes


def _check_no_duplicates(qcodes: np.ndarray, mcodes: np.ndarray, acodes: np.ndarray, q: pd.DataFrame,
                         models: list, where) -> None:
    """One row per (question, model, arm): an O(n) check through a dense bitmap filled in chunks of
    int64 keys (no n-long int64 array), a sort only on failure."""
    n = len(qcodes)
    nq, nm = len(q), len(models)

    def keys(lo: int, hi: int) -> np.ndarray:
        return (acodes[lo:hi].astype(np.int64) * nm + mcodes[lo:hi]) * nq + qcodes[lo:hi]

    step = 1 << 20  # (8 MB int64 temporaries: reused heap memory, not fresh pages per chunk)
    if _strictly_increasing(keys, n, step):
        return  # rows in (arm, model, question) order, the usual layout: no key can repeat
    n_arms = int(acodes.max()) + 1 if n else 1  # the arms present (codes are ARMS positions)
    if nq * nm * n_arms <= 1_000_000_000:
        seen = np.zeros(nq * nm * n_arms, dtype=np.bool_)
        for lo in range(0, n, step):
            seen[keys(lo, lo + step)] = True
        has_dup = int(np.count_nonzero(seen)) != n
        del seen
    else:
        has_dup = True  # fall back to the sort below
    if has_dup:
        key = keys(0, n)
        order = np.argsort(key, kind="stable")
        sk = key[order]
        d = np.flatnonzero(sk[1:] == sk[:-1])
        if len(d):
            i = int(order[d[0] + 1])
            first = int(order[d[0]])
            raise InputError(
                f"duplicate row for question {q['question_id'].iloc[qcodes[i]]!r}, model {models[mcodes[i]]!r}, "
                f"arm {ARMS[acodes[i]]!r} (first seen at row {where(first)['row']})",
                **where(i), column="question_id")


def _strictly_increasing(keys, n: int, step: int) -> bool:
    """Whether the keys ``keys(lo, hi)`` of rows 0..n-1 strictly increase (checked chunk by chunk, stopping
    at the first chunk that does not)."""
    prev = None
    for lo in range(0, n, step):
        k = keys(lo, lo + step)
        if (prev is not None and k[0] <= prev) or not bool((k[1:] > k[:-1]).all()):
            return False
        prev = k[-1]
    return True


#: about one row in this many is probed first for a right answer, then for text (a run that answered shows them there)
_PROBE_STRIDE = 64
#: run rows per chunk of :func:`empty_runs` (no n-long temporary)
_CHUNK_ROWS = 1 << 22


def _has_text(col, rows: np.ndarray, *, answer: bool = False) -> np.ndarray:
    """(len(rows),) bool: the Arrow string cell of each run row in ``rows`` holds something other than whitespace
    or a harness's no-output message (:data:`~audit_hub.answers.fill.FAILED_CALL_TEXTS`); in the ``answer`` column
    also other than a harness's could-not-read marker (:data:`~audit_hub.answers.fill.UNREADABLE_MARKERS`:
    VLMEvalKit's yes/no ``Unknown``, which it writes for a ``FAIL_MSG`` prediction too). No copy of the column: a
    gather of those cells, their byte lengths, one whitespace test and one lookup."""
    import pyarrow.compute as pc

    from ..answers.fill import FAILED_CALL_TEXTS, UNREADABLE_MARKERS

    arr = col._pa_array if hasattr(col, "_pa_array") else pa.chunked_array([pa.array(col)])  # noqa: SLF001
    cells = arr.take(pa.array(rows))
    length = pc.fill_null(pc.binary_length(cells), 0).to_numpy(zero_copy_only=False)
    blank = pc.fill_null(pc.utf8_is_space(cells), True).to_numpy(zero_copy_only=False)
    trimmed = pc.utf8_trim_whitespace(cells)
    none = list(FAILED_CALL_TEXTS)
    if answer:
        trimmed = pc.utf8_lower(trimmed)
        none = [t.lower() for t in none] + list(UNREADABLE_MARKERS)
    failed = pc.fill_null(pc.is_in(trimmed, pa.array(none)), False).to_numpy(zero_copy_only=False)
    return (length > 0) & ~blank & ~failed


def empty_runs(mcodes: np.ndarray, acodes: np.ndarray, hit: np.ndarray, hit_exact: np.ndarray | None,
               prediction, answer) -> list[tuple[int, int, int, bool]]:
    """The (model code, arm code, rows, scored) of the runs that carry nothing: on every row of that model and arm
    no prediction or answer text (null, blank, or a harness's no-output message such as VLMEvalKit's ``FAIL_MSG``)
    and no correctness value (``hit``, and ``hit_exact`` when the file has it: int8, -1 unknown) other than wrong.
    A failed or mis-merged run, not a model that answered: kept, its rows would count as unknown in one correctness
    field, or as a model wrong on every item, and take the whole pool's comparison with them.

    ``scored`` is True for a run that the harness scored wrong on some row (VLMEvalKit judges a run whose every API
    call failed: ``FAIL_MSG`` everywhere, ``hit`` 0 everywhere). Such a run is left out only where another run of
    the table shows text on a probed row: a table of correctness alone (no prediction or answer anywhere) keeps a
    model wrong everywhere, as there is nothing to tell it from a model that answered wrongly.

    Cost, in chunks (no n-long temporary): one row in each stretch of :data:`_PROBE_STRIDE`, drawn at random (a fixed stride
    can fall on one run only, in a table sorted by question), is probed first for a right answer: every model that
    answered shows one there on a benchmark of any size and drops out. Only where a run is left (a model at chance
    on a small benchmark, a run missing from one arm) are the rows read again in full (a pass of bincounts), then
    the texts of the runs still without a right answer, again probed first and then on every row only of the runs
    still without text."""
    n = len(mcodes)
    if n == 0:
        return []
    nk = len(ARMS)
    size = (int(mcodes.max()) + 1) * nk
    step = _CHUNK_ROWS

    def keys(lo: int, hi: int) -> np.ndarray:
        return mcodes[lo:hi].astype(np.int32) * nk + acodes[lo:hi]

    def right(lo: int, hi: int) -> np.ndarray:
        r = hit[lo:hi] > 0
        return r | (hit_exact[lo:hi] > 0) if hit_exact is not None else r

    def known(lo: int, hi: int) -> np.ndarray:
        r = hit[lo:hi] >= 0
        return r | (hit_exact[lo:hi] >= 0) if hit_exact is not None else r

    probe = np.arange(0, n, _PROBE_STRIDE)  # one row at random in each stretch of the stride: sorted, no two alike
    probe = np.minimum(probe + np.random.default_rng(0).integers(0, _PROBE_STRIDE, len(probe)), n - 1)
    kp = mcodes[probe].astype(np.int32) * nk + acodes[probe]
    alive = np.zeros(size, bool)
    lo_arm, hi_arm = int(acodes.min()), int(acodes.max())
    # candidates: every (model, arm) of the arms present (exact with one arm, where every model has rows in it;
    # a pair without rows drops out below, where its row count is 0)
    alive.reshape(-1, nk)[:, lo_arm:hi_arm + 1] = True
    total, scored = None, np.zeros(size, bool)
    if hit.max(initial=-1) >= 0 or (hit_exact is not None and hit_exact.max(initial=-1) >= 0):
        pr = hit[probe] > 0
        if hit_exact is not None:
            pr |= hit_exact[probe] > 0
        alive[np.unique(kp[pr])] = False
        if not alive.any():
            return []
        total = np.zeros(size, np.int64)
        for lo in range(0, n, step):  # the runs still without a right answer, on every row
            k = keys(lo, lo + step)
            total += np.bincount(k, minlength=size)
            m = alive[k]
            if m.any():
                alive[np.unique(k[m & right(lo, lo + step)])] = False
                scored[np.unique(k[m & known(lo, lo + step)])] = True
        alive &= total > 0
    if (alive & scored).any():  # wrong everywhere: left out only where the table shows text on another run
        look = probe if n > _CHUNK_ROWS // _PROBE_STRIDE else np.arange(n)  # a small table: every row
        others = look[~alive[mcodes[look].astype(np.int32) * nk + acodes[look]]]
        if not len(others) or not (_has_text(prediction, others) | _has_text(answer, others, answer=True)).any():
            alive &= ~scored
    for lo in range(0, n, step):
        if not alive.any():
            return []
        hi = min(lo + step, n)
        k = keys(lo, hi)
        for rows in (probe[(probe >= lo) & (probe < hi)] - lo, None):
            rows = np.flatnonzero(alive[k]) if rows is None else rows[alive[k[rows]]]
            if len(rows):
                has = _has_text(prediction, lo + rows) | _has_text(answer, lo + rows, answer=True)
                alive[np.unique(k[rows[has]])] = False
    gone = np.flatnonzero(alive)
    if not len(gone):
        return []
    if total is None:  # the rows of the runs left out (no correctness anywhere: not counted above)
        total = np.zeros(size, np.int64)
        for lo in range(0, n, step):
            total += np.bincount(keys(lo, lo + step), minlength=size)
    return [(int(g // nk), int(g % nk), int(total[g]), bool(scored[g])) for g in gone if total[g] > 0]


#: a run is compared with the others for being a copy only when it answered at least this many questions, and
#: got at least DUPLICATE_MIN_WRONG of them wrong (two strong models that answer every question with its gold letter
#: agree everywhere without one being a copy: only shared wrong answers tell a copy)
DUPLICATE_MIN_ITEMS = 30
DUPLICATE_MIN_WRONG = 10


def duplicate_runs(frame) -> list[dict]:
    """Models whose image-arm run is an exact copy of another model's (the same answer code and the same verdict on
    every question, at least :data:`DUPLICATE_MIN_WRONG` of them wrong, and the same prediction text on every row;
    and the same blind run where either has one): ``[{"model", "copy_of", "rows"}]``, the copy being
    the later name of the two (so the result does not depend on input order). One model counted twice breaks the
    independence the consensus and agreement statistics assume (the metamorphic review: a copied run moved the
    unanimous count from 194 to 687 over its expectation); the caller leaves the copies out and says so."""
    if not frame.has_arm("full") or frame.n_models < 2:
        return []
    import hashlib

    names = frame.models_in("full")
    if len(names) < 2:
        return []
    A = frame.answer_codes("full", models=names)
    H = frame.correctness("full", "hit", models=names)
    gold = frame.gold_codes()
    groups: dict[bytes, list[int]] = {}
    for j in range(len(names)):
        a = np.ascontiguousarray(A[:, j])
        if int((a >= 0).sum()) < DUPLICATE_MIN_ITEMS or int(((a >= 0) & (a != gold)).sum()) < DUPLICATE_MIN_WRONG:
            continue
        key = hashlib.blake2b(a.tobytes() + np.ascontiguousarray(H[:, j]).tobytes(), digest_size=16).digest()
        groups.setdefault(key, []).append(j)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        order = sorted(members, key=lambda j: str(names[j]))
        keep = order[0]
        base = [_predictions_by_question(frame, names[keep], arm) for arm in ("full", "blind")]
        for j in order[1:]:
            other = [_predictions_by_question(frame, names[j], arm) for arm in ("full", "blind")]
            # the same texts in the image arm, and in the blind arm too where either has one
            if all(len(o) == len(b) and o.equals(b) for o, b in zip(other, base)):
                out.append({"model": str(names[j]), "copy_of": str(names[keep]), "rows": int(len(other[0]))})
    return sorted(out, key=lambda r: r["model"])


def _predictions_by_question(frame, model: str, arm: str = "full"):
    """The prediction text of each of ``model``'s rows in ``arm``, ordered by question (an Arrow array)."""
    r = frame.runs
    m = frame.models.index(model)
    rows = np.flatnonzero((r["m"].to_numpy() == m) & (r["arm"].to_numpy() == ARMS.index(arm)))
    rows = rows[np.argsort(r["q"].to_numpy()[rows], kind="stable")]
    col = r["prediction"].array
    arr = col._pa_array if hasattr(col, "_pa_array") else pa.chunked_array([pa.array(col, pa.string())])  # noqa: SLF001
    return pc.take(arr, pa.array(rows)).combine_chunks()


def label_collisions(labels) -> list[list[str]]:
    """Groups of distinct labels that differ only in case or spacing ("Algebra" / "algebra ", "bard" / "bard "):
    kept apart by the audit (a label is what the file says), named so that a typo is not read as two categories
    or two models."""
    by: dict[str, list[str]] = {}
    for lab in dict.fromkeys(str(x) for x in labels):
        by.setdefault(" ".join(lab.casefold().split()), []).append(lab)
    return [sorted(v) for v in by.values() if len(v) > 1]


def label_collisions_note(kind: str, groups: list[list[str]]) -> str | None:
    """One sentence naming :func:`label_collisions`' groups (``kind``: "category labels", "model names")."""
    if not groups:
        return None
    shown = "; ".join(" / ".join(repr(x) for x in g) for g in groups[:5])
    more = f"; and {len(groups) - 5:,} more" if len(groups) > 5 else ""
    return (f"{count(len(groups), 'group')} of {kind} that differ only in case or spacing, audited apart: {shown}{more}"
            " (if each is one label, make them equal in the input or with --map)")


def duplicate_runs_note(records: list[dict] | None) -> str | None:
    """One sentence for the CLI warning and the card (model names are input text: escape where it lands)."""
    if not records:
        return None
    shown = "; ".join(f"{r['model']} (a copy of {r['copy_of']}, {int(r['rows']):,} rows)" for r in records[:10])
    more = f"; and {len(records) - 10:,} more" if len(records) > 10 else ""
    return (f"{count(len(records), 'run')} left out as an exact copy of another model's run (the same prediction, "
            f"answer and verdict on every question: one model counted twice would break the independence the "
            f"consensus and agreement statistics assume): {shown}{more}")


def empty_runs_note(records: list[dict] | None) -> str | None:
    """One sentence for the CLI warning and the card (the models are input text: escape where it lands), or None
    when no run was left out by :func:`empty_runs`."""
    if not records:
        return None
    shown = "; ".join(f"{r['model']} ({r['arm']} arm, {int(r['rows']):,} rows"
                      + (", scored wrong on every row" if r.get("scored_wrong") else "") + ")" for r in records[:10])
    more = f"; and {len(records) - 10:,} more" if len(records) > 10 else ""
    return (f"{count(len(records), 'run')} left out, with no prediction (or only a harness's no-output message) or answer "
            f"on any row, and no correctness other than wrong (a failed or mis-merged run?): {shown}{more}")


def validate_runs(runs: pd.DataFrame, q: pd.DataFrame, file: str, *, compute_exact: bool, drop_empty: bool = True):
    n = len(runs)
    src_rows = runs["source_row"].to_numpy() if "source_row" in runs.columns else None
    src_files = runs["source_file"] if "source_file" in runs.columns else None

    def where(i: int) -> dict:
        f = str(src_files.iloc[i]) if src_files is not None else file
        return {"file": f, "row": _row_of(src_rows, i)}

    if n == 0:
        empty = pd.DataFrame({"q": np.array([], np.int32), "m": np.array([], np.int16),
                              "arm": np.array([], np.int8),
                              "prediction": pd.Series([], dtype=ARROW_STR), "answer": pd.Series([], dtype=ARROW_STR),
                              "hit": np.array([], np.int8), "hit_exact": np.array([], np.int8)})
        return empty, []
    for c in ("question_id", "model"):
        if c not in runs.columns:
            raise InputError(f"missing required column {c!r}; found {list(runs.columns)}", file=file, column=c)
    qcodes = _question_codes(runs["question_id"], q, where)
    # models numbered by first appearance in the rows (names kept verbatim): the numbering, and with it
    # every output's model order, is the same whatever dictionary order (or none) the file's encoding had
    mcodes, models = _model_codes(runs["model"])
    if (mcodes < 0).any():
        i = int(np.flatnonzero(mcodes < 0)[0])
        raise InputError("model is empty", **where(i), column="model")
    if len(models) > 32000:
        raise InputError(f"{len(models)} distinct models; at most 32,000 are supported", file=file, column="model")
    mcodes = mcodes.astype(np.int16, copy=False)
    acodes = _arm_codes(runs, n, where)
    _check_no_duplicates(qcodes, mcodes, acodes, q, models, where)

    def str_col(name):
        if name not in runs.columns:
            return pd.arrays.ArrowExtensionArray(null_string_array(n))
        return to_arrow_strings(runs[name])

    answer_dict = None
    if "answer" in runs.columns and "hit_exact" in runs.columns:
        col_a = runs["answer"]
        if isinstance(col_a.dtype, pd.CategoricalDtype) or (
                isinstance(col_a.dtype, pd.ArrowDtype) and pa.types.is_dictionary(col_a.dtype.pyarrow_dtype)):
            answer_dict = to_codes(col_a)  # the answer ids for encode_text, at no hashing cost
    prediction = str_col("prediction")
    answer = str_col("answer")
    hit = _hit_to_int8(runs["hit"] if "hit" in runs.columns else None, n, where, "hit")
    hit_exact = _hit_to_int8(runs["hit_exact"], n, where, "hit_exact") if "hit_exact" in runs.columns else None
    gone = empty_runs(mcodes, acodes, hit, hit_exact, prediction, answer) if drop_empty else []
    drop = (np.isin(mcodes.astype(np.int64) * len(ARMS) + acodes, [m * len(ARMS) + a for m, a, _, _ in gone])
            if gone else None)
    if drop is not None and not drop.all():  # every run empty: nothing is left out
        # left out, and the rest validated again (rare): the error rows keep naming the rows of the file
        keep = np.flatnonzero(~drop)
        sub = runs.iloc[keep]
        if src_rows is None:
            sub = sub.assign(source_row=keep + 1)
        out, kept = validate_runs(sub, q, file, compute_exact=compute_exact)
        out.attrs["_empty_runs"] = [{"model": str(models[m]), "arm": ARMS[a], "rows": r} | ({"scored_wrong": True} if sc else {})
                                    for m, a, r, sc in gone]
        return out, kept
    out = pd.DataFrame({
        "q": qcodes.astype(np.int32, copy=False), "m": mcodes, "arm": acodes.astype(np.int8, copy=False),
        "prediction": prediction,
        "answer": answer, "hit": hit,
    }, copy=False)
    if answer_dict is not None:
        out.attrs["_answer_dict"] = (answer_dict[0], answer_dict[1], out["answer"].array._pa_array)  # noqa: SLF001
    if hit_exact is not None:
        out["hit_exact"] = hit_exact
    elif compute_exact:
        from ..answers.fill import fill_answers_and_exact
        parsed = fill_answers_and_exact(q, out)
        out["answer"], out["hit_exact"] = parsed.answer, parsed.hit_exact
        out.attrs["_answer_codes"] = parsed.codes  # the parser's codes: the frame keeps them
    else:
        out["hit_exact"] = np.full(n, MISSING, dtype=np.int8)
    return out, list(models)
