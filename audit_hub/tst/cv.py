"""One cross-validation engine for TsT-RF and TsT-LLM.

Folds are over *questions*. ``StratifiedGroupKFold`` (stratified by category, grouped by an image /
scene column) when a group column is given, ``StratifiedKFold`` otherwise; each repeat uses its own
fold seed (``seed + repeat``). The engine calls ``fit_predict(train_mask, test_mask, repeat, fold)``
and leaves the modelling to the caller, so the RF and the LoRA runs share exactly the same folds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError

MIN_SKLEARN = (1, 9, 1)


def check_sklearn() -> None:
    """scikit-learn < 1.9.1 desynchronises groups when shuffling in StratifiedGroupKFold."""
    import sklearn

    parts = []
    for p in sklearn.__version__.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    if tuple(parts) < MIN_SKLEARN:
        raise InputError(f"TsT needs scikit-learn >= 1.9.1 (found {sklearn.__version__}); earlier versions "
                         "desynchronise groups when shuffling StratifiedGroupKFold")


def fold_assignments(strata: np.ndarray, groups: np.ndarray | None, *, k: int, repeats: int,
                     seed: int) -> np.ndarray:
    """(repeats, n) int8 array: the held-out fold of every item in every repeat.

    ``strata``: integer stratum per item (category). ``groups``: integer group per item or None.
    Repeat ``r`` uses fold seed ``seed + r``.
    """
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    check_sklearn()
    n = len(strata)
    n_units = n if groups is None else len(np.unique(groups))
    if k < 2:
        raise InputError(f"k must be at least 2, got {k}")
    if n_units < k:
        raise InputError(f"TsT needs at least k={k} questions (or groups) to score; found {n_units}")
    largest = int(np.bincount(np.asarray(strata, dtype=np.int64)).max()) if n else 0
    if largest < k:  # scikit-learn's stratified splitters cannot make k folds of any category
        raise InputError(f"TsT's folds are stratified by category and answer format, and no such stratum has k={k} "
                         f"questions (the largest has {largest}); give more questions per category or a smaller --k")
    out = np.full((repeats, n), -1, dtype=np.int8)
    X = np.zeros((n, 1))
    for r in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "least populated class has only 1 member"
            if groups is None:
                splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed + r)
                splits = splitter.split(X, strata)
            else:
                splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed + r)
                splits = splitter.split(X, strata, groups)
            for f, (_, test) in enumerate(splits):
                out[r, test] = f
    assert (out >= 0).all()
    return out


def run_cv(assign: np.ndarray, fit_predict: Callable[[np.ndarray, np.ndarray, int, int], Any],
           progress: Callable[[], None] | None = None) -> list[list[Any]]:
    """Call ``fit_predict(train_mask, test_mask, repeat, fold)`` for every fold of every repeat.

    Returns ``results[repeat][fold]``. ``progress`` is called after each fold.
    """
    results: list[list[Any]] = []
    for r in range(assign.shape[0]):
        row = []
        for f in range(int(assign[r].max()) + 1):
            test = assign[r] == f
            row.append(fit_predict(~test, test, r, f))
            if progress is not None:
                progress()
        results.append(row)
    return results


def inner_folds(units: np.ndarray, train: np.ndarray, n_inner: int, seed: int) -> np.ndarray:
    """Cross-fitting folds inside the training set: (n,) int8, -1 outside ``train``.

    Units (question or group codes) are shuffled with ``seed`` and dealt round-robin, so a group never
    straddles two inner folds.
    """
    rng = np.random.default_rng(seed)
    tu = np.unique(units[train])
    perm = rng.permutation(len(tu))
    fold_of_unit = np.empty(len(tu), dtype=np.int8)
    fold_of_unit[perm] = np.arange(len(tu)) % n_inner
    out = np.full(len(units), -1, dtype=np.int8)
    out[train] = fold_of_unit[np.searchsorted(tu, units[train])]
    return out
