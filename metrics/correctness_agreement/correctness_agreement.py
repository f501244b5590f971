"""correctness_agreement: item difficulty and discrimination from the models' correctness profile.

A thin ``evaluate`` adapter over ``audit_hub.detectors.correctness_agreement`` (package ``benchaudit``).
"""

import datasets
import evaluate

from audit_hub.metrics import adapter as metric_adapter  # From: benchaudit

_DESCRIPTION = """\
The correctness profile of each question over a pool of models: difficulty as the share of models
correct (Jeffreys-shrunk, with its interval), saturated items (every model correct) and floor items
(every model wrong), the item-rest correlation when there are at least five models, and Guttman
inversions (weaker models right where stronger ones fail) only when the model ranking itself is
significant. Judge-dependent: correctness is the judged `hits` column where given, else the exact
match of predictions against references.
"""

_KWARGS_DESCRIPTION = """
Args (one row per (question, model) pair; every list has one entry per row):
    question_ids (`list` of `str`): question of each row.
    models (`list` of `str`): model of each row.
    Default configuration:
    predictions (`list` of `str`): the model's extracted answer (option letter for multiple-choice
        items, "yes"/"no", or a value). None or "" = no parseable answer (wrong).
    references (`list` of `str`): gold answer of the row's question (repeated on each row).
    hits (`list` of 0/1, optional): judged correctness, overriding the exact match.
    Configuration "hits" (`evaluate.load(..., "hits")`):
    hits (`list` of 0/1): judged correctness (None = unknown).
    Optional keywords in both: options / n_options, answer_types, categories (question-level columns),
    seed (default 0), field ("hit" default or "hit_exact"), return_per_question (bool). Any other
    keyword is a TypeError; detector parameters (alpha; None = the
    detector's default) go to `audit_hub.detectors.correctness_agreement.run`.

Returns:
    A dict of plain Python values: the detector's summary (n_saturated, n_floor, ...) plus n_questions,
    n_models, n_flagged_questions, flagged_question_ids and severity_counts.
"""

_TEXT = datasets.Value("string")
_HIT = datasets.Value("int8")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CorrectnessAgreement(metric_adapter.DeclaredInputs, evaluate.Metric):
    """Difficulty / discrimination from correctness (see the metric card)."""

    def _info(self):
        if self.config_name == "hits":
            features = {"question_ids": _TEXT, "models": _TEXT, "hits": _HIT}
        elif self.config_name == "default":
            features = {"question_ids": _TEXT, "models": _TEXT, "predictions": _TEXT, "references": _TEXT}
        else:
            raise ValueError(f"unknown configuration {self.config_name!r}; use 'default' or 'hits'")
        return metric_adapter.metric_info("correctness_agreement", features, description=_DESCRIPTION,
                                          inputs_description=_KWARGS_DESCRIPTION)

    def _compute(self, question_ids, models=None, predictions=None, blind_predictions=None, references=None,
                 hits=None, blind_hits=None, options=None, n_options=None, answer_types=None, categories=None,
                 field="hit", seed=0, return_per_question=False, alpha=None):
        """Every keyword is named here: a misspelled one is a TypeError. Detector parameters left at
        None take the detector's default."""
        return metric_adapter.compute(
            "correctness_agreement", question_ids=question_ids, models=models, predictions=predictions,
            blind_predictions=blind_predictions, references=references, hits=hits, blind_hits=blind_hits,
            options=options, n_options=n_options, answer_types=answer_types, categories=categories, field=field,
            seed=seed, return_per_question=return_per_question,
            params={"alpha": alpha})
