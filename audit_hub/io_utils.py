"""Small I/O helpers shared by every writer: atomic output folders, hashing, Hub-layout folders."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target`` atomically.

    On any exception (including KeyboardInterrupt) the temporary folder is removed and ``target`` is
    left exactly as it was, so a failed or killed run never leaves a partial output folder behind.
    A killed process (SIGKILL) leaves only a hidden ``.<name>.tmp-*`` sibling, never ``target``.
    """
    target = Path(target).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists")
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write a file via a temporary sibling and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def to_jsonable(obj: Any) -> Any:
    """Convert numpy / pandas scalars and containers to plain JSON types (NaN -> None)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return None if math.isnan(v) or math.isinf(v) else v
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    try:
        import pandas as pd
        if obj is pd.NA or obj is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return str(obj)


def dump_json(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"


def write_hub_folder(folder: str | os.PathLike, configs: dict, card_markdown: str | None = None,
                     summary: dict | None = None, manifest: dict | None = None,
                     max_rows_per_shard: int = 2_000_000) -> dict[str, list[str]]:
    """Write DataFrames in the layout ``datasets.push_to_hub`` produces.

    ``configs`` maps a config name to a DataFrame; each is written to
    ``data/<config>-NNNNN-of-MMMMM.parquet`` (sharded above ``max_rows_per_shard`` rows).
    Returns the relative file paths per config (for the card's ``configs:`` YAML).
    """
    folder = Path(folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    written: dict[str, list[str]] = {}
    for name, df in configs.items():
        n = len(df)
        n_shards = max(1, math.ceil(n / max_rows_per_shard))
        paths = []
        for s in range(n_shards):
            part = df.iloc[s * max_rows_per_shard:(s + 1) * max_rows_per_shard]
            rel = f"data/{name}-{s:05d}-of-{n_shards:05d}.parquet"
            part.to_parquet(folder / rel, index=False)
            paths.append(rel)
        written[name] = paths
    if card_markdown is not None:
        (folder / "README.md").write_text(card_markdown, encoding="utf-8")
    if summary is not None:
        (folder / "summary.json").write_text(dump_json(summary), encoding="utf-8")
    if manifest is not None:
        (folder / "manifest.json").write_text(dump_json(manifest), encoding="utf-8")
    return written
