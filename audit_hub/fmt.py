"""Text formatting for every place a number or an input-derived string lands in the report.

Scalars for the card (``pct``, ``pp``, ``fmt_p``, ``fmt_num``, ``ci``), Markdown tables (``md_table``;
input-derived cells are escaped by the caller with :func:`audit_hub.escape.md_inline`) and the vectorised labels of the per-question evidence phrases
(``num_labels``, ``str_labels``). Used by the report and by the detectors' report phrases.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def isnum(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(float(x))


def pct(x: Any, digits: int = 1) -> str:
    return f"{100 * float(x):.{digits}f}%" if isnum(x) else "n/a"


def pp(x: Any, digits: int = 1) -> str:
    return f"{100 * float(x):+.{digits}f} pp" if isnum(x) else "n/a"


def fmt_p(p: Any) -> str:
    if not isnum(p):
        return "n/a"
    p = float(p)
    if p < 0.001:
        return "< 0.001"
    return f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def fmt_p_fine(p: Any) -> str:
    """A p-value with four decimals below 0.01 (card notes that compare two tests' p-values)."""
    if not isnum(p):
        return "n/a"
    p = float(p)
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}" if p < 0.01 else f"{p:.3f}"


def fmt_num(x: Any, digits: int = 3) -> str:
    if not isnum(x):
        return "n/a"
    x = float(x)
    return f"{int(x):,}" if x.is_integer() and abs(x) < 1e15 else f"{x:.{digits}g}"


def ci(pair: Any, kind: str = "pct") -> str:
    """Format a two-element interval as a percentage / pp / plain range."""
    if not isinstance(pair, (list, tuple, np.ndarray)) or len(pair) != 2 or not all(isnum(v) for v in pair):
        return "n/a"
    lo, hi = (float(v) for v in pair)
    if kind == "pct":
        return f"[{100 * lo:.1f}, {100 * hi:.1f}]%"
    if kind == "pp":
        return f"[{100 * lo:+.1f}, {100 * hi:+.1f}] pp"
    return f"[{lo:.3g}, {hi:.3g}]"


def md_table(header: list[str], rows: list[list[Any]], align: list[str] | None = None) -> str:
    """A Markdown table; ``align`` entries are 'l' or 'r'."""
    if not rows:
        return ""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def num_labels(s: pd.Series) -> pd.Series:
    """Integers without decimals, other numbers with two; missing as '?'."""
    x = pd.to_numeric(s, errors="coerce")
    out = x.map(lambda v: "?" if pd.isna(v) else (f"{int(v)}" if float(v).is_integer() else f"{v:.2f}"))
    return out.astype(object)


def str_labels(s: pd.Series) -> pd.Series:
    """Strings with missing values as '?'."""
    return s.astype(object).where(s.notna(), "?").astype(str)
