"""Writing an output folder: the one path every command's folder takes to disk.

:func:`output_folder` opens an atomic folder (:func:`audit_hub.hub.folders.atomic_dir`: written beside
``--out``, checked again and swapped in at the end, nothing partial on failure) and yields an
:class:`OutputFolder`, through which the command writes its configs (the one shard writer,
:func:`audit_hub.hub.shards.write_config`), its JSON files, its figures, its card (the one YAML header
builder, :mod:`audit_hub.hub.card`) and, last, its manifest (the one schema, :mod:`audit_hub.hub.manifest`).

:func:`write_report_set` writes several complete reports and an index in one atomic folder (the work_dir
audit: ``OUT/<name>/`` each a valid output of its own, ``OUT/index.json``, ``OUT/README.md`` whose YAML
lists every report's configs, and ``OUT/manifest.json`` listing every file under ``OUT``).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import card as _card
from . import manifest as _manifest
from .figures import save_png
from .shards import SHARD_BYTES, write_config

INDEX_JSON = "index.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class OutputFolder:
    """A folder being written (the temporary folder of :func:`output_folder`, or a report inside it).

    ``files``: config (file stem) -> the shard paths written so far, for the card's YAML."""

    def __init__(self, root: str | os.PathLike, command: str):
        self.root = Path(root)
        self.command = command
        self.files: dict[str, list[str]] = {}
        self.started_at = time.time()

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def config(self, name: str, table: Any, shard_bytes: int = SHARD_BYTES, cancel=None) -> list[str]:
        """Write one config (a DataFrame or an Arrow table) as ``data/<name>-NNNNN-of-MMMMM.parquet``."""
        paths = write_config(self.root, name, table, shard_bytes, cancel)
        self.files[name] = paths
        return paths

    def add_config(self, name: str, paths: list[str]) -> None:
        """Record shards of ``name`` put into the folder another way (moved in from a staging folder)."""
        self.files[name] = list(paths)

    def json(self, rel: str, obj: Any) -> Path:
        """``obj`` as JSON (numpy -> plain types, NaN -> null, credentials scrubbed)."""
        from .folders import dump_json

        p = self.path(rel)
        p.write_text(dump_json(obj), encoding="utf-8")
        return p

    def text(self, rel: str, text: str) -> Path:
        p = self.path(rel)
        p.write_text(text, encoding="utf-8")
        return p

    def parquet(self, rel: str, df: Any) -> Path:
        """A DataFrame as one Parquet file outside the configs (pandas' writer, its schema kept)."""
        p = self.path(rel)
        df.to_parquet(p, index=False)
        return p

    def figure(self, fig: Any, rel: str) -> str:
        """Save a matplotlib figure as ``rel`` (PNG) and close it; returns ``rel``."""
        save_png(fig, self.path(rel))
        return rel

    def folder(self, rel: str) -> Path:
        """A sub-folder (created) for writers that take a folder (figures drawn in another process)."""
        p = self.root / rel
        p.mkdir(parents=True, exist_ok=True)
        return p

    def card(self, header: dict, *, body: str | None = None, template: str | None = None,
             splits: dict[str, str] | None = None, names: dict[str, str] | None = None, **ctx: Any) -> str:
        """Write ``README.md``: ``header`` + ``dataset_info`` read back from this folder's shards + the body."""
        info = _card.dataset_info(self.root, self.files, splits=splits, names=names) if self.files else None
        text = _card.render(header, info=info, body=body, template=template, **ctx)
        self.text("README.md", text)
        return text

    def card_text(self, text: str) -> None:
        """Write a ``README.md`` already rendered (by :func:`audit_hub.hub.card.render`, e.g. in a worker)."""
        self.text("README.md", text)

    def manifest(self, *, command_line: list[str] | None, inputs: list | None, fields: dict | None = None,
                 timings: dict | None = None, started_at: float | None = None,
                 finished_at: float | None = None) -> dict:
        """Write ``manifest.json`` last (it lists every other file with its sha256)."""
        m = _manifest.build(self.command, folder=self.root, command_line=command_line, inputs=inputs,
                            started_at=self.started_at if started_at is None else started_at,
                            finished_at=time.time() if finished_at is None else finished_at,
                            timings=timings, fields=fields)
        _manifest.write(self.root, m)
        return m


