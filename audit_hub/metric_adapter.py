"""Shared code behind the six ``evaluate`` metric modules in ``metrics/<name>/``.

An ``evaluate.Metric`` receives flat per-row columns (one row per question, or per
(question, model) pair). This module turns those columns into one validated
:class:`~audit_hub.frame.AuditFrame` and calls the detector's ``run`` on it, so the metric modules
stay thin and never re-implement a statistic: ``evaluate.load("metrics/<name>").compute(...)``
returns exactly the summary that ``audit_hub.detectors.<name>.run`` returns on the same frame.

Column conventions (documented for users in each metric card):

* ``question_ids``: the question of each row (str).
* ``models``: the model of each row (str); rows are (question, model) pairs, one per pair.
* ``predictions`` / ``blind_predictions``: the model's *extracted* answer with / without the
  image: an option letter (``"A"``) for multiple-choice items, ``"yes"``/``"no"``, or a value.
  ``None`` or ``""`` means no parseable answer (counted wrong).
* ``references``: the gold answer of the row's question (letter, yes/no or value).
* ``hits`` / ``blind_hits``: optional judged correctness (1/0/True/False/None); when given they
  override the exact-match correctness computed from predictions and references.
* ``options`` (list of option texts) or ``n_options`` (int), ``answer_types``, ``categories``:
  question-level columns repeated on every row of a question. The first value of each question
  is used; a question whose rows disagree raises :class:`MetricInputError`.

Exact match is decided in the frame's answer-code space (:func:`audit_hub.answers.encode_answers`):
letters compare case-insensitively against the option range, yes/no case-insensitively, numbers
numerically ("0.50" == ".5") and free text after casefolding and whitespace collapsing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import detectors
from .errors import DetectorSkipped, InputError
from .schema import LETTERS

METRIC_NAMES: tuple[str, ...] = detectors.names()  # one evaluate module per detector

#: The audit paper, cited by every metric module.
CITATION = """\
@misc{degtiarev2026auditing,
  title  = {Auditing VLM Benchmarks from Existing Evaluation Runs},
  author = {Degtiarev, Denis and Gromova, Anna and Katkov, Sergey and Mikhailin, Artem and
            Mukhamedshina, Safina and Nasybullin, Albert and Shaikhutdinova, Karina and Tuzov, Artem},
  year   = {2026},
  note   = {Innopolis University}
}
"""

#: Where errors say the data came from (evaluate has no file names).
SOURCE = "<evaluate compute inputs>"
_QSOURCE = "<questions from the compute inputs>"
_PLACEHOLDER_GOLD = {"mc": "A", "yesno": "yes", "numeric": "0", "free": "?"}



class MetricInputError(InputError, ValueError):
    """Bad metric input. Both an :class:`InputError` (exit code 2 in the CLI) and a ``ValueError``
    (what users of ``evaluate`` expect from ``compute``)."""


# ---------------------------------------------------------------------------------- helpers
def _as_list(name: str, values: Any, n: int | None) -> list:
    """Per-row column as a list, with its length checked against the number of rows."""
    if isinstance(values, (str, bytes)):
        raise MetricInputError(f"{name} must be a list with one entry per row, got a string",
                               file=SOURCE, column=name)
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.tolist()
    elif isinstance(values, np.ndarray):
        values = values.tolist() if values.ndim == 1 else list(values)
    else:
        try:
            values = list(values)
        except TypeError:
            raise MetricInputError(f"{name} must be a list with one entry per row, got "
                                   f"{type(values).__name__}", file=SOURCE, column=name) from None
    if n is not None and len(values) != n:
        raise MetricInputError(f"{name} has {len(values)} entries but question_ids has {n}; every per-row "
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
        raise MetricInputError(
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
        raise MetricInputError(f"{name} must be an integer in [{lo}, {hi}], got {values[i]!r}",
                               file=SOURCE, row=i + 1, column=name)
    return x.astype(np.int64)


def _options_column(values: list) -> list[list[str]]:
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append([])
        elif isinstance(v, (list, tuple, np.ndarray)):
            out.append(["" if x is None else str(x) for x in v])
        else:
            raise MetricInputError(f"options must be a list of option texts per row, got {type(v).__name__}",
                                   file=SOURCE, row=i + 1, column="options")
    return out


# ---------------------------------------------------------------------------------- the frame
def build_frame(
    question_ids: Sequence,
    *,
    models: Sequence | None = None,
    predictions: Sequence | None = None,
    blind_predictions: Sequence | None = None,
    references: Sequence | None = None,
    hits: Sequence | None = None,
    blind_hits: Sequence | None = None,
    options: Sequence | None = None,
    n_options: Sequence | None = None,
    answer_types: Sequence | None = None,
    categories: Sequence | None = None,
):
    """Build one validated :class:`AuditFrame` from per-row metric columns.

    Rows are (question, model) pairs when ``models`` is given, else questions (a question may
    repeat; its question-level columns must then agree). Full-arm runs are created from
    ``predictions``/``hits``, blind-arm runs from ``blind_predictions``/``blind_hits``.

    Correctness: ``hit_exact`` is the exact match of the prediction against the reference in the
    frame's answer-code space (a missing or unparseable answer counts wrong; unknown when there is
    no reference). ``hit`` is the judged ``hits`` column where given, else ``hit_exact``.

    When ``references`` is absent (metrics that never read the gold answer: the agreement
    statistics, or judged ``hits``), each question gets a placeholder gold answer of its answer
    type; exact-match correctness is then unknown (-1).
    """
    from .answers.codes import encode_answers
    from .frame import AuditFrame

    qid_list = _as_list("question_ids", question_ids, None)
    n = len(qid_list)
    if n == 0:
        raise MetricInputError("no rows: question_ids is empty", file=SOURCE, column="question_ids")
    cols: dict[str, list | None] = {}
    for name, v in (("models", models), ("predictions", predictions), ("blind_predictions", blind_predictions),
                    ("references", references), ("hits", hits), ("blind_hits", blind_hits),
                    ("options", options), ("n_options", n_options), ("answer_types", answer_types),
                    ("categories", categories)):
        cols[name] = None if v is None else _as_list(name, v, n)

    qtext = _text_or_none(qid_list)
    if any(q is None for q in qtext):
        i = next(i for i, q in enumerate(qtext) if q is None)
        raise MetricInputError("question_id is empty", file=SOURCE, row=i + 1, column="question_ids")
    qcodes, qids = pd.factorize(pd.Series(qtext, dtype=object), sort=False)
    qcodes = qcodes.astype(np.int64)
    qids = np.asarray(qids, dtype=object)
    nq = len(qids)

    # ---- question-level columns: first value per question, conflicts are errors
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
                raise MetricInputError(
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

    # ---- runs
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
            part.attrs["judged"] = hit is not None
            part.attrs["has_pred"] = pred is not None
            run_parts.append(part)
    else:
        for name in ("predictions", "blind_predictions", "hits", "blind_hits"):
            if cols[name] is not None:
                raise MetricInputError(f"{name} given without models: per-model columns need a models column "
                                       f"naming the model of each row", file=SOURCE, column="models")
    runs = None
    if run_parts:
        runs = pd.concat(run_parts, ignore_index=True)
        runs["model"] = runs["model"].astype(object)
        if runs["model"].isna().any():
            i = int(np.flatnonzero(runs["model"].isna().to_numpy())[0]) % n
            raise MetricInputError("model is empty", file=SOURCE, row=i + 1, column="models")

    try:
        frame = AuditFrame.from_tables(qdf, runs, questions_source=_QSOURCE, runs_source=SOURCE,
                                       compute_exact=False)
    except MetricInputError:
        raise
    except InputError as e:
        row = e.row
        if e.file == _QSOURCE and row is not None:  # a question-table row -> its first input row
            row = int(_first_rows(qcodes, nq)[row - 1]) + 1
        raise MetricInputError(e.detail, file=SOURCE, row=row, column=_public_column(e.column)) from None

    # ---- correctness: exact match in the answer-code space; judged hits override in "hit"
    if runs is not None:
        r = frame.runs
        codes, gold = encode_answers(frame.questions, r)
        exact = (codes == gold[r["q"].to_numpy()]).astype(np.int8)
        if not has_gold:
            exact[:] = -1
        # rows of an arm with no predictions at all have no exact match
        arm_codes = r["arm"].to_numpy()
        judged_arm = np.zeros(2, dtype=bool)
        pred_arm = np.zeros(2, dtype=bool)
        for part in run_parts:
            a = 0 if part["arm"].iloc[0] == "full" else 1
            judged_arm[a] = part.attrs["judged"]
            pred_arm[a] = part.attrs["has_pred"]
        exact[~pred_arm[arm_codes]] = -1
        r["hit_exact"] = exact
        use_exact = ~judged_arm[arm_codes]
        hit = r["hit"].to_numpy().copy()
        hit[use_exact] = exact[use_exact]
        r["hit"] = hit
        frame.meta["metric_correctness"] = {
            "hit": {a: ("judged (hits column)" if judged_arm[i] else "exact match of predictions vs references")
                    for i, a in enumerate(("full", "blind"))},
        }
    return frame


_PUBLIC_COLUMNS = {"question_id": "question_ids", "model": "models", "answer": "references",
                   "answer_type": "answer_types", "category": "categories", "prediction": "predictions",
                   "hit": "hits", "hit_exact": "hits"}


def _public_column(col: str | None) -> str | None:
    return _PUBLIC_COLUMNS.get(col, col) if col is not None else None


# ---------------------------------------------------------------------------------- detectors
def run_detector(name: str, frame, *, field: str = "hit", seed: int = 0,
                 return_per_question: bool = False, **params) -> dict[str, Any]:
    """Run ``audit_hub.detectors.<name>.run`` on ``frame`` and return plain Python values.

    The result is the detector's ``summary`` converted to JSON types (so it equals
    ``to_jsonable(run(frame, ...).summary)``) plus, under keys the detectors do not use:
    ``n_questions``, ``n_models``, ``n_flagged_questions`` and ``flagged_question_ids``
    (question-code order), ``severity_counts``; and ``per_question`` (list of row dicts) when
    ``return_per_question`` is true.
    """
    from .io_utils import to_jsonable

    if name not in METRIC_NAMES:
        raise ValueError(f"unknown metric {name!r}; expected one of {METRIC_NAMES}")
    mod = detectors.get(name).load()
    _check_params(name, mod.run, params)
    try:
        res = mod.run(frame, field=field, seed=seed, **params)
    except DetectorSkipped as e:
        raise MetricInputError(f"{name} cannot run on these inputs: {e}", file=SOURCE) from None
    out = to_jsonable(dict(res.summary))
    pq = res.per_question
    flagged = pq[f"is_{name}_issue"].to_numpy(dtype=bool)
    sev = pq[f"{name}_severity"].astype(str)
    from .severity import LEVELS

    extra = {
        "n_questions": int(frame.n_questions),
        "n_models": int(frame.n_models),
        "n_flagged_questions": int(flagged.sum()),
        "flagged_question_ids": [str(q) for q in pq["question_id"].to_numpy()[flagged]],
        "severity_counts": {lvl: int((sev == lvl).sum()) for lvl in LEVELS},
    }
    for k, v in extra.items():
        out.setdefault(k, v)
    if return_per_question:
        out["per_question"] = to_jsonable(pq.to_dict(orient="records"))
    return out


def _check_params(name: str, run, params: dict) -> None:
    """Reject keywords the detector does not name (some detectors swallow unknown keywords, which would
    silently ignore a typo such as ``n_permutation``)."""
    import inspect

    sig = inspect.signature(run)
    accepted = [p.name for p in sig.parameters.values()
                if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("frame", "field", "seed")]
    unknown = sorted(k for k in params if k not in accepted)
    if unknown:
        raise MetricInputError(f"unknown keyword(s) {unknown} for {name}; it accepts {accepted} besides the "
                               f"input columns, seed, field and return_per_question", file=SOURCE)


def _check_requirements(name: str, given: dict[str, Any]) -> None:
    alternatives = detectors.get(name).inputs
    for alt in alternatives:
        if all(given.get(c) is not None for c in alt):
            return
    best = min(alternatives, key=lambda alt: sum(given.get(c) is None for c in alt))
    missing = [c for c in best if given.get(c) is None]
    want = " or ".join("(" + ", ".join(a) + ")" for a in alternatives)
    raise MetricInputError(f"{name} needs the columns {want}; missing {missing}", file=SOURCE, column=missing[0])


def compute(name: str, *, question_ids: Sequence, models: Sequence | None = None,
            predictions: Sequence | None = None, blind_predictions: Sequence | None = None,
            references: Sequence | None = None, hits: Sequence | None = None,
            blind_hits: Sequence | None = None, options: Sequence | None = None,
            n_options: Sequence | None = None, answer_types: Sequence | None = None,
            categories: Sequence | None = None, field: str = "hit", seed: int = 0,
            return_per_question: bool = False, **params) -> dict[str, Any]:
    """What every metric module's ``_compute`` calls: build the frame, run the detector.

    ``params`` go to the detector's ``run`` unchanged (e.g. ``n_permutations`` for
    visual_dependency). See :func:`build_frame` for the column conventions.
    """
    given = {"models": models, "predictions": predictions, "blind_predictions": blind_predictions,
             "references": references, "hits": hits, "blind_hits": blind_hits, "options": options,
             "n_options": n_options}
    _check_requirements(name, given)
    frame = build_frame(question_ids, models=models, predictions=predictions,
                        blind_predictions=blind_predictions, references=references, hits=hits,
                        blind_hits=blind_hits, options=options, n_options=n_options,
                        answer_types=answer_types, categories=categories)
    return run_detector(name, frame, field=field, seed=seed, return_per_question=return_per_question,
                        **params)
