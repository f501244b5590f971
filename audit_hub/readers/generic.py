"""Generic tables (CSV, TSV, JSON lines, JSON, Parquet, Excel) and the column normalisation every
reader shares.

:func:`read_table` reads any of those formats into a DataFrame with a ``source_row`` column
(1-based data row; the line number for JSON lines) and never loads image columns. CSV/TSV go
through ``pyarrow.csv`` with every column read as text (so ``007`` stays ``007`` and quoted
multi-line cells work); Parquet through ``pyarrow.parquet`` with ID/model/arm columns
dictionary-encoded so they arrive as pandas categoricals (the fast path of the audit frame).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..input_guard import check_parquet_schema, check_text_head, check_zip_container
from . import (
    L2_ALIASES,
    LETTERS,
    MEDIA_COLUMNS,
    PICKLE_EXTENSIONS,
    ReadResult,
    apply_column_map,
    cell_to_str,
    check_text_encoding_prefix,
    ensure_nonempty,
    ext_of,
    first_present,
    is_null,
    iter_json_lines,
    load_json_records,
    options_from_letter_columns,
    pick_id_column,
    raise_bad_utf8,
    read_head,
    split_embedded_options,
    stem_of,
    to_str_series,
)

ARROW_STR = pd.ArrowDtype(pa.string())
DICT_COLUMNS = ("question_id", "model", "arm", "index", "id", "qid", "doc_id")
PREDICTION_ALIASES = ("prediction", "response", "output", "pred", "model_output")
HIT_ALIASES = ("hit", "correct", "is_correct")


def _types_mapper(t: pa.DataType):
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return ARROW_STR
    if pa.types.is_boolean(t):
        return pd.BooleanDtype()
    return None


# ---------------------------------------------------------------------------------------- reading
def read_table(path: str, column_map: dict[str, str] | None = None, *,
               keep: Callable[[list[str]], list[str] | None] | None = None,
               dictionary: bool = True, arrow_lists: bool = False) -> pd.DataFrame:
    """Read a CSV/TSV/JSONL/JSON/Parquet/XLSX table; adds ``source_row``; skips media columns.

    ``keep`` (CSV/TSV/Parquet only) receives the header (after ``column_map``) and returns the
    column names to read, or None for all: readers that need a few columns of a wide sheet skip
    parsing the rest. ``dictionary=False`` reads Parquet ID columns as plain strings instead of
    categoricals (a questions table has one row per ID: a dictionary only costs time there).
    ``arrow_lists=True`` keeps Parquet list-of-string columns as ``pd.ArrowDtype`` lists (null items
    become "") instead of Python lists: a million option lists stay one Arrow buffer, and the audit
    frame reads them without converting back (listed in ``df.attrs['arrow_list_columns']``)."""

    def select(names: list[str]) -> list[str]:
        cols = [n for n in names if n not in MEDIA_COLUMNS]
        if keep is None:
            return cols
        cmap = column_map or {}
        wanted = keep([cmap.get(n, n) for n in cols])
        if wanted is None:
            return cols
        wanted_set = set(wanted)
        return [n for n in cols if cmap.get(n, n) in wanted_set]

    ext = ext_of(path)
    if ext in PICKLE_EXTENSIONS:
        from . import refuse_pickle
        refuse_pickle(path)
    ensure_nonempty(path)
    if ext in (".csv", ".tsv"):
        check_text_head(path, read_head(path))
        df = _read_delimited(path, "\t" if ext == ".tsv" else ",", select)
    elif ext == ".parquet":
        df = _read_parquet(path, select, dictionary=dictionary, arrow_lists=arrow_lists, column_map=column_map)
    elif ext == ".xlsx":
        df = _read_excel(path)
    elif ext == ".jsonl":
        rows, recs = [], []
        for lineno, rec in iter_json_lines(path):
            for k in MEDIA_COLUMNS.intersection(rec):
                del rec[k]
            recs.append(rec)
            rows.append(lineno)
        if not recs:
            raise InputError("the file has no JSON lines (only blank lines)", file=path)
        df = pd.DataFrame.from_records(recs)
        df["source_row"] = np.asarray(rows, dtype=np.int64)
    elif ext == ".json":
        recs, rows = load_json_records(path)
        if not recs:
            raise InputError("the JSON list is empty", file=path)
        for rec in recs:
            for k in MEDIA_COLUMNS.intersection(rec):
                del rec[k]
        df = pd.DataFrame.from_records(recs)
        df["source_row"] = np.asarray(rows, dtype=np.int64)
    else:
        raise InputError(f"unknown file type {ext or '(no extension)'!r}; expected one of "
                         ".csv .tsv .jsonl .json .parquet .xlsx", file=path)
    if len(df) == 0:
        raise InputError("the file has a header but no data rows", file=path)
    df = apply_column_map(df, column_map, path)
    return df


def _header(path: str, sep: str) -> list[str]:
    head = read_head(path, 1 << 16)
    check_text_encoding_prefix(path, head)
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            names = next(csv.reader(fh, delimiter=sep), None)
    except UnicodeDecodeError:
        raise_bad_utf8(path)
        raise
    if not names or all(not n.strip() for n in names):
        raise InputError("the file has no header line", file=path, row=None)
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"duplicate column name(s) {dup} in the header", file=path, column=dup[0])
    return names


def _read_delimited(path: str, sep: str, select: Callable[[list[str]], list[str]]) -> pd.DataFrame:
    import pyarrow.csv as pacsv

    names = _header(path, sep)
    include = select(names)
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, include_columns=include,
                strings_can_be_null=True, null_values=[""], quoted_strings_can_be_null=True),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
        msg = str(e)
        if "utf8" in msg.lower() or "utf-8" in msg.lower():
            raise_bad_utf8(path)
        _find_bad_row(path, sep, len(names))
        raise InputError(f"cannot parse the file as {'TSV' if sep == chr(9) else 'CSV'}: {msg.splitlines()[0]}",
                         file=path) from None
    df = table.to_pandas(types_mapper=_types_mapper)
    df["source_row"] = np.arange(1, len(df) + 1, dtype=np.int64)
    return df


def _find_bad_row(path: str, sep: str, n_fields: int) -> None:
    """Walk the file with the csv module to name the first data row with the wrong field count."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh, delimiter=sep)
            next(reader, None)
            for i, row in enumerate(reader, start=1):
                if row and len(row) != n_fields:
                    raise InputError(f"data row {i} has {len(row)} fields, the header has {n_fields}",
                                     file=path, row=i)
    except UnicodeDecodeError:
        raise_bad_utf8(path)
    except csv.Error as e:
        raise InputError(f"malformed {'TSV' if sep == chr(9) else 'CSV'} ({e})", file=path) from None


