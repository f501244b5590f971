"""Hugging Face datasets: a Hub id ``org/name[:config][@revision]`` or a local folder in Hub layout
(``data/*.parquet`` + ``README.md``), loaded with ``datasets.load_dataset``.

Image/audio/video features are removed before any row is materialised, so nothing is decoded.
The question-ID column is the first of ``question_id, id, index, qid, doc_id`` with unique values.
The split is the one asked for, else the only split, else the first of ``test, validation, val,
dev, testmini, train``. ``trust_remote_code`` is never enabled here.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pandas as pd

from ..errors import InputError
from .cells import MEDIA_COLUMNS, apply_column_map
from .generic import normalise_questions

HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?::(?P<config>[\w.-]+))?(?:@(?P<rev>[\w./-]+))?$")
SPLIT_PREFERENCE = ("test", "validation", "val", "dev", "testmini", "train")


def parse_hub_spec(spec: str) -> tuple[str, str | None, str | None] | None:
    """``org/name[:config][@revision]`` -> (repo, config, revision); None when it is not one."""
    m = HUB_ID.match(spec.strip())
    if not m:
        return None
    return m.group("repo"), m.group("config"), m.group("rev")


def is_hub_layout_folder(path: str) -> bool:
    if not os.path.isdir(path):
        return False
    names = os.listdir(path)
    if "README.md" in names or "dataset_infos.json" in names or "dataset_dict.json" in names:
        return True
    if os.path.isdir(os.path.join(path, "data")):
        return True
    return any(n.endswith((".parquet", ".jsonl", ".csv", ".arrow")) for n in names)


def _is_media_feature(feat: Any) -> bool:
    import datasets

    media = tuple(t for t in (getattr(datasets, "Image", None), getattr(datasets, "Audio", None),
                              getattr(datasets, "Video", None), getattr(datasets, "Pdf", None)) if t is not None)
    if isinstance(feat, media):
        return True
    inner = getattr(feat, "feature", None)
    if inner is not None and not isinstance(feat, dict):
        return _is_media_feature(inner)
    if isinstance(feat, (list, tuple)) and feat:
        return _is_media_feature(feat[0])
    return False


def _resolved_sha(repo: str, revision: str | None) -> str | None:
    """Commit sha of a Hub dataset from the local cache, else from the Hub API; None if unknown."""
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
        ref = os.path.join(HF_HUB_CACHE, "datasets--" + repo.replace("/", "--"), "refs", revision or "main")
        if os.path.isfile(ref):
            return open(ref, encoding="utf-8").read().strip() or None
        if revision and re.fullmatch(r"[0-9a-f]{40}", revision):
            return revision
        from huggingface_hub import HfApi
        return HfApi().dataset_info(repo, revision=revision).sha
    except Exception:  # noqa: BLE001 - provenance is best effort, loading already succeeded
        return None


def card_data_patterns(folder: str) -> list[str]:
    """Every data-file pattern (and ``data_dir``) the ``configs`` of the folder's README.md card names, in any
    of the forms datasets reads (a string, a list, ``{split, path}`` items, a split mapping)."""
    card = os.path.join(folder, "README.md")
    if not os.path.isfile(card):
        return []
    try:
        import yaml

        with open(card, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
        if not text.startswith("---"):
            return []
        meta = yaml.safe_load(text.split("---", 2)[1]) or {}
    except Exception:  # noqa: BLE001 - an unreadable card is datasets' to report
        return []
    out: list[str] = []

    def walk(v) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                if k != "split":
                    walk(x)

    for cfg in meta.get("configs") or [] if isinstance(meta, dict) else []:
        if isinstance(cfg, dict):
            walk(cfg.get("data_files"))
            walk(cfg.get("data_dir"))
    return out


def check_data_files_inside(data_files, spec: str, *, local: bool, repo: str) -> None:
    """Every data file the dataset card names (``configs: data_files``, resolved by ``datasets``) lies
    inside the folder (symlinks followed) or, for a Hub id, inside that Hub repository; anything else
    (``../outside/*.csv``, an absolute path, another repository, a URL) is an :class:`InputError`."""
    root = os.path.realpath(spec) if local else None
    for split, paths in (data_files or {}).items():
        for f in paths or ():
            f = str(f)
            if local:
                real = os.path.realpath(f)
                inside = real == root or real.startswith(root.rstrip(os.sep) + os.sep)
                shown = os.path.relpath(real, root) if os.path.isabs(real) else f
            else:
                inside = f.startswith((f"hf://datasets/{repo}@", f"hf://datasets/{repo}/"))
                shown = f
            if not inside:
                raise InputError(f"the dataset card names data file {shown!r} (split {split!r}) outside "
                                 f"{'the folder' if local else 'the repository ' + repr(repo)}; data files must "
                                 "lie inside it", file=os.path.join(spec, "README.md") if local else spec,
                                 column="configs.data_files")


def load_hub_questions(spec: str, *, revision: str | None = None, column_map: dict[str, str] | None = None,
                       split: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Load questions from the Hub or a local Hub-layout folder; returns (questions, source info)."""
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a dependency
        raise InputError(f"the 'datasets' package is needed to read {spec!r} ({e})") from None
    local = os.path.isdir(spec)
    if local:
        repo, config, rev = spec, None, None
    else:
        parsed = parse_hub_spec(spec)
        if parsed is None:
            raise InputError(f"{spec!r} is neither a file, a folder nor a Hub dataset id (org/name[:config][@rev])",
                             file=spec)
        repo, config, rev = parsed
        rev = revision or rev
    if local:  # before datasets sees the card: a pattern reaching outside the folder, in any form
        for pat in card_data_patterns(spec):
            norm = os.path.normpath(pat)
            if "://" in pat or os.path.isabs(pat) or norm == ".." or norm.startswith(".." + os.sep):
                raise InputError(f"the dataset card names data files {pat!r} outside the folder; data files "
                                 "must lie inside it", file=os.path.join(spec, "README.md"),
                                 column="configs.data_files")
    import contextlib
    import tempfile

    # a local folder is prepared in a temporary cache removed after the read: the user's ~/.cache is not theirs to
    # fill with a copy of their data (gigabytes for an image benchmark); a Hub dataset uses the usual cache
    scratch = tempfile.TemporaryDirectory(prefix="benchaudit-hf-") if local else contextlib.nullcontext(None)
    with scratch as cache_dir:
        return _load_prepared(datasets, spec, repo, config, rev, split, column_map, local, cache_dir)


def _load_prepared(datasets, spec, repo, config, rev, split, column_map, local: bool, cache_dir):
    try:
        builder = datasets.load_dataset_builder(repo, name=config, revision=rev, cache_dir=cache_dir)
        check_data_files_inside(builder.config.data_files, spec, local=local, repo=repo)
        builder.download_and_prepare()
        dd = builder.as_dataset()
    except InputError:
        raise
    except FileNotFoundError as e:
        raise InputError(f"dataset not found ({e})", file=spec) from None
    except Exception as e:  # noqa: BLE001 - datasets raises many types; one clear message
        raise InputError(f"cannot load the dataset ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
                         file=spec) from None
    if isinstance(dd, datasets.DatasetDict):
        splits = list(dd.keys())
        if split is None:
            if len(splits) == 1:
                split = splits[0]
            else:
                split = next((s for s in SPLIT_PREFERENCE if s in dd), splits[0])
        if split not in dd:
            raise InputError(f"split {split!r} not found; available: {splits}", file=spec)
        ds = dd[split]
    else:
        ds = dd
    drop = [name for name, feat in ds.features.items() if name in MEDIA_COLUMNS or _is_media_feature(feat)]
    if drop:
        ds = ds.remove_columns(drop)
    df = ds.to_pandas()
    df = apply_column_map(df, column_map, spec)
    df["source_row"] = range(1, len(df) + 1)
    questions = normalise_questions(df, spec)
    info: dict[str, Any] = {"path": os.path.abspath(spec) if local else spec, "kind": "hf-local" if local else "hf-hub",
                            "rows": len(df), "split": split, "dropped_media_columns": drop}
    if not local:
        sha = _resolved_sha(repo, rev)
        info.update({"repo_id": repo, "config": config, "revision": rev, "commit_sha": sha, "resolved_commit": sha})
    return questions, info
