"""Which correctness field a reading of the frame uses: the full arm's primary field, and the field on which the
full and the blind arm are compared. One owner for the audit's detectors (``engine.run``), TsT's pruning gap table
(``tst.prune``) and anything else that compares the arms."""

from __future__ import annotations

from typing import Any

from ..fmt import count
from .core import AuditFrame


def primary_field(frame: AuditFrame) -> str:
    """The correctness field the detectors read: the judge's verdict when the full arm has one, else exact match."""
    return "hit" if frame.has_judged("full") else "hit_exact"


def arm_field(frame: AuditFrame) -> dict[str, Any]:
    """The correctness field on which the full and the blind arm are compared, and why.

    The judged field (``hit``) when every model of the compared pool has judged correctness in both arms
    (the exact-match field is then compared as well: judge dependence); otherwise exact matching
    (``hit_exact``) in both arms. ``benchaudit blind`` runs no judge, so a judged full arm against its
    blind reruns is compared on exact matching, the full arm's exact-match correctness being computed from
    its predictions by the same parser (:mod:`audit_hub.answers`) that scored the blind arm. Returns
    ``{"field", "why", "judged_too", "exact_source", "models_without_judge": {arm: [names]}}``."""
    full, blind = frame.models_in("full"), frame.models_in("blind")
    paired = frame.paired_models()
    mf, mb = (paired, paired) if paired else (full, blind)
    src = frame.meta.get("hit_exact_source", "parser")
    how = ("exact-match correctness is computed in each arm by the same parser (audit_hub.answers), from the "
           "harness's extracted answer where the run file gives one, else from the prediction"
           if src == "parser" else "exact-match correctness as the run files give it (hit_exact)")
    if not mf or not mb:
        return {"field": primary_field(frame), "why": "no blind arm to compare with", "judged_too": False,
                "exact_source": src, "models_without_judge": {}}
    hk = frame.known_counts("hit")
    idx = {m: i for i, m in enumerate(frame.models)}
    without = {"full": [m for m in mf if hk[0, idx[m]] == 0], "blind": [m for m in mb if hk[1, idx[m]] == 0]}
    if not without["full"] and not without["blind"]:
        return {"field": "hit", "judged_too": True, "exact_source": src, "models_without_judge": without,
                "why": "both arms carry judged correctness (hit) for every compared model: the arms are compared "
                       f"on the judged field and again on exact matching; {how}"}
    if len(without["full"]) == len(mf):
        why = f"the full arm has no judged correctness, so both arms are compared on exact matching; {how}"
    else:
        who = without["blind"] or without["full"]
        arm = "blind" if without["blind"] else "full"
        why = (f"the {arm} arm has no judged correctness for {len(who)} of "
               f"{count(len(mb if arm == 'blind' else mf), 'compared model')}: {', '.join(who[:5])}{' ...' if len(who) > 5 else ''}"
               + (" (`benchaudit blind` scores by exact matching and runs no judge)" if arm == "blind" else "")
               + f", so both arms are compared on exact matching; {how}")
    return {"field": "hit_exact", "why": why, "judged_too": False, "exact_source": src,
            "models_without_judge": without}
