"""File I/O shared by every reader: table files (CSV, TSV, JSON lines, JSON, Parquet, Excel) into
DataFrames, JSON lines, UTF-8 checks, and the refusal to unpickle.

:func:`read_table` reads any of those formats into a DataFrame with a ``source_row`` column
(1-based data row; the line number for JSON lines) and never loads image columns. CSV/TSV go
through ``pyarrow.csv`` with every column read as text (so ``007`` stays ``007`` and quoted
multi-line cells work); Parquet through ``pyarrow.parquet`` with ID/model/arm columns
dictionary-encoded so they arrive as pandas categoricals (the fast path of the audit frame).

Long run tables take a faster road: :func:`read_parquet_runs` (Parquet) and :func:`read_text_runs`
(JSON lines, CSV/TSV, through pyarrow's streaming readers) read each string column straight into one
integer code space (:class:`SharedDictionary`, the one unifier of per-piece dictionaries), so the read
costs about the same whatever encoding the writer chose and no row becomes a Python string.
"""

from __future__ import annotations

import codecs
import csv
import os
import sys
from collections.abc import Callable
from contextlib import closing

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..columns import ARROW_STR, small_int
from ..errors import InputError
from .cells import ID_CANDIDATES, MEDIA_COLUMNS, PICKLE_EXTENSIONS, apply_column_map, ext_of
from .input_guard import (
    check_parquet_schema,
    check_text_head,
    check_zip_container,
    json_loads,
)

#: a table file with column names and no row (a run that produced nothing): refused when named, skipped with
#: this reason when found in a folder, as an empty file is
NO_DATA_ROWS = "the file has a header but no data rows"

DICT_COLUMNS = ("question_id", "model", "arm", "index", "id", "qid", "doc_id")


def refuse_pickle(path: str) -> None:
    """Raise the one error every reader gives for a pickle file."""
    raise InputError(
        "refusing to read a pickle file: unpickling can execute arbitrary code. VLMEvalKit writes "
        ".pkl files only as caches; export the results to .xlsx, .tsv, .csv or .parquet "
        "(e.g. pandas.read_pickle(...).to_excel(...) on a machine you trust) and pass that file",
        file=path)


def check_text_encoding_prefix(path: str, head: bytes) -> None:
    """Reject UTF-16/32 files early with a message that says what to do."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or (len(head) >= 4 and head[1:2] == b"\x00"
                                                                      and head[3:4] == b"\x00"):
        raise InputError("the file is UTF-16 encoded; save it as UTF-8 and try again", file=path, row=None)


def raise_bad_utf8(path: str) -> None:
    """Stream the file through a UTF-8 decoder and raise naming the first bad byte (offset and line)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    line = 1
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            try:
                dec.decode(chunk, final=False)
            except UnicodeDecodeError as e:
                bad = offset + e.start
                line += chunk[: e.start].count(b"\n")
                raise InputError(
                    f"not valid UTF-8 text: byte 0x{chunk[e.start]:02x} at byte offset {bad} (line {line}); "
                    "the file seems to use another encoding (e.g. Latin-1 / cp1252); save it as UTF-8",
                    file=path, row=None) from None
            line += chunk.count(b"\n")
            offset += len(chunk)
        try:
            dec.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InputError(f"not valid UTF-8 text: the file ends inside a multi-byte character (byte offset {offset})",
                             file=path) from None


def read_head(path: str, n: int = 4096) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


#: the largest sidecar JSON (a blind folder's run_config.json, manifest.json) read for what it records
SIDECAR_MAX_BYTES = 16 << 20


def sidecar_json(path: str) -> dict | None:
    """A small JSON object written beside run files by another command (``run_config.json``, ``manifest.json`` of a
    ``benchaudit blind`` folder), read for what it records: None when it is missing, a link, not a regular file,
    over :data:`SIDECAR_MAX_BYTES`, unreadable, not JSON or not an object (nothing is followed or read unbounded)."""
    import json

    try:
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > SIDECAR_MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def json_head(path: str, n: int = 4096) -> bytes:
    """The first ``n`` bytes of a JSON file without a UTF-8 BOM and leading whitespace (to recognise its kind)."""
    return read_head(path, n).lstrip(b"\xef\xbb\xbf").lstrip()


def ensure_nonempty(path: str) -> None:
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise InputError(f"cannot read the file ({e.strerror})", file=path) from None
    if size == 0:
        raise InputError("the file is empty (0 bytes)", file=path)


def iter_json_lines(path: str):
    """Yield ``(line_number, record)`` for each non-blank line; bad JSON/encoding names the line."""
    with open(path, "rb") as fh:
        offset = 0
        for lineno, raw in enumerate(fh, start=1):
            start = offset
            offset += len(raw)
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[3:]
                start += 3
            if lineno == 1:
                check_text_encoding_prefix(path, raw[:8])
                check_text_head(path, raw[:4096])
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"not valid UTF-8 text at byte offset {start + e.start} (line {lineno}); "
                                 "save the file as UTF-8", file=path, row=lineno) from None
            try:
                rec = json_loads(text, path, row=lineno, where=f"line {lineno}: ")
            except InputError as e:
                if raw.endswith(b"\n"):
                    raise
                raise InputError(e.detail + "; it is the last line and has no newline at its end: the file was cut "
                                 "short (a run that stopped while writing it?); delete the partial line or rerun",
                                 file=e.file, row=e.row, column=e.column) from None
            if not isinstance(rec, dict):
                raise InputError(f"line {lineno} is a JSON {type(rec).__name__}, expected an object",
                                 file=path, row=lineno)
            yield lineno, rec


