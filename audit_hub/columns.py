"""Arrow column helpers shared by the frame, its validation and the answer codes: a column's Arrow
chunks, string arrays and dictionary codes without Python objects for the common cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

#: The string dtype of every text column of the frame and the readers.
ARROW_STR = pd.ArrowDtype(pa.string())


def arrow_strings(values) -> pd.arrays.ArrowExtensionArray:
    """A sequence of str / None (NaN read as None) as an :data:`ARROW_STR` array, built by pyarrow. Never
    ``pd.array(list, dtype=ARROW_STR)``: pandas first makes a fixed-width NumPy unicode array of it, rows x the
    longest text x 4 bytes (one 400 KB answer among 4,000 rows took 6.3 GB)."""
    return pd.arrays.ArrowExtensionArray(pa.array(list(values), type=pa.string(), from_pandas=True))


def arrow_chunks(series: pd.Series) -> pa.ChunkedArray | None:
    """The Arrow chunks behind an ``ArrowDtype`` column (zero-copy), else None."""
    if isinstance(series.dtype, pd.ArrowDtype):
        arr = series.array._pa_array  # noqa: SLF001 (documented attribute of ArrowExtensionArray)
        return arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
    return None


def small_int(n_values: int) -> type:
    """Smallest signed int dtype that holds codes 0..n_values-1 and -1."""
    if n_values < 127:
        return np.int8
    if n_values < 32767:
        return np.int16
    return np.int32


def dictionary_chunk_codes(chunks: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a chunked Arrow dictionary column without unifying dictionaries by hashing
    every chunk: consecutive chunks with an equal dictionary (the usual case for Parquet row groups
    written from one categorical) reuse the mapping, so the cost is one pass over the indices."""
    n = len(chunks)
    dicts: list[pa.Array] = []
    seg_of_chunk: list[int] = []
    prev = None
    for ch in chunks.chunks:
        d = ch.dictionary
        if prev is None or not (d is prev or d.equals(prev)):
            dicts.append(d)
            prev = d
        seg_of_chunk.append(len(dicts) - 1)
    # one factorize over the distinct dictionaries (small next to the rows)
    allv = pa.concat_arrays([d.cast(pa.string()) if not pa.types.is_string(d.type) else d for d in dicts]) \
        if dicts else pa.array([], pa.string())
    gcodes, uniques = pd.factorize(pd.Series(pd.arrays.ArrowExtensionArray(allv)), use_na_sentinel=True)
    gcodes = gcodes.astype(np.int32)
    bounds = np.cumsum([0] + [len(d) for d in dicts])
    dtype = small_int(len(uniques))
    out = np.empty(n, dtype=dtype)
    pos = 0
    identity_of: dict[int, bool] = {}
    for ch, seg in zip(chunks.chunks, seg_of_chunk):
        m = len(ch)
        if m == 0:
            continue
        seg_map = gcodes[bounds[seg]:bounds[seg + 1]].astype(dtype)
        identity = identity_of.get(seg)
        if identity is None:
            identity = identity_of[seg] = bool((seg_map == np.arange(len(seg_map))).all())
        idx = ch.indices
        if identity and not idx.null_count:
            out[pos:pos + m] = idx.to_numpy()
        elif idx.null_count:
            iv = idx.fill_null(0).to_numpy()
            v = seg_map[iv] if len(seg_map) else np.zeros(m, dtype)
            v[~ch.is_valid().to_numpy(zero_copy_only=False)] = -1
            out[pos:pos + m] = v
        else:
            out[pos:pos + m] = seg_map[idx.to_numpy()]
        pos += m
    uniq = np.asarray([str(u) for u in uniques], dtype=object)
    return out, uniq


def to_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Factorize a column into (codes, uniques); -1 for null. Codes use the smallest int dtype that fits.

    Categorical and Arrow dictionary columns reuse their codes (no hashing of the rows)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.array.codes, _category_strings(series.dtype.categories)
    chunks = arrow_chunks(series)
    if chunks is not None and pa.types.is_dictionary(chunks.type):
        return dictionary_chunk_codes(chunks)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return codes.astype(small_int(len(uniques)), copy=False), np.asarray([str(u) for u in uniques], dtype=object)


_NULL_CHUNK = 1 << 20


def null_string_array(n: int) -> pa.ChunkedArray:
    """An all-null Arrow string column of ``n`` rows whose chunks share one 1M-row null array: the same
    values as ``pa.nulls(n, pa.string())`` without its n+1 offsets (400 MB at 1e8 rows)."""
    if n <= _NULL_CHUNK:
        return pa.chunked_array([pa.nulls(n, pa.string())], type=pa.string())
    block = pa.nulls(_NULL_CHUNK, pa.string())
    full, rest = divmod(n, _NULL_CHUNK)
    return pa.chunked_array([block] * full + ([block.slice(0, rest)] if rest else []), type=pa.string())


