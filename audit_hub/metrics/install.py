"""Install the ``metrics/<name>/`` evaluate modules into evaluate's module cache (offline use).

``evaluate.load("benchaudit/<name>")`` first asks the Hub for ``<name>.py`` of the Space
``benchaudit/<name>``; when that fails (``HF_EVALUATE_OFFLINE=1``, or no network) it falls back to
the newest cached copy, which it looks up as::

    <HF_MODULES_CACHE>/evaluate_modules/metrics/<namespace>--<name>/<64-hex hash>/<name>.py

and imports as ``evaluate_modules.metrics.<namespace>--<name>.<hash>.<name>`` (every folder on the
way holds an ``__init__.py``; "newest" is the ``<name>.py`` with the latest modification time).
:func:`install` writes exactly that layout, so the metrics work without ever touching the Hub.

The module sources are found in the repository (``metrics/`` beside the package) or, after a plain
``pip install``, inside the package as ``audit_hub/metric_modules/`` (pyproject maps ``metrics/``
there at build time, so there is one copy in the repository).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import BenchauditError
from . import NAMESPACE
from .adapter import METRIC_NAMES

MODULE_FILES = ("{name}.py", "README.md", "app.py", "requirements.txt")  # a Space folder
CACHE_FILES = ("{name}.py", "README.md")  # what goes into evaluate's module cache
DYNAMIC_MODULES = "evaluate_modules"  # evaluate.config.MODULE_NAME_FOR_DYNAMIC_MODULES
MODULE_TYPE = "metrics"


class MetricsInstallError(BenchauditError):
    """The metric sources or the cache folder are not usable."""


@dataclass
class InstalledModule:
    """One installed module: where it lives and how evaluate imports it."""

    name: str
    load_id: str  # what to pass to evaluate.load
    path: Path  # the installed <name>.py
    hash: str
    removed_stale: int  # older hash folders of the same module that were removed


# ------------------------------------------------------------------------------ locations
def repo_metrics_dir() -> Path:
    """``metrics/`` of a source checkout (next to the ``audit_hub`` package)."""
    return Path(__file__).resolve().parents[2] / "metrics"


def packaged_metrics_dir() -> Path:
    """The copy of the modules shipped inside the installed package."""
    return Path(__file__).resolve().parent.parent / "metric_modules"


def _complete(folder: Path, names: tuple[str, ...] = METRIC_NAMES) -> bool:
    return all((folder / n / f"{n}.py").is_file() for n in names)


def source_dir(source: str | os.PathLike | None = None) -> Path:
    """Folder holding ``<name>/<name>.py`` for every metric: ``source`` if given, else the
    repository's ``metrics/``, else the packaged copy."""
    if source is not None:
        p = Path(source).expanduser().resolve()
        if not p.is_dir():
            raise MetricsInstallError(f"metrics source folder {p} does not exist")
        return p
    for p in (repo_metrics_dir(), packaged_metrics_dir()):
        if _complete(p):
            return p
    raise MetricsInstallError(
        f"no metric modules found in {repo_metrics_dir()} or {packaged_metrics_dir()}; "
        f"reinstall benchaudit or pass --source")