def _read_parquet(path: str, select: Callable[[list[str]], list[str]], *, dictionary: bool = True,
                  arrow_lists: bool = False, column_map: dict[str, str] | None = None) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        check_parquet_schema(schema, path, column_map)
        cols = select(list(schema.names))
        dict_cols = [n for n in cols if n in DICT_COLUMNS or n == "source_file"] if dictionary else []
        table = pq.read_table(path, columns=cols, read_dictionary=dict_cols)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"not a readable Parquet file ({str(e).splitlines()[0]})", file=path) from None
    # list-of-string columns (options) come back as numpy arrays per row; that is fine downstream
    list_cols = [f.name for f in table.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)]
    lists = {}
    clean = []
    kept = []
    for c in list_cols:  # plain Python lists; null items inside string lists become ""
        col = table.column(c).combine_chunks()
        if pa.types.is_string(col.type.value_type) or pa.types.is_large_string(col.type.value_type):
            if arrow_lists:
                lists[c] = pd.Series(pd.arrays.ArrowExtensionArray(type(col).from_arrays(
                    col.offsets, pc.fill_null(col.values, ""), mask=col.is_null())))
                kept.append(c)
            else:
                lists[c] = _string_lists(col)
            clean.append(c)
        else:
            lists[c] = col.to_pylist()
    if list_cols:
        table = table.drop_columns(list_cols)
    df = table.to_pandas(types_mapper=_types_mapper, split_blocks=True, self_destruct=True)
    for c in list_cols:
        df[c] = lists[c].set_axis(df.index) if c in kept else pd.Series(lists[c], dtype=object, index=df.index)
    df.attrs["clean_list_columns"] = clean
    df.attrs["arrow_list_columns"] = kept
    for c in dict_cols:  # categories as plain str (Arrow-backed categories slow down .astype(str))
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype) and not isinstance(s.cat.categories.dtype, np.dtype):
            df[c] = s.cat.rename_categories(np.asarray(s.cat.categories.astype(object), dtype=object))
    df["source_row"] = np.arange(1, len(df) + 1, dtype=np.int64)
    return df