def _category_strings(cats: pd.Index) -> np.ndarray:
    """A categorical's categories as an object array of ``str`` (``str()`` of other values); categories
    that are already strings (the readers' object categories) are taken as they are, with no conversion."""
    if cats.dtype == object:
        values = cats.to_numpy()
        if pd.api.types.infer_dtype(values, skipna=False) == "string":
            return values
    return np.asarray(cats.astype(str), dtype=object)


def to_arrow_strings(series: pd.Series) -> pd.api.extensions.ExtensionArray:
    """Any column (object, categorical, Arrow, numeric) -> Arrow string array, without Python objects
    for the common cases (categoricals and Arrow columns convert in C)."""
    import pyarrow.compute as pc

    s = series
    if isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_string(s.dtype.pyarrow_dtype):
        return s.array
    chunks = arrow_chunks(s)
    if chunks is not None and pa.types.is_dictionary(chunks.type) and pa.types.is_string(chunks.type.value_type):
        return pd.arrays.ArrowExtensionArray(chunks.cast(pa.string()))
    if isinstance(s.dtype, pd.CategoricalDtype) and pd.api.types.infer_dtype(s.dtype.categories, skipna=False) == "string":
        fixed = _decode_fixed_width(s.array.codes, s.dtype.categories)
        if fixed is not None:
            return pd.arrays.ArrowExtensionArray(fixed)
    try:
        arr = pa.array(s, from_pandas=True)
        if pa.types.is_dictionary(arr.type):
            arr = arr.cast(pa.string()) if pa.types.is_string(arr.type.value_type) else \
                pc.cast(arr.dictionary_decode(), pa.string())
        elif not pa.types.is_string(arr.type):
            if pa.types.is_large_string(arr.type):
                arr = arr.cast(pa.string())
            else:
                raise pa.ArrowInvalid("not strings")
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        vals = s.astype(object).where(s.notna(), None).tolist()
        arr = pa.array([None if v is None else str(v) for v in vals], type=pa.string())
    return pd.arrays.ArrowExtensionArray(arr)


def _decode_fixed_width(codes: np.ndarray, categories: pd.Index, chunk: int = 1 << 20) -> pa.ChunkedArray | None:
    """Codes (-1: null) into string ``categories`` that all have one UTF-8 length (option letters, yes/no
    words of one length) -> Arrow strings, built in numpy in chunks of ``chunk`` rows: a byte gather per
    chunk, and one offsets buffer shared by every chunk without nulls (the offsets of a fixed width are
    the same arithmetic run), so 1e8 rows need no 400 MB of offsets and no Arrow per-row copy loop.
    None when the lengths differ (Arrow's dictionary cast handles those)."""
    values = pa.array(categories.to_numpy(dtype=object), type=pa.string())
    k, n = len(values), len(codes)
    if k == 0 or values.null_count:
        return None
    offs = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + k + 1]
    width = int(offs[1] - offs[0])
    if not (np.diff(offs) == width).all() or chunk * width >= 1 << 31:
        return None
    table = np.frombuffer(values.buffers()[2], np.uint8)[offs[0]:offs[-1]].reshape(k, width)
    if width == 1:
        table = table.reshape(-1)  # (a 1-d gather is the quick one)
    shared = pa.py_buffer(np.arange(0, (min(n, chunk) + 1) * width, width, dtype=np.int32) if width
                          else np.zeros(min(n, chunk) + 1, np.int32))
    parts = []
    for lo in range(0, n, chunk):
        c = codes[lo:lo + chunk]
        m = len(c)
        null = c < 0
        n_null = int(np.count_nonzero(null))
        if n_null:
            valid = ~null
            offsets = np.empty(m + 1, np.int32)
            offsets[0] = 0
            np.cumsum(valid, dtype=np.int32, out=offsets[1:])
            if width != 1:
                offsets *= np.int32(width)
            data = table[c[valid]]
            parts.append(pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(data.reshape(-1)),
                                                     pa.py_buffer(np.packbits(valid, bitorder="little")), n_null))
        else:
            parts.append(pa.StringArray.from_buffers(m, shared, pa.py_buffer(table[c].reshape(-1))))
    return pa.chunked_array(parts, type=pa.string())


def dictionary_codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """(codes with -1 for null, unique strings) of a string column, computed in Arrow."""
    arr = pa.array(to_arrow_strings(series))
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    enc = arr.dictionary_encode()
    idx = enc.indices.to_numpy(zero_copy_only=False)
    codes = np.where(pd.isna(idx), -1, idx).astype(np.int64) if enc.null_count else idx.astype(np.int64)
    return codes, enc.dictionary.to_pylist()
