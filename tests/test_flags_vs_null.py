"""A detector's flags count toward a question's overall severity at their own level only where the calibration's
defect-free simulations of the benchmark do not explain them (``summary.json`` ``flags_vs_null``,
:func:`audit_hub.severity.null_cap`); consensus_error's suspects the held-out check contradicts are low."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit_hub import api
from audit_hub.severity import LEVELS, NULL_CAP, NULL_SHARE_MAX, RANK, null_cap, null_share_of_flags

BLINK = Path(__file__).parent / "fixtures" / "real_pools" / "blink"


def test_null_share_hand_cases():
    # 669 of 1,901 flagged (0.3519) against 0.3213 on the nulls: 0.913 of the flags would appear without defect
    assert null_share_of_flags(669 / 1901, 0.3213) == pytest.approx(0.3213 / (669 / 1901))
    assert null_cap(669 / 1901, 0.3213) == NULL_CAP == "low"
    assert null_share_of_flags(83 / 1901, 0.01665) == pytest.approx(0.3813, abs=1e-4)
    assert null_cap(83 / 1901, 0.01665) is None
    assert null_share_of_flags(0.01, 0.02) == 1.0  # more flags on the nulls than here: all explained
    assert null_cap(0.1, 0.1 * NULL_SHARE_MAX) == "low" and null_cap(0.1, 0.1 * NULL_SHARE_MAX - 1e-9) is None
    assert null_share_of_flags(0.0, 0.3) is None and null_share_of_flags(0.2, None) is None
    assert null_cap(0.0, 0.3) is None and null_cap(0.2, None) is None


def _overall(q, summary) -> np.ndarray:
    """The overall severity recomputed from each detector's own column and flag, capped as summary.json says."""
    caps = {n: RANK[c["capped_at"]] for n, c in summary["flags_vs_null"].items() if c["capped_at"]}
    # a detector not capped as a whole may be capped on the categories the pool answers at chance
    scoped = {n: (RANK[c["chance_categories"]["capped_at"]], set(c["chance_categories"]["categories"]))
              for n, c in summary["flags_vs_null"].items()
              if not c["capped_at"] and (c.get("chance_categories") or {}).get("capped_at")}
    rank = np.zeros(len(q), np.int64)
    for col in [c for c in q.columns if c.endswith("_severity") and c != "severity"]:
        name = col[: -len("_severity")]
        r = q[col].map(RANK).fillna(0).to_numpy(np.int64)
        flag = q[f"is_{name}_issue"].fillna(False).astype(bool).to_numpy() | (r > 0)
        cap = np.full(len(q), caps.get(name, 4))
        if name in scoped:
            cap = np.where(q["category"].astype(str).isin(scoped[name][1]).to_numpy(), scoped[name][0], cap)
        rank = np.maximum(rank, np.where(flag, np.minimum(r, cap), 0))
    return np.array(LEVELS, dtype=object)[rank]


