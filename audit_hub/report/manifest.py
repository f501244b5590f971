"""``manifest.json``: everything needed to reproduce the report and to check it was not altered.

sha256 of every input (computed here when the reader did not record it) and of every output file,
the dataset revision (and the resolved commit of Hub inputs), package versions (read from
installed metadata, nothing is imported), seeds, thresholds and parameters, the command line, and
UTC timestamps.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("benchaudit", "numpy", "pandas", "pyarrow", "scipy", "statsmodels", "datasets", "huggingface_hub",
            "evaluate", "matplotlib", "rapidfuzz", "scikit-learn", "jinja2", "typer", "torch", "transformers")
MANIFEST_VERSION = 1


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions (None when absent), without importing the packages."""
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).isoformat(timespec="seconds")


def describe_inputs(inputs: list[dict]) -> list[dict]:
    """Copy the input records and fill ``sha256``/``bytes`` for local files that lack them."""
    from ..hub.folders import sha256_file

    out = []
    for rec in inputs or []:
        r = dict(rec)
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


def output_files(folder: Path, exclude: tuple[str, ...] = ("manifest.json",)) -> list[dict]:
    """sha256 and size of every file in the report folder (sorted, POSIX paths)."""
    from ..hub.folders import sha256_file

    files = []
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file():
            rel = p.relative_to(folder).as_posix()
            if rel in exclude:
                continue
            files.append({"path": rel, "bytes": p.stat().st_size, "sha256": sha256_file(p)})
    return files


def _config_dict(config: Any) -> dict:
    from dataclasses import asdict, is_dataclass

    if is_dataclass(config):
        return asdict(config)
    return dict(config or {})


def build_manifest(result: Any, *, command_line: list[str], inputs: list[dict], folder: Path,
                   started_at: float, finished_at: float, timings: dict[str, float] | None = None) -> dict:
    """The manifest dict (JSON-serialisable through :func:`audit_hub.hub.folders.dump_json`).

    ``timings``: wall seconds per stage (:mod:`audit_hub.clock`; read, validate, each detector,
    calibration, report, figures, card); defaults to the detector timings of ``result``."""
    frame = result.frame
    meta = frame.meta
    ds = dict(meta.get("dataset") or {})
    ins = describe_inputs(inputs)
    hub_inputs = [{k: r.get(k) for k in ("path", "repo_id", "revision", "resolved_commit", "kind")}
                  for r in ins if r.get("repo_id") or r.get("resolved_commit")]
    cfg = _config_dict(result.config)
    thresholds = {name: dict(res.params) for name, res in result.results.items() if getattr(res, "params", None)}
    return {
        "manifest_version": MANIFEST_VERSION,
        "tool": "benchaudit",
        "benchaudit_version": package_versions(("benchaudit",))["benchaudit"],
        "command_line": list(command_line),
        "started_at": _iso(started_at),
        "finished_at": _iso(finished_at),
        "timings_s": {k: round(float(v), 4) for k, v in
                      (timings if timings is not None else getattr(result, "timings", {}) or {}).items()},
        "dataset": {**ds, "revision": ds.get("revision") or ds.get("commit") or ds.get("resolved_commit")},
        "hub_inputs": hub_inputs,
        "inputs": ins,
        "n_questions": frame.n_questions,
        "models": {"full": frame.models_in("full"), "blind": frame.models_in("blind")},
        "primary_field": result.primary_field,
        "seeds": {"seed": cfg.get("seed"), **(result.summary.get("seeds") or {})},
        "config": cfg,
        "thresholds": thresholds,
        "skipped": dict(result.skipped or {}),
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "packages": package_versions(),
            "env": {k: os.environ[k] for k in ("HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
                    if k in os.environ},
        },
        "outputs": output_files(folder),
    }