def peek_json_line(path: str) -> dict | None:
    """First record of a JSON-lines file (None when it has none)."""
    for _, rec in iter_json_lines(path):
        return rec
    return None


def load_json_document(path: str, raw: bytes | None = None):
    """A whole ``.json`` document (or ``raw``, its bytes, e.g. a member of an archive) parsed with the
    guards every JSON input passes: UTF-8 (a BOM dropped), the text-head checks, duplicate keys refused."""
    if raw is None:
        ensure_nonempty(path)
        raw = open(path, "rb").read()
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[3:]
    check_text_encoding_prefix(path, raw[:8])
    check_text_head(path, raw[:4096])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(f"not valid UTF-8 text at byte offset {e.start} (line {line}); save the file as UTF-8",
                         file=path) from None
    if not text.strip():
        raise InputError("the file is empty", file=path)
    return json_loads(text, path)


def load_json_records(path: str) -> tuple[list[dict], list[int]]:
    """A ``.json`` file holding a list of objects, ``{"data": [...]}``, or ``{id: {...}}`` -> records."""
    obj = load_json_document(path)
    return json_records(obj, path)


def json_records(obj, path: str) -> tuple[list[dict], list[int]]:
    """A parsed JSON document -> records (see :func:`load_json_records`)."""
    if isinstance(obj, dict) and isinstance(obj.get("data"), list):
        obj = obj["data"]
    if isinstance(obj, list):
        bad = [i for i, r in enumerate(obj) if not isinstance(r, dict)]
        if bad:
            raise InputError(f"item {bad[0] + 1} of the JSON list is not an object", file=path, row=bad[0] + 1)
        return obj, list(range(1, len(obj) + 1))
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        recs = []
        for k, v in obj.items():
            r = dict(v)
            if not any(c in r for c in ID_CANDIDATES):
                r["question_id"] = k
            recs.append(r)
        return recs, list(range(1, len(recs) + 1))
    raise InputError("JSON file is not a table (expected a list of objects or an object of objects)", file=path)


def _types_mapper(t: pa.DataType):
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return ARROW_STR
    if pa.types.is_boolean(t):
        return pd.BooleanDtype()
    return None


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
        raise InputError(NO_DATA_ROWS, file=path)
    df = apply_column_map(df, column_map, path)
    return df


def delimited_column_names(path: str, sep: str) -> list[str]:
    """The header of a CSV/TSV file (the checks of :func:`read_table`: UTF-16, duplicates, no header)."""
    check_text_head(path, read_head(path))
    return _header(path, sep)


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

    def parse(block_size: int):
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=block_size),
            parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, include_columns=include,
                strings_can_be_null=True, null_values=[""], quoted_strings_can_be_null=True),
        )

    try:
        try:
            table = parse(1 << 24)
        except pa.ArrowInvalid as e:
            if "straddl" not in str(e).lower():
                raise
            # a row longer than the 16 MB block (one huge cell): once more with the file as one block
            table = parse(int(min(os.path.getsize(path) + 1, (1 << 31) - 1)))
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
    """Walk the file with the csv module to name the first data row with the wrong field count (or the row the
    csv module cannot read)."""
    i = 0
    old_limit = csv.field_size_limit()
    try:
        csv.field_size_limit(min(sys.maxsize, (1 << 31) - 1))  # a huge cell is a row to name, not a csv.Error
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
        raise InputError(f"malformed {'TSV' if sep == chr(9) else 'CSV'} ({e})", file=path, row=i + 1) from None
    finally:
        csv.field_size_limit(old_limit)


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


#: Run-table columns read dictionary-encoded (into one shared code space per column, see
#: :class:`SharedDictionary`) when they hold strings: IDs, model, arm, file, and the low-cardinality
#: texts the frame reads (predictions and extracted answers are mostly a handful of letters/values), and
#: correctness flags given as text (CSV's "true"/"1": a few values, converted once each).
RUN_DICT_COLUMNS = DICT_COLUMNS + ("source_file", "arm", "answer", "extracted", "extracted_answer", "prediction",
                                   "response", "output", "pred", "model_output",
                                   "hit", "correct", "is_correct", "hit_exact")  # (flags as text, in CSV)
#: Of those, the free texts: when their distinct values stop being few (more than half the rows seen,
#: past 65,536), the column is kept as plain Arrow strings instead (a dictionary would only cost time).
RUN_TEXT_COLUMNS = ("answer", "extracted", "extracted_answer", "prediction", "response", "output", "pred",
                    "model_output")