def test_real_blink_pool_low_agreement_flags_are_what_the_null_produces(tmp_path):
    """BLINK val (1,901 items, 19 models): 35% of its items have per-item agreement at or below chance, and so
    do 32% of the items of defect-free simulations of this pool: those flags are not findings. Before: 770 of
    1,901 questions at medium or above, 669 of them from that detector alone."""
    res = api.audit(str(BLINK / "questions.parquet"), str(BLINK / "runs.parquet"), out=tmp_path / "r",
                    figures=False)
    s = res.summary
    fk = s["flags_vs_null"]["fleiss_kappa_agreement"]
    cal = s["calibration"]["fleiss_kappa_agreement"]
    q = res.questions
    assert fk["n_flagged"] == int(q["is_fleiss_kappa_agreement_issue"].sum()) and fk["n_flagged"] > 500
    assert fk["flag_rate"] == pytest.approx(fk["n_flagged"] / len(q))
    assert fk["null_flag_rate"] == cal["flag_rate"] == pytest.approx(cal["fpr"])  # a flag-rate detector
    assert fk["null_flag_rate_ci"][0] <= fk["null_flag_rate"] <= fk["null_flag_rate_ci"][1]
    assert fk["null_share_of_flags"] == pytest.approx(fk["null_flag_rate"] / fk["flag_rate"])
    assert fk["null_share_of_flags"] >= 0.8 and fk["capped_at"] == "low"
    # correctness_agreement flags 4.4% against 1.7% on the nulls: kept at its own level
    ca = s["flags_vs_null"]["correctness_agreement"]
    assert ca["capped_at"] is None and ca["null_share_of_flags"] < NULL_SHARE_MAX
    assert (q["severity"].to_numpy() == _overall(q, s)).all()
    only_fk = q["is_fleiss_kappa_agreement_issue"].to_numpy() & (q["n_flags"].to_numpy() == 1) & (
        q["correctness_agreement_severity"] == "info").to_numpy() & (q["consensus_error_severity"] == "info").to_numpy()
    assert only_fk.sum() > 100
    assert set(q.loc[only_fk, "severity"]) == {"low"} and set(q.loc[only_fk, "suggested_action"]) == {"keep"}
    assert (q.loc[only_fk, "fleiss_kappa_agreement_severity"] == "medium").all()  # its own column keeps it
    # its flags in the 5 categories this pool answers at chance (35 of 669 items, 5.2%) are fewer than the
    # chance-categories regime flags there (about 7%): those count at low; the other 48 stay medium
    cc = ca["chance_categories"]
    cats = set(s["calibration"]["correctness_agreement"]["simulator"]["regime_fit"]["chance_categories"]["categories"])
    assert set(cc["categories"]) == cats and len(cats) == 5
    at = q["category"].astype(str).isin(cats).to_numpy()
    own = (q["correctness_agreement_severity"] == "medium").to_numpy()
    assert cc["n_items"] == at.sum() and cc["n_flagged"] == int(q["is_correctness_agreement_issue"].to_numpy()[at].sum())
    assert cc["null_share_of_flags"] >= NULL_SHARE_MAX and cc["capped_at"] == "low"
    assert cc["null_flag_rate_ci"][0] <= cc["null_flag_rate"] <= cc["null_flag_rate_ci"][1]
    assert (own & at).sum() > 20 and set(q.loc[own & at, "severity"]) == {"low"}
    n_med = int(q["severity"].map(RANK).ge(2).sum())
    assert n_med == int((own & ~at).sum()) < 150
    # consensus_error: the held-out check fails on this pool, so its suspects are low, not medium
    ce = s["consensus_error"]
    assert ce["flags_supported"] is False and ce["n_posterior_gold_wrong_unsupported"] > 0
    assert not q["consensus_error_severity"].isin(["medium", "high", "critical"]).any()
    card = (tmp_path / "r" / "README.md").read_text()
    assert f"- {n_med:,} of 1,901 questions have a finding at medium severity or above." in card
    line = next(x for x in card.splitlines() if x.startswith("- `fleiss_kappa_agreement` flags"))
    assert f"{fk['n_flagged']:,} questions ({100 * fk['flag_rate']:.1f}%)" in line
    assert f"({100 * fk['null_flag_rate']:.1f}% [" in line and "count at low severity at most" in line
    line = next(x for x in card.splitlines() if x.startswith("- `correctness_agreement` flags"))
    # the count and the items it is out of, apart (669 chance-category items beside fleiss's 669 flags read as one)
    assert line.startswith(f"- `correctness_agreement` flags {cc['n_flagged']:,} questions "
                           f"({100 * cc['flag_rate']:.1f}% of their {cc['n_items']:,} items) in the 5 categories this "
                           "pool answers at chance") and "its other flags keep their level" in line


def test_the_bundled_example_keeps_flags_the_null_does_not_explain():
    """MATH-V (bundled): low-agreement items are 6.4% of the benchmark against 0.4% on its nulls: real, kept."""
    res = api.audit(figures=False)
    s, q = res.summary, res.questions
    fk = s["flags_vs_null"]["fleiss_kappa_agreement"]
    assert fk["capped_at"] is None and fk["null_share_of_flags"] < 0.2
    flagged = q["is_fleiss_kappa_agreement_issue"].to_numpy()
    assert flagged.sum() > 100 and (q.loc[flagged, "severity"].map(RANK) >= 2).all()
    assert (q["severity"].to_numpy() == _overall(q, s)).all()


def test_without_calibration_nothing_is_capped():
    res = api.audit(calibration_sims=0, figures=False)
    assert res.summary["flags_vs_null"] == {}
    q = res.questions
    flagged = q["is_fleiss_kappa_agreement_issue"].to_numpy()
    assert (q.loc[flagged, "severity"].map(RANK) >= 2).all()
