"""Which units (models, or a model's runs together) to leave out when a few of them cover few items.

A run stopped early, or a model evaluated on a subset, knows only part of the items. A statistic that needs every
unit's value on an item would then be computed on the few items that unit covered; the alternative is to leave the
unit out. :func:`coverage_left_out_units` chooses between the two by the known (item, unit) cells: candidates leave
in order of their unknown items, most first, and as many leave as maximise items known for every remaining unit x
units (the first maximum, so a tie keeps the units). A unit missing a few items stays (those items are the ones
excluded); one that covers a small part of the benchmark leaves and every item stays. Checking every prefix of
that order, not one unit at a time, also finds two units missing the same half, which one at a time gain nothing.
Used by the zero-gain test and by curation's ranking pool.
"""

from __future__ import annotations

import numpy as np


def coverage_left_out_units(unknown: np.ndarray, groups: np.ndarray | None = None, keep_per_group: int = 1
                            ) -> tuple[list[int], int]:
    """(columns of ``unknown`` to leave out, items then known for every remaining column). ``unknown``: (Q, U)
    bool, an item's value missing for that unit. ``groups``: (U,) ints, the units of each group of which at least
    ``keep_per_group`` stay (one group when None). Nothing leaves when every item is known. Cost: one pass over
    the (Q,) count of unknown units per unit considered."""
    Q, U = unknown.shape
    u = unknown.sum(axis=1)
    if not u.any():
        return [], int(Q)
    groups = np.zeros(U, np.int64) if groups is None else np.asarray(groups, np.int64)
    left = np.bincount(groups, minlength=int(groups.max(initial=0)) + 1)
    order = np.argsort(-unknown.sum(axis=0), kind="stable")
    best, best_k, out = int((u == 0).sum()) * U, 0, []
    for j in order:
        g = int(groups[j])
        if not unknown[:, j].any():
            break
        if left[g] <= keep_per_group:
            continue
        left[g] -= 1
        u = u - unknown[:, j]
        out.append(int(j))
        cells = int((u == 0).sum()) * (U - len(out))
        if cells > best:
            best, best_k = cells, len(out)
    return out[:best_k], best // (U - best_k)
