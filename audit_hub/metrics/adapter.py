"""Shared code behind the six ``evaluate`` metric modules in ``metrics/<name>/``.

An ``evaluate.Metric`` receives flat per-row columns (one row per question, or per
(question, model) pair). This module turns those columns into one validated
:class:`~audit_hub.frame.core.AuditFrame` and calls the detector's ``run`` on it, so the metric modules
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

Exact match is decided in the frame's answer-code space (:func:`audit_hub.answers.encode_text`):
letters compare case-insensitively against the option range, yes/no case-insensitively, numbers
numerically ("0.50" == ".5") and free text after casefolding and whitespace collapsing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import detectors
from ..errors import DetectorSkipped, InputError
from ..readers.compute_columns import QUESTIONS_SOURCE, SOURCE, read_compute_columns
from ..schema import ARMS, CORRECTNESS_FIELDS

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



class MetricInputError(InputError, ValueError):
    """Bad metric input. Both an :class:`InputError` (exit code 2 in the CLI) and a ``ValueError``
    (what users of ``evaluate`` expect from ``compute``)."""


# ---------------------------------------------------------------------------------- arguments
#: the columns that carry answers (text): None, NaN or "" = no parseable answer
ANSWER_COLUMNS = ("predictions", "blind_predictions", "references")
#: the columns of judged correctness
HIT_COLUMNS = ("hits", "blind_hits")
#: arguments that must be True or False (None: the detector's default)
BOOL_ARGUMENTS = ("return_per_question", "leave_one_out", "power", "secondary_permutations", "use_blind",
                  "per_category", "check")
FIELDS = CORRECTNESS_FIELDS
#: the row-key columns: a string or an integer per row (read as its text)
ID_COLUMNS = {"question_ids": "question", "models": "model"}
#: arguments that may not be None (the others: None = the detector's default)
NOT_NONE = ("seed",)


def _is_nan(v) -> bool:
    return isinstance(v, float) and v != v or (type(v).__module__ == "numpy" and getattr(v, "dtype", None) is not None
                                               and v.dtype.kind == "f" and bool(v != v))


def _hit_ok(v) -> bool:
    import numbers

    if v is None:
        return True
    if isinstance(v, (bool, np.bool_)):
        return True
    return isinstance(v, numbers.Real) and not _is_nan(v) and v in (0, 1)


def check_arguments(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments of module ``name`` checked with the CLI's rules (ranges from
    :data:`audit_hub.bounds.ARGUMENT_RANGES`, the messages of :func:`audit_hub.bounds.check_range`); a bad
    one is a :class:`MetricInputError` (a ``ValueError``) naming it and its allowed values. Returns the
    arguments with no-answer cells (None, NaN) in the answer columns written as ``""`` (what ``evaluate``'s
    string features accept; the same meaning, as the cards say)."""
    import numbers

    from ..bounds import ARGUMENT_RANGES, check_range, range_text

    out = dict(args)
    for key, value in args.items():
        if value is None:
            if key in NOT_NONE:
                raise MetricInputError(f"{name}: {key} must be an integer in the range "
                                       f"{range_text(key, ARGUMENT_RANGES)}, got None (a seed is recorded with the "
                                       "result, so that it can be reproduced)")
            continue
        if key in ARGUMENT_RANGES:
            try:
                check_range(key, value, ARGUMENT_RANGES)
            except InputError as e:
                raise MetricInputError(f"{name}: {e.detail}") from None
        elif key in BOOL_ARGUMENTS:
            if not isinstance(value, (bool, np.bool_)):
                raise MetricInputError(f"{name}: {key} must be True or False, got {value!r}")
        elif key == "field":
            if value not in FIELDS:
                raise MetricInputError(f"{name}: field must be one of {', '.join(map(repr, FIELDS))}, got {value!r}")
        elif key in HIT_COLUMNS:
            vals = _as_list(key, value, name)
            bad = next((i for i, v in enumerate(vals) if not _hit_ok(v)), None)
            if bad is not None:
                raise MetricInputError(f"{name}: {key}[{bad}] is {vals[bad]!r}; allowed values are 0, 1, True, "
                                       "False or None (not judged)")
        elif key in ANSWER_COLUMNS:
            vals = _as_list(key, value, name)
            clean = []
            for i, v in enumerate(vals):
                if v is None or _is_nan(v):
                    v = ""
                elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, numbers.Real)):
                    raise MetricInputError(f"{name}: {key}[{i}] is {type(v).__name__} {v!r}; allowed values are "
                                           "a string (option letter, yes/no or a value), a number, or None / "
                                           "\"\" (no parseable answer)")
                elif not isinstance(v, str):  # a number: its text, what evaluate's string feature takes
                    v = str(v.item() if hasattr(v, "item") else v)
                clean.append(v)
            out[key] = clean
        elif key in ID_COLUMNS:
            vals = _as_list(key, value, name)
            clean = []
            for i, v in enumerate(vals):
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, numbers.Integral)):
                    raise MetricInputError(f"{name}: {key}[{i}] is {type(v).__name__} {v!r}; allowed values are a "
                                           "string or an integer (every row names its " + ID_COLUMNS[key] + ")")
                clean.append(v if isinstance(v, str) else str(int(v)))
            out[key] = clean
        elif key == "options":
            vals = _as_list(key, value, name)
            bad = next((i for i, v in enumerate(vals) if v is not None and (isinstance(v, (str, bytes, Mapping))
                                                                             or not hasattr(v, "__len__"))), None)
            if bad is not None:
                raise MetricInputError(f"{name}: options[{bad}] is {type(vals[bad]).__name__} {vals[bad]!r}; each row's "
                                       "options must be a list of option texts (or None)")
    return out


