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

A detector whose flags are about as frequent as on defect-free benchmarks like this one (the calibration's
simulations flag at least :data:`NULL_SHARE_MAX` as many items as the detector flags here: most of its flags
would appear without any defect) counts toward the overall severity at :data:`NULL_CAP` at most
(:func:`null_cap`); its own severity column keeps its level, and the card says which detectors were capped.
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


#: a detector's flags count at their own level only while defect-free simulations of the benchmark flag fewer than
#: this share of as many items (an estimated false-discovery share of the flag rule below one half)
NULL_SHARE_MAX = 0.5
#: the most a detector whose flags the null explains adds to a question's overall severity
NULL_CAP = "low"


def null_share_of_flags(observed_rate: float, null_rate: float | None) -> float | None:
    """The share of a detector's flags that defect-free benchmarks like this one would produce: its flag rate on
    the calibration's simulations over its flag rate here (at most 1); None without a null rate or flags."""
    if null_rate is None or not observed_rate or observed_rate <= 0 or not np.isfinite(null_rate):
        return None
    return float(min(1.0, null_rate / observed_rate))


def null_cap(observed_rate: float, null_rate: float | None) -> str | None:
    """:data:`NULL_CAP` when the null explains at least :data:`NULL_SHARE_MAX` of the flags, else None."""
    share = null_share_of_flags(observed_rate, null_rate)
    return NULL_CAP if share is not None and share >= NULL_SHARE_MAX else None


def severity_array(rank: np.ndarray) -> np.ndarray:
    """Map integer ranks (0..4) to level names (object array)."""
    names = np.array(LEVELS, dtype=object)
    return names[np.clip(np.asarray(rank, dtype=np.int64), 0, 4)]