def _string_lists(col: pa.Array) -> list[list[str] | None]:
    """A list<string> Arrow array -> Python lists (None for a null list, "" for a null item).

    ``to_pylist()`` builds each row through a Python-level scalar (2.8 s for a million rows of option
    lists); converting the flat values once and slicing is ~10x faster."""
    import gc

    n = len(col)
    lengths = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(col)  # respects offsets and slicing; null lists contribute nothing
    values = pc.fill_null(values.cast(pa.string()), "") if len(values) else values
    ends = np.cumsum(lengths).tolist()
    starts = [0] + ends[:-1]
    null_rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)).tolist() if col.null_count else []
    was = gc.isenabled()
    gc.disable()  # a million new lists: the cyclic collector would rescan them over and over
    try:
        vals = values.to_pylist()
        out: list[list[str] | None] = [vals[a:b] for a, b in zip(starts, ends)]
    finally:
        if was:
            gc.enable()
    for i in null_rows:
        out[i] = None
    assert len(out) == n
    return out


def parquet_column_names(path: str) -> list[str]:
    """Column names of a Parquet file from its footer (no data read); unreadable files raise InputError."""
    import pyarrow.parquet as pq

    ensure_nonempty(path)
    try:
        return list(pq.read_schema(path).names)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"not a readable Parquet file ({str(e).splitlines()[0]})", file=path) from None


def read_parquet_runs(path: str, column_map: dict[str, str] | None = None) -> pd.DataFrame:
    """A long run table in Parquet -> DataFrame for 1e8-row files, without per-row Python work.

    Unlike :func:`read_table` this adds no ``source_row`` column: row ``i`` of the result is data row
    ``i + 1`` of the file, which is what the audit frame assumes when the column is absent.

    The file is read one row group at a time (the allocator then reuses each group's buffers: about
    half the time and memory of one ``read_table`` over the whole file). String ID/model/arm/answer
    columns are read dictionary-encoded; when every row group carries the same dictionary (a file
    written from one categorical, the usual case) each group's indices are copied straight into one
    code array of the smallest integer type and the column becomes a pandas Categorical whose codes
    the audit frame uses as they are (no ``unify_dictionaries`` hashing of 1e8 rows, no second copy).
    A column whose dictionary changes between groups stays a chunked Arrow dictionary column (indices
    narrowed to int8 when the dictionary has < 127 values), which the frame also reads without hashing
    the rows. Everything else is zero-copy ``pd.ArrowDtype``. Media columns are skipped."""
    import pyarrow.parquet as pq

    ensure_nonempty(path)
    cmap = column_map or {}
    try:
        schema = pq.read_schema(path)
        check_parquet_schema(schema, path, cmap)
        cols = [n for n in schema.names if n not in MEDIA_COLUMNS]
        dict_cols = [n for n in cols if cmap.get(n, n) in DICT_COLUMNS + ("answer",)
                     and _is_string_like(schema.field(n).type)]
        pf = pq.ParquetFile(path, read_dictionary=dict_cols)
        n_total = pf.metadata.num_rows
        chunks: dict[str, list[pa.Array]] = {c: [] for c in cols}
        shared: dict[str, _SharedCodes | None] = {c: _SharedCodes(n_total) for c in dict_cols}
        for g in range(pf.num_row_groups):
            rows = pf.metadata.row_group(g).num_rows
            if rows == 0:
                continue
            if rows <= 1 << 24:
                parts = [pf.read_row_group(g, columns=cols)]
            else:  # one huge row group: bounded batches so that the int32 indices never exist all at once
                parts = [pa.Table.from_batches([b]) for b in pf.iter_batches(batch_size=1 << 24, row_groups=[g],
                                                                              columns=cols)]
            for part in parts:
                for c in cols:
                    for ch in part.column(c).chunks:
                        sc = shared.get(c)
                        if sc is not None and sc.add(ch):
                            continue
                        if sc is not None:  # the dictionary changed: back to Arrow chunks for this column
                            chunks[c].extend(sc.as_arrow_chunks())
                            shared[c] = None
                        chunks[c].append(_narrow_dictionary(ch))
            del parts
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"not a readable Parquet file ({str(e).splitlines()[0]})", file=path) from None
    if not cols or n_total == 0:
        raise InputError("the file has a header but no data rows", file=path)
    for c in cols:  # a column narrowed in some row groups only (a dictionary that grew past 126): widen back
        kinds = {ch.type for ch in chunks[c]}
        if len(kinds) > 1:
            wide = next(t for t in kinds if not pa.types.is_int8(t.index_type))
            chunks[c] = [ch if ch.type == wide else pa.DictionaryArray.from_arrays(
                ch.indices.cast(wide.index_type), ch.dictionary) for ch in chunks[c]]
    cats = {}
    for c, sc in shared.items():
        if sc is None:
            continue
        try:
            cats[c] = sc.categorical()
        except ValueError:  # a dictionary with repeated values cannot be categories: keep it in Arrow
            chunks[c] = sc.as_arrow_chunks()
    table = pa.table({c: pa.chunked_array(chunks[c]) for c in cols if c not in cats})
    del chunks
    arrow_df = table.to_pandas(types_mapper=pd.ArrowDtype, self_destruct=True)
    del table
    df = pd.DataFrame({c: pd.Series(cats[c], copy=False) if c in cats else arrow_df[c] for c in cols}, copy=False)
    del arrow_df, cats
    pa.default_memory_pool().release_unused()  # the int32 index buffers freed above go back to the system
    return apply_column_map(df, column_map, path)