class Background:
    """``fn(*args)`` on a daemon thread; :meth:`result` joins and re-raises its exception."""

    def __init__(self, fn, *args, start: bool = True):
        import threading

        self._out: Any = None
        self._err: BaseException | None = None

        def work() -> None:
            try:
                self._out = fn(*args)
            except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread by result())
                self._err = e

        self._thread = threading.Thread(target=work, name="benchaudit-output-writer", daemon=True)
        if start:
            self._thread.start()

    def start(self) -> None:
        """Start it (made with ``start=False``: the owner holds it before it runs)."""
        self._thread.start()

    def join(self) -> None:
        if self._thread.ident is not None:  # never started: nothing to wait for
            self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._out


class StagedConfig:
    """One config written on a second thread before the output folder opens, into a staging folder
    beside ``out`` (named like the output's temporary folders, so a killed run's leftover is removed by
    the next run), then moved into the folder by :meth:`move_into`. :meth:`discard` (always safe to
    call) stops and joins the thread and removes what is left. No staging (``job`` None) when ``out``'s
    parent does not exist yet or cannot be written.

    ``register``: called with the object once its staging folder exists, with SIGINT/SIGTERM held off from
    before the folder is made until the caller has it (:func:`~audit_hub.hub.folders.signals_held`), so that a
    Ctrl-C at any instant leaves the folder to the caller's :meth:`discard`; the thread is known to the object
    before it starts. Whatever fails or is interrupted later in the constructor discards the folder itself."""

    def __init__(self, out: str | os.PathLike, name: str, make_table: Callable[[], Any], *, command: str,
                 inputs=(), shard_bytes: int = SHARD_BYTES, register: Callable[[Any], None] | None = None):
        import threading

        from .folders import signals_held, staging_dir

        self.name = name
        self.cancel = threading.Event()
        self.dir: Path | None = None
        self.job: Background | None = None
        with signals_held():
            self.dir = staging_dir(out, command=command, inputs=inputs)
            if register is not None:
                register(self)
        try:
            if self.dir is not None:
                job = Background(write_config, self.dir, name, make_table(), shard_bytes, self.cancel, start=False)
                self.job = job
                job.start()
        except BaseException:
            self.discard()
            raise

    def wait(self) -> None:
        """Block until the write has finished (or failed; :meth:`move_into` re-raises)."""
        if self.job is not None:
            self.job.join()

    def move_into(self, folder: Path) -> list[str]:
        """Wait for the write, move the shards into ``folder``; their relative paths."""
        paths = self.job.result()
        (Path(folder) / "data").mkdir(parents=True, exist_ok=True)
        for rel in paths:
            os.replace(self.dir / rel, Path(folder) / rel)
        return paths

    def discard(self) -> None:
        import shutil

        if self.job is not None:
            self.cancel.set()  # after a failure: stop at the next shard
            self.job.join()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def output_folder(out: str | os.PathLike, *, command: str, inputs=(), recognise=None,
                  what: str = "--out", _hook: Callable[[Path], None] | None = None) -> Iterator[OutputFolder]:
    """Open ``out`` for writing by ``command``: an :class:`OutputFolder` over a temporary sibling that
    replaces ``out`` atomically on success (see :func:`audit_hub.hub.folders.atomic_dir`)."""
    from .folders import atomic_dir

    with atomic_dir(out, command=command, inputs=inputs, recognise=recognise, what=what) as tmp:
        f = OutputFolder(tmp, command)
        yield f
        if not (f.root / _manifest.MANIFEST).is_file():
            raise RuntimeError(f"internal: the {command} output has no manifest.json")
        if _hook is not None:
            _hook(f.root)


