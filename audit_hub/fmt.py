"""Text formatting for every place a number or an input-derived string lands in the report.

The one number formatter of the CLI, the card and the figures (``pct``, ``pp``, ``fmt_p``, ``fmt_num``,
``ci``: significant digits for shares, p-values at the permutation resolution, intervals at the
precision of their estimate), Markdown tables (``md_table``; input-derived
cells are escaped by the caller with :func:`audit_hub.escape.md_inline`) and the vectorised labels of the per-question evidence phrases
(``num_labels``, ``str_labels``). Used by the report and by the detectors' report phrases.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def isnum(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(float(x))


def share_decimals(x: Any) -> int:
    """Decimals of a share printed as a percentage: one for 1% and above (three significant digits at
    10-99%), two significant digits below 1% (0.94%, 0.029%, 0.000044%: a tiny nonzero share never prints
    as 0.0000), at most eight; one for zero."""
    if not isnum(x):
        return 1
    v = abs(100 * float(x))
    if v == 0 or v >= 1:
        return 1
    return min(8, 1 - math.floor(math.log10(v)))


def num_decimals(x: Any, sig: int = 3) -> int:
    """Decimals that show ``x`` to ``sig`` significant digits (0 for integers and numbers >= 10**sig)."""
    if not isnum(x) or float(x) == 0:
        return 0 if isnum(x) and float(x).is_integer() else sig - 1
    x = float(x)
    if x.is_integer() and abs(x) >= 1:
        return 0
    return max(0, min(8, sig - 1 - math.floor(math.log10(abs(x)))))


def pct(x: Any, digits: int | None = None) -> str:
    """A share as a percentage at :func:`share_decimals` (or ``digits``) decimals: ``42.3%``, ``0.94%``."""
    if not isnum(x):
        return "n/a"
    d = share_decimals(x) if digits is None else digits
    return f"{100 * float(x):.{d}f}%"


def pp(x: Any, digits: int | None = None) -> str:
    """A difference of shares in percentage points, signed: ``+1.1 pp``, ``+0.029 pp``."""
    if not isnum(x):
        return "n/a"
    d = share_decimals(x) if digits is None else digits
    return f"{100 * float(x):+.{d}f} pp"


def fmt_p(p: Any, n_permutations: int | None = None) -> str:
    """A p-value. A permutation p ``(1 + #) / (B + 1)`` is printed at its resolution ``1 / (B + 1)``
    (``B = 999``: three decimals, ``0.001`` is the smallest it can be); an analytic p with two
    significant digits and at most three decimals, ``< 0.001`` below 0.001."""
    if not isnum(p):
        return "n/a"
    p = float(p)
    if n_permutations:
        d = max(1, math.ceil(math.log10(int(n_permutations) + 1) - 1e-9))
        return f"{p:.{d}f}"
    if p < 0.001:
        return "< 0.001"
    return f"{p:.{min(3, num_decimals(p, 2))}f}"  # 0.001 (never 0.0010), 0.012, 0.32


def p_is(p: Any, n_permutations: int | None = None) -> str:
    """``p = 0.012`` or ``p < 0.001`` (never ``p = < 0.001``): :func:`fmt_p` with its relation."""
    out = fmt_p(p, n_permutations)
    return f"p {out}" if out.startswith("<") else f"p = {out}"


def fmt_p_vs(p: Any, level: float) -> str:
    """A p-value printed beside the level it is compared with: as :func:`fmt_p`, with more digits (up to four
    significant) where that would print the level itself for a p that is not the level ("p = 0.050, above 0.05"
    for 0.0504 reads as a contradiction)."""
    out = fmt_p(p)
    if not isnum(p) or float(p) == level:
        return out
    for digits in (3, 4):
        try:
            if float(out) != level:
                break
        except ValueError:  # "< 0.001"
            break
        out = f"{float(p):.{num_decimals(float(p), digits)}f}"
    return out


def pct_pair(x: Any, level: Any) -> tuple[str, str]:
    """A share and the level it is compared with, as percentages at one number of decimals: :func:`pct`'s, or more
    (up to three more) where that would print them equal though they differ ("2.1%, above the 2.1% margin" for
    2.083% and 2.064% reads as a contradiction: "2.08%, above the 2.06% margin")."""
    if not (isnum(x) and isnum(level)):
        return pct(x), pct(level)
    d = max(share_decimals(x), share_decimals(level))
    for extra in range(4):
        a, b = f"{100 * float(x):.{d + extra}f}", f"{100 * float(level):.{d + extra}f}"
        if a != b or float(x) == float(level):
            break
    return a + "%", b + "%"


def num_vs(x: Any, level: float, digits: int = 2) -> str:
    """A number printed beside the level it is compared with: ``digits`` decimals, or more (up to four) where that
    would print the level itself for a number that is not the level ("0.20 < 0.2" for 0.196: "0.196 < 0.2")."""
    if not isnum(x):
        return "n/a"
    x = float(x)
    for d in range(digits, digits + 3):
        out = f"{x:.{d}f}"
        if float(out) != float(level) or x == float(level):
            return out
    return f"{x:.{digits + 3}f}"


def fmt_p_fine(p: Any, n_permutations: int | None = None) -> str:
    """The same as :func:`fmt_p` (kept for the detectors' card phrases that call it by this name)."""
    return fmt_p(p, n_permutations)


def count(n: Any, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the right number, thousands separated: ``1 question``, ``3 questions``,
    ``1,204 items``; ``plural`` for an irregular noun (``process`` -> ``processes``)."""
    k = int(n)
    return f"{k:,} {noun if k == 1 else (plural or noun + 's')}"


def fmt_num(x: Any, digits: int = 3) -> str:
    """A count with thousands separators, any other number with ``digits`` significant digits
    (``0.000167``, ``7.69``, ``1,738``)."""
    if not isnum(x):
        return "n/a"
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{num_decimals(x, digits)}f}"


def ci(pair: Any, kind: str = "pct", estimate: Any = None) -> str:
    """A two-element interval as a percentage (``kind="pct"``), percentage points (``"pp"``) or plain
    numbers (``"num"``), at the precision of its ``estimate`` (the number printed beside it; without
    one, at the precision of the interval's own width)."""
    if not isinstance(pair, (list, tuple, np.ndarray)) or len(pair) != 2 or not all(isnum(v) for v in pair):
        return "n/a"
    lo, hi = (float(v) for v in pair)
    ref = estimate if isnum(estimate) else (hi - lo) / 2 if hi != lo else lo
    if kind == "pct":
        d = share_decimals(ref)
        return f"[{100 * lo:.{d}f}, {100 * hi:.{d}f}]%"
    if kind == "pp":
        d = share_decimals(ref)
        return f"[{100 * lo:+.{d}f}, {100 * hi:+.{d}f}] pp"
    d = num_decimals(ref)
    return f"[{lo:.{d}f}, {hi:.{d}f}]"


def plain(x: Any) -> str:
    """A value for a sentence a person reads, never a Python repr: a mapping as ``key: value, ...``
    (``{'choice': 'budget'}`` -> ``choice: budget``), a sequence as ``a, b``, None as ``none``, a number
    through :func:`fmt_num`."""
    if x is None:
        return "none"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, dict):
        return ", ".join(f"{k}: {plain(v)}" for k, v in x.items()) if x else "none"
    if isinstance(x, (list, tuple, set, frozenset)):
        return ", ".join(plain(v) for v in x) if x else "none"
    if isnum(x):
        return fmt_num(x)
    return str(x)


#: a Markdown table with more rows than this is folded into a ``<details>`` block (the Hub and GitHub render it
#: collapsed), so that a wide pool's per-model tables (150 models: 300 rows each) do not push the findings
#: hundreds of lines down the card
FOLD_ROWS = 40


def md_table(header: list[str], rows: list[list[Any]], align: list[str] | None = None,
             fold_rows: int | None = FOLD_ROWS) -> str:
    """A Markdown table; ``align`` entries are 'l' or 'r'. Over ``fold_rows`` rows (None: never) it is folded
    into a ``<details>`` block whose summary gives the row count; the table inside is unchanged."""
    if not rows:
        return ""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    table = "\n".join(lines)
    if fold_rows is not None and len(rows) > fold_rows:
        # blank lines around the table: Markdown inside an HTML block is parsed only after one
        return f"<details><summary>The table: {len(rows):,} rows (select to expand)</summary>\n\n{table}\n\n</details>"
    return table


def num_labels(s: pd.Series) -> pd.Series:
    """Integers without decimals, other numbers with two; missing as '?'."""
    x = pd.to_numeric(s, errors="coerce")
    out = x.map(lambda v: "?" if pd.isna(v) else (f"{int(v)}" if float(v).is_integer() else f"{v:.2f}"))
    return out.astype(object)


def str_labels(s: pd.Series) -> pd.Series:
    """Strings with missing values as '?'."""
    return s.astype(object).where(s.notna(), "?").astype(str)
