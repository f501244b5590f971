"""Card text for the statistics of visual_dependency, consensus_error and the calibration check:
which null is the headline and why, the unstratified comparison, power, the label-error test and
whether the model pool can detect label errors at all. Strings only (Markdown, inputs escaped)."""

from __future__ import annotations

from typing import Any


def _pct(x: Any, d: int = 1) -> str:
    return "n/a" if x is None else f"{100 * float(x):.{d}f}%"


def _pp(x: Any) -> str:
    return "n/a" if x is None else f"{100 * float(x):+.1f} pp"


def _p(x: Any) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    return "< 0.0001" if x < 1e-4 else f"{x:.4f}" if x < 0.01 else f"{x:.3f}"


def visual_dependency_notes(vd: dict) -> list[str]:
    """Lines under the zero-gain table: the null in words, stratified vs unstratified, power."""
    out = []
    if not vd or vd.get("skipped"):
        return out
    if vd.get("null_hypothesis"):
        out.append(f"**Null of the headline test** ({vd.get('n_strata', 1)} strata): {vd['null_hypothesis']}")
    un = vd.get("unstratified")
    if isinstance(un, dict):
        txt = (f"Unstratified (one benchmark-wide shuffle, the paper's number): null mean {_pct(un.get('null_mean'))}, "
               f"excess {_pp(un.get('excess'))}, p = {_p(un.get('p_value'))}; stratified headline: excess "
               f"{_pp(vd.get('excess'))}, p = {_p(vd.get('p_value'))}.")
        if un.get("disagrees"):
            txt = "**The two nulls disagree.** " + txt + " The headline is the stratified test: " + str(un.get("why", ""))
        out.append(txt)
    pw = vd.get("power")
    if isinstance(pw, dict):
        md = pw.get("min_detectable_share")
        at = pw.get("power_at") or {}
        n, m = vd.get("n_items"), vd.get("n_models")
        lead = (f"**Power**: at {n:,} items and {m} full-arm models, the smallest share of blind-solvable items "
                f"(every model right with and without the image) detected with 80% power at alpha = "
                f"{pw.get('alpha')} is {_pct(md)}" if md is not None else
                f"**Power**: at {n:,} items and {m} full-arm models, even 50% blind-solvable items are not detected "
                "with 80% power")
        out.append(lead + "; probability of detecting 2% / 5% / 10%: " +
                   " / ".join(f"{float(at[k]):.2f}" for k in ("0.02", "0.05", "0.1") if k in at) +
                   f" ({pw.get('method', '')}).")
    return out


def consensus_error_notes(ce: dict) -> list[str]:
    """Lines on the label-error headline test, the posterior ranking and the pool's detection power."""
    out = []
    if not ce or ce.get("skipped"):
        return out
    ht = ce.get("headline_test")
    if isinstance(ht, dict) and not ht.get("interpretable", True):
        out.append(f"**consensus_error headline test not reported**: {ht.get('not_interpretable_because', '')}. "
                   "The likelihood-ratio test of 'no gold label is wrong' assumes the latent-truth model fits the "
                   "pool; here it does not, so its p-value would reflect misfit, not label errors. "
                   f"{ce.get('n_posterior_gold_wrong', 0)} item(s) have posterior >= 0.5 that the gold is wrong.")
    elif isinstance(ht, dict):
        out.append(f"**consensus_error headline test**: likelihood ratio of 'no gold label is wrong', p = "
                   f"{_p(ht.get('p_value'))}, estimated wrong-gold rate {_pct(ht.get('eps_hat'))}; "
                   f"{ce.get('n_posterior_gold_wrong', 0)} item(s) with posterior >= 0.5 that the gold is wrong "
                   f"(flagged relabel), {ce.get('n_unanimous_explained', 0)} unanimous non-gold item(s) that item "
                   f"difficulty and attractive distractors explain (review). Null: {ht.get('null_hypothesis', '')}. "
                   f"The independence count above is the paper's figure: real pools share difficulty, so it is "
                   f"exceeded on defect-free benchmarks (p = {_p(ce.get('p_value_independence'))}).")
    det = ce.get("detection")
    if isinstance(det, dict) and det.get("recall") is not None:
        txt = (f"**Can this pool find wrong golds?** On simulations of this pool (fitted model, {det.get('n_items')} "
               f"items, {100 * det.get('error_rate', 0):.0f}% planted wrong golds, {det.get('n_reps')} runs) the "
               f"posterior flags {_pct(det.get('recall'), 0)} of them (recall) with precision "
               f"{_pct(det.get('precision'), 0)}; average precision of the ranking {float(det.get('average_precision') or 0):.2f}.")
        if ce.get("pool_too_weak"):
            txt += (" **The pool is too weak to detect label errors**: 'no findings' here says little about the "
                    "labels; the ranking (`consensus_error_score`) is still the best order to review items in.")
        out.append(txt)
    return out


def calibration_lead(cal: dict) -> str:
    """One sentence stating what the calibration simulated (subsample size, simulation count)."""
    for c in (cal or {}).values():
        if isinstance(c, dict) and isinstance(c.get("simulator"), dict):
            s = c["simulator"]
            return (f"Simulated on a stratified subsample of {s.get('n_items'):,} of the {s.get('n_items_benchmark'):,} "
                    f"questions ({c.get('n_sims')} simulations; by effective option count and yes/no gold; per-model "
                    f"accuracy per arm, option count and gold; full-arm item difficulty SD "
                    f"{float(s.get('difficulty_sd') or 0):.2f} on the logit scale). Detectors without a nominal rate "
                    "report the share of items they flag on these defect-free benchmarks.")
    return ""