class SharedDictionary:
    """One code space for a string column that arrives in pieces, each with its own dictionary
    (Parquet row groups, JSON/CSV batches): the one owner of that unification.

    Each piece's dictionary (small next to its rows, or at most as long) is looked up in the growing
    global dictionary with Arrow's hash lookup (``pyarrow.compute.index_in``, in C++: about ten times
    pandas' object-string hashing), never the rows; values not seen before get the next codes, in the
    order they first appear in the piece's dictionary (null entries map to -1, repeated entries to one
    code). The piece's indices are then written as ``remap[indices]`` into one code array of the
    smallest signed integer type, widened when the dictionary grows past int8/int16 (-1 is null). A
    piece whose dictionary equals the previous one reuses its remap (pandas categoricals and batch
    writers repeat one dictionary in every row group) and, when that remap is the identity, its
    indices are copied as they are. ``n`` rows known in advance: one preallocated array; otherwise
    pieces are kept and joined at the end. ``text``: a free-text column (see :meth:`too_many`)."""

    def __init__(self, n: int | None = None, *, text: bool = False) -> None:
        self.n = n
        self.text = text
        self.pos = 0
        self.size = 0
        self._values = pa.array([], type=pa.string())
        self._prev: pa.Array | None = None
        self._prev_remap: np.ndarray | None = None
        self._identity = False
        self.dtype: type = np.int8
        self.codes: np.ndarray | None = np.empty(n, dtype=np.int8) if n is not None else None
        self._pieces: list[np.ndarray] = []

    # -- the dictionary
    def remap(self, dictionary: pa.Array) -> np.ndarray:
        """Global code (int64; -1 for a null entry) of each entry of a piece's ``dictionary``; new values
        are added in the order they first appear there."""
        import pyarrow.compute as pc

        if self._prev is not None and (dictionary is self._prev or dictionary.equals(self._prev)):
            assert self._prev_remap is not None
            return self._prev_remap
        d = dictionary.cast(pa.string()) if not pa.types.is_string(dictionary.type) else dictionary
        d.validate(full=True)  # UTF-8 (a JSON/CSV reader may pass bad bytes on); ArrowInvalid otherwise
        runs = self._runs(d) if self.size and not d.null_count else None
        if runs is not None:
            out = runs
        elif self.size:
            out = pc.fill_null(pc.index_in(d, value_set=self._values), -1).to_numpy().astype(np.int64)
        else:
            out = np.full(len(d), -1, np.int64)
        miss = out < 0
        if d.null_count:
            miss &= d.is_valid().to_numpy(zero_copy_only=False)
        if miss.any():
            enc = (d if miss.all() else d.filter(pa.array(miss))).dictionary_encode()  # one hash pass, first-appearance order
            new = enc.dictionary  # (repeated entries once)
            out[miss] = enc.indices.to_numpy().astype(np.int64) + self.size
            self._values = pa.concat_arrays([self._values, new])
            self.size += len(new)
        self._prev, self._prev_remap = dictionary, out
        self._identity = not d.null_count and bool((out == np.arange(len(out))).all())
        return out

    def _runs(self, d: pa.Array, max_runs: int = 8) -> np.ndarray | None:
        """The global codes of a null-free piece dictionary ``d`` made of at most ``max_runs`` runs of
        consecutive global values (a piece of a file sorted the same way in every model/arm block:
        q300000..q999999, q0..q239999), found without hashing the whole global dictionary (which
        ``index_in`` does for every piece); None when ``d`` is not so, or holds a new value."""
        import pyarrow.compute as pc

        parts = []
        pos = 0
        while pos < len(d):
            if len(parts) == max_runs:
                return None
            k = pc.index(self._values, d[pos]).as_py()
            if k < 0:
                return None
            m = min(len(d) - pos, self.size - k)
            same = pc.equal(d.slice(pos, m), self._values.slice(k, m)).to_numpy(zero_copy_only=False)
            stop = int(np.argmin(same)) if not same.all() else m
            if stop == 0:
                return None
            parts.append(np.arange(k, k + stop, dtype=np.int64))
            pos += stop
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def categories(self) -> pd.Index:
        """The global dictionary, in code order, as an object Index."""
        return pd.Index(np.asarray(self._values.to_numpy(zero_copy_only=False), dtype=object), dtype=object)

    # -- the codes
    def _widen(self) -> None:
        want = small_int(self.size)
        if np.dtype(want).itemsize > np.dtype(self.dtype).itemsize:
            self.dtype = want
            if self.codes is not None:  # (only the rows written so far are copied)
                wide = np.empty(len(self.codes), dtype=want)
                wide[:self.pos] = self.codes[:self.pos]
                self.codes = wide

    def add(self, arr: pa.Array) -> None:
        """Append a piece: a dictionary array, or plain strings (dictionary-encoded here, per piece)."""
        if not pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_encode()
        m = len(arr)
        remap = self.remap(arr.dictionary)
        self._widen()
        idx = arr.indices
        if self._identity and not idx.null_count:
            vals = idx.to_numpy()
        else:
            table = np.append(remap, -1).astype(self.dtype)  # (the last slot: a null index)
            vals = table[idx.fill_null(len(remap)).to_numpy()] if idx.null_count else table[idx.to_numpy()]
        if self.codes is not None:
            self.codes[self.pos:self.pos + m] = vals
        else:
            self._pieces.append(np.asarray(vals, dtype=self.dtype))
        self.pos += m

    def too_many(self) -> bool:
        """A free-text column whose values are not few: better kept as plain strings."""
        return self.text and self.size > max(1 << 16, self.pos // 2)

    def code_array(self) -> np.ndarray:
        if self.codes is not None:
            return self.codes[:self.pos]
        if not self._pieces:
            return np.zeros(0, dtype=self.dtype)
        return np.concatenate([p.astype(self.dtype, copy=False) for p in self._pieces])

    def categorical(self) -> pd.Categorical:
        """The column so far as a pandas Categorical (object categories in code order)."""
        return pd.Categorical.from_codes(self.code_array(), dtype=pd.CategoricalDtype(self.categories()),
                                         validate=False)

    def as_strings(self) -> pa.Array:
        """The column so far as plain Arrow strings (for a column given up as :meth:`too_many`)."""
        codes = self.code_array()
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), self._values).cast(pa.string())


