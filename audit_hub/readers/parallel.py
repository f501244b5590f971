"""A folder of run files read by two processes: this one and the audit's worker process.

Parsing an .xlsx sheet is CPU work in Python (the cell values, the question table each VLMEvalKit sheet
carries), and a VLMEvalKit results folder holds one sheet per model. While the audit reads its inputs,
the worker process (:class:`audit_hub.engine.worker.WorkerProcess`) has nothing to do yet, so it reads some of
the sheets too.

Who reads which file is decided as the reading goes: both processes take the next file index from a
counter in shared memory (:class:`ReadClaims`), so a slow start of the worker costs nothing (this
process then reads more of them). The results are put back in file order, and the first failing file
in that order is the one reported, as when one process reads them all: a failing file ends the
claiming, every file before it has been read by one of the two, and the others' results are dropped.
A worker that dies, or never gets to the job, leaves its files to this process.

Only .xlsx files up to :data:`SHARE_MAX_BYTES` are shared, and only when there are at least two of
them: their parsed tables are small next to the parsing work. Parquet and text tables are read here
(Arrow reads them with its own threads; sending the tables between processes would cost more than
reading them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

WORKER_CLAIMS = None  # in the worker process: the shared [round, next index] array (set at its start)
SHARE_EXTENSIONS = (".xlsx",)
SHARE_MAX_BYTES = 64 << 20
MIN_SHARED = 2

class ReadWorker(Protocol):
    """What reading needs of the engine's worker process (:class:`audit_hub.engine.worker.WorkerProcess`):
    the shared ``[round, next file]`` counter, a round started there, a wait that says whether the worker
    survived, and the warm-up queued when there is nothing to share. The readers hold nothing else of it."""

    read_claims: Any

    def start_round(self, fn: Callable, *args) -> tuple[int, Any] | None: ...

    def wait(self, job) -> bool: ...

    def warm(self) -> None: ...


class ReadClaims:
    """Indices ``0 .. n-1`` of one reading round, handed out once each, in increasing order, to whichever
    process asks first. ``arr`` is a shared ``[round, next index]`` array; a claim of any
    other round than the current one gets nothing, so a job that starts late (after its round was
    closed) reads nothing."""

    def __init__(self, arr, round_id: int, n: int) -> None:
        self.arr, self.round, self.n = arr, int(round_id), int(n)

    def next(self) -> int | None:
        with self.arr.get_lock():
            if int(self.arr[0]) != self.round:
                return None
            k = int(self.arr[1])
            if k >= self.n:
                return None
            self.arr[1] = k + 1
        return k

    def close(self) -> int:
        """End the round (no more claims) and return how many indices were handed out."""
        with self.arr.get_lock():
            if int(self.arr[0]) == self.round:
                self.arr[0] = self.round + 1
                return min(int(self.arr[1]), self.n)
            return self.n


def _portable(e: BaseException) -> BaseException:
    """What the worker sends back for an exception: an InputError (its message, file, row and column survive
    the trip) or a MemoryError as it is, anything else as a RuntimeError naming its type and message (an
    exception class whose arguments do not survive pickling must not reach the pool's result thread)."""
    from ..errors import InputError

    if type(e) is InputError:
        return InputError(e.detail, file=e.file, row=e.row, column=e.column)
    if isinstance(e, MemoryError):
        return MemoryError(*[str(a) for a in e.args])
    return RuntimeError(f"{type(e).__name__}: {e}")


def _attempt(read: Callable, path: str, explicit: bool, kwargs: dict) -> tuple[str, Any]:
    """``("ok", read(path, explicit, **kwargs))``, or ``("error", exception)`` when it raises one."""
    try:
        return "ok", read(path, explicit, **kwargs)
    except Exception as e:  # noqa: BLE001 - the caller reports it in file order
        return "error", e


def worker_reads(round_id: int, files: Sequence[tuple[str, bool]], read: Callable, kwargs: dict
                 ) -> tuple[dict, float, int]:
    """In the worker: ``read(path, explicit, **kwargs)`` the files of ``round_id`` it claims. Returns ({index:
    ("ok", result) or ("error", exception)}, seconds, its pid). Stops claiming after its first error."""
    arr = WORKER_CLAIMS
    out: dict[int, tuple[str, Any]] = {}
    t0 = time.perf_counter()
    if arr is None:
        return out, 0.0, os.getpid()
    claims = ReadClaims(arr, round_id, len(files))
    while (k := claims.next()) is not None:
        path, explicit = files[k]
        tag, value = out[k] = _attempt(read, path, explicit, kwargs)
        if tag == "error":  # returned to the audit process, which raises it in file order
            out[k] = (tag, _portable(value))
            break
    return out, time.perf_counter() - t0, os.getpid()


def shareable(path: str) -> bool:
    """A file the worker may read: an .xlsx of at most :data:`SHARE_MAX_BYTES`."""
    if not path.lower().endswith(SHARE_EXTENSIONS):
        return False
    try:
        return os.path.getsize(path) <= SHARE_MAX_BYTES
    except OSError:
        return False


class _ReadJob:
    """One reading round in the worker: its claims, and :meth:`collect` for its results."""

    def __init__(self, worker, claims: ReadClaims, job) -> None:
        self.worker, self.claims, self.job = worker, claims, job

    def collect(self) -> dict[int, tuple[str, Any]]:
        """{index in this round: ("ok", result) | ("error", exception)} from the worker; what a worker that
        died did not return is missing (the caller reads those files itself)."""
        from ..clock import note_parallel

        if not self.worker.wait(self.job):
            return {}
        try:
            out, seconds, _pid = self.job.get()
        except Exception:  # noqa: BLE001 - the job itself failed: its files are read here
            return {}
        note_parallel("read worker", seconds)
        return out


def _start(worker, files: list[tuple[str, bool]], read: Callable, kwargs: dict) -> _ReadJob | None:
    """A reading round over ``files`` started in ``worker``'s process (None when it cannot start)."""
    started = worker.start_round(worker_reads, files, read, kwargs)
    if started is None:
        return None
    round_id, job = started
    return _ReadJob(worker, ReadClaims(worker.read_claims, round_id, len(files)), job)


def read_files(files: Sequence[tuple[str, bool]], read: Callable[[str, bool], Any], kwargs: dict,
               worker: ReadWorker | None = None) -> list[Any]:
    """``[read(path, explicit) for path, explicit in files]`` (the results in file order), with the
    shareable files read by this process and ``worker``'s process together when ``worker`` is given.
    ``read`` (a module-level function: it is sent to the worker by name) and its keyword arguments ``kwargs``
    are what the worker runs too. The first exception in file order is raised."""
    shared = [i for i, (p, _) in enumerate(files) if shareable(p)] if worker is not None else []
    handle = _start(worker, [files[i] for i in shared], read, kwargs) if len(shared) >= MIN_SHARED else None
    if handle is None:
        if worker is not None:
            worker.warm()  # nothing to share: the worker gets on with its imports
        return [read(p, e, **kwargs) for p, e in files]
    out: dict[int, tuple[str, Any]] = {}
    first_error: int | None = None
    try:
        while (k := handle.claims.next()) is not None:
            i = shared[k]
            out[i] = _attempt(read, *files[i], kwargs)
            if out[i][0] == "error":  # raised below, in file order
                first_error = i
                break
    finally:
        handed = handle.claims.close()
    mine = set(out)
    theirs_idx = [shared[k] for k in range(handed) if shared[k] not in mine]
    if theirs_idx:
        for k, v in handle.collect().items():
            out[shared[k]] = v
        for i in theirs_idx:  # the worker died or returned early: read them here
            if i not in out and (first_error is None or i < first_error):
                out[i] = _attempt(read, *files[i], kwargs)
    errors = [i for i, (tag, _) in out.items() if tag == "error"]
    stop = min(errors) if errors else len(files)
    shared_set = set(shared)
    for i, (p, e) in enumerate(files[:stop]):  # the files not shared, before the first error
        if i in shared_set:
            continue
        out[i] = _attempt(read, p, e, kwargs)
        if out[i][0] == "error":
            stop = i
            break
    for i in range(len(files)):
        tag, v = out.get(i, ("missing", None))
        if tag == "error":
            raise v
        if i >= stop:
            break
    return [out[i][1] for i in range(len(files))]
