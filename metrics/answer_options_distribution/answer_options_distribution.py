"""answer_options_distribution: is the gold answer spread evenly over the option positions?

A thin ``evaluate`` adapter over ``audit_hub.detectors.answer_options_distribution`` (package ``benchaudit``).
"""

import datasets
import evaluate

from audit_hub.metrics import adapter as metric_adapter  # From: benchaudit

_DESCRIPTION = """\
Position bias of a multiple-choice benchmark: the histogram of gold-answer letters, tested against
uniform within each number-of-options stratum (chi-squares and degrees of freedom summed over strata;
Monte Carlo p-value when expected counts are small), Cohen's w, and the accuracy of always answering
the most common gold letter against chance. When per-model predictions are given, each model's
predicted-letter distribution is compared with the gold distribution. Judge-free; works on the
questions alone (no model runs needed).
"""

_KWARGS_DESCRIPTION = """
Args (one row per question, or per (question, model) pair when models are given):
    question_ids (`list` of `str`): question of each row.
    references (`list` of `str`): gold option letter of the row's question.
    Default configuration:
    n_options (`list` of `int`): number of options of the row's question.
    Configuration "options" (`evaluate.load(..., "options")`):
    options (`list` of `list` of `str`): option texts of the row's question.
    Configurations "default+predictions" and "options+predictions" also take
    predictions (`list` of `str`, per row) with models (`list` of `str`): each model's predicted-letter
    distribution against the gold's; blind_predictions (per row) adds the blind arm. Passing
    predictions to a configuration without them is a TypeError (evaluate would drop them).
    Optional keywords: models, categories, answer_types, seed (default 0), return_per_question.
    Detector parameters (n_mc, alpha, per_category; None = the detector's default) go to
    `audit_hub.detectors.answer_options_distribution.run`; any other keyword is a TypeError.
    Question-level columns (references, n_options, options, categories) repeat on every row of a
    question; rows of one question must agree.

Returns:
    A dict of plain Python values: the detector's summary (gold_position_counts, chi2, dof, p_value,
    ...) plus n_questions, n_models, n_flagged_questions, flagged_question_ids and severity_counts.
"""

_TEXT = datasets.Value("string")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AnswerOptionsDistribution(metric_adapter.DeclaredInputs, evaluate.Metric):
    """Gold-position histogram and its tests (see the metric card)."""

    def _info(self):
        base, _, with_predictions = self.config_name.partition("+")
        if base == "options":
            features = {"question_ids": _TEXT, "references": _TEXT, "options": datasets.Sequence(_TEXT)}
        elif base == "default":
            features = {"question_ids": _TEXT, "references": _TEXT, "n_options": datasets.Value("int32")}
        if base not in ("default", "options") or with_predictions not in ("", "predictions"):
            raise ValueError(f"unknown configuration {self.config_name!r}; use 'default', 'options', "
                             "'default+predictions' or 'options+predictions'")
        if with_predictions:
            features["predictions"] = _TEXT
        return metric_adapter.metric_info("answer_options_distribution", features, description=_DESCRIPTION,
                                          inputs_description=_KWARGS_DESCRIPTION)

    def _compute(self, question_ids, models=None, predictions=None, blind_predictions=None, references=None,
                 hits=None, blind_hits=None, options=None, n_options=None, answer_types=None, categories=None,
                 field="hit", seed=0, return_per_question=False, n_mc=None, alpha=None,
                 per_category=None):
        """Every keyword is named here: a misspelled one is a TypeError. Detector parameters left at
        None take the detector's default."""
        return metric_adapter.compute(
            "answer_options_distribution", question_ids=question_ids, models=models, predictions=predictions,
            blind_predictions=blind_predictions, references=references, hits=hits, blind_hits=blind_hits,
            options=options, n_options=n_options, answer_types=answer_types, categories=categories, field=field,
            seed=seed, return_per_question=return_per_question,
            params={"n_mc": n_mc, "alpha": alpha, "per_category": per_category})