class _Collector:
    """The columns of a run table read in pieces: string columns in :data:`RUN_DICT_COLUMNS` through a
    :class:`SharedDictionary` each (a free text that turns out to have many values goes back to plain
    strings), every other column as its Arrow chunks."""

    def __init__(self, names: list[str], n: int | None, column_map: dict[str, str] | None) -> None:
        cmap = column_map or {}
        self.names = names
        self.n = n
        self.shared: dict[str, SharedDictionary] = {}
        self.dict_names = {c for c in names if cmap.get(c, c) in RUN_DICT_COLUMNS}
        self.text_names = {c for c in names if cmap.get(c, c) in RUN_TEXT_COLUMNS}
        self.chunks: dict[str, list[pa.Array]] = {c: [] for c in names}

    @classmethod
    def for_schema(cls, schema: pa.Schema, column_map: dict[str, str] | None) -> _Collector | None:
        """A collector of unknown length for a text table's columns (media columns left out); None when
        a name repeats (the exact path names the problem)."""
        names = [f.name for f in schema if f.name not in MEDIA_COLUMNS]
        return cls(names, None, column_map) if len(set(names)) == len(names) else None

    def add_columns(self, cols: list[pa.Array]) -> None:
        """One piece of every column, in :attr:`names` order."""
        for c, arr in zip(self.names, cols):
            self.add(c, arr)

    def add(self, c: str, arr: pa.Array) -> None:
        if c in self.dict_names and is_string_like(arr.type) and not self.chunks[c]:
            sd = self.shared.get(c)
            if sd is None:
                sd = self.shared[c] = SharedDictionary(self.n, text=c in self.text_names)
            sd.add(arr)
            if sd.too_many():
                self.chunks[c].append(sd.as_strings())
                del self.shared[c]
            return
        sd = self.shared.pop(c, None)
        if sd is not None:  # (a piece of another type: the column goes back to Arrow chunks)
            self.chunks[c].append(sd.as_strings())
        if pa.types.is_dictionary(arr.type) and c in self.chunks and self.chunks[c] \
                and not pa.types.is_dictionary(self.chunks[c][0].type):
            arr = arr.cast(arr.type.value_type)
        self.chunks[c].append(arr)

    def frame(self, path: str, column_map: dict[str, str] | None) -> pd.DataFrame:
        cats = {c: self.shared[c].categorical() for c in self.names if c in self.shared}
        self.shared.clear()
        plain = [c for c in self.names if c not in cats]
        arrow_df = None
        if plain:
            table = pa.table({c: _one_type(self.chunks[c]) for c in plain})
            self.chunks.clear()
            arrow_df = table.to_pandas(types_mapper=pd.ArrowDtype, self_destruct=True)
            del table
        df = pd.DataFrame({c: pd.Series(cats[c], copy=False) if c in cats else arrow_df[c] for c in self.names},
                          copy=False)
        del arrow_df, cats
        pa.default_memory_pool().release_unused()  # the int32 index buffers freed above go back to the system
        return apply_column_map(df, column_map, path)


def _one_type(chunks: list[pa.Array]) -> pa.ChunkedArray:
    """Chunks of one column as one chunked array (dictionary chunks with different index types, or a
    mix of dictionary and plain strings, are cast to plain values)."""
    kinds = {ch.type for ch in chunks}
    if len(kinds) > 1:
        chunks = [ch.cast(ch.type.value_type) if pa.types.is_dictionary(ch.type) else ch for ch in chunks]
        kinds = {ch.type for ch in chunks}
        if len(kinds) > 1:  # e.g. string and large_string pieces
            return pa.chunked_array([ch.cast(pa.string()) for ch in chunks])
    return pa.chunked_array(chunks, type=chunks[0].type) if chunks else pa.chunked_array([], pa.null())


