"""Error types. Every input problem is an :class:`InputError` naming file, row and column."""

from __future__ import annotations


class BenchauditError(Exception):
    """Base class for errors benchaudit reports to the user (exit code 2)."""

    exit_code = 2


class InputError(BenchauditError):
    """Bad user input. The message names the file, the row and the column where known.

    ``row`` is 1-based as a person counts data rows (the header is not a row).
    """

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 column: str | None = None):
        self.file = file
        self.row = row
        self.column = column
        self.detail = message
        where = []
        if file is not None:  # a path with look-alike, invisible or control characters is shown escaped
            f = str(file)
            where.append(f"file {f}" if f.isascii() and f.isprintable() else f"file {ascii(f)}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            c = str(column)
            where.append(f"column {c!r}" if c.isascii() and c.isprintable() else f"column {ascii(c)}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class ParameterError(BenchauditError, ValueError):
    """A parameter value a function cannot take (exit code 2 in the CLI; a ValueError in Python)."""


class DetectorSkipped(BenchauditError):
    """A detector cannot run on the inputs given; the reason goes into summary.json."""


class OutputError(BenchauditError):
    """The output folder cannot be written or would destroy something that is not a previous output."""


_SIGNAL_RECEIVED: list[int] = []  # the CLI's handlers record a signal here as well as raising Interrupted


def note_signal(signum: int | None) -> None:
    """Record that SIGINT/SIGTERM arrived (``None``: forget it; the CLI does so as each run starts)."""
    _SIGNAL_RECEIVED[:] = [] if signum is None else [int(signum)]


def signal_received() -> int | None:
    """The signal recorded by :func:`note_signal` during this run, or None. Checked where output is made
    final: the handler's :class:`Interrupted` may have been raised inside code that cannot pass it on (a
    finaliser, ``__del__`` or a weakref callback prints "Exception ignored" and carries on), and the run must
    still not write its output."""
    return _SIGNAL_RECEIVED[0] if _SIGNAL_RECEIVED else None


class Interrupted(BaseException):  # noqa: N818 - a signal, not an error
    """SIGINT/SIGTERM arrived; raised by the CLI's signal handlers so every cleanup block runs.

    A BaseException (like KeyboardInterrupt) so that ``except Exception`` blocks do not swallow it, but
    not a KeyboardInterrupt, so that the CLI framework does not turn it into a silent exit code.
    """

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + int(signum)
        super().__init__(f"interrupted by signal {signum}")


def require_modules(what: str, modules: tuple[str, ...], extra: str = "blind") -> None:
    """One line naming the install step when ``what`` needs packages of an optional extra that are missing
    (``benchaudit blind`` and TsT-LLM without ``benchaudit[blind]``: was an "internal error" naming the module)."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pin = ' "torch==2.13.0"' if extra == "blind" else ""
        raise InputError(f"{what} needs {', '.join(missing)}, which this install lacks: "
                         f"pip install \"benchaudit[{extra}]\"{pin}")
