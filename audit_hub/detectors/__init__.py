"""The detectors, registered in this one place (see :mod:`audit_hub.detectors.registry`).

Each detector is a module ``audit_hub/detectors/<name>.py`` with a pure ``run(frame, *, field, seed,
...) -> DetectorResult`` (contract in :mod:`audit_hub.detectors.base`). Its metadata (description,
inputs, judge dependence, calibration parameters, report phrases) is registered below; nothing
outside this package spells a detector's name.
"""

from __future__ import annotations

from .registry import ActionTrigger, DetectorSpec, RegistryError, by_role, get, names, register, specs

register(
    name="visual_dependency",
    description="share of questions with zero accuracy gain from the image, against an item-matched "
                "permutation null",
    requires="runs with the image (full arm) and without it (blind arm, e.g. `benchaudit blind`), with "
             "correctness in the chosen field",
    inputs=(("models", "predictions", "blind_predictions", "references"), ("models", "hits", "blind_hits")),
    judge_dependent=True,
    evidence=("f", "b", "mf", "mb", "m", "gain", "zero_gain", "negative_gain", "excluded"),
    label="no gain from the image",
    signal="full vs blind accuracy",
    finding="no-gain-from-image items",
    audit_params=("n_permutations", "alpha"),
    compares_arms=True,
    # 199 permutations inside a simulation (p resolution 0.005); power, the per-category and the
    # unstratified permutation nulls are not part of the headline test
    calibration_params={"leave_one_out": False, "n_boot": 0, "power": False, "n_permutations": 199,
                        "secondary_permutations": False},
    actions=(ActionTrigger("drop", "high"),),
    role="image_gain",
    headline_statistic="zero_gain_share",
    judge_dependence="judge_dependence",
    peak_bytes_per_cell=3.6,
    ns_per_cell=51,
)
register(
    name="consensus_error",
    description="questions on which the models agree on one answer that is not the gold one",
    requires="full-arm answers from at least 2 models (blind runs optional, raise severity)",
    inputs=(("models", "predictions", "references"),),
    judge_dependent=False,
    evidence=("n_parseable", "consensus_code", "consensus_answer", "consensus_share", "gold_share", "unanimous",
              "n_blind_parseable", "blind_agreement", "duplicates_gold", "p_gold_wrong", "log_odds_gold_wrong",
              "gold_evidence", "gold_doubted"),
    # the recall simulation is not part of the headline test; 3 EM iterations inside a simulation
    calibration_params={"recall_sims": 0, "label_iters": 3, "check": False},
    # curation reads the flags: the audit's fit and its held-out check (a flag the check does not support is
    # a review order, never removed); only the recall simulation (summary only) is off
    findings_params={"recall_sims": 0},
    label="consensus error",
    signal="majority vote vs gold label",
    finding="label-conflict candidates",
    actions=(ActionTrigger("rewrite distractor", "medium", "consensus_error_duplicates_gold"),
             ActionTrigger("relabel", "high")),
    role="label_conflict",
    headline_statistic="unanimous",
    peak_bytes_per_cell=11.4,
    ns_per_cell=141,
)
register(
    name="fleiss_kappa_agreement",
    description="inter-model agreement on each question's answer (Fleiss kappa and per-item agreement)",
    requires="full-arm answers from at least 2 models",
    inputs=(("models", "predictions"),),
    judge_dependent=False,
    evidence=("agreement", "n_raters", "n_distinct", "entropy"),
    # the bootstrap intervals are not part of the per-item flags calibration counts
    calibration_params={"n_boot": 0},
    label="low inter-model agreement",
    signal="inter-model agreement (Fleiss kappa)",
    finding="unstable / ambiguous items",
    peak_bytes_per_cell=2.6,
    ns_per_cell=13,
)
register(
    name="correctness_agreement",
    description="each question's correctness profile across models (saturation, floor, item-rest correlation)",
    requires="correctness of at least two models with the image (full arm)",
    inputs=(("models", "predictions", "references"), ("models", "hits")),
    judge_dependent=True,
    evidence=("n_correct", "n_models", "p_correct", "p_correct_low", "p_correct_high", "saturated", "floor",
              "item_rest", "item_rest_p", "guttman_inversions", "guttman_share", "note"),
    label="anomalous correctness profile",
    signal="correctness profile across models",
    finding="difficulty / discrimination",
    role="correctness_profile",
    peak_bytes_per_cell=5.5,
    ns_per_cell=19,
)
register(
    name="answer_options_distribution",
    description="gold-answer positions against a uniform spread, stratified by the number of options",
    requires="multiple-choice questions (no runs needed)",
    inputs=(("references", "options"), ("references", "n_options")),
    judge_dependent=False,
    evidence=("gold_letter", "n_options", "position_excess"),
    # the per-category rows (Monte Carlo p per category) are not part of the headline test
    calibration_params={"per_category": False},
    label="gold in an over-represented position",
    signal="gold-position histogram",
    finding="position bias",
    peak_bytes_per_cell=1.8,
    ns_per_cell=14,
)
register(
    name="distractor_similarity",
    description="identical, near-identical and contrastive option pairs",
    requires="option texts for at least one question (no runs needed)",
    inputs=(("options", "references"),),
    judge_dependent=False,
    evidence=("tier", "pair", "similarity", "involves_gold", "n_exact_pairs", "n_near_pairs", "n_contrastive_pairs",
              "bare_letter_options", "n_options_compared", "placeholder_gold", "rewrite_options",
              "n_placeholder_distractors"),
    label="duplicate or placeholder options",
    signal="pairwise option similarity; placeholder options",
    finding="near-duplicate and placeholder options",
    actions=(ActionTrigger("rewrite distractor", "medium", "distractor_similarity_rewrite_options"),
             ActionTrigger("relabel", "critical", "distractor_similarity_placeholder_gold")),
    role="option_similarity",
    peak_bytes_per_cell=7.1,
    ns_per_cell=30,
)

#: The card's text for each suggested action (the triggers are the ``actions`` registered above).
ACTION_RULES: dict[str, str] = {
    "rewrite distractor": "distractor_similarity at medium or above (identical or near-identical options), or "
                          "the consensus option duplicates the gold text; the options need fixing, not the label",
    "relabel": "the gold option is a placeholder (a missing value: empty, nan, or None as trailing padding; unanswerable as released), or "
               "consensus_error at high or above: posterior >= 0.5 that the gold is wrong under a model of "
               "per-model reliability and position bias, item difficulty and attractive distractors, in a "
               "category whose golds the pool can tell, confirmed by the held-out-model check (on open items: every "
               "model that answered parseably chose the same non-gold answer), so the gold label is the first suspect",
    "drop": "visual_dependency at high or above: every model solves it without the image and gains nothing from "
            "it, so on a vision benchmark the item does not measure vision",
    "review": "any other finding at medium or above",
    "keep": "no finding above low",
}

__all__ = ["ACTION_RULES", "ActionTrigger", "DetectorSpec", "RegistryError", "by_role", "get", "names", "register", "specs"]
