"""The audit's per-question findings that curation reads, computed by the audit pipeline itself.

:func:`audit_findings` runs the detectors curation uses through :func:`audit_hub.engine.run.run_detectors`
(the registry's detectors on the primary correctness field only: no exact-match arm, calibration,
permutation null or summary; each detector in its registered findings mode, ``findings_params``: summary
extras off, per-question flags as the audit publishes them; only the per-question tables are read), and joins their
per-question tables into one frame keyed by question code. Model-independent findings (the option-similarity detector, placeholder options) are
computed once and reused when the same questions are audited with a different set of models (the
folds of the held-out evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import detectors as reg
from . import roles


@dataclass
class Findings:
    """Per-question findings (one row per question, question-code order) and the detectors' notes."""

    table: pd.DataFrame
    skipped: dict[str, str]
    models_full: list[str]
    models_blind: list[str]
    field: str


def placeholder_options(frame) -> pd.DataFrame:
    """Per question: number of placeholder options and whether the gold option is one, by the audit's
    one placeholder rule (:mod:`audit_hub.detectors.placeholders`: a missing value wherever it stands;
    ``None``/``null``/``N/A`` only as trailing padding, not among quantities)."""
    from ..detectors.placeholders import placeholder_table

    ph = placeholder_table(frame)
    gold_ph = ph["gold_placeholder"] & (np.asarray(frame.gold_index) >= 0)
    return pd.DataFrame({"placeholder_n_options": ph["n_placeholders"].astype(np.int64),
                         "placeholder_gold": gold_ph.astype(bool)})


def audit_findings(frame, *, seed: int = 0, text_cache: pd.DataFrame | None = None,
                   detectors: tuple[str, ...] | None = None) -> Findings:
    """Run the audit's detectors on ``frame`` and join their per-question tables.

    ``text_cache``: the model-independent columns from an earlier call on the same questions.
    """
    from ..engine.run import run_detectors

    dets = tuple(detectors or roles.names(roles.MODEL_DEPENDENT + (() if text_cache is not None else roles.TEXT_ONLY)))
    # each detector in the mode its registration declares for findings (summary-level extras off: bootstrap,
    # leave-one-out, recall simulations; no permutation null; every per-question flag as the audit publishes
    # it, the label-error flags with their held-out check), on the primary correctness field only (no
    # exact-match arm, calibration or summary): the per-question tables are what is read
    params = {}
    for name in dets:
        p = dict(reg.get(name).findings_overrides)
        if "n_permutations" in p or "n_permutations" in reg.get(name).audit_params:
            p["n_permutations"] = 0
        params[name] = p
    results, skipped, field = run_detectors(frame, dets, seed=seed, params=params)
    parts = []
    for name in dets:
        r = results.get(name)
        if r is None:
            continue
        pq = r.per_question.drop(columns=["question_id"]).reset_index(drop=True)
        parts.append(pq)
    if text_cache is not None:
        parts.append(text_cache.reset_index(drop=True))
    else:
        parts.append(placeholder_options(frame))
    table = pd.concat(parts, axis=1) if parts else pd.DataFrame(index=range(frame.n_questions))
    return Findings(table=table, skipped=skipped, models_full=frame.models_in("full"),
                    models_blind=frame.models_in("blind"), field=field)


def text_columns(findings: Findings) -> pd.DataFrame:
    """The model-independent columns of a findings table (to pass as ``text_cache``)."""
    text = roles.names(roles.TEXT_ONLY)
    cols = [c for c in findings.table.columns
            if c.startswith(tuple(f"{n}_" for n in text) + tuple(f"is_{n}_" for n in text) + ("placeholder_",))]
    return findings.table[cols].copy()
