"""The flat per-row columns an ``evaluate`` metric's ``compute`` receives, as a format mapping like
the file readers: :func:`read_compute_columns` turns them into the public questions and runs tables
(one row per question; one row per (question, model, arm)), which the frame then validates.

Column conventions are documented in :mod:`audit_hub.metrics.adapter`. Errors are
:class:`~audit_hub.errors.InputError` naming the input column and the 1-based input row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..schema import LETTERS, options_cell

#: Where errors say the data came from (evaluate has no file names).
SOURCE = "<evaluate compute inputs>"
QUESTIONS_SOURCE = "<questions from the compute inputs>"
#: The per-row columns besides ``question_ids`` (see :mod:`audit_hub.metrics.adapter`).
COLUMNS: tuple[str, ...] = ("models", "predictions", "blind_predictions", "references", "hits", "blind_hits",
                            "options", "n_options", "answer_types", "categories")


_PLACEHOLDER_GOLD = {"mc": "A", "yesno": "yes", "numeric": "0", "free": "?"}


def _as_list(name: str, values: Any, n: int | None) -> list:
    """Per-row column as a list, with its length checked against the number of rows."""
    if isinstance(values, (str, bytes)):
        raise InputError(f"{name} must be a list with one entry per row, got a string",
                               file=SOURCE, column=name)
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.tolist()
    elif isinstance(values, np.ndarray):
        values = values.tolist() if values.ndim == 1 else list(values)
    else:
        try:
            values = list(values)
        except TypeError:
            raise InputError(f"{name} must be a list with one entry per row, got "
                                   f"{type(values).__name__}", file=SOURCE, column=name) from None
    if n is not None and len(values) != n:
        raise InputError(f"{name} has {len(values)} entries but question_ids has {n}; every per-row "
                               f"column needs one entry per row", file=SOURCE, column=name)
    return values


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and np.isnan(v):
        return True
    return isinstance(v, str) and v.strip() == ""


def _text_or_none(values: list) -> list:
    """Stripped strings, None for missing/empty. Converts each *distinct* value once (columns of
    letters, model names or question ids have far fewer distinct values than rows)."""
    try:
        codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    except TypeError:  # unhashable entries (lists): convert one by one
        return [None if _is_missing(v) else str(v).strip() for v in values]
    table = np.array([None if _is_missing(u) else str(u).strip() for u in uniques] + [None], dtype=object)
    return table[codes].tolist()


def _first_per_question(name: str, values: list, qcodes: np.ndarray, qids: np.ndarray,
                        keys: list | None = None) -> list:
    """First value of each question; raise when a question's rows disagree.

    ``keys`` are hashable stand-ins for unhashable values (option lists); the comparison is on
    the keys, the returned values are the originals.
    """
    nq = len(qids)
    k = values if keys is None else keys
    ks = pd.Series(k, dtype=object)
    # factorize the values (missing -> its own code so that "None" vs "A" is a conflict too)
    vcodes, _ = pd.factorize(ks.where(ks.notna(), "\x00<missing>\x00"))
    first_row = _first_rows(qcodes, nq)
    bad = vcodes != vcodes[first_row[qcodes]]
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        j = int(first_row[qcodes[i]])
        raise InputError(
            f"{name} must be the same on every row of a question; question {qids[qcodes[i]]!r} has "
            f"{values[j]!r} (row {j + 1}) and {values[i]!r} (row {i + 1})",
            file=SOURCE, row=i + 1, column=name)
    return [values[j] for j in first_row]


def _first_rows(qcodes: np.ndarray, nq: int) -> np.ndarray:
    """Index of the first row of each question code (codes are 0..nq-1)."""
    _, first = np.unique(qcodes, return_index=True)
    assert len(first) == nq
    return first.astype(np.int64)


def _int_column(name: str, values: list, lo: int, hi: int) -> np.ndarray:
    x = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=np.float64,
                                                                                  na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(x) | (x != np.round(x)) | (x < lo) | (x > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name} must be an integer in [{lo}, {hi}], got {values[i]!r}",
                               file=SOURCE, row=i + 1, column=name)
    return x.astype(np.int64)


def _options_column(values: list) -> list[list[str]]:
    return [options_cell(v, SOURCE, i + 1) for i, v in enumerate(values)]


def _question_table(cols: dict[str, list | None], qcodes: np.ndarray, qids: np.ndarray) -> tuple[pd.DataFrame, bool]:
    """The questions table from the question-level columns (first value per question; conflicts are
    errors) and whether real gold answers were given."""
    nq = len(qids)
    qdf = pd.DataFrame({"question_id": qids})
    opts_q: list[list[str]] | None = None
    if cols["options"] is not None:
        opts_rows = _options_column(cols["options"])
        opts_q = _first_per_question("options", opts_rows, qcodes, qids,
                                     keys=["\x1f".join(o) + f"\x1e{len(o)}" for o in opts_rows])
    if cols["n_options"] is not None:
        k_rows = _int_column("n_options", cols["n_options"], 0, len(LETTERS))
        k_q = np.asarray(_first_per_question("n_options", k_rows.tolist(), qcodes, qids), dtype=np.int64)
        if opts_q is None:
            # no option texts: letters stand in for them (like MATH-Vision's bare-letter options)
            opts_q = [list(LETTERS[:k]) for k in k_q]
        else:
            lens = np.array([len(o) for o in opts_q])
            bad = np.flatnonzero(lens != k_q)
            if len(bad):
                raise InputError(
                    f"n_options ({k_q[bad[0]]}) disagrees with the {lens[bad[0]]} options given for question "
                    f"{qids[bad[0]]!r}", file=SOURCE, column="n_options")
    if opts_q is not None:
        qdf["options"] = opts_q
    if cols["answer_types"] is not None:
        qdf["answer_type"] = _first_per_question("answer_types", _text_or_none(cols["answer_types"]), qcodes, qids)
    if cols["categories"] is not None:
        qdf["category"] = _first_per_question("categories", _text_or_none(cols["categories"]), qcodes, qids)
    has_gold = cols["references"] is not None
    if has_gold:
        qdf["answer"] = _first_per_question("references", _text_or_none(cols["references"]), qcodes, qids)
    else:
        if "answer_type" in qdf.columns:
            types = [t if t is not None else ("mc" if opts_q is not None and len(opts_q[i]) else "free")
                     for i, t in enumerate(qdf["answer_type"])]
        else:
            types = ["mc" if opts_q is not None and len(o) else "free" for o in (opts_q or [[]] * nq)]
        qdf["answer"] = [_PLACEHOLDER_GOLD.get(str(t).lower(), "?") for t in types]

    return qdf, has_gold


def _run_parts(cols: dict[str, list | None], qtext: list, n: int) -> list[pd.DataFrame]:
    """One runs table per arm with predictions or hits (``attrs``: ``judged``, ``has_pred``)."""
    run_parts = []
    if cols["models"] is not None:
        model_text = _text_or_none(cols["models"])
        for arm, pred_name, hit_name in (("full", "predictions", "hits"), ("blind", "blind_predictions", "blind_hits")):
            pred, hit = cols[pred_name], cols[hit_name]
            if pred is None and hit is None:
                continue
            pred_text = _text_or_none(pred) if pred is not None else [None] * n
            part = pd.DataFrame({
                # object columns: a single Arrow chunk per column after validation
                "question_id": pd.Series(qtext, dtype=object), "model": pd.Series(model_text, dtype=object),
                "arm": arm,
                "prediction": pd.Series(pred_text, dtype=object), "answer": pd.Series(pred_text, dtype=object),
                "hit": pd.Series(hit if hit is not None else [None] * n, dtype=object),
                "hit_exact": np.nan,
                "source_file": SOURCE, "source_row": np.arange(1, n + 1),
            })
            if pred is None:  # a hits-only arm: a row not judged in it (None) is not a run of it, so a model
                # judged in one arm only (a text-only model beside image models) is in that arm only
                keep = np.array([not _is_missing(h) for h in hit], dtype=bool)
                if not keep.any():
                    continue
                part = part[keep].reset_index(drop=True) if not keep.all() else part
            elif hit is None and all(p is None for p in pred_text):
                import warnings

                warnings.warn(f"every entry of {pred_name} is empty (None or \"\"): every {arm}-arm row counts "
                              "wrong, as for a run whose every answer was unreadable (a text-only run that refused "
                              f"each question); if that arm was not run, leave {pred_name} out", UserWarning,
                              stacklevel=2)
            part.attrs["judged"] = hit is not None
            part.attrs["has_pred"] = pred is not None
            run_parts.append(part)
    else:
        for name in ("predictions", "blind_predictions", "hits", "blind_hits"):
            if cols[name] is not None:
                raise InputError(f"{name} given without models: per-model columns need a models column "
                                       f"naming the model of each row", file=SOURCE, column="models")
    return run_parts


def read_compute_columns(
    question_ids: Sequence, columns: Mapping[str, Sequence | None],
) -> tuple[pd.DataFrame, pd.DataFrame | None, dict[str, Any]]:
    """The compute columns (``columns``: name in :data:`COLUMNS` -> per-row values or None) ->
    (questions table, runs table or None, facts about the inputs).

    Rows are (question, model) pairs when ``models`` is given, else questions (a question may
    repeat; its question-level columns must then agree). Full-arm runs come from
    ``predictions``/``hits``, blind-arm runs from ``blind_predictions``/``blind_hits``; the runs'
    ``answer`` is the prediction (already extracted). Without ``references`` each question gets a
    placeholder gold answer of its answer type (``has_gold`` is then False). Facts:
    ``has_gold``, ``judged`` and ``has_predictions`` per arm (``{"full": bool, "blind": bool}``),
    ``first_rows`` (the first input row of each question, for error messages).
    """
    qid_list = _as_list("question_ids", question_ids, None)
    n = len(qid_list)
    if n == 0:
        raise InputError("no rows: question_ids is empty", file=SOURCE, column="question_ids")
    cols: dict[str, list | None] = {}
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown:
        raise TypeError(f"unknown compute column(s) {unknown}; known: {list(COLUMNS)}")
    for name in COLUMNS:
        v = columns.get(name)
        cols[name] = None if v is None else _as_list(name, v, n)

    qtext = _text_or_none(qid_list)
    if any(q is None for q in qtext):
        i = next(i for i, q in enumerate(qtext) if q is None)
        raise InputError("question_id is empty", file=SOURCE, row=i + 1, column="question_ids")
    qcodes, qids = pd.factorize(pd.Series(qtext, dtype=object), sort=False)
    qcodes = qcodes.astype(np.int64)
    qids = np.asarray(qids, dtype=object)
    nq = len(qids)

    qdf, has_gold = _question_table(cols, qcodes, qids)
    run_parts = _run_parts(cols, qtext, n)
    runs = None
    if run_parts:
        runs = pd.concat(run_parts, ignore_index=True)
        runs["model"] = runs["model"].astype(object)
        if runs["model"].isna().any():
            i = int(np.flatnonzero(runs["model"].isna().to_numpy())[0]) % n
            raise InputError("model is empty", file=SOURCE, row=i + 1, column="models")
    facts = {"has_gold": has_gold, "first_rows": _first_rows(qcodes, nq),
             "judged": {p["arm"].iloc[0]: p.attrs["judged"] for p in run_parts},
             "has_predictions": {p["arm"].iloc[0]: p.attrs["has_pred"] for p in run_parts}}
    return qdf, runs, facts