def modules_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """evaluate's ``HF_MODULES_CACHE``, resolved from the environment the way ``evaluate.config``
    does (``HF_MODULES_CACHE``, else ``$HF_HOME/modules``, else ``$XDG_CACHE_HOME/huggingface/modules``,
    else ``~/.cache/huggingface/modules``), or ``cache_dir`` when given."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get("HF_MODULES_CACHE"):
        return Path(os.environ["HF_MODULES_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "~/.cache")
    hf_home = os.path.expanduser(os.environ.get("HF_HOME", os.path.join(xdg, "huggingface")))
    return Path(hf_home) / "modules"


def _version() -> str:
    from .. import __version__

    return __version__


def module_hash(path: Path) -> str:
    """A 64-hex content hash of the module file (evaluate only requires 64 characters)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _touch_init(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    init = folder / "__init__.py"
    if not init.exists():
        init.write_text("", encoding="utf-8")


def _select(names: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    if not names:
        return METRIC_NAMES
    unknown = [n for n in names if n not in METRIC_NAMES]
    if unknown:
        raise MetricsInstallError(f"unknown metric(s) {unknown}; choose from {list(METRIC_NAMES)}")
    return tuple(dict.fromkeys(names))


# ------------------------------------------------------------------------------ install / list
def install(*, namespace: str = NAMESPACE, names: list[str] | tuple[str, ...] | None = None,
            cache_dir: str | os.PathLike | None = None,
            source: str | os.PathLike | None = None) -> list[InstalledModule]:
    """Copy each metric module into evaluate's module cache under ``<namespace>--<name>``.

    Idempotent: installing the same sources twice leaves one hash folder per module (older hash
    folders of the same module are removed so the cache lookup can only find this version). Each
    hash folder is written to a temporary sibling and renamed into place, so an interrupted install
    never leaves a half-written module that evaluate would pick up.
    """
    from ..hub.folders import atomic_dir

    if not namespace or "/" in namespace or "--" in namespace or namespace.strip() != namespace:
        raise MetricsInstallError(f"invalid namespace {namespace!r}")
    src = source_dir(source)
    selected = _select(names)
    missing = [n for n in selected if not (src / n / f"{n}.py").is_file()]
    if missing:
        raise MetricsInstallError(f"{src} lacks the module file(s) {[f'{n}/{n}.py' for n in missing]}")
    root = modules_cache_dir(cache_dir)
    try:
        _touch_init(root)
        dyn = root / DYNAMIC_MODULES
        _touch_init(dyn)
        _touch_init(dyn / MODULE_TYPE)
    except OSError as e:
        raise MetricsInstallError(f"cannot write evaluate's module cache {root}: {e}") from None
    out = []
    for name in selected:
        script = src / name / f"{name}.py"
        h = module_hash(script)
        module_dir = dyn / MODULE_TYPE / f"{namespace}--{name}"
        _touch_init(module_dir)
        target = module_dir / h
        with atomic_dir(target, command="metrics install", inputs=[src / name], what="module folder",
                        recognise=lambda d, n=name: (d / f"{n}.py").is_file() and (d / f"{n}.json").is_file()) as tmp:
            (tmp / "__init__.py").write_text("", encoding="utf-8")
            for pattern in CACHE_FILES:
                f = src / name / pattern.format(name=name)
                if f.is_file():
                    shutil.copyfile(f, tmp / f.name)  # copyfile: fresh mtime = "newest" for evaluate
            meta = {"original file path": str(script), "local file path": str(target / f"{name}.py"),
                    "benchaudit_version": _version(), "sha256": h}
            (tmp / f"{name}.json").write_text(json.dumps(meta), encoding="utf-8")
        removed = 0
        for other in module_dir.iterdir():
            if other.is_dir() and other.name != h and len(other.name) == 64:
                shutil.rmtree(other, ignore_errors=True)
                removed += 1
        out.append(InstalledModule(name=name, load_id=f"{namespace}/{name}", path=target / f"{name}.py",
                                   hash=h, removed_stale=removed))
    return out


def installed(*, namespace: str = NAMESPACE, cache_dir: str | os.PathLike | None = None,
              source: str | os.PathLike | None = None) -> list[dict]:
    """For each metric: the installed hash (or None) and whether it matches the current sources."""
    try:
        src: Path | None = source_dir(source)
    except MetricsInstallError:
        src = None
    dyn = modules_cache_dir(cache_dir) / DYNAMIC_MODULES / MODULE_TYPE
    rows = []
    for name in METRIC_NAMES:
        module_dir = dyn / f"{namespace}--{name}"
        hashes = [p for p in module_dir.iterdir() if p.is_dir() and len(p.name) == 64 and
                  (p / f"{name}.py").is_file()] if module_dir.is_dir() else []
        newest = max(hashes, key=lambda p: (p / f"{name}.py").stat().st_mtime) if hashes else None
        current = module_hash(src / name / f"{name}.py") if src is not None and \
            (src / name / f"{name}.py").is_file() else None
        meta: dict = {}
        if newest is not None:
            try:
                meta = json.loads((newest / f"{name}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                meta = {}
        rows.append({
            "installed_version": meta.get("benchaudit_version") if isinstance(meta, dict) else None,
            "name": name, "load_id": f"{namespace}/{name}",
            "source": str(src / name) if src is not None else None,
            "installed_hash": newest.name if newest is not None else None,
            "up_to_date": newest is not None and newest.name == current,
        })
    return rows
