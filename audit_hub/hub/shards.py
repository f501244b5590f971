"""The one shard writer of every output folder: a table -> ``data/<config>-NNNNN-of-MMMMM.parquet``.

Every command (audit, tst, prune, curate, blind, the work_dir index) writes its configs here, in the
layout ``datasets.push_to_hub`` produces: shards of at most :data:`SHARD_BYTES` of Arrow memory (the
Hub client uses 500 MB on disk), zstd, plain ``string`` types and no pandas schema blob, so every
reader (pyarrow, pandas, ``datasets``) sees the same public types.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

# Target in-memory size of one Parquet shard (datasets.push_to_hub uses 500 MB on disk).
SHARD_BYTES = 256 * 1024 * 1024
# Rows per Parquet row group for dictionary-encoded tables (bounded so a reader can stream the file).
ROW_GROUP_ROWS = 1 << 24
# Large enough for the dictionary page of 1M+ question IDs; above it the writer would fall back to
# plain encoding and hash every value again.
DICTIONARY_PAGE_BYTES = 1 << 28


def arrow_table(df: Any) -> pa.Table:
    """DataFrame -> Arrow table with plain ``string`` types and no pandas metadata (portable schema)."""
    t = pa.Table.from_pandas(df, preserve_index=False)
    fields = []
    for f in t.schema:
        typ = f.type
        if pa.types.is_large_string(typ):
            typ = pa.string()
        elif pa.types.is_large_list(typ) and pa.types.is_large_string(typ.value_type):
            typ = pa.list_(pa.string())
        elif (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and pa.types.is_large_string(typ.value_type):
            typ = pa.list_(pa.string())
        elif pa.types.is_null(typ):
            typ = pa.string()
        elif pa.types.is_dictionary(typ):
            typ = pa.string()
        fields.append(pa.field(f.name, typ))
    return t.cast(pa.schema(fields))


def write_arrow_parquet(table: pa.Table, path: Path, row_group_rows: int = ROW_GROUP_ROWS) -> None:
    """Write ``table`` to ``path`` in row groups of at most ``row_group_rows`` rows (zstd).

    A dictionary column's dictionary and indices are stored directly (no re-hashing of 100M strings)
    and the file carries no Arrow schema blob, so readers see plain ``string`` columns."""
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


_SHARD = re.compile(r"^(?P<stem>.+)-\d{5}-of-\d{5}\.parquet$")


def written_configs(root: Path) -> dict[str, list[str]]:
    """The configs a written folder holds, read back from the shard names :func:`write_config` gives
    (``data/<config>-NNNNN-of-MMMMM.parquet``): config -> its shard paths relative to ``root``."""
    out: dict[str, list[str]] = {}
    data = Path(root) / "data"
    for p in sorted(data.glob("*.parquet")) if data.is_dir() else []:
        m = _SHARD.match(p.name)
        if m:
            out.setdefault(m.group("stem"), []).append(f"data/{p.name}")
    return out


def write_config(folder: Path, name: str, df: Any, shard_bytes: int = SHARD_BYTES, cancel=None) -> list[str]:
    """Write one config as ``data/<name>-NNNNN-of-MMMMM.parquet`` shards; return the relative paths.
    ``cancel``: a ``threading.Event`` checked before each shard (set: stop, return what was written).

    ``df``: a DataFrame, or an Arrow table (written as it is, in row groups, dictionary columns
    stored directly; see :func:`write_arrow_parquet`)."""
    import pyarrow.parquet as pq

    folder = Path(folder)
    native = isinstance(df, pa.Table)
    table = df if native else arrow_table(df)
    n_shards = max(1, math.ceil(table.nbytes / shard_bytes)) if table.num_rows else 1
    n_shards = min(n_shards, max(1, table.num_rows))
    rows = math.ceil(table.num_rows / n_shards) if table.num_rows else 0
    (folder / "data").mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(n_shards):
        if cancel is not None and cancel.is_set():
            break
        rel = f"data/{name}-{s:05d}-of-{n_shards:05d}.parquet"
        part = table.slice(s * rows, rows) if rows else table
        if native:
            write_arrow_parquet(part, folder / rel)
        else:
            pq.write_table(part, folder / rel, compression="zstd")
        paths.append(rel)
    return paths


def write_parquet_atomic(table: pa.Table, path: str | os.PathLike) -> Path:
    """Write one Parquet file so that it appears whole or not at all (a temporary sibling, then
    ``os.replace``): the shards and the merged file of a resumable (blind) output."""
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