class _RepeatedDictionaries:
    """The row groups' dictionary columns whose dictionary page repeats the reference group's byte for byte
    (a pandas categorical, a batch writer): their indices are decoded from the pages
    (:mod:`.parquet_pages`) and paired with the reference group's dictionary as pyarrow decoded it, so
    pyarrow does not hash the same dictionary again in every group (0.3 s per 1M-entry dictionary). A group
    whose dictionary differs, or that the page decoder does not handle, is read by pyarrow as before.

    Everything read from the footer (each chunk's span, codec, value count and sizes) is taken once, here,
    on the calling thread; the reading threads only read bytes and decode."""

    def __init__(self, pf, path: str, dict_cols: list[str]) -> None:
        from .parquet_pages import chunk_span

        self.path = path
        size = os.path.getsize(path)
        md = pf.metadata
        # column -> per row group (span, codec, values, max uncompressed bytes, rows) | None
        self.chunks: dict[str, list[tuple | None]] = {}
        self.max_def: dict[str, int] = {}
        if pf.num_row_groups > 1:
            leaves = {pf.schema.column(i).path: i for i in range(md.num_columns)}
            for c in dict_cols:
                i = leaves.get(c)
                leaf = pf.schema.column(i) if i is not None else None
                if leaf is None or leaf.max_repetition_level != 0 or leaf.max_definition_level > 1:
                    continue
                per = []
                for g in range(md.num_row_groups):
                    rg = md.row_group(g)
                    m = rg.column(i)
                    span = chunk_span(m, size)
                    per.append(None if span is None else
                               (span, m.compression, int(m.num_values), int(m.total_uncompressed_size), rg.num_rows))
                self.chunks[c] = per
                self.max_def[c] = int(leaf.max_definition_level)
        self.ref: dict[str, tuple[bytes, pa.Array]] = {}

    @staticmethod
    def _read(fh, info: tuple | None) -> bytes | None:
        if info is None:
            return None
        (off, ln) = info[0]
        fh.seek(off)
        return fh.read(ln)

    def learn(self, g: int, part: pa.Table) -> None:
        """The reference dictionary of each column, from the first group read by pyarrow."""
        from .parquet_pages import Unsupported, dictionary_page_bytes

        if self.ref or not self.chunks:
            return
        with open(self.path, "rb") as fh:
            for c, per in self.chunks.items():
                arrs = part.column(c).chunks
                if len(arrs) != 1 or not pa.types.is_dictionary(arrs[0].type):
                    continue
                raw = self._read(fh, per[g])
                try:
                    if raw is not None:
                        self.ref[c] = (dictionary_page_bytes(raw), arrs[0].dictionary)
                except Unsupported:
                    pass
        if not self.ref:
            self.chunks = {}

    def columns(self, g: int) -> dict[str, pa.Array]:
        """{column: its DictionaryArray} for the columns of group ``g`` decoded from the pages."""
        from .parquet_pages import Unsupported, chunk_indices, dictionary_page_bytes

        out: dict[str, pa.Array] = {}
        if not self.ref:
            return out
        with open(self.path, "rb") as fh:
            for c, (ref_bytes, ref_dict) in self.ref.items():
                info = self.chunks[c][g]
                raw = self._read(fh, info)
                try:
                    if raw is None or dictionary_page_bytes(raw) != ref_bytes:
                        continue
                    _, codec, n_values, max_bytes, n_rows = info
                    idx = chunk_indices(raw, len(ref_dict), codec, n_values, self.max_def[c], max_page_bytes=max_bytes)
                except Unsupported:
                    continue
                if len(idx) != n_rows:
                    continue
                ind = pa.array(idx, mask=idx < 0) if (idx < 0).any() else pa.array(idx)
                out[c] = pa.DictionaryArray.from_arrays(ind, ref_dict, safe=False)
        return out


READ_THREADS = 4


