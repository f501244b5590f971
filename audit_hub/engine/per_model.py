"""Per-model accuracy by arm, the image gain of each paired model, and MMStar's multimodal gain and leakage.

Pure: frame in, a JSON-ready dict out (``summary.json`` ``per_model``; the card's per-model table).

* ``rows``: one per (model, arm): run rows, judged and exact-match accuracy with Wilson score intervals
  (over the rows with a known value in that field), the unparseable share.
* ``gains``: one per model with runs in the full and the blind arm (paired by name) and per field compared
  (:func:`audit_hub.frame.fields.arm_field`): accuracy with and without the image on the items both arms scored
  and the image gain full - blind, with Newcombe's square-and-add interval for paired proportions
  (:func:`audit_hub.stats.core.paired_difference_ci`; the two accuracies are measured on the same items,
  so an interval for independent samples would be too wide where the arms agree).
* ``mmstar``: with a ``base`` arm (the language backbone alone, text only), per model with all three arms,
  MMStar's (Chen et al. 2024, MMStar-Benchmark/MMStar ``eval/README.md``) multimodal gain
  ``MG = S_v - S_wv`` and multimodal leakage ``ML = max(0, S_wv - S_t)``: ``S_v`` the model's score with the
  image (full arm), ``S_wv`` without it (blind arm), ``S_t`` its language backbone's (base arm). MG is computed
  on the items both the full and the blind arm scored, ML on those the blind and the base arm scored (MMStar
  scores every item, where these are the whole benchmark); ML's interval is the paired interval of
  ``S_wv - S_t`` clipped at 0 like the estimate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..fmt import count
from ..frame.core import AuditFrame
from ..schema import ARM_SYMBOLS, ARMS, CORRECTNESS_FIELDS
from ..stats.core import paired_difference_ci, wilson_ci

FIELDS = CORRECTNESS_FIELDS
#: a run whose answers are unreadable on at least this share of its rows, in an arm whose other runs' median is at
#: most :data:`UNREADABLE_POOL_MAX` (and at least :data:`UNREADABLE_MIN_OTHERS` other runs), is named (``unreadable``)
UNREADABLE_SHARE = 0.5
UNREADABLE_POOL_MAX = 0.2
UNREADABLE_MIN_OTHERS = 2
PAIRED_INTERVAL = "Newcombe (1998) square-and-add interval for paired proportions (Wilson components)"


def _f(x) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def _diff_rows(tabs: np.ndarray, alpha: float) -> list[dict]:
    d, lo, hi = paired_difference_ci(tabs[:, 0], tabs[:, 1], tabs[:, 2], tabs[:, 3], alpha)
    n = tabs.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pa, pb = (tabs[:, 0] + tabs[:, 1]) / n, (tabs[:, 0] + tabs[:, 2]) / n
    return [{"n_items": int(n[j]), "a": _f(pa[j]) if n[j] else None, "b": _f(pb[j]) if n[j] else None,
             "difference": _f(d[j]), "ci": [_f(lo[j]), _f(hi[j])], "n_a_only": int(tabs[j, 1]),
             "n_b_only": int(tabs[j, 2])} for j in range(len(tabs))]


def per_model_table(frame: AuditFrame, arms: dict, alpha: float = 0.05) -> dict[str, Any]:
    """The per-model table (module docstring); ``arms``: :func:`audit_hub.frame.fields.arm_field`'s record."""
    acc = frame.accuracy_table()
    kh, ke = frame.known_counts("hit"), frame.known_counts("hit_exact")
    idx = {m: i for i, m in enumerate(frame.models)}
    rows = []
    for r in acc.to_dict(orient="records"):
        a, m = ARMS.index(r["arm"]), idx[r["model"]]
        row = {"model": r["model"], "arm": r["arm"], "n_items": int(r["n_items"]),
               "unparseable_share": _f(r["unparseable_share"])}
        for fld, key, known in (("hit", "judged", kh), ("hit_exact", "exact", ke)):
            n = int(known[a, m])
            p = r["accuracy_judged"] if fld == "hit" else r["accuracy_exact"]
            k = int(round(float(p) * n)) if n else 0
            lo, hi = wilson_ci(k, n, alpha)
            row[f"n_{key}"] = n
            row[f"accuracy_{key}"] = k / n if n else None
            row[f"accuracy_{key}_ci"] = [_f(lo), _f(hi)] if n else [None, None]
        rows.append(row)
    fields = list(CORRECTNESS_FIELDS) if arms.get("judged_too") else [arms.get("field", "hit_exact")]
    paired = frame.paired_models()
    gains = []
    for fld in fields:
        for m, g in zip(paired, _diff_rows(frame.paired_counts("full", "blind", fld, paired), alpha)):
            if g["n_items"]:
                gains.append({"model": m, "field": fld, "n_items": g["n_items"], "accuracy_full": g["a"],
                              "accuracy_blind": g["b"], "gain": g["difference"], "gain_ci": g["ci"],
                              "n_right_only_with_image": g["n_a_only"], "n_right_only_blind": g["n_b_only"]})
    mmstar = []
    base = set(frame.models_in("base"))
    triple = [m for m in paired if m in base]
    for fld in fields:
        if not triple:
            break
        mg = _diff_rows(frame.paired_counts("full", "blind", fld, triple), alpha)
        ml = _diff_rows(frame.paired_counts("blind", "base", fld, triple), alpha)
        for m, g, lk in zip(triple, mg, ml):
            if not (g["n_items"] and lk["n_items"]):
                continue
            clip = [None if x is None else max(0.0, x) for x in lk["ci"]]
            mmstar.append({"model": m, "field": fld, "n_items_mg": g["n_items"], "S_v": g["a"], "S_wv": g["b"],
                           "MG": g["difference"], "MG_ci": g["ci"], "n_items_ml": lk["n_items"],
                           "S_wv_ml": lk["a"], "S_t": lk["b"],
                           "ML": None if lk["difference"] is None else max(0.0, lk["difference"]), "ML_ci": clip})
    return {"alpha": alpha, "fields": fields, "field_why": arms.get("why"), "unreadable": unreadable_runs(rows),
            "accuracy_interval": "Wilson score interval", "gain_interval": PAIRED_INTERVAL,
            "arm_symbols": dict(ARM_SYMBOLS), "rows": rows, "gains": gains, "mmstar": mmstar,
            "models_without_blind": [m for m in frame.models_in("full") if m not in set(paired)]}


