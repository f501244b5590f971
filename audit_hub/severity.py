"""Severity levels: defined once here, explained in the report card, applied by every detector.

=========  =====  ==============================================================================
level      rank   meaning (what a benchmark maintainer should do)
=========  =====  ==============================================================================
critical   4      The item is very likely broken as released (e.g. two options identical after
                  normalisation and one is gold; every model and the blind runs agree on one
                  non-gold option). Review before the next release; likely relabel or drop.
high       3      Strong, specific evidence of a defect (unanimous non-gold consensus; exact
                  duplicate distractors; item solved by every model without the image).
                  Review soon.
medium     2      Evidence worth a look (near-duplicate options; zero gain from the image where
                  most models are right blind; very low agreement; negative discrimination).
low        1      Weak or pool-dependent signal (e.g. a non-gold majority short of unanimity);
                  read together with other detectors.
info       0      No finding, or a descriptive statistic only.
=========  =====  ==============================================================================

A question's overall severity is the maximum over detectors. Detectors never invent other labels.
"""

from __future__ import annotations

import numpy as np

LEVELS: tuple[str, ...] = ("info", "low", "medium", "high", "critical")
RANK = {name: i for i, name in enumerate(LEVELS)}

DESCRIPTIONS = {
    "critical": "Very likely broken as released (e.g. duplicate gold option; every model and the blind "
                "runs agree on one non-gold option). Relabel or drop before the next release.",
    "high": "Strong, specific evidence of a defect (unanimous non-gold consensus, exact-duplicate "
            "distractors, solved by every model without the image). Review soon.",
    "medium": "Evidence worth a look (near-duplicate options, no gain from the image while most models "
              "are right blind, very low inter-model agreement, negative discrimination).",
    "low": "Weak or pool-dependent signal (e.g. a non-gold majority short of unanimity); read together "
           "with the other detectors.",
    "info": "No finding, or a descriptive statistic only.",
}


def severity_array(rank: np.ndarray) -> np.ndarray:
    """Map integer ranks (0..4) to level names (object array)."""
    names = np.array(LEVELS, dtype=object)
    return names[np.clip(np.asarray(rank, dtype=np.int64), 0, 4)]


