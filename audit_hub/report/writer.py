"""The audit report's content -- the ``questions``, ``summary`` and ``runs`` configs, figures, card,
summary and manifest fields -- handed to the output layer (:mod:`audit_hub.hub.output`), which writes it.

The folder has exactly the layout ``datasets.push_to_hub`` writes (``README.md`` with ``configs`` and
``dataset_info`` YAML, ``data/<config>-NNNNN-of-MMMMM.parquet``), plus ``summary.json``,
``manifest.json`` and ``figures/``. :func:`write_report` writes it atomically (a failed or killed audit
never leaves a partial folder behind); :func:`fill_report` writes one report into a folder that is
already open (one report of a work_dir index, :func:`audit_hub.hub.output.write_report_set`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..bounds import release_memory
from ..hub.output import Background, OutputFolder, StagedConfig, output_folder
from ..hub.shards import SHARD_BYTES
from .tables import build_questions_table, build_runs_table, build_summary_table

CONFIGS: tuple[str, ...] = ("questions", "summary", "runs")


class RenderWorker(Protocol):
    """What the report needs of the engine's worker process (:class:`audit_hub.engine.worker.WorkerProcess`):
    a job started there (an async result, or None when it cannot start), a job run there and waited for
    (here when the worker is gone), a wait for a started job that says whether the worker lived to finish it,
    and whether it still runs. The report holds nothing else of it."""

    def submit(self, fn: Callable, *args): ...

    def wait(self, job) -> bool: ...

    def call(self, fn: Callable, *args) -> Any: ...

    def alive(self) -> bool: ...


class EarlyRuns(StagedConfig):
    """The ``runs`` config written on a second thread while the detectors run (it depends on the frame
    only; Arrow's writer releases the GIL), staged beside the output by the output layer and moved into
    the report by :func:`write_report`. :meth:`discard` (always safe to call) joins the thread and
    removes what is left."""

    def __init__(self, frame: Any, out_dir: str | os.PathLike, *, inputs=(), shard_bytes: int = SHARD_BYTES,
                 register=None):
        from .runs_arrow import runs_arrow_table

        self.frame = frame
        super().__init__(out_dir, "runs", lambda: runs_arrow_table(frame), command="audit", inputs=inputs,
                         shard_bytes=shard_bytes, register=register)

    def usable_for(self, frame: Any) -> bool:
        return self.job is not None and frame is self.frame


def _submit_figures(worker, fi, out: Path):
    """The figures drawn in ``worker``'s process (an async result), or None to draw them here."""
    if worker is None or not worker.alive():
        return None
    from .figures import render_figures_timed

    return worker.submit(render_figures_timed, fi, out)


def _wait_figures(worker, job, fi, folder: Path, planned: dict[str, str]) -> None:
    """Wait for the worker's figures; they must be the ones the card names. A worker that died meanwhile
    (killed, out of memory) never answers: the figures are drawn here instead."""
    from ..clock import note_parallel

    if not worker.wait(job):
        from .figures import render_figures

        drawn = render_figures(fi, folder)
    else:
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
    from ..clock import stage

    started = time.time()
    target = Path(out_dir)
    t0 = time.perf_counter()
    with stage("report"):
        release_memory(result.frame)  # the detectors' dense matrices and freed heap, before the report's peak
        tables = _tables(result, early_runs)
    with output_folder(target, command="audit", inputs=[r.get("path") for r in inputs or []], _hook=_hook) as f:
        fill_report(result, f, command_line=command_line, inputs=inputs, figures=figures, shard_bytes=shard_bytes,
                    worker=worker, started_at=started, _prepared=tables, _t0=t0)
    return target.resolve()


def _tables(result: Any, early_runs: EarlyRuns | None) -> tuple:
    """(summary, runs or None, early runs or None). The ``questions`` table is built by :func:`fill_report` once
    the figures are handed to the worker (they need only the summary), so that they are drawn meanwhile."""
    early = early_runs if early_runs is not None and early_runs.usable_for(result.frame) else None
    return build_summary_table(result), build_runs_table(result) if early is None else None, early


def fill_report(result: Any, f: OutputFolder, *, command_line: list[str], inputs: list[dict], figures: bool = True,
                shard_bytes: int = SHARD_BYTES, worker: RenderWorker | None = None, started_at: float | None = None,
                _prepared=None,
                _t0: float | None = None) -> None:
    """Write one complete audit report into the open folder ``f`` (configs, figures, ``summary.json``,
    the card and, last, the manifest). :func:`write_report` for a folder of its own; a work_dir audit
    calls it once per benchmark through :func:`audit_hub.hub.output.write_report_set`."""
    from ..clock import current_timings, stage
    from .card import render_card
    from .manifest import manifest_fields

    started = time.time() if started_at is None else started_at
    local: dict[str, float] = {}  # this function's stages, for the manifest when no clock is installed
    t0 = time.perf_counter() if _t0 is None else _t0
    if _prepared is None:
        with stage("report"):
            _prepared = _tables(result, None)
    summary_df, runs, early = _prepared
    tmp = f.root
    # the runs config (100M rows at 1M x 50: most of the report's time, in Arrow's C++ writer with the
    # GIL released) is written on a second thread while this one writes the other configs and draws
    # the figures; the card reads every file's footer, so it waits for the runs first
    runs_job = Background(f.config, "runs", runs, shard_bytes) if early is None else Background(early.move_into, tmp)
    del runs
    try:
        figs: dict[str, str] = {}
        fig_job = fi = None
        local["report"] = time.perf_counter() - t0
        if figures:  # handed to the worker first, so that it draws them while this thread writes the configs
            from . import figures as fig_mod

            t0 = time.perf_counter()
            with stage("figures"):
                fi = fig_mod.figure_inputs(result, summary_df)
                fig_job = _submit_figures(worker, fi, tmp / "figures")
            local["figures"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with stage("report"):
            questions = build_questions_table(result)
            f.config("questions", questions, shard_bytes)
            f.config("summary", summary_df, shard_bytes)
        local["report"] += time.perf_counter() - t0
        if fi is not None:
            t0 = time.perf_counter()
            with stage("figures"):
                figs = fig_mod.planned(fi) if fig_job is not None else fig_mod.render_figures(fi, f.folder("figures"))
            local["figures"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        with stage("report"):  # what is left of the runs write after the figures
            paths = runs_job.result()
            if early is not None:
                f.add_config("runs", paths)
        local["report"] += time.perf_counter() - t0
    finally:
        runs_job.join()
    files = {name: f.files[name] for name in CONFIGS}
    t0 = time.perf_counter()
    release_memory()  # the runs write's Arrow buffers, before the card reads every file
    with stage("card"):
        f.json("summary.json", result.summary)
        copies = result.frame.meta.get("_circular_copies")
        if copies is not None and len(copies):  # CircularEval: the per-copy rows behind each question's verdict
            f.parquet("circular_copies.parquet", copies)
        f.card_text(render_card(result, questions, summary_df, files=files, figures=figs, folder=tmp,
                                worker=_card_worker(worker, fig_job)))
    local["card"] = time.perf_counter() - t0
    if fig_job is not None:
        t0 = time.perf_counter()
        with stage("figures"):
            _wait_figures(worker, fig_job, fi, tmp / "figures", figs)
        local["figures"] += time.perf_counter() - t0
    timings = current_timings() or {**dict(getattr(result, "timings", {}) or {}), **local}
    f.manifest(command_line=command_line, inputs=inputs, fields=manifest_fields(result, inputs), timings=timings,
               started_at=started)