def unreadable_runs(rows: list[dict]) -> list[dict]:
    """The runs (``rows`` of :func:`per_model_table`) whose answers the parser could not read on at least
    :data:`UNREADABLE_SHARE` of their rows while the other runs of the same arm read well (their median at most
    :data:`UNREADABLE_POOL_MAX`, at least :data:`UNREADABLE_MIN_OTHERS` of them): a prompt or answer format the
    parser does not read, or a run that failed with text (an error message on every row). Not left out: the
    harness's judged correctness may still hold; named on the console and the card."""
    out = []
    for r in rows:
        share = r.get("unparseable_share")
        if share is None or share < UNREADABLE_SHARE:
            continue
        others = [o["unparseable_share"] for o in rows if o["arm"] == r["arm"] and o is not r
                  and o.get("unparseable_share") is not None]
        if len(others) < UNREADABLE_MIN_OTHERS or float(np.median(others)) > UNREADABLE_POOL_MAX:
            continue
        out.append({"model": r["model"], "arm": r["arm"], "unparseable_share": share,
                    "others_median": float(np.median(others)), "n_others": len(others)})
    return out


def unreadable_note(records: list[dict] | None) -> str | None:
    """One sentence for the console warning and the card (the models are input text: escape where it lands), or
    None when no run is unreadable (:func:`unreadable_runs`)."""
    if not records:
        return None
    shown = "; ".join(f"{r['model']} ({r['arm']} arm): {100 * r['unparseable_share']:.0f}% of its answers unreadable, "
                      f"the other {r['arm']}-arm runs' median {100 * r['others_median']:.0f}%" for r in records[:10])
    more = f"; and {len(records) - 10:,} more" if len(records) > 10 else ""
    return (f"{count(len(records), 'run')} whose answers the parser mostly could not read (a prompt or answer format it "
            f"does not read, or a failed run that wrote an error message?): {shown}{more}. Their unreadable answers "
            "count as wrong in exact matching and as unanswered in the answer-agreement detectors "
            "(docs/answer_extraction.md)")
