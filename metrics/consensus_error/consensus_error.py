"""consensus_error: questions on which the models agree on one answer that is not the gold one.

A thin ``evaluate`` adapter over ``audit_hub.detectors.consensus_error`` (package ``benchaudit``).
"""

import datasets
import evaluate

from audit_hub.metrics import adapter as metric_adapter  # From: benchaudit

_DESCRIPTION = """\
Label-conflict candidates of a benchmark: questions on which every model that answered parseably
chose the same non-gold answer (unanimous non-gold), and questions whose strict majority vote is a
non-gold answer (ties are "no majority"). The unanimous count is reported with its Wilson interval
and beside the count expected if the models erred independently (from each model's error rate and
the number of options). Judge-free: it compares extracted answers, never judged correctness.
"""

_KWARGS_DESCRIPTION = """
Args (one row per (question, model) pair; every list has one entry per row):
    question_ids (`list` of `str`): question of each row.
    models (`list` of `str`): model of each row.
    predictions (`list` of `str`): the model's extracted answer (option letter for multiple-choice
        items, "yes"/"no", or a value). None or "" = no parseable answer.
    references (`list` of `str`): gold answer of the row's question (repeated on each row).
    blind_predictions (`list` of `str`, optional): the same model's answer without the image; raises
        the severity when the blind runs do not agree on the consensus answer.
    options (`list` of `list` of `str`, optional): option texts (severity rises when the consensus
        option duplicates the gold text).
    n_options (`list` of `int`, optional): number of options when the texts are not at hand.
    answer_types, categories (`list` of `str`, optional): answer type and category of the question. Pass
        them as the questions file has them: the label model is fitted, and identifiability tested, per
        category (without them the benchmark is one category, and the result can differ from the audit's).
    seed (`int`): seed, default 0.
    return_per_question (`bool`): also return the per-question table as a list of dicts.
    Detector parameters (min_answered, blind_agree_share, recall_sims, use_blind, label_iters, check; None = the detector's default) go to
    `audit_hub.detectors.consensus_error.run`; any other keyword is a TypeError.

Returns:
    A dict of plain Python values: the detector's summary (n_unanimous_non_gold,
    expected_under_independence, n_majority_non_gold, ...) plus n_questions, n_models,
    n_flagged_questions, flagged_question_ids and severity_counts.
"""

_TEXT = datasets.Value("string")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConsensusError(metric_adapter.DeclaredInputs, evaluate.Metric):
    """Unanimous / majority non-gold consensus (see the metric card)."""

    def _info(self):
        if self.config_name != "default":
            raise ValueError(f"unknown configuration {self.config_name!r}; use 'default'")
        features = {"question_ids": _TEXT, "models": _TEXT, "predictions": _TEXT, "references": _TEXT}
        return metric_adapter.metric_info("consensus_error", features, description=_DESCRIPTION,
                                          inputs_description=_KWARGS_DESCRIPTION)

    def _compute(self, question_ids, models=None, predictions=None, blind_predictions=None, references=None,
                 hits=None, blind_hits=None, options=None, n_options=None, answer_types=None, categories=None,
                 field="hit", seed=0, return_per_question=False, min_answered=None, blind_agree_share=None,
                 recall_sims=None, use_blind=None, label_iters=None, check=None):
        """Every keyword is named here: a misspelled one is a TypeError. Detector parameters left at
        None take the detector's default."""
        return metric_adapter.compute(
            "consensus_error", question_ids=question_ids, models=models, predictions=predictions,
            blind_predictions=blind_predictions, references=references, hits=hits, blind_hits=blind_hits,
            options=options, n_options=n_options, answer_types=answer_types, categories=categories, field=field,
            seed=seed, return_per_question=return_per_question,
            params={"min_answered": min_answered, "blind_agree_share": blind_agree_share, "recall_sims": recall_sims,
                    "use_blind": use_blind, "label_iters": label_iters, "check": check})
