"""Which detector's per-question columns each curation stage reads, resolved through the registry.

Curation never spells a detector's name: it asks :func:`audit_hub.detectors.by_role` for the detector
that plays a role and builds its column names from the registered record. A role with no detector
registered gives column names that no table has, so the stage reading them flags nothing.
"""

from __future__ import annotations

from .. import detectors

IMAGE_GAIN = "image_gain"                    # per-item full-arm and blind-arm counts f, b (text ablation)
CORRECTNESS_PROFILE = "correctness_profile"  # saturated / floor items, negative discrimination (saturation)
LABEL_CONFLICT = "label_conflict"            # non-gold consensus (anomaly)
OPTION_SIMILARITY = "option_similarity"      # duplicate options (anomaly; needs no runs)

MODEL_DEPENDENT = (IMAGE_GAIN, LABEL_CONFLICT, CORRECTNESS_PROFILE)
TEXT_ONLY = (OPTION_SIMILARITY,)


def detector(role: str) -> str | None:
    return detectors.by_role(role)


def column(role: str, suffix: str) -> str:
    """``<detector>_<suffix>`` (an evidence column) of the detector playing ``role``."""
    return f"{detector(role) or '<unregistered ' + role + '>'}_{suffix}"


def issue_column(role: str) -> str:
    name = detector(role)
    return detectors.get(name).issue_column if name else f"<unregistered {role}>"


def severity_column(role: str) -> str:
    name = detector(role)
    return detectors.get(name).severity_column if name else f"<unregistered {role}>"


def names(roles: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in (detector(r) for r in roles) if n)