def read_parquet_runs(path: str, column_map: dict[str, str] | None = None) -> pd.DataFrame:
    """A long run table in Parquet -> DataFrame for 1e8-row files, without per-row Python work.

    Unlike :func:`read_table` this adds no ``source_row`` column: row ``i`` of the result is data row
    ``i + 1`` of the file, which is what the audit frame assumes when the column is absent.

    Row groups are read on up to :data:`READ_THREADS` threads (pyarrow releases the GIL; at most that
    many groups are in flight, consumed in file order). String ID/model/arm columns and the prediction
    / answer texts are read dictionary-encoded straight from the dictionary pages, and each group's
    dictionary is mapped onto one code space per column (:class:`SharedDictionary`): whatever the
    writer did (one categorical's dictionary repeated in every group, a new dictionary per group, plain
    strings), the column becomes a pandas Categorical with the smallest integer codes. A row group whose
    dictionary page repeats the first group's byte for byte has its indices decoded from its pages
    (:class:`_RepeatedDictionaries`), so pyarrow does not hash the same dictionary again. Everything else
    is zero-copy ``pd.ArrowDtype``. Media columns are skipped."""
    import threading

    import pyarrow.parquet as pq

    ensure_nonempty(path)
    cmap = column_map or {}
    try:
        schema = pq.read_schema(path)
        check_parquet_schema(schema, path, cmap)
        cols = [n for n in schema.names if n not in MEDIA_COLUMNS]
        dict_cols = [n for n in cols if cmap.get(n, n) in RUN_DICT_COLUMNS and is_string_like(schema.field(n).type)]
        pf = pq.ParquetFile(path, read_dictionary=dict_cols)
        n_total = pf.metadata.num_rows
        if not cols or n_total == 0:
            raise InputError(NO_DATA_ROWS, file=path)
        groups = [g for g in range(pf.num_row_groups) if pf.metadata.row_group(g).num_rows > 0]
        col = _Collector(cols, n_total, cmap)
        local = threading.local()
        repeated = _RepeatedDictionaries(pf, path, [c for c in dict_cols if c in cols])

        def read_group(g: int) -> pa.Table:
            f = getattr(local, "pf", None)
            if f is None:
                f = local.pf = pq.ParquetFile(path, read_dictionary=dict_cols)
            fast = repeated.columns(g)
            rest = [c for c in cols if c not in fast]
            part = f.read_row_group(g, columns=rest) if rest else None
            if not fast:
                return part
            return pa.table({c: fast[c] if c in fast else part.column(c) for c in cols})

        def consume(part: pa.Table) -> None:
            for c in cols:
                for ch in part.column(c).chunks:
                    col.add(c, ch)

        big = [g for g in groups if pf.metadata.row_group(g).num_rows > 1 << 24]
        workers = max(1, min(READ_THREADS, os.cpu_count() or 1, len(groups)))
        if big or workers == 1:
            for g in groups:
                if g in big:  # one huge row group: bounded batches so the int32 indices never exist all at once
                    for b in pf.iter_batches(batch_size=1 << 24, row_groups=[g], columns=cols):
                        consume(pa.Table.from_batches([b]))
                else:
                    part = read_group(g)
                    repeated.learn(g, part)
                    consume(part)
        else:
            first = pf.read_row_group(groups[0], columns=cols)  # the reference dictionaries, read by pyarrow
            repeated.learn(groups[0], first)
            consume(first)
            del first
            with closing(_in_order(read_group, groups[1:], workers, workers, "parquet-read")) as parts:
                for part in parts:
                    consume(part)
                    del part
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"not a readable Parquet file ({str(e).splitlines()[0]})", file=path) from None
    return col.frame(path, column_map)


#: A JSON line with this many opening brackets (counted across blocks) goes to the exact Python path
#: (pyarrow's JSON parser crashes on nesting some 10,000+ levels deep; Python's refuses past its recursion
#: limit, with a message).
_MAX_BRACKETS_PER_LINE = 512
_BLOCK = 1 << 24


_KEEP_FOR_SCAN = bytes((0, 10, 91, 123))  # NUL, newline, [ and {: what the pre-scan looks at
_DROP_FOR_SCAN = bytes(b for b in range(256) if b not in _KEEP_FOR_SCAN)


def _bracket_carry(kept: bytes, n_nl: int, carry: int) -> int | None:
    """The bracket check of :func:`_jsonl_fast_ok` on one block reduced to its newline/bracket bytes
    (``kept``, ``n_nl`` newlines): the brackets of the line still open at its end, given ``carry``
    from the blocks before, or None when a line holds :data:`_MAX_BRACKETS_PER_LINE` or more."""
    limit = _MAX_BRACKETS_PER_LINE
    if len(kept) - n_nl + carry >= limit:  # enough brackets here for one line to hold too many
        a = np.frombuffer(kept, dtype=np.uint8)
        ends = np.flatnonzero(a == 10)
        per_line = np.diff(np.concatenate(([-1], ends, [len(a)]))) - 1  # (last: the open line)
        per_line[0] += carry
        if int(per_line.max()) >= limit:
            return None
        return int(per_line[-1])
    return carry + len(kept) if not n_nl else len(kept) - kept.rfind(b"\n") - 1


def _scan_block(block: bytes, carry: int) -> tuple[int, int, int | None] | None:
    """The pre-scan of one block of a JSON-lines file that starts at a line start or continues the previous
    block (``carry``: the open line's bracket count so far). None when it holds a NUL byte or a line with
    too many brackets; else (its newlines, the new carry, its last non-blank line counted from 1 at the
    block's first line, or None for a blank block)."""
    kept = block.translate(None, _DROP_FOR_SCAN)
    if b"\x00" in kept:
        return None
    n_nl = kept.count(b"\n")
    new_carry = _bracket_carry(kept, n_nl, carry)
    if new_carry is None:
        return None
    del kept
    tail = block[-4096:]
    stripped = tail.rstrip()
    if not stripped and len(block) > len(tail):
        stripped = block.rstrip()
        tail = block
    last = n_nl - tail[len(stripped):].count(b"\n") + 1 if stripped else None
    return n_nl, new_carry, last


def _jsonl_fast_ok(path: str) -> int | None:
    """One pass over the bytes of a JSON-lines file: the number of lines up to its last non-blank
    byte, or None when the file must take the exact Python path (a line with many brackets, NUL bytes,
    a UTF-16/32 mark). Each 16 MB block is reduced in C (``bytes.translate``) to its NUL, newline and
    opening-bracket bytes, about two bytes a line, and only that is examined."""
    lines = 0
    last_content_line = 0
    carry: int | None = 0  # brackets of the line still open at the end of the blocks read so far
    with open(path, "rb") as fh:
        first = True
        while True:
            block = fh.read(_BLOCK)
            if not block:
                break
            if first and block.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                return None
            first = False
            scanned = _scan_block(block, carry)
            if scanned is None:
                return None
            n_nl, carry, last = scanned
            if last is not None:
                last_content_line = lines + last
            lines += n_nl
    return last_content_line


