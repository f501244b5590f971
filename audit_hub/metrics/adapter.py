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
from ..schema import ARMS

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


# ---------------------------------------------------------------------------------- the frame
class DeclaredInputs:
    """Base of every evaluate module here, before ``evaluate.Metric``: ``Metric.compute`` takes
    ``predictions`` and ``references`` by name and silently drops them when the loaded configuration
    does not declare them as features; here that is a TypeError naming them and the configurations."""

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the module's result from the inputs (evaluate's ``compute``; see the arguments below).
        """
        declared = set(self._feature_names())
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
        frame = AuditFrame.from_tables(qdf, runs, questions_source=QUESTIONS_SOURCE, runs_source=SOURCE,
                                       compute_exact=False)
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