def _as_list(key: str, value, name: str) -> list:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise MetricInputError(f"{name}: {key} must be a list with one entry per row, got {type(value).__name__}",
                               column=key)
    return list(value.tolist() if hasattr(value, "tolist") else value)


def argument_types_markdown(module: str, arguments: Sequence[str]) -> str:
    """The card section that lists the accepted types of every argument of ``module`` (``arguments``: the
    keywords of its ``_compute``), from the same tables :func:`check_arguments` uses."""
    from ..bounds import ARGUMENT_RANGES, range_text

    fixed = {
        "question_ids": "list of str (one per row)",
        "models": "list of str (one per row)",
        "predictions": "list of str, number or None; None, NaN or \"\" = no parseable answer (wrong)",
        "blind_predictions": "list of str, number or None; None, NaN or \"\" = no parseable answer (wrong); "
                             "all None is accepted",
        "references": "list of str or number (the gold answer of the row's question)",
        "hits": "list of 0, 1, True, False or None (not judged); NaN and strings such as 'yes' are refused",
        "blind_hits": "list of 0, 1, True, False or None (not judged); NaN and strings such as 'yes' are refused",
        "options": "list of lists of str (the option texts of the row's question)",
        "n_options": "list of int",
        "answer_types": "list of str: 'mc', 'yesno', 'numeric' or 'free'",
        "categories": "list of str",
        "field": "'hit' or 'hit_exact'",
        "stratify": "'auto', 'none' or the detector's other strata (see above)",
        "design_label": "str 'COLUMN[:VALUE]' or None",
    }
    lines = [ARGUMENT_TYPES_HEADING, "", "Every argument is checked before anything is computed; a value outside "
             "these is a `ValueError` naming the argument and its allowed values.", "",
             "| Argument | Accepted |", "| :--- | :--- |"]
    for a in arguments:
        if a in ARGUMENT_RANGES:
            lo, hi = ARGUMENT_RANGES[a]
            kind = "int" if isinstance(lo, int) and (hi is None or isinstance(hi, int)) else "float"
            text = f"{kind} in {range_text(a, ARGUMENT_RANGES)}" + (", default 0" if a == "seed" else
                                                                  ", or None (the default)")
        elif a in BOOL_ARGUMENTS:
            text = "True or False" + ("" if a == "return_per_question" else ", or None (the default)")
        else:
            text = fixed.get(a, "see above")
        lines.append(f"| `{a}` | {text} |")
    return "\n".join(lines) + "\n"


