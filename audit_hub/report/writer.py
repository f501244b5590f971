"""Write the report folder: the ``questions``, ``summary`` and ``runs`` configs, and ``write_report``.

The folder has exactly the layout ``datasets.push_to_hub`` writes (``README.md`` with ``configs`` and
``dataset_info`` YAML, ``data/<config>-NNNNN-of-MMMMM.parquet``), plus ``summary.json``,
``manifest.json`` and ``figures/``. It is written inside :func:`audit_hub.hub.folders.atomic_dir`, so a
failed or killed audit never leaves a partial folder behind. This is the only module that imports
the card, the figures and the manifest.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from .tables import build_questions_table, build_runs_table, build_summary_table

CONFIGS: tuple[str, ...] = ("questions", "summary", "runs")


class RenderWorker(Protocol):
    """What the report needs of the engine's worker process (:class:`audit_hub.engine.worker.WorkerProcess`):
    a job started there (an async result, or None when it cannot start), a job run there and waited for
    (here when the worker is gone), and whether it still runs. The report holds nothing else of it."""

    def submit(self, fn: Callable, *args): ...

    def call(self, fn: Callable, *args) -> Any: ...

    def alive(self) -> bool: ...


# Target in-memory size of one Parquet shard (datasets.push_to_hub uses 500 MB on disk).
SHARD_BYTES = 256 * 1024 * 1024


def _arrow_table(df: pd.DataFrame):
    """DataFrame -> Arrow table with plain ``string`` types and no pandas metadata (portable schema)."""
    import pyarrow as pa

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


def write_config(folder: Path, name: str, df, shard_bytes: int = SHARD_BYTES, cancel=None) -> list[str]:
    """Write one config as ``data/<name>-NNNNN-of-MMMMM.parquet`` shards; return the relative paths.
    ``cancel``: a ``threading.Event`` checked before each shard (set: stop, return what was written).

    ``df``: a DataFrame, or an Arrow table (written as it is, in row groups, dictionary columns
    stored directly; see :func:`audit_hub.report.runs_arrow.write_arrow_parquet`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .runs_arrow import write_arrow_parquet

    native = isinstance(df, pa.Table)
    table = df if native else _arrow_table(df)
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


class _Background:
    """``fn(*args)`` on a daemon thread; :meth:`result` joins and re-raises its exception."""

    def __init__(self, fn, *args):
        import threading

        self._out: Any = None
        self._err: BaseException | None = None

        def work() -> None:
            try:
                self._out = fn(*args)
            except BaseException as e:  # noqa: BLE001 (re-raised in the caller's thread by result())
                self._err = e

        self._thread = threading.Thread(target=work, name="benchaudit-runs-writer", daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._out


class EarlyRuns:
    """The ``runs`` config written on a second thread while the detectors run (it depends on the frame
    only; Arrow's writer releases the GIL), into a staging folder beside the output that
    :func:`write_report` moves into the report. :meth:`discard` (always safe to call) joins the thread
    and removes what is left."""

    def __init__(self, frame: Any, out_dir: str | os.PathLike, *, inputs=(), shard_bytes: int = SHARD_BYTES):
        import threading

        from ..hub.folders import staging_dir
        from .runs_arrow import runs_arrow_table

        self.frame = frame
        self.cancel = threading.Event()
        self.dir = staging_dir(out_dir, command="audit", inputs=inputs)
        self.job = None if self.dir is None else _Background(write_config, self.dir, "runs",
                                                              runs_arrow_table(frame), shard_bytes, self.cancel)

    def usable_for(self, frame: Any) -> bool:
        return self.job is not None and frame is self.frame

    def wait(self) -> None:
        """Block until the write has finished (or failed; :meth:`move_into` re-raises)."""
        if self.job is not None:
            self.job.join()

    def move_into(self, folder: Path) -> list[str]:
        """Wait for the write, move the shards into ``folder``; their relative paths."""
        paths = self.job.result()
        (folder / "data").mkdir(parents=True, exist_ok=True)
        for rel in paths:
            os.replace(self.dir / rel, folder / rel)
        return paths

    def discard(self) -> None:
        import shutil

        if self.job is not None:
            self.cancel.set()  # after a failure: stop at the next shard
            self.job.join()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _submit_figures(worker, fi, out: Path):
    """The figures drawn in ``worker``'s process (an async result), or None to draw them here."""
    if worker is None:
        return None
    from .figures import render_figures_timed

    return worker.submit(render_figures_timed, fi, out)


def _wait_figures(job, planned: dict[str, str]) -> None:
    """Wait for the worker's figures; they must be the ones the card names."""
    from ..clock import note_parallel

    drawn, seconds = job.get()
    note_parallel("figures worker", seconds)
    if drawn != planned:
        raise RuntimeError(f"figures drawn {sorted(drawn)} differ from those planned {sorted(planned)}")


# How long the card waits for the worker to finish the figures before rendering here instead: about what
# importing datasets and huggingface_hub's card module costs this process (the worker has them imported).
# Small figures (a few thousand questions) are done by then; large ones take seconds, and the card is
# rendered here meanwhile, as before.
CARD_WAIT_S = 0.3


def _card_worker(worker, fig_job):
    """``worker`` when it is free (or frees up within :data:`CARD_WAIT_S`) to render the card, else None."""
    if worker is None or not worker.alive():
        return None
    if fig_job is not None:
        fig_job.wait(CARD_WAIT_S)
        if not fig_job.ready():
            return None
    return worker


def write_report(result: Any, out_dir: str | os.PathLike, *, command_line: list[str], inputs: list[dict],
                 figures: bool = True, shard_bytes: int = SHARD_BYTES, early_runs: EarlyRuns | None = None,
                 worker: RenderWorker | None = None, _hook=None) -> Path:
    """Write the whole report folder atomically and return its path.

    ``early_runs``: the runs config already being written (:class:`EarlyRuns` of ``result.frame``);
    its shards are moved in instead of writing them again. The caller discards it afterwards.

    ``worker``: a started :class:`~audit_hub.engine.worker.WorkerProcess` whose process is free (the calibration
    is done): the figures are drawn there while this process writes the tables and the card (the same
    files; the card needs only their names).

    ``inputs``: one dict per input file (``path``, ``kind``, optional ``sha256``, ``bytes``, ``rows``,
    ``revision``/``resolved_commit`` for Hub inputs); missing hashes are computed here.
    ``_hook`` is for tests: called with the temporary folder just before it is moved into place.
    """
    from ..clock import current_timings, stage
    from ..hub.folders import atomic_dir, dump_json
    from .card import render_card
    from .manifest import build_manifest

    started = time.time()
    target = Path(out_dir)
    local: dict[str, float] = {}  # this function's stages, for the manifest when no clock is installed
    t0 = time.perf_counter()
    with stage("report"):
        questions = build_questions_table(result)
        summary_df = build_summary_table(result)
        early = early_runs if early_runs is not None and early_runs.usable_for(result.frame) else None
        runs = build_runs_table(result) if early is None else None
    with atomic_dir(target, command="audit", inputs=[r.get("path") for r in inputs or []]) as tmp:
        # the runs config (100M rows at 1M x 50: most of the report's time, in Arrow's C++ writer with the
        # GIL released) is written on a second thread while this one writes the other configs and draws
        # the figures; the card reads every file's footer, so it waits for the runs first
        runs_job = _Background(write_config, tmp, "runs", runs, shard_bytes) if early is None else \
            _Background(early.move_into, tmp)
        del runs
        try:
            with stage("report"):
                written = {"questions": write_config(tmp, "questions", questions, shard_bytes),
                           "summary": write_config(tmp, "summary", summary_df, shard_bytes)}
            local["report"] = time.perf_counter() - t0
            figs: dict[str, str] = {}
            fig_job = None
            if figures:
                from . import figures as fig_mod

                t0 = time.perf_counter()
                with stage("figures"):
                    fi = fig_mod.figure_inputs(result, summary_df)
                    fig_job = _submit_figures(worker, fi, tmp / "figures")
                    figs = fig_mod.planned(fi) if fig_job is not None else fig_mod.render_figures(fi, tmp / "figures")
                local["figures"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            with stage("report"):  # what is left of the runs write after the figures
                written["runs"] = runs_job.result()
            local["report"] += time.perf_counter() - t0
        finally:
            runs_job.join()
        files = {name: written[name] for name in CONFIGS}
        t0 = time.perf_counter()
        with stage("card"):
            (tmp / "summary.json").write_text(dump_json(result.summary), encoding="utf-8")
            copies = result.frame.meta.get("_circular_copies")
            if copies is not None and len(copies):  # CircularEval: the per-copy rows behind each question's verdict
                copies.to_parquet(tmp / "circular_copies.parquet", index=False)
            card = render_card(result, questions, summary_df, files=files, figures=figs, folder=tmp,
                               worker=_card_worker(worker, fig_job))
            (tmp / "README.md").write_text(card, encoding="utf-8")
        local["card"] = time.perf_counter() - t0
        if fig_job is not None:
            t0 = time.perf_counter()
            with stage("figures"):
                _wait_figures(fig_job, figs)
            local["figures"] += time.perf_counter() - t0
        timings = current_timings() or {**dict(getattr(result, "timings", {}) or {}), **local}
        manifest = build_manifest(result, command_line=command_line, inputs=inputs, folder=tmp,
                                  started_at=started, finished_at=time.time(), timings=timings)
        (tmp / "manifest.json").write_text(dump_json(manifest), encoding="utf-8")
        if _hook is not None:
            _hook(tmp)
    return target.resolve()
