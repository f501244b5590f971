"""visual_dependency: how often the image adds nothing, against an item-matched permutation null.

A thin ``evaluate`` adapter over ``audit_hub.detectors.visual_dependency`` (package ``benchaudit``).
"""

import datasets
import evaluate

from audit_hub.metrics import adapter as metric_adapter  # From: benchaudit

_DESCRIPTION = """\
Zero-gain share of a vision-language benchmark: the share of questions on which the models answer
correctly exactly as often without the image (blind run) as with it (f == b, counted over the models
run both ways). The share is compared with an item-matched permutation null (blind outcome rows
shuffled across items, which keeps the distribution of blind scores and breaks only the pairing);
the excess over the null mean and a one-sided permutation p-value (1 + #{null >= observed}) / (B + 1)
are reported, together with leave-one-model-out estimates. A positive excess means more questions
gain nothing from the image than the models' accuracies alone would produce.
"""

_KWARGS_DESCRIPTION = """
Args (one row per (question, model) pair; every list has one entry per row):
    question_ids (`list` of `str`): question of each row.
    models (`list` of `str`): model of each row.
    predictions (`list` of `str`): the model's extracted answer WITH the image: option letter for
        multiple-choice items, "yes"/"no", or a value. None or "" = no parseable answer (wrong).
    blind_predictions (`list` of `str`): the same model's extracted answer WITHOUT the image.
    references (`list` of `str`): gold answer of the row's question (repeated on each row).
    hits, blind_hits (`list` of 0/1, optional): judged correctness with / without the image. With the
        "hits" configuration they are the inputs (no predictions or references needed); with the default
        configuration they override the exact match of predictions against references.
    options (`list` of `list` of `str`, optional): option texts of the row's question.
    n_options (`list` of `int`, optional): number of options, when the texts are not at hand.
    answer_types (`list` of `str`, optional): "mc", "yesno", "numeric" or "free" (inferred otherwise).
    categories (`list` of `str`, optional): category of the row's question (per-category breakdown).
    n_permutations (`int`): permutations of the null, default 999.
    seed (`int`): seed of the permutations and bootstraps, default 0.
    field (`str`): "hit" (judged hits where given, else exact match; default) or "hit_exact".
    return_per_question (`bool`): also return the per-question table as a list of dicts.
    Detector parameters (n_permutations, alpha, stratify, n_boot, leave_one_out, power, secondary_permutations,
    design_label -- e.g.
    "category:VD" to check the gain against the designer's labels passed as `categories`; None = the
    detector's default) go to
    `audit_hub.detectors.visual_dependency.run`; any other keyword is a TypeError.

Returns:
    A dict of plain Python values: the detector's summary (n_items, zero_gain_share, share_ci,
    null_mean, null_sd, excess, excess_ci, p_value, n_permutations, leave_one_model_out, ...) plus
    n_questions, n_models, n_flagged_questions, flagged_question_ids and severity_counts.

Examples:
    >>> vd = evaluate.load("benchaudit/visual_dependency")
    >>> out = vd.compute(question_ids=["q1", "q1", "q2", "q2"], models=["m1", "m2", "m1", "m2"],
    ...                  predictions=["A", "A", "B", "C"], blind_predictions=["A", "B", "B", "C"],
    ...                  references=["A", "A", "B", "B"], n_permutations=99, seed=0)
    >>> sorted(k for k in ("zero_gain_share", "null_mean", "excess", "p_value") if k in out)
    ['excess', 'null_mean', 'p_value', 'zero_gain_share']
"""

_TEXT = datasets.Value("string")
_HIT = datasets.Value("int8")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class VisualDependency(metric_adapter.DeclaredInputs, evaluate.Metric):
    """Zero-gain share with its permutation null (see the metric card)."""

    def _info(self):
        if self.config_name == "hits":
            features = {"question_ids": _TEXT, "models": _TEXT, "hits": _HIT, "blind_hits": _HIT}
        elif self.config_name == "default":
            features = {"question_ids": _TEXT, "models": _TEXT, "predictions": _TEXT,
                        "blind_predictions": _TEXT, "references": _TEXT}
        else:
            raise ValueError(f"unknown configuration {self.config_name!r}; use 'default' or 'hits'")
        return metric_adapter.metric_info("visual_dependency", features, description=_DESCRIPTION,
                                          inputs_description=_KWARGS_DESCRIPTION)

    def _compute(self, question_ids, models=None, predictions=None, blind_predictions=None, references=None,
                 hits=None, blind_hits=None, options=None, n_options=None, answer_types=None, categories=None,
                 field="hit", seed=0, return_per_question=False, n_permutations=None, alpha=None,
                 stratify=None, n_boot=None, leave_one_out=None, power=None, design_label=None,
                 secondary_permutations=None):
        """Every keyword is named here: a misspelled one is a TypeError. Detector parameters left at
        None take the detector's default."""
        return metric_adapter.compute(
            "visual_dependency", question_ids=question_ids, models=models, predictions=predictions,
            blind_predictions=blind_predictions, references=references, hits=hits, blind_hits=blind_hits,
            options=options, n_options=n_options, answer_types=answer_types, categories=categories, field=field,
            seed=seed, return_per_question=return_per_question,
            params={"n_permutations": n_permutations, "alpha": alpha, "stratify": stratify, "n_boot": n_boot,
                    "leave_one_out": leave_one_out, "power": power, "design_label": design_label,
                    "secondary_permutations": secondary_permutations})
