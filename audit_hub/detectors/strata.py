"""Strata of the zero-gain permutation null and of the calibration simulator's accuracy classes.

``"auto"`` (the default) is the effective option count (options of an mc item, 2 for yes/no, open
items apart) plus, on yes/no items, the gold answer; ``"none"`` is one benchmark-wide shuffle;
``"category"`` may be added to either. See docs/statistics.md.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, ParameterError
from ..frame.core import AuditFrame

STRATIFY_KEYS = ("auto", "category", "n_options", "gold")
STRATIFY_DEFAULT = "auto"


def stratify_keys(stratify) -> list[str]:
    """Normalise ``stratify`` to a list of keys. ``"auto"`` (the default) is the effective option count
    plus, on yes/no items, the gold answer; ``"none"``/None/False/[] is one global shuffle (the paper's
    number); ``"category"`` may be combined with either."""
    if stratify is None or stratify is False:
        return []
    keys = [stratify] if isinstance(stratify, str) else list(stratify)
    keys = [k for k in keys if k != "none"]
    bad = [k for k in keys if k not in STRATIFY_KEYS]
    if bad:
        raise ParameterError(f"stratify (--stratify) must be 'none' or among {STRATIFY_KEYS}, got {bad}")
    out: list[str] = []
    for k in keys:
        for kk in (("n_options", "gold") if k == "auto" else (k,)):
            if kk not in out:
                out.append(kk)
    return out


def cli_stratify(values: list[str] | None) -> list[str]:
    """``--stratify`` values to the detector's keys: default auto; 'category' (or 'gold' / 'n_options')
    alone is added to auto unless 'none' is given. Unknown values raise :class:`InputError`."""
    vals = [v.strip().lower() for v in (values or [])]
    bad = sorted(set(vals) - set(STRATIFY_KEYS) - {"none"})
    if bad:
        raise InputError(f"--stratify takes auto, none, category, n_options or gold; got {bad}")
    if not vals:
        return ["auto"]
    if "none" in vals:
        return [v for v in vals if v != "none"]
    return vals if "auto" in vals else ["auto", *vals]


def effective_option_count(frame: AuditFrame) -> np.ndarray:
    """Number of answers a guesser chooses from: the real options for mc items (placeholder option texts
    such as ``nan`` or empty excluded, :mod:`audit_hub.detectors.placeholders`), 2 for yes/no, 0 for open
    (numeric / free-form) items, which form their own stratum."""
    from .placeholders import real_option_count

    atype = frame.answer_type
    return np.where(atype == "mc", real_option_count(frame).astype(np.int64), np.where(atype == "yesno", 2, 0))


def strata_codes(frame: AuditFrame, stratify) -> tuple[np.ndarray, list[str]]:
    """Integer stratum per question for the shuffle (0 everywhere when not stratified); computed once per
    set of keys (the codes are read-only)."""
    keys = stratify_keys(stratify)
    code = frame.cached(("strata_codes", tuple(keys)), lambda: _strata_codes(frame, keys))
    return code, list(keys)


def _strata_codes(frame: AuditFrame, keys: list[str]) -> np.ndarray:
    code = np.zeros(frame.n_questions, dtype=np.int64)
    for k in keys:
        if k == "category":
            c, _ = frame.category_codes("category")
        elif k == "n_options":
            _, c = np.unique(effective_option_count(frame), return_inverse=True)
        else:  # gold answer on yes/no items (yes = 0, no = 1); 2 for every other item
            c = np.where(frame.answer_type == "yesno", np.clip(frame.gold_codes(), 0, 1), 2)
        c = np.asarray(c, dtype=np.int64)
        code = code * (int(c.max()) + 1 if len(c) else 1) + c
    _, code = np.unique(code, return_inverse=True)
    code = code.astype(np.int64)
    code.setflags(write=False)
    return code


