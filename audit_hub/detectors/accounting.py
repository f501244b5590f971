"""Every item accounted for: what a detector used, and why it left the others out.

Each detector reports ``n_items`` (questions its statistic used) and ``excluded`` (``{reason: count}``)
in its summary, so that ``n_items + sum(excluded.values()) == number of questions`` holds for every
detector; the card prints one exclusion line per detector and the CLI one warning line when anything
was excluded. An item is charged to the first reason that excludes it, in the order given.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def item_accounting(n_questions: int, reasons: Iterable[tuple[str, np.ndarray]]) -> dict:
    """``{"n_items": used, "excluded": {reason: count}}`` from ordered ``(reason, excluded_mask)`` pairs."""
    left = np.ones(int(n_questions), dtype=bool)
    excluded: dict[str, int] = {}
    for reason, mask in reasons:
        out = left & np.asarray(mask, dtype=bool)
        c = int(out.sum())
        if c:
            excluded[reason] = excluded.get(reason, 0) + c
            left &= ~out
    return {"n_items": int(left.sum()), "excluded": excluded}


def exclusion_line(name: str, summary: dict) -> str | None:
    """One plain-text line ``name: used N of T items; excluded: reason (k), ...``; None if nothing excluded."""
    exc = summary.get("excluded") or {}
    if not exc:
        return None
    n = int(summary.get("n_items") or 0)
    total = n + sum(int(v) for v in exc.values())
    parts = ", ".join(f"{reason} ({int(k):,})" for reason, k in exc.items())
    return f"{name}: used {n:,} of {total:,} items; excluded: {parts}"


__all__ = ["item_accounting", "exclusion_line"]
