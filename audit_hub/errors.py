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
        if file is not None:
            where.append(f"file {file}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class ParameterError(BenchauditError, ValueError):
    """A parameter value a function cannot take (exit code 2 in the CLI; a ValueError in Python)."""


class DetectorSkipped(BenchauditError):
    """A detector cannot run on the inputs given; the reason goes into summary.json."""
