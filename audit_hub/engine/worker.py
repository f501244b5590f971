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


class Job:
    """A call started in the worker (a future): :meth:`ready`, :meth:`wait` with a timeout, :meth:`get` (its
    value, or the exception it raised there)."""

    def __init__(self, future) -> None:
        self.future = future

    def ready(self) -> bool:
        return self.future.done()

    def wait(self, timeout: float | None = None) -> None:
        from concurrent.futures import wait

        wait([self.future], timeout)

    def lost(self) -> bool:
        """Done without an answer: the worker died (killed, out of memory) or was stopped before it returned."""
        from concurrent.futures import CancelledError
        from concurrent.futures.process import BrokenProcessPool

        if not self.future.done():
            return False
        try:
            return isinstance(self.future.exception(0), BrokenProcessPool)
        except CancelledError:
            return True

    def get(self) -> Any:
        return self.future.result()


class WorkerProcess:
    """One spawned worker process (its interpreter start and imports overlap the caller's). A context
    manager: leaving it stops the worker.

    A :class:`concurrent.futures.ProcessPoolExecutor` of one process: a worker that dies (an OOM kill) fails
    every call it holds at once (:meth:`Job.lost`), and no replacement starts. (``multiprocessing.Pool`` starts
    a replacement, never answers the lost call, and its ``terminate`` can block for ever on a queue lock the
    dead process held.)"""

    def __init__(self) -> None:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor

        _quiet_resource_tracker()
        ctx = multiprocessing.get_context("spawn")
        self.counter = ctx.Value("q", 0)  # the next simulation index to run (calibration.SimClaims)
        # [round, next file index]: the input files read beside the caller (readers.parallel)
        self.read_claims = ctx.Array("q", 2)
        self.pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker,
                                        initargs=(self.counter, self.read_claims, os.getpid()))
        self.pool.submit(_warm_readers)  # starts the process, from this thread
        self._procs = list(getattr(self.pool, "_processes", {}).values())
        self._pids = {p.pid for p in self._procs}
        self._warmed = False
        self._warmed_report = False
        # set by the caller: blocks until the second CPU is free of the caller's own background work (the
        # runs table written while the detectors run); the simulations are submitted after it returns
        self.after: Callable[[], None] | None = None

    def alive(self) -> bool:
        """The worker process still runs and takes calls."""
        if self.pool is None or getattr(self.pool, "_broken", False):
            return False
        return all(p.is_alive() for p in self._procs)

    def wait(self, job: Job) -> bool:
        """Wait for a call started in the worker; False if the worker died first (the result is lost)."""
        while not job.ready():
            job.wait(0.05)
            if not job.ready() and not self.alive():
                return False
        return not job.lost()

    def call(self, fn: Callable, *args) -> Any:
        """``fn(*args)`` run in the worker and waited for; run here when the worker is gone or dies meanwhile.
        An exception ``fn`` raises there is raised here."""
        job = self.submit(fn, *args) if self.alive() else None
        if job is not None and self.wait(job):
            return job.get()
        return fn(*args)

    def submit(self, fn: Callable, *args) -> Job | None:
        """``fn(*args)`` started in the worker: a :class:`Job`, or None when the worker is stopped or dead (the
        caller then runs ``fn`` itself)."""
        from concurrent.futures.process import BrokenProcessPool

        pool = self.pool
        if pool is None:
            return None
        try:
            return Job(pool.submit(fn, *args))
        except (RuntimeError, BrokenProcessPool):  # stopped meanwhile, or the worker died
            return None

    def warm(self) -> None:
        """Queue the imports a simulation and the figures need (once; after any reading job)."""
        if not self._warmed and self.pool is not None:
            self._warmed = True
            self.submit(_warm)

    def warm_report(self) -> None:
        """Queue the imports the figures and the card need (once): after the simulations when they are
        submitted (:class:`audit_hub.engine.calibration.Calibration` calls this right behind them), else now."""
        if not self._warmed_report and self.pool is not None:
            self._warmed_report = True
            self.submit(_warm_report)

    def start_round(self, fn: Callable, *args) -> tuple[int, Job] | None:
        """Open a new reading round (:attr:`read_claims` set to ``[round, 0]``) and submit
        ``fn(round, *args)`` to the worker, with the warm-up imports queued behind it. Returns (round, job), or
        None when the worker is stopped."""
        if self.pool is None:
            return None
        arr = self.read_claims
        with arr.get_lock():
            arr[0] = int(arr[0]) + 1
            arr[1] = 0
            round_id = int(arr[0])
        job = self.submit(fn, round_id, *args)
        if job is None:
            return None
        self.warm()
        return round_id, job

    def close(self) -> None:
        """Stop the worker now, whatever it is running (safe to call twice)."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        for p in self._procs:  # the executor's manager thread sees it die and fails the calls it held
            if p.is_alive():
                p.kill()
        pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start_worker(enabled: bool = True) -> WorkerProcess | None:
    """A :class:`WorkerProcess` when ``enabled`` and a second CPU is free (None otherwise, or where no process
    can be started)."""
    if not (enabled and worker_helps()):
        return None
    return new_worker()


def new_worker() -> WorkerProcess | None:
    """A started :class:`WorkerProcess`, or None where none can start: no process here, or a script that calls
    benchaudit at its top level without the ``__main__`` guard (:func:`unguarded_main`; a warning says so)."""
    where = unguarded_main()
    if where is not None:
        if where not in _WARNED:  # once per call site
            import warnings

            _WARNED.add(where)
            why = ("this script calls it at its top level without 'if __name__ == \"__main__\":', which a "
                   "second process would run again; put the call under that guard to use two CPUs") if where[1] \
                else "a second process cannot start from this main script (it runs it again first)"
            warnings.warn_explicit(f"benchaudit runs in one process: {why}", RuntimeWarning,
                                   filename=where[0], lineno=where[1])
        return None
    try:
        return WorkerProcess()
    except OSError:
        return None


def _is_main_guard(test) -> bool:
    """``__name__ == "__main__"`` (either side), alone or as a term of an ``and``."""
    import ast

    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_guard(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [n for n in sides if isinstance(n, ast.Name) and n.id == "__name__"]
    consts = [n for n in sides if isinstance(n, ast.Constant) and n.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


_WARNED: set[tuple[str, int]] = set()


def unguarded_main() -> tuple[str, int] | None:
    """The ``__main__`` script's path and line when it is calling benchaudit from top-level code outside an
    ``if __name__ == "__main__":`` block (else None).

    A spawned process (the worker) starts by running the main script again, as ``__mp_main__``; an unguarded
    call would run the script's work there too (whatever it does before the call, the call itself failing in
    multiprocessing's bootstrapping), and the worker would be lost (a ``multiprocessing.Pool`` restarted it
    without end). Told here from the call stack and the script's syntax tree, before any process starts.
    ``python -m package``, an interactive session, ``python -c``, the console script (guarded) and scripts
    that do not parse answer None; a main script that cannot be read (``python - < script``) answers
    ``(path, 0)``: a second process could not run it at all."""
    import ast
    import multiprocessing
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not isinstance(path, str):
        return None
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name == "__main__" or spec_name.endswith(".__main__"):
        return None  # `python -m package`: multiprocessing does not run a package's __main__ again
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        return path, 0  # this is the re-run itself
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # the script's top level is not running (called later, or from elsewhere)
        return None
    line = frame.f_lineno
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except OSError:  # ``python - < script``: a second process could not run it at all
        return path, 0
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body \
                and node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
            return None
    return path, line


def worker_helps() -> bool:
    """A second CPU is available to this process (a worker then runs beside the audit)."""
    from ..bounds import available_cpus

    return available_cpus() >= 2