def read_text_runs(path: str, column_map: dict[str, str] | None = None) -> pd.DataFrame | None:
    """A long run table in JSON lines or CSV/TSV -> DataFrame like :func:`read_parquet_runs` (no
    ``source_row``: row ``i`` is JSON line / CSV data row ``i + 1``), through pyarrow's streaming
    readers in 16 MB blocks: string ID/model/arm/answer/prediction columns are dictionary-encoded per
    block into one code space per column (:class:`SharedDictionary`), so 1e8 lines never exist as
    Python objects or plain strings. Media columns are dropped per block.

    Returns None whenever the exact Python path must read the file instead: any parse error (bad
    JSON, duplicate keys, a non-object line, a type changing between blocks, ragged CSV rows, bad
    UTF-8), blank lines inside a JSON-lines file (row numbers would no longer be line numbers), NaN or
    infinite numbers (pyarrow turns over-long integers into inf; the Python path names them), nested
    values, or many brackets on one line (see :data:`_MAX_BRACKETS_PER_LINE`). That path then gives
    the one-line message naming the file and line, or the same table."""
    ext = ext_of(path)
    ensure_nonempty(path)
    try:
        if ext == ".jsonl":
            return _read_jsonl_runs(path, column_map)
        elif ext in (".csv", ".tsv"):
            import pyarrow.csv as pacsv

            sep = "\t" if ext == ".tsv" else ","
            head = read_head(path)
            if b"\x00" in head or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                return None
            names = _header(path, sep)
            reader = pacsv.open_csv(
                path, read_options=pacsv.ReadOptions(block_size=_BLOCK),
                parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types={n: pa.string() for n in names},
                    include_columns=[n for n in names if n not in MEDIA_COLUMNS],
                    strings_can_be_null=True, null_values=[""], quoted_strings_can_be_null=True))
            batches = iter(reader)
        else:
            return None
        col: _Collector | None = None
        n = 0
        for batch in batches:
            if col is None:
                col = _Collector.for_schema(batch.schema, column_map)
                if col is None:
                    return None
            if [f.name for f in batch.schema if f.name not in MEDIA_COLUMNS] != col.names:
                return None
            cols = _checked_columns(batch, col)
            if cols is None:
                return None
            col.add_columns(cols)
            n += batch.num_rows
    except (pa.ArrowException, UnicodeDecodeError, ValueError, OSError):
        return None
    if col is None or n == 0:
        return None
    return col.frame(path, column_map)


def _checked_columns(batch: pa.RecordBatch, col: _Collector, *, encode: bool = False) -> list[pa.Array] | None:
    """The columns ``col.names`` of one parsed batch, checked for the fast path: None for NaN/infinite
    numbers, nested or dictionary values; plain string columns validated as UTF-8 (ArrowInvalid), the
    dictionary columns later, on their dictionaries. ``encode``: string columns that go to a shared
    dictionary come back dictionary-encoded already (done on a reader thread)."""
    import pyarrow.compute as pc

    out = []
    for c in col.names:
        arr = batch.column(c)
        t = arr.type
        if pa.types.is_floating(t):
            if (arr.null_count < len(arr)) and not pc.all(pc.is_finite(arr)).as_py():
                return None
        elif pa.types.is_nested(t) or pa.types.is_dictionary(t):
            return None
        elif is_string_like(t):
            if c not in col.dict_names:
                arr.validate(full=True)
            elif encode and not col.chunks.get(c):  # (a free text given up as too many: left plain)
                arr = arr.dictionary_encode()
        out.append(arr)
    return out


#: JSON-lines files are parsed in byte ranges of about this size, cut at newlines, on reader threads
#: (16 MB: on 2 threads the last round of ranges leaves a core idle for less time than with 64 MB; a
#: 400 MB file reads in 1.6 s instead of 1.9 s).
_JSONL_CHUNK = 1 << 24
#: The first range, parsed alone on Arrow's own threads and whose inferred schema is imposed on the others,
#: is this many ranges long (64 MB): a type that first appears later sends the file to the exact path, so
#: the schema is inferred from more lines than one range holds.
_JSONL_FIRST_RANGES = 4


def _jsonl_ranges(path: str, size: int):
    """(start, end) byte ranges covering the file, each ending just after a newline (the last one at
    the end of the file), of about :data:`_JSONL_CHUNK` bytes (the first :data:`_JSONL_FIRST_RANGES`
    times that): every line lies inside one range."""
    start = 0
    with open(path, "rb") as fh:
        while start < size:
            end = start + _JSONL_CHUNK * (_JSONL_FIRST_RANGES if start == 0 else 1)
            if end >= size:
                yield start, size
                return
            fh.seek(end)
            while True:
                piece = fh.read(1 << 16)
                if not piece:
                    end = size
                    break
                i = piece.find(b"\n")
                if i >= 0:
                    end += i + 1
                    break
                end += len(piece)
            yield start, end
            start = end


