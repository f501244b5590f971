"""Read the first sheet of an .xlsx workbook into a DataFrame of Python values.

Engine: the Rust ``calamine`` reader (``python-calamine``, through pandas' ``calamine`` engine) when
it is installed, which parses a VLMEvalKit sheet about 7x faster than openpyxl; openpyxl otherwise.
Both go through the same pandas parser (header row, ``dtype=object``, the default missing-value
strings, integral floats as ints), so the values a reader sees do not depend on the engine.

This function only parses. Safety checks on the container (zip size limits and the like) are the
caller's, made before this is called; the engine choice does not change them.
"""

from __future__ import annotations

import importlib.util

import pandas as pd


def xlsx_engine() -> str:
    """``"calamine"`` when python-calamine is importable, else ``"openpyxl"``."""
    return "calamine" if importlib.util.find_spec("python_calamine") is not None else "openpyxl"


def _calamine_errors() -> tuple[type[BaseException], ...]:
    try:
        import python_calamine as pc
    except ImportError:
        return ()
    return tuple(getattr(pc, n) for n in ("CalamineError", "ZipError", "XmlError", "PasswordError",
                                          "WorksheetNotFound", "WorkbookClosed") if hasattr(pc, n))


# Parse errors of the engines, for the caller's "not a readable .xlsx workbook" message.
XLSX_ERRORS: tuple[type[BaseException], ...] = _calamine_errors()


def read_xlsx_sheet(path: str, engine: str | None = None) -> pd.DataFrame:
    """The first sheet, first row as header, every cell as a Python object (empty -> NaN)."""
    return pd.read_excel(path, engine=engine or xlsx_engine(), dtype=object)