class _SharedCodes:
    """Collects the indices of dictionary chunks that share one dictionary into a preallocated code
    array (int8/int16/int32 by dictionary size; -1 for null)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pos = 0
        self.dictionary: pa.Array | None = None
        self.codes: np.ndarray | None = None

    def add(self, ch: pa.Array) -> bool:
        """Append a chunk; False (nothing appended) when its dictionary is not the one seen first."""
        if not pa.types.is_dictionary(ch.type):
            return False
        d = ch.dictionary
        if self.dictionary is None:
            if d.null_count:
                return False
            self.dictionary = d
            k = len(d)
            self.codes = np.empty(self.n, dtype=np.int8 if k < 127 else np.int16 if k < 32767 else np.int32)
        elif not (d is self.dictionary or d.equals(self.dictionary)):
            return False
        assert self.codes is not None
        m = len(ch)
        idx = ch.indices
        self.codes[self.pos:self.pos + m] = idx.fill_null(-1).to_numpy() if idx.null_count else idx.to_numpy()
        self.pos += m
        return True

    def as_arrow_chunks(self) -> list[pa.Array]:
        """What was collected so far, as one Arrow dictionary chunk (for the fallback)."""
        if self.codes is None or self.pos == 0:
            return []
        c = self.codes[:self.pos]
        return [pa.DictionaryArray.from_arrays(pa.array(c, mask=c < 0), self.dictionary)]

    def categorical(self) -> pd.Categorical:
        """The collected column; ValueError when the dictionary repeats a value."""
        assert self.dictionary is not None and self.codes is not None and self.pos == self.n
        cats = pd.Index(np.asarray(self.dictionary.cast(pa.string()).to_numpy(zero_copy_only=False), dtype=object),
                        dtype=object)
        return pd.Categorical.from_codes(self.codes, dtype=pd.CategoricalDtype(cats))


def _narrow_dictionary(arr: pa.Array) -> pa.Array:
    """Dictionary array with int32 indices and a dictionary of < 127 values -> the same with int8 indices."""
    if pa.types.is_dictionary(arr.type) and len(arr.dictionary) < 127 and pa.types.is_int32(arr.type.index_type):
        return pa.DictionaryArray.from_arrays(arr.indices.cast(pa.int8()), arr.dictionary)
    return arr


def _is_string_like(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _read_excel(path: str) -> pd.DataFrame:
    import zipfile

    check_zip_container(path)  # size/ratio limits, defusedxml, duplicate header names: before any parser
    try:
        df = pd.read_excel(path, engine="openpyxl", dtype=object)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise InputError(f"not a readable .xlsx workbook ({type(e).__name__}: {e})", file=path) from None
    df = df.drop(columns=[c for c in df.columns if c in MEDIA_COLUMNS])
    df.columns = [str(c) for c in df.columns]
    df["source_row"] = np.arange(1, len(df) + 1, dtype=np.int64)
    data_cols = [c for c in df.columns if c != "source_row"]
    if data_cols:
        df = df[df[data_cols].notna().any(axis=1)].reset_index(drop=True)
    return df


# ---------------------------------------------------------------------------------------- questions
def _options_cell(v: Any, file: str, row: int, clean: bool = False) -> list[str]:
    if type(v) is list and (clean or all(type(x) is str for x in v)):
        return v
    if isinstance(v, (list, tuple, np.ndarray)):
        return ["" if is_null(x) else str(x) for x in v]
    if is_null(v):
        return []
    s = str(v).strip()
    if s == "":
        return []
    if s.startswith("["):
        try:
            parsed = json.loads(s)
        except ValueError as e:
            raise InputError(f"options is not a JSON list ({e}); write options as a JSON list of strings",
                             file=file, row=row, column="options") from None
        if not isinstance(parsed, list):
            raise InputError("options must be a JSON list", file=file, row=row, column="options")
        return ["" if x is None else str(x) for x in parsed]
    raise InputError("options must be a list of option texts (a JSON list in text files)",
                     file=file, row=row, column="options")


def normalise_questions(df: pd.DataFrame, file: str, *, gold_column: str = "answer") -> pd.DataFrame:
    """Any question table -> the public question format (+ ``source_file``, ``source_row``).

    Recognises the ID column among ``question_id, id, index, qid, doc_id``; options from an
    ``options``/``choices`` column, VLMEvalKit's ``A``..``Z`` columns, or embedded in the question
    text (MMStar ``Options: A: ..``, MathVista ``Choices:\\n(A) ..``; then the stem becomes the
    question); ``l2-category`` spellings; VLMEvalKit circular copies (``index`` >= 1,000,000 or a
    ``g_index`` column) share a ``group_id``.
    """
    n = len(df)
    if n == 0:
        raise InputError("the questions table is empty", file=file)
    rows = df["source_row"].to_numpy() if "source_row" in df.columns else np.arange(1, n + 1)
    idcol = "question_id" if "question_id" in df.columns else pick_id_column(df.columns, df)
    if idcol is None:
        raise InputError(f"no question ID column (looked for question_id, id, index, qid, doc_id); found "
                         f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=question_id",
                         file=file, column="question_id")
    if gold_column not in df.columns:
        alt = first_present(df.columns, ("gold", "gt_answer", "ground_truth", "label", "target"))
        if alt is None:
            raise InputError(f"missing column {gold_column!r} (the gold answer); found "
                             f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=answer",
                             file=file, column=gold_column)
        gold_column = alt
    qid = to_str_series(df[idcol], strip=True)
    question = to_str_series(df["question"]) if "question" in df.columns else pd.Series([None] * n, dtype=object)
    # options
    opt_col = first_present(df.columns, ("options", "choices"))
    options: list[list[str]] | None = None
    arrow_options: pd.Series | None = None  # Arrow list<string> column kept as it is (see read_table)
    if opt_col is not None:
        clean = opt_col in df.attrs.get("clean_list_columns", ())
        if opt_col in df.attrs.get("arrow_list_columns", ()):
            lengths = pc.list_value_length(pa.array(df[opt_col].array))
            if n and (pc.max(lengths).as_py() or 0) > 0:
                arrow_options = df[opt_col].reset_index(drop=True)  # (null rows read as [] by the frame)
        if arrow_options is None:
            cells = df[opt_col].tolist()
            if clean:  # lists of str from _read_parquet: nothing to check per row
                options = [[] if v is None else v for v in cells]
            else:
                options = [[] if v is None else _options_cell(v, file, int(rows[i])) for i, v in enumerate(cells)]
    if arrow_options is None and (options is None or not any(options)):
        letter_opts = options_from_letter_columns(df)
        if letter_opts is not None:
            options = letter_opts
    qtext = question.tolist()
    if arrow_options is None and (options is None or not any(options)):
        options = [[] for _ in range(n)]
        for i, t in enumerate(qtext):
            stem, opts = split_embedded_options(t) if t is not None else (t, [])
            if opts:
                options[i] = opts
                qtext[i] = stem
    gold = to_str_series(df[gold_column], strip=True).tolist()
    l2 = first_present(df.columns, L2_ALIASES)
    group = None
    if "group_id" in df.columns:
        group = to_str_series(df["group_id"]).tolist()
    elif "g_index" in df.columns:
        group = to_str_series(df["g_index"]).tolist()
    elif idcol == "index":
        num = pd.to_numeric(df["index"], errors="coerce")
        if num.notna().all() and (num >= 1_000_000).any():
            group = [str(int(v) % 1_000_000) for v in num.tolist()]
    def obj(values) -> pd.Series:
        return pd.Series(list(values), dtype=object)

    def text(col: str | None) -> pd.Series:
        return obj(to_str_series(df[col]).tolist()) if col is not None and col in df.columns else obj([None] * n)

    out = pd.DataFrame({
        "question_id": obj(qid.tolist()),
        "question": obj(qtext),
        "options": arrow_options if arrow_options is not None else obj(options),
        "answer": obj(gold),
        "answer_type": text("answer_type"),
        "category": text("category"),
        "l2_category": text(l2),
        "group_id": obj(group) if group is not None else obj([None] * n),
        "hint": text("hint"),
    })
    out["source_file"] = file
    out["source_row"] = np.asarray(rows, dtype=np.int64)
    return out


# ---------------------------------------------------------------------------------------- runs
def bool_to_int8(s: pd.Series) -> pd.Series:
    """Nullable boolean -> nullable Int8 (the frame converts numeric columns without Python loops)."""
    if isinstance(s.dtype, pd.BooleanDtype) or (isinstance(s.dtype, pd.ArrowDtype)
                                                and pa.types.is_boolean(s.dtype.pyarrow_dtype)):
        return s.astype("Int8")
    return s


def as_arrow_str(s: pd.Series) -> pd.Series:
    """Any column -> Arrow string column (null for missing)."""
    if isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_string(s.dtype.pyarrow_dtype):
        return s
    return pd.Series(pd.array(to_str_series(s).tolist(), dtype=ARROW_STR), index=s.index)


def constant_categorical(value: str, n: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[value])


def _is_arrow_dictionary(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_dictionary(s.dtype.pyarrow_dtype)


def _is_arrow_bool(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_boolean(s.dtype.pyarrow_dtype)


def _null_strings(n: int, index: pd.Index) -> pd.Series:
    """An all-null Arrow string column of length ``n`` (built in C, not from a list of Nones)."""
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.nulls(n, pa.string())), index=index)


def generic_runs(df: pd.DataFrame, file: str, *, arm: str = "full", model: str | None = None,
                 with_questions: bool = True, implicit_rows: bool = False) -> ReadResult:
    """A long run table (``question_id, model, arm, prediction, answer, hit, hit_exact``).

    ``model`` (or the file stem, when the table has no ``model`` column) names the model; an ``arm``
    column in the file wins over the ``arm`` argument. ``answer`` here is the model's extracted
    answer; a ``gold`` column, when present, is kept for :func:`questions` derivation only.

    ``implicit_rows=True`` with a ``df`` that has no ``source_row`` column (from
    :func:`read_parquet_runs`) leaves out ``source_file``/``source_row``: row ``i`` is data row
    ``i + 1`` of ``file``, and :func:`audit_hub.ingest` adds the columns only when it has to merge
    several files (two int64/category columns of 1e8 rows are 0.9 GB). Arrow dictionary and Arrow
    boolean columns are passed through unchanged; the frame reads them without a copy.
    """
    n = len(df)
    implicit = implicit_rows and "source_row" not in df.columns
    if implicit and with_questions and "gold" in df.columns and "question" in df.columns:
        df = df.assign(source_row=np.arange(1, n + 1, dtype=np.int64))  # the questions need real rows
        implicit = False
    idcol = "question_id" if "question_id" in df.columns else pick_id_column(df.columns)
    if idcol is None:
        raise InputError(f"no question ID column (looked for question_id, id, index, qid, doc_id); found "
                         f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=question_id",
                         file=file, column="question_id")
    out: dict[str, Any] = {}  # columns; one DataFrame(copy=False) at the end (setitem would copy each)
    q = df[idcol]
    out["question_id"] = q if isinstance(q.dtype, pd.CategoricalDtype) or _is_arrow_dictionary(q) \
        else to_str_series(q, strip=True)
    if model is not None:
        out["model"] = constant_categorical(model, n)
    elif "model" in df.columns:
        m = df["model"]
        out["model"] = m if isinstance(m.dtype, pd.CategoricalDtype) or _is_arrow_dictionary(m) \
            else to_str_series(m, strip=True)
    else:
        out["model"] = constant_categorical(stem_of(file), n)
    if "arm" in df.columns:
        out["arm"] = df["arm"]
    else:
        out["arm"] = constant_categorical(arm, n)

    def text(col: str | None) -> pd.Series:
        if col is None:
            return _null_strings(n, df.index)
        s = df[col]
        if _is_arrow_dictionary(s) and _is_string_like(s.dtype.pyarrow_dtype):
            return s  # dictionary of strings: the frame decodes it in C (and reuses its codes for answers)
        if implicit and isinstance(s.dtype, pd.CategoricalDtype) \
                and pd.api.types.infer_dtype(s.cat.categories, skipna=False) == "string":
            return s  # (read_parquet_runs) likewise: the frame converts a categorical of strings in C
        return as_arrow_str(s)

    def flag(col: str) -> pd.Series:
        s = df[col]
        return s if _is_arrow_bool(s) else bool_to_int8(s)

    pcol = first_present(df.columns, PREDICTION_ALIASES)
    if pcol is not None or not implicit:  # (fast path: an absent column costs nothing; the frame fills nulls)
        out["prediction"] = text(pcol)
    out["answer"] = text(first_present(df.columns, ("answer", "extracted", "extracted_answer")))
    hcol = first_present(df.columns, HIT_ALIASES)
    if hcol:
        out["hit"] = flag(hcol)
    if "hit_exact" in df.columns:
        out["hit_exact"] = flag("hit_exact")
    if not implicit:
        out["source_file"] = constant_categorical(file, n)
        out["source_row"] = df["source_row"].to_numpy() if "source_row" in df.columns else np.arange(1, n + 1)
    runs = pd.DataFrame({k: pd.Series(v, index=df.index, copy=False) if not isinstance(v, pd.Series) else v
                         for k, v in out.items()}, copy=False).reset_index(drop=True)
    questions = None
    if with_questions and "gold" in df.columns and "question" in df.columns:
        qdf = df.drop(columns=[c for c in ("answer", "prediction") if c in df.columns])
        questions = normalise_questions(qdf.drop_duplicates(subset=[idcol]), file, gold_column="gold")
    return ReadResult(path=file, kind="generic", runs=runs, questions=questions, rows=n)


def is_generic_run_table(columns) -> bool:
    cols = set(columns)
    has_id = any(c in cols for c in ("question_id", "id", "qid", "doc_id", "index"))
    return has_id and (bool(cols & set(PREDICTION_ALIASES)) or bool(cols & set(HIT_ALIASES))
                       or "hit_exact" in cols)


__all__ = ["read_table", "read_parquet_runs", "parquet_column_names", "normalise_questions", "generic_runs", "is_generic_run_table", "as_arrow_str",
           "bool_to_int8", "constant_categorical", "cell_to_str", "LETTERS"]
