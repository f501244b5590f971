"""Stage clock: the wall time of each stage of one audit.

Stages, in order: ``read`` (parse the input files into tables), ``validate`` (check them and encode
the audit frame), ``calibration setup`` (the null simulator's fit on the frame), one stage per detector
(named after it), ``judge dependence``, ``calibration``, ``tst``, ``summary`` (the per-model table and the
detectors' entries), ``report`` (tables, Parquet, card) and ``figures``. The CLI installs one
:class:`StageClock` for the whole command (:func:`recording`); library code marks its stages with
:func:`stage`, which does nothing when no clock is installed, so the library stays free of I/O and
of any display. ``manifest.json`` records :attr:`StageClock.timings` as ``timings_s``; the CLI
shows the current stage with a progress bar and prints the timings with ``--verbose``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar

PARALLEL = " (parallel)"


class StageClock:
    """Accumulates wall seconds per stage name (first-start order) and announces each stage."""

    def __init__(self, on_start: Callable[[str], None] | None = None,
                 on_progress: Callable[[str, int, int, float], None] | None = None) -> None:
        self.timings: dict[str, float] = {}
        self.current: str | None = None
        self._on_start = on_start
        self._on_progress = on_progress
        self._started: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        outer = self.current
        self.current = name
        if self._on_start is not None:
            self._on_start(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
            self.current = outer

    def progress(self, done: int, total: int) -> None:
        """Announce ``done`` of ``total`` units of the current stage with an estimate of the seconds left
        (from the pace since its first announcement); a no-op without an ``on_progress`` display."""
        if self._on_progress is None or self.current is None:
            return
        now = time.perf_counter()
        t0 = self._started.setdefault(self.current, now)
        first = self._started.get(self.current + "#done", None)
        if first is None:
            self._started[self.current + "#done"] = done
            first = done
        rate = (done - first) / (now - t0) if now > t0 and done > first else None
        left = (total - done) / rate if rate else float("nan")
        self._on_progress(self.current, int(done), int(total), left)

    def lines(self) -> list[str]:
        """``name  seconds  share`` lines for the console (``--verbose``); work done in parallel with the
        stages (named ``... (parallel)``) is listed after the total, not in it."""
        serial = {n: s for n, s in self.timings.items() if not n.endswith(PARALLEL)}
        total = sum(serial.values()) or 1.0
        width = max((len(n) for n in self.timings), default=5)
        out = [f"{n:<{width}}  {s:8.2f} s  {100 * s / total:5.1f}%" for n, s in serial.items()]
        out.append(f"{'total':<{width}}  {sum(serial.values()):8.2f} s")
        out += [f"{n:<{width}}  {s:8.2f} s" for n, s in self.timings.items() if n.endswith(PARALLEL)]
        return out


_CURRENT: ContextVar[StageClock | None] = ContextVar("benchaudit_stage_clock", default=None)
_COMMAND_START: ContextVar[float | None] = ContextVar("benchaudit_command_start", default=None)


_COMMAND_ARGV: ContextVar[tuple[str, ...] | None] = ContextVar("benchaudit_command_argv", default=None)


@contextmanager
def command_window(at: float | None = None, argv: list[str] | None = None) -> Iterator[float]:
    """Mark the start of one command (the CLI's ``main``, one library call, an ``Output.save``) as ``at`` (now
    when None), unless an enclosing window already did: every manifest written inside says ``started_at`` =
    this moment, not when its folder began to be written (:func:`command_start`). ``argv``: the CLI's arguments,
    the manifests' ``command_line`` (:func:`command_line`)."""
    outer = _COMMAND_START.get()
    if outer is not None:
        yield outer
        return
    token = _COMMAND_START.set(time.time() if at is None else at)
    argv_token = _COMMAND_ARGV.set(tuple(str(a) for a in argv)) if argv is not None else None
    try:
        yield _COMMAND_START.get()
    finally:
        if argv_token is not None:
            _COMMAND_ARGV.reset(argv_token)
        _COMMAND_START.reset(token)


def command_line(command: str) -> list[str]:
    """What a manifest records as ``command_line``: the CLI's own arguments when the CLI runs (``benchaudit audit
    --runs ...``), else ``benchaudit <command> (library)`` (a script's or a notebook kernel's ``sys.argv`` says
    nothing about the call, and may name a local path)."""
    argv = _COMMAND_ARGV.get()
    return ["benchaudit", *argv] if argv is not None else ["benchaudit", command, "(library)"]


def command_start() -> float | None:
    """When the enclosing :func:`command_window` began (Unix seconds), or None outside one."""
    return _COMMAND_START.get()


@contextmanager
def recording(clock: StageClock) -> Iterator[StageClock]:
    """Install ``clock`` so that :func:`stage` calls below this point record into it."""
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        _CURRENT.reset(token)


def _raise_if_signalled() -> None:
    """Raise :class:`~audit_hub.errors.Interrupted` if the CLI's handler recorded SIGINT/SIGTERM whose exception
    was lost: raised inside code that cannot pass it on (an import's weakref callback prints "Exception ignored"
    and carries on), the run would otherwise go on computing until the output step refuses to write. Checked as
    each stage starts and at each progress report, so a lost signal stops the run within one stage step."""
    from .errors import Interrupted, signal_received

    signum = signal_received()
    if signum is not None:
        raise Interrupted(signum)


def stage(name: str):
    """Context manager timing one stage into the installed clock (a no-op without one). Raises
    :class:`~audit_hub.errors.Interrupted` first if a signal arrived whose exception was lost."""
    _raise_if_signalled()
    clock = _CURRENT.get()
    return clock.stage(name) if clock is not None else nullcontext()


def progress(done: int, total: int) -> None:
    """Report progress within the current stage to the installed clock (a no-op without one); raises like
    :func:`stage` after a lost signal."""
    _raise_if_signalled()
    clock = _CURRENT.get()
    if clock is not None:
        clock.progress(done, total)


def note_parallel(name: str, seconds: float) -> None:
    """Record ``seconds`` of work done beside the stages (a worker process), as ``"<name> (parallel)"``."""
    clock = _CURRENT.get()
    if clock is not None:
        clock.timings[name + PARALLEL] = clock.timings.get(name + PARALLEL, 0.0) + seconds


def current_timings() -> dict[str, float]:
    """A copy of the installed clock's timings so far (empty without one)."""
    clock = _CURRENT.get()
    return dict(clock.timings) if clock is not None else {}