def check_report_name(name: str) -> str:
    """A report's folder name inside an index: letters, digits, '.', '_', '-' (not leading), at most 96."""
    from ..errors import InputError

    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise InputError(f"cannot use {name!r} as a report folder name (letters, digits, '.', '_', '-'; "
                         "not starting with '.' or '-')")
    return name


def index_card_text(reports: dict[str, tuple[Path, dict[str, list[str]]]], *, title: str, body: str,
                    header: dict | None = None) -> str:
    """The README of an index of reports: its YAML lists every report's configs as ``<name>-<config>``
    (``<name>`` alone for its ``questions``; the first is the default), with their ``dataset_info``, so the
    pushed index loads with ``datasets.load_dataset(repo, "<name>-<config>")``; then ``body``. ``reports``:
    folder name -> (its root, its configs: :attr:`OutputFolder.files` or :func:`~audit_hub.hub.shards.written_configs`)."""
    cfgs, info = [], []
    for name, (root, files) in reports.items():
        names = {stem: name if stem == "questions" else f"{name}-{stem}" for stem in files}
        cfgs += _card.configs(files, names=names, prefix=name)
        if files:
            info += _card.dataset_info(root, files, names=names)
    if cfgs:
        cfgs[0]["default"] = True
    head = {"pretty_name": _card.yaml_text(title), "tags": ["benchaudit", "benchmark-audit"], **(header or {}),
            "configs": cfgs}
    return _card.render(head, info=info or None, body=body)


def write_report_set(out: str | os.PathLike, reports: dict[str, Callable[[OutputFolder], Any]], *,
                     command: str = "audit", inputs=(), command_line: list[str] | None = None,
                     index_rows: list[dict] | Callable[[dict[str, Any]], list[dict]] = (),
                     title: str = "benchaudit reports", body: str | Callable[[list[dict]], str] = "",
                     fields: dict | None = None, header: dict | None = None,
                     _hook: Callable[[Path], None] | None = None) -> Path:
    """Write several complete reports and an index into ``out`` in one atomic folder; return its path.

    ``reports``: folder name -> ``fill(folder)``, which writes one complete report into the
    :class:`OutputFolder` it is given (configs, summary, card and, last, its own manifest, exactly as for a
    folder of its own; each report is then pushable on its own). ``fill``'s return values are passed, by
    name, to ``index_rows`` when it is a callable; the rows (one per report: items, models, headline
    figures) are written as ``index.json`` with each row's ``path``. ``body``: the index card's Markdown
    (input-derived strings escaped by the caller with :mod:`audit_hub.escape`), or a callable of the rows.
    The index card's YAML lists every report's configs as ``<name>-<config>`` (``<name>`` alone for its
    ``questions``), so ``datasets.load_dataset(repo, "<name>")`` loads one benchmark's questions.
    The index's ``manifest.json`` has ``kind: index`` and ``reports`` (name, path, command of each)."""
    from ..errors import InputError

    if not reports:
        raise InputError("no report to write")
    for name in reports:
        check_report_name(name)
    lowered = [n.lower() for n in reports]
    dup = next((n for n in reports if lowered.count(n.lower()) > 1), None)
    if dup is not None:
        raise InputError(f"two reports would share the folder {dup!r} (names differ only in case)")
    started = time.time()
    with output_folder(out, command=command, inputs=inputs, _hook=_hook) as top:
        results: dict[str, Any] = {}
        subs: dict[str, OutputFolder] = {}
        for name, fill in reports.items():
            sub = OutputFolder(top.folder(name), command)
            results[name] = fill(sub)
            if not (sub.root / _manifest.MANIFEST).is_file():
                raise RuntimeError(f"internal: the report {name} has no manifest.json")
            subs[name] = sub
        rows = index_rows(results) if callable(index_rows) else list(index_rows)
        rows = [{**r, "path": r.get("path") or f"{r['name']}/"} if isinstance(r, dict) and "name" in r else r
                for r in rows]
        top.json(INDEX_JSON, {"reports": rows})
        top.text("README.md", index_card_text({name: (sub.root, sub.files) for name, sub in subs.items()},
                                              title=title, header=header,
                                              body=body(rows) if callable(body) else body))
        top.manifest(command_line=command_line, inputs=list(inputs or ()), started_at=started,
                     fields={"kind": "index", **(fields or {}),
                             "reports": [{"name": n, "path": f"{n}/", "command": command} for n in subs]})
    return Path(out).resolve()


