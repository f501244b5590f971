"""The one ``manifest.json`` schema of every output folder (audit, tst, prune, curate, blind, index).

Common fields, in this order: ``manifest_version``, ``tool`` (``benchaudit``), ``command`` (the command
that wrote the folder), ``benchaudit_version``, ``command_line``, ``started_at`` / ``finished_at`` (UTC
ISO 8601; ``started_at`` is when the command or library call began, :func:`audit_hub.clock.command_window`), ``timings_s``; then the command's own fields (the audit's ``dataset`` and ``hub_inputs``
first, as they describe the inputs); ``inputs`` (each with sha256 and size, computed here when the
reader did not record them); then the rest of the command's fields; ``environment`` (Python,
platform, installed package versions read from metadata without importing them, Hub variables); and
``outputs``: the sha256 and size of every file in the folder but the manifest itself. ``benchaudit push``
uploads exactly the files ``outputs`` lists (see :func:`audit_hub.hub.publish.report_files`).

``manifest_version`` 2 (this layout): ``command`` added to the audit's version-1 layout; tst, prune,
curate and blind manifests, which had layouts of their own (tst/prune: ``command`` was the command
line, ``versions``, ``params``, no ``outputs``; curate: ``packages`` and a Unix ``started_at``; blind:
none), use it with their settings under ``params``.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
MANIFEST_VERSION = 2
PACKAGES = ("benchaudit", "numpy", "pandas", "pyarrow", "scipy", "statsmodels", "datasets", "huggingface_hub",
            "evaluate", "matplotlib", "rapidfuzz", "scikit-learn", "jinja2", "typer", "torch", "transformers")
# Fields that describe the inputs and precede the ``inputs`` list (the audit's layout since version 1).
_BEFORE_INPUTS = ("dataset", "hub_inputs")
REQUIRED = ("manifest_version", "tool", "command", "benchaudit_version", "command_line", "inputs", "environment",
            "outputs")


def benchaudit_version() -> str:
    """The version of benchaudit that writes the folder (the one place it is read for outputs)."""
    from .. import __version__

    return __version__


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions (None when absent), without importing the packages."""
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def iso(ts: float | None) -> str | None:
    return None if ts is None else _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).isoformat(timespec="seconds")


def describe_inputs(inputs: list) -> list[dict]:
    """Copy the input records (dicts, or plain paths) and fill ``sha256``/``bytes`` for local files that lack them."""
    from .folders import sha256_file

    out = []
    for rec in inputs or []:
        r = dict(rec) if isinstance(rec, dict) else {"path": str(rec)}
        p = r.get("path")
        if p and not r.get("sha256"):
            path = Path(str(p))
            if path.is_file():
                r["sha256"] = sha256_file(path)
                r.setdefault("bytes", path.stat().st_size)
            else:
                r.setdefault("sha256", None)
        out.append(r)
    return out


def output_files(folder: Path, exclude: tuple[str, ...] = (MANIFEST,)) -> list[dict]:
    """sha256 and size of every file in the folder (sorted, POSIX paths), the manifest excluded."""
    from .folders import sha256_file

    files = []
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file():
            rel = p.relative_to(folder).as_posix()
            if rel in exclude:
                continue
            files.append({"path": rel, "bytes": p.stat().st_size, "sha256": sha256_file(p)})
    return files


def environment() -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "env": {k: os.environ[k] for k in ("HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if k in os.environ},
    }


def build(command: str, *, folder: Path, command_line: list[str] | None, inputs: list | None,
          started_at: float | None, finished_at: float | None, timings: dict[str, float] | None = None,
          fields: dict[str, Any] | None = None) -> dict:
    """The manifest dict of ``folder`` (JSON-serialisable through :func:`audit_hub.hub.folders.dump_json`);
    written last, so ``outputs`` lists every other file. ``fields``: the command's own fields."""
    from ..clock import command_start

    fields = dict(fields or {})
    began = command_start()  # the command's own start where one is marked (the CLI, a library call)
    started_at = began if began is not None else started_at
    head = {
        "manifest_version": MANIFEST_VERSION,
        "tool": "benchaudit",
        "command": command,
        "benchaudit_version": benchaudit_version(),
        "command_line": [str(a) for a in command_line or []],
        "started_at": iso(started_at),
        "finished_at": iso(finished_at),
        "timings_s": {k: round(float(v), 4) for k, v in (timings or {}).items()},
    }
    before = {k: fields.pop(k) for k in _BEFORE_INPUTS if k in fields}
    return {**head, **before, "inputs": describe_inputs(inputs or []), **fields, "environment": environment(),
            "outputs": output_files(folder)}


def write(folder: Path, manifest: dict) -> Path:
    """Write ``manifest`` as ``folder/manifest.json`` (credentials scrubbed)."""
    from .folders import dump_json

    path = Path(folder) / MANIFEST
    path.write_text(dump_json(manifest), encoding="utf-8")
    return path
