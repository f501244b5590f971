"""The one builder of a card's YAML header: ``configs`` and ``dataset_info`` for every output folder.

Every card the tool writes (audit, tst, prune, curate, blind, the work_dir index) gets its header here:
:func:`configs` lists each config with its split and the glob of its shards (``data/<name>-*.parquet``,
under ``prefix`` for a report inside an index), :func:`dataset_info` reads the features, row counts and
sizes back from the Parquet files actually written (so the card always matches the files), and
:func:`render` joins a :class:`huggingface_hub.DatasetCardData` header with the card's body (a Jinja
template or ready Markdown) and checks that the YAML parses back. Input-derived strings in the body are
escaped by the caller with :mod:`audit_hub.escape`; those in the header pass through :func:`yaml_text`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def yaml_text(s: Any, limit: int = 100) -> str:
    """An input-derived string for a YAML header value (``pretty_name``): one plain line; the YAML
    dumper quotes it, so no key, document marker or tag can be formed."""
    from ..escape import plain_text

    return plain_text(s, limit)


def configs(files: dict[str, list[str]], *, default: str | None = None, splits: dict[str, str] | None = None,
            names: dict[str, str] | None = None, prefix: str = "") -> list[dict]:
    """The ``configs`` YAML list for shards written by :func:`audit_hub.hub.shards.write_config`.

    ``files``: config (file stem) -> its shard paths; ``default``: the stem of the default config;
    ``splits``: stem -> split name (default ``train``); ``names``: stem -> the config name shown on the
    Hub (default the stem); ``prefix``: a sub-folder holding the shards (an index of reports)."""
    splits, names = splits or {}, names or {}
    pre = f"{prefix.rstrip('/')}/" if prefix else ""
    return [{"config_name": names.get(stem, stem),
             "data_files": [{"split": splits.get(stem, "train"), "path": f"{pre}data/{stem}-*.parquet"}],
             **({"default": True} if stem == default else {})} for stem in files]


def dataset_info(folder: Path, files: dict[str, list[str]], *, splits: dict[str, str] | None = None,
                 names: dict[str, str] | None = None) -> list[dict]:
    """``dataset_info`` YAML entries (features, splits, sizes) read back from the written Parquet files."""
    import pyarrow.parquet as pq
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo

    splits, names = splits or {}, names or {}
    folder = Path(folder)
    infos = []
    for name, paths in files.items():
        schema = pq.read_schema(folder / paths[0])
        n_rows = sum(pq.ParquetFile(folder / p).metadata.num_rows for p in paths)
        n_bytes = sum((folder / p).stat().st_size for p in paths)
        mem = sum(pq.ParquetFile(folder / p).metadata.row_group(i).total_byte_size
                  for p in paths for i in range(pq.ParquetFile(folder / p).metadata.num_row_groups))
        split_dict = SplitDict()
        split_dict.add(SplitInfo(name=splits.get(name, "train"), num_bytes=int(mem), num_examples=int(n_rows)))
        info = DatasetInfo(features=Features.from_arrow_schema(schema), splits=split_dict,
                           download_size=int(n_bytes), dataset_size=int(mem))
        infos.append({"config_name": names.get(name, name), **info._to_yaml_dict()})
    return infos


def render(header: dict, *, info: list[dict] | None = None, body: str | None = None, template: str | None = None,
           **ctx: Any) -> str:
    """A card's text: ``header`` (:class:`DatasetCardData` keyword arguments, ``configs`` included) plus
    ``info`` (the ``dataset_info`` entries of :func:`dataset_info`), then the body: ``template`` (a Jinja
    file rendered with ``ctx``) or ``body`` (Markdown). Blank-line runs are collapsed; raises when the YAML
    does not parse back."""
    from huggingface_hub import DatasetCard, DatasetCardData

    data = DatasetCardData(**header, dataset_info=info) if info is not None else DatasetCardData(**header)
    if template is not None:
        text = str(DatasetCard.from_template(data, template_path=template, **ctx))
    else:
        text = f"---\n{data.to_yaml()}\n---\n\n{body or ''}"
    text = re.sub(r"\n{3,}", "\n\n", text)
    if not text.endswith("\n"):
        text += "\n"
    DatasetCard(text)  # parses the YAML header; raises on a malformed card
    return text
