"""The audit's worker process: one spawned interpreter beside the audit's own, started first thing.

Its jobs, in order: import the readers (:func:`_warm_readers`) and read some of the input files
(:mod:`audit_hub.readers.parallel`); import what the simulations and figures need (:func:`_warm`);
run the calibration simulations it claims (:mod:`audit_hub.engine.calibration`); draw the figures
(:mod:`audit_hub.report.writer`). Work is shared through two counters in shared memory, inherited at
the start (:data:`SIM_COUNTER` for the simulations, ``readers.parallel.WORKER_CLAIMS`` for the files), so that which
process did what never changes a result.

This module imports nothing heavy: the CLI starts the worker before it loads numpy or pandas, so the
worker's own start overlaps them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SIM_COUNTER = None  # in the worker: WorkerProcess.counter (set by _init_worker)
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int | None) -> None:
    """Make the worker end, quietly, the moment the audit process is gone (SIGKILL, an OOM kill): on Linux
    the kernel sends it SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), elsewhere a thread
    watches the parent pid. No BrokenPipeError from a result it can no longer hand back; whatever it
    wrote is inside the killed run's temporary folder, which the next run removes."""
    import os
    import signal
    import sys

    if parent_pid is None:
        return
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(0)
    if not armed:
        import threading
        import time

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.2)
            os._exit(0)

        threading.Thread(target=watch, name="benchaudit-parent-watch", daemon=True).start()


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (before the first semaphore) with warnings off. After a
    SIGKILL of the audit the tracker still unlinks every semaphore the run created; its only output would
    be the 'leaked semaphore objects' warning, printed into the user's terminal."""
    import os
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if tracker is None or getattr(tracker, "_fd", None) is not None:
        return  # already running (or another implementation): nothing to do
    old = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = "ignore"
    try:
        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001 - the tracker starts on first use anyway
        pass
    finally:
        if old is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = old


def _init_worker(counter, read_claims=None, parent_pid: int | None = None) -> None:
    global SIM_COUNTER
    _die_with_parent(parent_pid)
    SIM_COUNTER = counter
    from ..readers import parallel

    parallel.WORKER_CLAIMS = read_claims  # WorkerProcess.read_claims, for the reading rounds


def _warm_readers() -> None:
    """Import the readers (the worker's first job: it may read input files beside the caller)."""
    from ..readers import dispatch, vlmevalkit, xlsx  # noqa: F401

    if xlsx.xlsx_engine() == "calamine":
        import pandas.io.excel._calamine  # noqa: F401
        import python_calamine  # noqa: F401


def _warm() -> None:
    """Import what a simulation needs (what the figures and the card need follows the simulations:
    :func:`_warm_report`, so that they start sooner)."""
    from .. import detectors

    for name in detectors.names():
        detectors.get(name).load()
    import threadpoolctl  # noqa: F401


def _warm_report() -> None:
    """Import what the figures and the card need (~0.5-0.9 s), queued behind the calibration simulations."""
    from ..hub.figures import pyplot_agg

    pyplot_agg()  # the report's figures are drawn here too, once the simulations are done
    import datasets  # noqa: F401  (and the card rendered: report.card.finish_card)
    import huggingface_hub.repocard  # noqa: F401


class WorkerProcess:
    """One spawned worker process (its interpreter start and imports overlap the caller's). A context
    manager: leaving it stops the worker."""

    def __init__(self) -> None:
        import multiprocessing
        import os

        _quiet_resource_tracker()
        ctx = multiprocessing.get_context("spawn")
        self.counter = ctx.Value("q", 0)  # the next simulation index to run (calibration.SimClaims)
        # [round, next file index]: the input files read beside the caller (readers.parallel)
        self.read_claims = ctx.Array("q", 2)
        self.pool = ctx.Pool(1, initializer=_init_worker, initargs=(self.counter, self.read_claims, os.getpid()))
        self.pool.apply_async(_warm_readers)
        self._pids = {p.pid for p in getattr(self.pool, "_pool", [])}
        self._warmed = False
        self._warmed_report = False
        # set by the caller: blocks until the second CPU is free of the caller's own background work (the
        # runs table written while the detectors run); the simulations are submitted after it returns
        self.after: Callable[[], None] | None = None

    def alive(self) -> bool:
        """The worker process the pool started still runs (a replacement the pool starts after it dies has
        lost the job it was running). True when that cannot be told."""
        if self.pool is None:
            return False
        procs = getattr(self.pool, "_pool", None)
        if procs is None or not self._pids:
            return True
        return all(p.pid in self._pids and p.is_alive() for p in procs)

    def wait(self, job) -> bool:
        """Wait for an async result of the worker; False if the worker died first (the result is lost)."""
        while not job.ready():
            job.wait(0.05)
            if not job.ready() and not self.alive():
                return False
        return True

    def call(self, fn: Callable, *args) -> Any:
        """``fn(*args)`` run in the worker and waited for; run here when the worker is gone or dies meanwhile.
        An exception ``fn`` raises there is raised here."""
        job = None
        if self.pool is not None and self.alive():
            try:
                job = self.pool.apply_async(fn, args)
            except (ValueError, AttributeError):  # the pool was stopped meanwhile
                job = None
        if job is not None and self.wait(job):
            return job.get()
        return fn(*args)

    def submit(self, fn: Callable, *args):
        """``fn(*args)`` started in the worker: an async result (``ready``, ``wait``, ``get``), or None when the
        worker is stopped (the caller then runs ``fn`` itself)."""
        if self.pool is None:
            return None
        try:
            return self.pool.apply_async(fn, args)
        except (ValueError, AttributeError):  # the pool was stopped meanwhile
            return None

    def warm(self) -> None:
        """Queue the imports a simulation and the figures need (once; after any reading job)."""
        if not self._warmed and self.pool is not None:
            self._warmed = True
            self.pool.apply_async(_warm)

    def warm_report(self) -> None:
        """Queue the imports the figures and the card need (once): after the simulations when they are
        submitted (:class:`audit_hub.engine.calibration.Calibration` calls this right behind them), else now."""
        if not self._warmed_report and self.pool is not None:
            self._warmed_report = True
            try:
                self.pool.apply_async(_warm_report)
            except (ValueError, AttributeError):  # the pool was stopped meanwhile
                pass

    def start_round(self, fn: Callable, *args) -> tuple[int, Any] | None:
        """Open a new reading round (:attr:`read_claims` set to ``[round, 0]``) and submit
        ``fn(round, *args)`` to the worker, with the warm-up imports queued behind it. Returns (round, async
        result), or None when the pool is stopped."""
        if self.pool is None:
            return None
        arr = self.read_claims
        with arr.get_lock():
            arr[0] = int(arr[0]) + 1
            arr[1] = 0
            round_id = int(arr[0])
        try:
            job = self.pool.apply_async(fn, (round_id, *args))
        except (ValueError, AttributeError):  # the pool was stopped meanwhile
            return None
        self.warm()
        return round_id, job

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start_worker(enabled: bool = True) -> WorkerProcess | None:
    """A :class:`WorkerProcess` when ``enabled`` and a second CPU is free (None otherwise, or where no process
    can be started)."""
    if not (enabled and worker_helps()):
        return None
    try:
        return WorkerProcess()
    except OSError:
        return None


def worker_helps() -> bool:
    """A second CPU is available to this process (a worker then runs beside the audit)."""
    from ..bounds import available_cpus

    return available_cpus() >= 2
