"""distractor_similarity: duplicate and near-duplicate answer options.

A thin ``evaluate`` adapter over ``audit_hub.detectors.distractor_similarity`` (package ``benchaudit``).
"""

import datasets
import evaluate

from audit_hub.metrics import adapter as metric_adapter  # From: benchaudit

_DESCRIPTION = """\
Pairwise similarity of each multiple-choice question's options after normalisation (Unicode NFKC,
casefolding, letter prefixes such as "A." or "(B)" stripped, numbers compared numerically). Tiers:
exact duplicates (critical when one of the pair is the gold option), near duplicates (normalised
Levenshtein similarity >= 0.9 on strings of 8+ characters, or token-set ratio >= 90 with 2+ tokens),
contrastive pairs ("left"/"right", negations) marked as such rather than as duplicates. Options that
are just their own letters (the real options are in the image) are excluded and counted. Judge-free;
works on the questions alone.
"""

_KWARGS_DESCRIPTION = """
Args (one row per question; a question may repeat if its columns agree):
    question_ids (`list` of `str`): question of each row.
    options (`list` of `list` of `str`): option texts of the question (letters implied by position).
    references (`list` of `str`): gold option letter of the question.
    categories, answer_types (`list` of `str`, optional): category and answer type of the question.
    seed (`int`): default 0. return_per_question (`bool`): also return the per-question table.
    Detector parameters (lev_threshold, lev_min_chars, token_set_threshold, token_min, short_max_chars, workers; None = the detector's default) go to
    `audit_hub.detectors.distractor_similarity.run`; any other keyword is a TypeError.

Returns:
    A dict of plain Python values: the detector's summary (n_exact_duplicates, n_near_duplicates, ...)
    plus n_questions, n_models, n_flagged_questions, flagged_question_ids and severity_counts.
"""

_TEXT = datasets.Value("string")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DistractorSimilarity(metric_adapter.DeclaredInputs, evaluate.Metric):
    """Duplicate / near-duplicate options (see the metric card)."""

    def _info(self):
        if self.config_name != "default":
            raise ValueError(f"unknown configuration {self.config_name!r}; use 'default'")
        features = {"question_ids": _TEXT, "options": datasets.Sequence(_TEXT), "references": _TEXT}
        return metric_adapter.metric_info("distractor_similarity", features, description=_DESCRIPTION,
                                          inputs_description=_KWARGS_DESCRIPTION)

    def _compute(self, question_ids, models=None, predictions=None, blind_predictions=None, references=None,
                 hits=None, blind_hits=None, options=None, n_options=None, answer_types=None, categories=None,
                 field="hit", seed=0, return_per_question=False, lev_threshold=None, lev_min_chars=None,
                 token_set_threshold=None, token_min=None, short_max_chars=None, workers=None):
        """Every keyword is named here: a misspelled one is a TypeError. Detector parameters left at
        None take the detector's default."""
        return metric_adapter.compute(
            "distractor_similarity", question_ids=question_ids, models=models, predictions=predictions,
            blind_predictions=blind_predictions, references=references, hits=hits, blind_hits=blind_hits,
            options=options, n_options=n_options, answer_types=answer_types, categories=categories, field=field,
            seed=seed, return_per_question=return_per_question,
            params={"lev_threshold": lev_threshold, "lev_min_chars": lev_min_chars,
                    "token_set_threshold": token_set_threshold, "token_min": token_min,
                    "short_max_chars": short_max_chars, "workers": workers})