# ---------------------------------------------------------------------------------------- resumable folders
# A blind run writes its folder in place (it is resumed there after a kill): the folder is checked again and
# created just before the first write, every file appears whole (a temporary sibling renamed into place),
# and the card and the manifest are written last, when the run is complete.
def open_in_place(out: str | os.PathLike, *, command: str, inputs=(), recognise=None, what: str = "--out") -> Path:
    """Check ``out`` again (the rule of :func:`audit_hub.hub.folders.check_output_target`, now, not only at
    the start: a folder made there meanwhile is refused, not written into) and create it; its path."""
    from .folders import check_output_target, pause_hook

    pause_hook()
    real = check_output_target(out, command=command, inputs=inputs, recognise=recognise, what=what)
    Path(out).mkdir(parents=True, exist_ok=True)
    return real


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """``obj`` as JSON (credentials scrubbed) written whole or not at all."""
    from .folders import atomic_write_bytes, dump_json

    atomic_write_bytes(path, dump_json(obj).encode("utf-8"))
    return Path(path)


def remove_in_place(out: str | os.PathLike, files: tuple[str, ...] = (), folders: tuple[str, ...] = ()) -> None:
    """Remove the named files and folders of ``out`` written by this tool (``--overwrite``); nothing else."""
    import shutil

    out = Path(out)
    for rel in folders:
        shutil.rmtree(out / rel, ignore_errors=True)
    for rel in files:
        with contextlib.suppress(FileNotFoundError):
            (out / rel).unlink()


def remove_file(path: str | os.PathLike) -> None:
    with contextlib.suppress(FileNotFoundError):
        Path(path).unlink()


def remove_empty_folder(path: str | os.PathLike) -> None:
    with contextlib.suppress(OSError):
        Path(path).rmdir()


def finish_in_place(out: str | os.PathLike, *, command: str, files: dict[str, list[str]], header: dict, body: str,
                    command_line: list[str] | None, inputs=(), fields: dict | None = None,
                    started_at: float | None = None, names: dict[str, str] | None = None) -> dict:
    """The last step of an in-place output: ``README.md`` (the one YAML header builder, ``dataset_info``
    read from ``files``) and ``manifest.json`` (the one schema; ``outputs`` lists every file now in ``out``),
    each written whole. Returns the manifest."""
    from .folders import atomic_write_bytes, dump_json

    out = Path(out)
    info = _card.dataset_info(out, files, names=names) if files else None
    atomic_write_bytes(out / "README.md", _card.render(header, info=info, body=body).encode("utf-8"))
    m = _manifest.build(command, folder=out, command_line=command_line, inputs=list(inputs or ()),
                        started_at=started_at, finished_at=time.time(), fields={**(fields or {}), "output_of": command})
    atomic_write_bytes(out / _manifest.MANIFEST, dump_json(m).encode("utf-8"))
    return m


def copy_output(src: str | os.PathLike, out: str | os.PathLike, *, command: str) -> Path:
    """Copy a complete output folder ``src`` to ``out`` atomically (the rules of every ``--out``)."""
    import shutil

    from .folders import atomic_dir

    with atomic_dir(out, command=command, inputs=[src]) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
    return Path(out).resolve()
