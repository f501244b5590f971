"""Card text for the calibration check: what the null benchmarks kept (subsample size, simulation
count). Strings only (Markdown)."""

from __future__ import annotations


def calibration_lead(cal: dict) -> str:
    """One sentence stating what the calibration simulated (subsample size, simulation count)."""
    for c in (cal or {}).values():
        if isinstance(c, dict) and isinstance(c.get("simulator"), dict):
            s = c["simulator"]
            n, total = s.get("n_items"), s.get("n_items_benchmark")
            on = (f"all {total:,} questions" if n == total else
                  f"a stratified subsample of {n:,} of the {total:,} questions")
            return (f"Simulated on {on} ({c.get('n_sims')} simulations; by effective option count and yes/no gold; per-model "
                    f"accuracy per arm, option count and gold; full-arm item difficulty SD "
                    f"{float(s.get('difficulty_sd') or 0):.2f} on the logit scale)"
                    + (f", split evenly over {len(s['regimes'])} regimes fitted to this benchmark's answers "
                       f"({', '.join(r.replace('_', ' ') for r in s['regimes'])}; the worst regime's rate is "
                       "shown beside the pooled one)" if len(s.get("regimes") or []) > 1 else "")
                    + ". Detectors without a nominal rate report the share of items they flag on these defect-free "
                    "benchmarks.")
    return ""
