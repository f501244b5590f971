"""fleiss_kappa_agreement: inter-model agreement on a benchmark's questions (Fleiss' kappa).

A thin ``evaluate`` adapter over ``audit_hub.detectors.fleiss_kappa_agreement`` (package ``benchaudit``).
"""

import datasets
import evaluate

from audit_hub.metrics import adapter as metric_adapter  # From: benchaudit

_CITATION = metric_adapter.CITATION + """\
@article{fleiss1971measuring,
  title   = {Measuring nominal scale agreement among many raters},
  author  = {Fleiss, Joseph L.},
  journal = {Psychological Bulletin},
  volume  = {76},
  number  = {5},
  pages   = {378--382},
  year    = {1971}
}
"""

_DESCRIPTION = """\
Agreement among the models' answers, treating each model as a rater and each question as an item:
Fleiss' kappa in its general form for items with different numbers of raters (models whose answer is
unparseable do not rate that item), Randolph's free-marginal kappa, and a bootstrap interval over
items; per question the observed agreement P_i, the number of distinct answers and the normalised
entropy. Judge-free; no gold answer is needed. Never a per-item kappa.
"""

_KWARGS_DESCRIPTION = """
Args (one row per (question, model) pair; every list has one entry per row):
    question_ids (`list` of `str`): question of each row.
    models (`list` of `str`): model of each row.
    predictions (`list` of `str`): the model's extracted answer (option letter for multiple-choice
        items, "yes"/"no", or a value). None or "" = no parseable answer (not a rating).
    references (`list` of `str`, optional): gold answers; not used by the statistic.
    options (`list` of `list` of `str`) or n_options (`list` of `int`), optional: marks multiple-choice
        items (answers are then option letters and the number of categories is known).
    answer_types, categories (`list` of `str`, optional): answer type and category of the question.
    seed (`int`): seed of the bootstrap, default 0.
    return_per_question (`bool`): also return the per-question table as a list of dicts.
    Detector parameters (n_boot, max_units, max_boot_codes, alpha, chunk; None = the detector's default) go to
    `audit_hub.detectors.fleiss_kappa_agreement.run`; any other keyword is a TypeError.

Returns:
    A dict of plain Python values: the detector's summary (kappa, kappa_ci, ...) plus n_questions,
    n_models, n_flagged_questions, flagged_question_ids and severity_counts.
"""

_TEXT = datasets.Value("string")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FleissKappaAgreement(metric_adapter.DeclaredInputs, evaluate.Metric):
    """Fleiss' kappa over models as raters (see the metric card)."""

    optional_features = ("references",)

    def _info(self):
        if self.config_name != "default":
            raise ValueError(f"unknown configuration {self.config_name!r}; use 'default'")
        features = {"question_ids": _TEXT, "models": _TEXT, "predictions": _TEXT, "references": _TEXT}
        return metric_adapter.metric_info("fleiss_kappa_agreement", features, description=_DESCRIPTION,
                                          inputs_description=_KWARGS_DESCRIPTION, citation=_CITATION)

    def _compute(self, question_ids, models=None, predictions=None, blind_predictions=None, references=None,
                 hits=None, blind_hits=None, options=None, n_options=None, answer_types=None, categories=None,
                 field="hit", seed=0, return_per_question=False, n_boot=None, max_units=None,
                 max_boot_codes=None, alpha=None, chunk=None):
        """Every keyword is named here: a misspelled one is a TypeError. Detector parameters left at
        None take the detector's default. ``references`` left out arrive as ``""`` on every row: not given."""
        if references is not None and all(r == "" for r in references):
            references = None
        return metric_adapter.compute(
            "fleiss_kappa_agreement", question_ids=question_ids, models=models, predictions=predictions,
            blind_predictions=blind_predictions, references=references, hits=hits, blind_hits=blind_hits,
            options=options, n_options=n_options, answer_types=answer_types, categories=categories, field=field,
            seed=seed, return_per_question=return_per_question,
            params={"n_boot": n_boot, "max_units": max_units, "max_boot_codes": max_boot_codes, "alpha": alpha,
                    "chunk": chunk})