ARGUMENT_TYPES_HEADING = "## Accepted argument types"


# ---------------------------------------------------------------------------------- the frame
def metric_info(name: str, features: dict, *, description: str, inputs_description: str, citation: str = CITATION):
    """The ``evaluate.MetricInfo`` of the metric module ``name``: its input features, its citation (the audit
    paper's unless given) and the module's Space as homepage (:func:`audit_hub.metrics.space_url`)."""
    import datasets
    import evaluate

    from . import space_url

    url = space_url(name)
    return evaluate.MetricInfo(description=description, citation=citation, inputs_description=inputs_description,
                               features=datasets.Features(features), homepage=url, reference_urls=[url])


class DeclaredInputs:
    """Base of every evaluate module here, before ``evaluate.Metric``: ``Metric.compute`` takes
    ``predictions`` and ``references`` by name and silently drops them when the loaded configuration
    does not declare them as features; here that is a TypeError naming them and the configurations.

    ``optional_features``: declared features a caller may leave out (``evaluate`` requires every declared one);
    left out, each row gets ``""`` (no value), which the module's ``_compute`` reads as not given."""

    optional_features: tuple[str, ...] = ()

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the module's result from the inputs (evaluate's ``compute``; see the arguments below).
        Every argument is checked here first (:func:`check_arguments`): a bad one is a ValueError naming it
        and its allowed values, before ``evaluate`` or ``datasets`` convert anything."""
        given = check_arguments(self.name, {"predictions": predictions, "references": references, **kwargs})
        predictions, references = given.pop("predictions"), given.pop("references")
        kwargs = given
        declared = set(self._feature_names())
        if references is None and "references" in self.optional_features and "references" in declared:
            rows = kwargs.get("question_ids")
            references = [""] * (len(rows) if rows is not None else 0)
        missing = [n for n, v in (("predictions", predictions), ("references", references))
                   if v is None and n in declared and n not in self.optional_features]
        missing += [n for n in sorted(declared - {"predictions", "references"} - set(self.optional_features))
                    if kwargs.get(n) is None]
        if missing:
            raise MetricInputError(f"{self.name}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                                   f"required by configuration {self.config_name!r} (its inputs: {sorted(declared)})")
        dropped = [n for n, v in (("predictions", predictions), ("references", references))
                   if v is not None and n not in declared]
        if dropped:
            raise TypeError(f"{self.name}: {' and '.join(dropped)} not an input of configuration "
                            f"{self.config_name!r} (its inputs: {sorted(declared)}); load a configuration "
                            f"that declares {' and '.join(dropped)}")
        return super().compute(predictions=predictions, references=references, **kwargs)


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
    """One validated :class:`AuditFrame` from per-row metric columns: the columns are read like any
    other input (:func:`audit_hub.readers.compute_columns.read_compute_columns`) and validated by the
    frame like any other tables.

    Correctness: ``hit_exact`` is the exact match of the prediction against the reference in the
    frame's answer-code space (a missing or unparseable answer counts wrong; unknown when there is
    no reference). ``hit`` is the judged ``hits`` column where given, else ``hit_exact``.
    """
    from ..frame.core import AuditFrame

    facts: dict = {}
    try:
        qdf, runs, facts = read_compute_columns(question_ids, {
            "models": models, "predictions": predictions, "blind_predictions": blind_predictions,
            "references": references, "hits": hits, "blind_hits": blind_hits, "options": options,
            "n_options": n_options, "answer_types": answer_types, "categories": categories})
        # a model whose every prediction is None is kept: here None is "no parseable answer (counted wrong)"
        frame = AuditFrame.from_tables(qdf, runs, questions_source=QUESTIONS_SOURCE, runs_source=SOURCE,
                                       compute_exact=False, drop_empty_runs=False)
    except InputError as e:
        row = e.row
        if e.file == QUESTIONS_SOURCE and row is not None:  # a question-table row -> its first input row
            row = int(facts["first_rows"][row - 1]) + 1
        raise MetricInputError(e.detail, file=SOURCE, row=row, column=_public_column(e.column)) from None

    # ---- correctness: exact match in the answer-code space; judged hits override in "hit"
    if runs is not None:
        r = frame.runs
        codes, gold = frame.answer_code_vector(), frame.gold_codes()
        exact = (codes == gold[r["q"].to_numpy()]).astype(np.int8)
        if not facts["has_gold"]:
            exact[:] = -1
        # rows of an arm with no predictions at all have no exact match
        arm_codes = r["arm"].to_numpy()
        judged_arm = np.array([facts["judged"].get(a, False) for a in ARMS])
        pred_arm = np.array([facts["has_predictions"].get(a, False) for a in ARMS])
        exact[~pred_arm[arm_codes]] = -1
        r["hit_exact"] = exact
        use_exact = ~judged_arm[arm_codes]
        hit = r["hit"].to_numpy().copy()
        hit[use_exact] = exact[use_exact]
        r["hit"] = hit
        frame.meta["metric_correctness"] = {
            "hit": {a: ("judged (hits column)" if judged_arm[i] else "exact match of predictions vs references")
                    for i, a in enumerate(ARMS)},
        }
    return frame


_PUBLIC_COLUMNS = {"question_id": "question_ids", "model": "models", "answer": "references",
                   "answer_type": "answer_types", "category": "categories", "prediction": "predictions",
                   "hit": "hits", "hit_exact": "hits"}


def _public_column(col: str | None) -> str | None:
    return _PUBLIC_COLUMNS.get(col, col) if col is not None else None


# ---------------------------------------------------------------------------------- detectors
def run_detector(name: str, frame, *, field: str = "hit", seed: int = 0, return_per_question: bool = False,
                 params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the registered detector ``name`` on ``frame`` and return plain Python values.

    ``params`` go to the detector's ``run`` (a key it does not take is a TypeError naming it). The
    result is the detector's ``summary`` converted to JSON types (so it equals
    ``to_jsonable(run(frame, ...).summary)``) plus, under keys the detectors do not use:
    ``n_questions``, ``n_models``, ``n_flagged_questions`` and ``flagged_question_ids``
    (question-code order), ``severity_counts``; and ``per_question`` (list of row dicts) when
    ``return_per_question`` is true.
    """
    from ..hub.folders import to_jsonable
    from ..severity import LEVELS

    if name not in METRIC_NAMES:
        raise ValueError(f"unknown metric {name!r}; expected one of {METRIC_NAMES}")
    mod = detectors.get(name).load()
    try:
        res = mod.run(frame, field=field, seed=seed, **dict(params or {}))
    except DetectorSkipped as e:
        raise MetricInputError(f"{name} cannot run on these inputs: {e}", file=SOURCE) from None
    out = to_jsonable(dict(res.summary))
    pq = res.per_question
    flagged = pq[f"is_{name}_issue"].to_numpy(dtype=bool)
    sev = pq[f"{name}_severity"].astype(str)
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
            return_per_question: bool = False, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What every metric module's ``_compute`` calls: build the frame, run the detector.

    ``params``: the detector's parameters (e.g. ``n_permutations`` for the zero-gain audit); a value
    of None means the detector's default, a key its ``run`` does not take is a TypeError naming it.
    See :func:`build_frame` for the column conventions.
    """
    checked = check_arguments(name, {"field": field, "seed": seed, "return_per_question": return_per_question,
                                     "hits": hits, "blind_hits": blind_hits, **dict(params or {})})
    del checked
    given = {"models": models, "predictions": predictions, "blind_predictions": blind_predictions,
             "references": references, "hits": hits, "blind_hits": blind_hits, "options": options,
             "n_options": n_options}
    _check_requirements(name, given)
    frame = build_frame(question_ids, models=models, predictions=predictions,
                        blind_predictions=blind_predictions, references=references, hits=hits,
                        blind_hits=blind_hits, options=options, n_options=n_options,
                        answer_types=answer_types, categories=categories)
    given_params = {k: v for k, v in (params or {}).items() if v is not None}
    return run_detector(name, frame, field=field, seed=seed, return_per_question=return_per_question,
                        params=given_params)
