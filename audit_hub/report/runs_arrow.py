"""The ``runs`` config straight from the audit frame's integer codes, as an Arrow table.

At 1,000,000 questions x 50 models x 2 arms the runs are 100M rows. Going through pandas
(``Categorical.astype(str)``) creates one Python string per row and column: 57 s and >10 GB there.
Here nothing is created per row: ``question_id``, ``model`` and ``arm`` are Arrow dictionary arrays
whose indices are the frame's own ``q``/``m``/``arm`` code buffers (zero copy) and whose
dictionaries are the question IDs, model names and arm names; ``prediction`` and ``answer`` are the
frame's Arrow string buffers; ``hit``/``hit_exact`` are packed from the int8 codes (-1 -> null).

:func:`write_arrow_parquet` writes such a table in row groups. The Parquet writer stores a dictionary
array's dictionary and indices directly (no re-hashing of 100M strings) when the dictionary page
limit is large enough to hold every question ID; the files are written without the Arrow schema
blob, so every reader (pyarrow, pandas, ``datasets``) sees plain ``string`` columns: the encoding
is a storage detail, the public types are unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

# Rows per Parquet row group for the runs config (bounded so a reader can stream the file).
ROW_GROUP_ROWS = 1 << 24
# Large enough for the dictionary page of 1M+ question IDs; above it the writer would fall back to
# plain encoding and hash every value again.
DICTIONARY_PAGE_BYTES = 1 << 28


def _strings(values: Any) -> pa.Array:
    """A plain Arrow ``string`` array from a pandas column or sequence of names."""
    arr = getattr(values, "array", values)
    pa_arr = getattr(arr, "_pa_array", None)  # pandas ArrowExtensionArray / ArrowStringArray
    if pa_arr is not None:
        out = pa_arr.combine_chunks() if isinstance(pa_arr, pa.ChunkedArray) else pa_arr
    else:
        out = pa.array(values, type=pa.string(), from_pandas=True)
    if pa.types.is_large_string(out.type):
        out = out.cast(pa.string())
    return out


def _string_column(series: Any) -> pa.ChunkedArray:
    """A frame column of Arrow strings, chunks kept as they are (zero copy when Arrow-backed)."""
    arr = getattr(series, "array", series)
    pa_arr = getattr(arr, "_pa_array", None)
    if pa_arr is None:
        pa_arr = pa.chunked_array([pa.array(series, type=pa.string(), from_pandas=True)])
    elif isinstance(pa_arr, pa.Array):
        pa_arr = pa.chunked_array([pa_arr])
    if pa.types.is_large_string(pa_arr.type):
        pa_arr = pa_arr.cast(pa.string())
    return pa_arr


def _hit_column(codes: np.ndarray) -> pa.Array:
    """int8 hit codes (1 right, 0 wrong, -1 unknown) -> Arrow bool with nulls."""
    unknown = codes < 0
    return pa.array(codes == 1, type=pa.bool_(), mask=unknown if unknown.any() else None)


def runs_arrow_table(frame: Any) -> pa.Table:
    """The runs in their public long format (same columns and values as
    :meth:`audit_hub.frame.core.AuditFrame.runs_table`), with ID/model/arm dictionary-encoded."""
    from ..schema import ARMS

    r = frame.runs
    q = np.ascontiguousarray(r["q"].to_numpy(), dtype=np.int32)
    m = np.ascontiguousarray(r["m"].to_numpy())
    arm = np.ascontiguousarray(r["arm"].to_numpy())
    qids = _strings(frame.questions["question_id"])
    models = pa.array([str(x) for x in frame.models], type=pa.string())
    arms = pa.array(list(ARMS), type=pa.string())
    return pa.table({
        "question_id": pa.DictionaryArray.from_arrays(pa.array(q), qids),
        "model": pa.DictionaryArray.from_arrays(pa.array(m), models),
        "arm": pa.DictionaryArray.from_arrays(pa.array(arm), arms),
        "prediction": _string_column(r["prediction"]),
        "answer": _string_column(r["answer"]),
        "hit": _hit_column(r["hit"].to_numpy()),
        "hit_exact": _hit_column(r["hit_exact"].to_numpy()),
    })


def write_arrow_parquet(table: pa.Table, path: Path, row_group_rows: int = ROW_GROUP_ROWS) -> None:
    """Write ``table`` to ``path`` in row groups of at most ``row_group_rows`` rows (zstd)."""
    import pyarrow.parquet as pq

    dict_cols = [f.name for f in table.schema if pa.types.is_dictionary(f.type)]
    kwargs = {}
    if dict_cols:
        # Min/max statistics of a dictionary column make the writer look up every referenced
        # dictionary value per row group: half the write time for 1M question IDs, for no reader's benefit.
        kwargs = {"store_schema": False, "dictionary_pagesize_limit": DICTIONARY_PAGE_BYTES,
                  "write_statistics": [f.name for f in table.schema if f.name not in dict_cols]}
    with pq.ParquetWriter(path, table.schema, compression="zstd", **kwargs) as writer:
        if table.num_rows == 0:
            writer.write_table(table)
        for lo in range(0, table.num_rows, row_group_rows):
            writer.write_table(table.slice(lo, row_group_rows), row_group_size=row_group_rows)