def _read_jsonl_runs(path: str, column_map: dict[str, str] | None) -> pd.DataFrame | None:
    """The JSON-lines part of :func:`read_text_runs`: the file is cut at newlines into ranges of about
    :data:`_JSONL_CHUNK` bytes (:func:`_jsonl_ranges`; the first longer), and each range is read, pre-scanned like
    :func:`_jsonl_fast_ok` (NUL bytes, bracket counts, its line count and last non-blank line),
    parsed with ``pyarrow.json.read_json``, checked and dictionary-encoded on one of up to
    :data:`READ_THREADS` threads (Arrow releases the GIL). The first range is parsed alone and its
    inferred schema is imposed on the others (a type changing later is a parse error, as with the
    streaming reader). Ranges are consumed in file order into the shared dictionaries, so codes and
    first-appearance order are the same as one pass. None: the exact Python path must read it."""

    import pyarrow.json as pajson

    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        if fh.read(4).startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return None
    col: _Collector | None = None
    schema: pa.Schema | None = None

    def parse(rng: tuple[int, int]):
        start, end = rng
        with open(path, "rb") as f:
            f.seek(start)
            chunk = f.read(end - start)
        scanned = _scan_block(chunk, 0)  # (a range starts at a line start: no bracket count carried in)
        if scanned is None:
            return None
        n_nl, _, last = scanned
        if last is None:  # (blank: no content line here)
            return n_nl, None, []
        # the first range is parsed alone (its schema is imposed on the others): on Arrow's threads, in
        # blocks of one later range's size (0.20 s instead of 0.37 s for 64 MB on 2 cores); the later
        # ranges run one per reader thread, single-threaded inside
        opts = pajson.ReadOptions(block_size=_JSONL_CHUNK, use_threads=schema is None)
        popts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error") \
            if schema is not None else pajson.ParseOptions()
        table = pajson.read_json(pa.BufferReader(chunk), read_options=opts, parse_options=popts)
        del chunk
        if col is None:
            return n_nl, last, table
        batches = []
        for b in table.to_batches():
            if [f.name for f in b.schema if f.name not in MEDIA_COLUMNS] != col.names:
                return None
            cols = _checked_columns(b, col, encode=True)
            if cols is None:
                return None
            batches.append((b.num_rows, cols))
        return n_nl, last, batches

    lines = n = expected = 0

    def account(res) -> bool:
        nonlocal lines, expected
        n_nl, last, _ = res
        if last is not None:
            expected = lines + last
        lines += n_nl
        return True

    ranges = _jsonl_ranges(path, size)
    first = next(ranges, None)
    if first is None:
        return None
    res = parse(first)
    if res is None:
        return None
    account(res)
    table = res[2]
    if isinstance(table, list) or table.num_rows == 0:
        return None
    schema = table.schema
    col = _Collector.for_schema(schema, column_map)
    if col is None:
        return None
    for b in table.to_batches():
        cols = _checked_columns(b, col)
        if cols is None:
            return None
        col.add_columns(cols)
        n += b.num_rows
    del table, res
    workers = max(1, min(READ_THREADS, os.cpu_count() or 1))
    with closing(_in_order(parse, ranges, workers, workers + 1, "jsonl-read")) as results:
        for res in results:
            if res is None:
                return None
            account(res)
            for m, cols in res[2]:
                col.add_columns(cols)
                n += m
            del res
    if n == 0 or n != expected:  # blank lines inside: let the exact path number the lines
        return None
    return col.frame(path, column_map)


def _in_order(fn: Callable, items, workers: int, depth: int, name: str):
    """``fn(item)`` for each of ``items`` on ``workers`` threads with at most ``depth`` calls submitted at once,
    yielded in the order of ``items`` (the next call is submitted before a result is handed out). Closing the
    generator early (the JSONL reader's fallback) cancels the calls not yet started and waits for the rest."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    ex = ThreadPoolExecutor(workers, thread_name_prefix=name)
    try:
        todo = iter(items)
        pending: deque = deque()
        for x in todo:
            pending.append(ex.submit(fn, x))
            if len(pending) >= depth:
                break
        while pending:
            out = pending.popleft().result()
            for x in todo:  # at most one more
                pending.append(ex.submit(fn, x))
                break
            yield out
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def is_string_like(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _read_excel(path: str) -> pd.DataFrame:
    import zipfile

    check_zip_container(path)  # size/ratio/memory limits, defusedxml, duplicate header names: before any parser
    from .xlsx import XLSX_ERRORS, read_xlsx_sheet

    try:
        df = read_xlsx_sheet(path)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, *XLSX_ERRORS) as e:
        raise InputError(f"not a readable .xlsx workbook ({type(e).__name__}: {e})", file=path) from None
    df = df.drop(columns=[c for c in df.columns if c in MEDIA_COLUMNS])
    df.columns = [str(c) for c in df.columns]
    df["source_row"] = np.arange(1, len(df) + 1, dtype=np.int64)
    data_cols = [c for c in df.columns if c != "source_row"]
    if data_cols:
        df = df[df[data_cols].notna().any(axis=1)].reset_index(drop=True)
    return df
