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
               keep: Callable[[list[str]], list[str] | None] | None = None) -> pd.DataFrame:
    """Read a CSV/TSV/JSONL/JSON/Parquet/XLSX table; adds ``source_row``; skips media columns.

    ``keep`` (CSV/TSV/Parquet only) receives the header (after ``column_map``) and returns the
    column names to read, or None for all: readers that need a few columns of a wide sheet skip
    parsing the rest."""

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
        df = _read_delimited(path, "\t" if ext == ".tsv" else ",", select)
    elif ext == ".parquet":
        df = _read_parquet(path, select)
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


def _read_parquet(path: str, select: Callable[[list[str]], list[str]]) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        cols = select(list(schema.names))
        dict_cols = [n for n in cols if n in DICT_COLUMNS or n == "source_file"]
        table = pq.read_table(path, columns=cols, read_dictionary=dict_cols)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"not a readable Parquet file ({str(e).splitlines()[0]})", file=path) from None
    # list-of-string columns (options) come back as numpy arrays per row; that is fine downstream
    list_cols = [f.name for f in table.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)]
    lists = {}
    clean = []
    for c in list_cols:  # plain Python lists, built in C; null items inside string lists become ""
        col = table.column(c).combine_chunks()
        if pa.types.is_string(col.type.value_type) or pa.types.is_large_string(col.type.value_type):
            col = type(col).from_arrays(col.offsets, pc.fill_null(col.values, ""), mask=col.is_null())
            clean.append(c)
        lists[c] = col.to_pylist()
    if list_cols:
        table = table.drop_columns(list_cols)
    df = table.to_pandas(types_mapper=_types_mapper, split_blocks=True, self_destruct=True)
    for c in list_cols:
        df[c] = pd.Series(lists[c], dtype=object, index=df.index)
    df.attrs["clean_list_columns"] = clean
    for c in dict_cols:  # categories as plain str (Arrow-backed categories slow down .astype(str))
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype) and not isinstance(s.cat.categories.dtype, np.dtype):
            df[c] = s.cat.rename_categories(np.asarray(s.cat.categories.astype(object), dtype=object))
    df["source_row"] = np.arange(1, len(df) + 1, dtype=np.int64)
    return df


def _read_excel(path: str) -> pd.DataFrame:
    import zipfile

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
    if opt_col is not None:
        clean = opt_col in df.attrs.get("clean_list_columns", ())
        options = [[] if v is None else _options_cell(v, file, int(rows[i]), clean)
                   for i, v in enumerate(df[opt_col].tolist())]
    if options is None or not any(options):
        letter_opts = options_from_letter_columns(df)
        if letter_opts is not None:
            options = letter_opts
    qtext = question.tolist()
    if options is None or not any(options):
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
        "options": obj(options),
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


def generic_runs(df: pd.DataFrame, file: str, *, arm: str = "full", model: str | None = None,
                 with_questions: bool = True) -> ReadResult:
    """A long run table (``question_id, model, arm, prediction, answer, hit, hit_exact``).

    ``model`` (or the file stem, when the table has no ``model`` column) names the model; an ``arm``
    column in the file wins over the ``arm`` argument. ``answer`` here is the model's extracted
    answer; a ``gold`` column, when present, is kept for :func:`questions` derivation only.
    """
    n = len(df)
    idcol = "question_id" if "question_id" in df.columns else pick_id_column(df.columns)
    if idcol is None:
        raise InputError(f"no question ID column (looked for question_id, id, index, qid, doc_id); found "
                         f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=question_id",
                         file=file, column="question_id")
    out = pd.DataFrame(index=df.index)
    q = df[idcol]
    out["question_id"] = q if isinstance(q.dtype, pd.CategoricalDtype) else to_str_series(q, strip=True)
    if model is not None:
        out["model"] = constant_categorical(model, n)
    elif "model" in df.columns:
        m = df["model"]
        out["model"] = m if isinstance(m.dtype, pd.CategoricalDtype) else to_str_series(m, strip=True)
    else:
        out["model"] = constant_categorical(stem_of(file), n)
    if "arm" in df.columns:
        out["arm"] = df["arm"]
    else:
        out["arm"] = constant_categorical(arm, n)
    pcol = first_present(df.columns, PREDICTION_ALIASES)
    out["prediction"] = as_arrow_str(df[pcol]) if pcol else pd.Series(pd.array([None] * n, dtype=ARROW_STR),
                                                                       index=df.index)
    acol = first_present(df.columns, ("answer", "extracted", "extracted_answer"))
    out["answer"] = as_arrow_str(df[acol]) if acol else pd.Series(pd.array([None] * n, dtype=ARROW_STR),
                                                                   index=df.index)
    hcol = first_present(df.columns, HIT_ALIASES)
    if hcol:
        out["hit"] = bool_to_int8(df[hcol])
    if "hit_exact" in df.columns:
        out["hit_exact"] = bool_to_int8(df["hit_exact"])
    out["source_file"] = constant_categorical(file, n)
    out["source_row"] = df["source_row"].to_numpy() if "source_row" in df.columns else np.arange(1, n + 1)
    questions = None
    if with_questions and "gold" in df.columns and "question" in df.columns:
        qdf = df.drop(columns=[c for c in ("answer", "prediction") if c in df.columns])
        questions = normalise_questions(qdf.drop_duplicates(subset=[idcol]), file, gold_column="gold")
    return ReadResult(path=file, kind="generic", runs=out.reset_index(drop=True), questions=questions, rows=n)


def is_generic_run_table(columns) -> bool:
    cols = set(columns)
    has_id = any(c in cols for c in ("question_id", "id", "qid", "doc_id", "index"))
    return has_id and (bool(cols & set(PREDICTION_ALIASES)) or bool(cols & set(HIT_ALIASES))
                       or "hit_exact" in cols)


__all__ = ["read_table", "normalise_questions", "generic_runs", "is_generic_run_table", "as_arrow_str",
           "bool_to_int8", "constant_categorical", "cell_to_str", "LETTERS"]
