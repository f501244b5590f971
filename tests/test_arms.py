"""Arms: pairing blind/base runs with full-arm models, the field the arms are compared on, the per-model
table (Wilson accuracies, paired image gain) and MMStar's multimodal gain / leakage with a base arm."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from audit_hub.engine.run import AuditConfig, arm_field, run_audit
from audit_hub.frame.core import AuditFrame
from audit_hub.readers.pairing import pair_arms
from audit_hub.stats.core import paired_difference_ci, wilson_ci

N = 20


def _questions(n: int = N) -> pd.DataFrame:
    return pd.DataFrame({"question_id": [f"q{i}" for i in range(n)], "question": [f"question {i}" for i in range(n)],
                         "options": [["red", "green", "blue", "white"]] * n, "answer": ["A"] * n,
                         "answer_type": ["mc"] * n, "category": ["c1" if i % 2 else "c2" for i in range(n)]})


def _rows(model: str, arm: str, right: np.ndarray, judged: np.ndarray | None = None) -> list[dict]:
    """Runs whose letter prediction is right (A) where ``right``; ``judged``: a judge's verdict column."""
    out = []
    for i, r in enumerate(right):
        row = {"question_id": f"q{i}", "model": model, "arm": arm, "prediction": "A" if r else "B"}
        if judged is not None:
            row["hit"] = bool(judged[i])
        out.append(row)
    return out


def _vec(ones: list[int], n: int = N) -> np.ndarray:
    v = np.zeros(n, bool)
    v[ones] = True
    return v


# ------------------------------------------------------------------------------------------------ interval
def test_paired_difference_interval_matches_the_reference_and_covers():
    # Fagerland, Lydersen & Laake's contingencytables (R), chapter 8 test: Cavo et al. 2012, table (59, 6, 16, 80):
    # "estimate = -0.0621 (95% CI -0.1186 to -0.0046)"
    d, lo, hi = paired_difference_ci(59, 6, 16, 80)
    assert (round(float(d), 4), round(float(lo), 4), round(float(hi), 4)) == (-0.0621, -0.1186, -0.0046)
    # all items agree: the difference is 0 and the interval still has width
    d, lo, hi = paired_difference_ci(10, 0, 0, 10)
    assert float(d) == 0 and float(lo) < 0 < float(hi)
    assert np.isnan(paired_difference_ci(0, 0, 0, 0)[1])
    # coverage on planted paired differences (correlated arms): close to the nominal 95%
    rng = np.random.default_rng(3)
    S, n = 4000, 150
    probs = np.array([0.45, 0.15, 0.05, 0.35])  # true difference 0.15 - 0.05 = 0.10
    tabs = rng.multinomial(n, probs, size=S)
    _, lo, hi = paired_difference_ci(tabs[:, 0], tabs[:, 1], tabs[:, 2], tabs[:, 3])
    cover = float(((lo <= 0.10) & (0.10 <= hi)).mean())
    assert 0.93 <= cover <= 0.975, cover
    # narrower than treating the arms as independent samples when they agree on most items
    p1, p2 = (tabs[:, 0] + tabs[:, 1]) / n, (tabs[:, 0] + tabs[:, 2]) / n
    wald_independent = 2 * 1.96 * np.sqrt(p1 * (1 - p1) / n + p2 * (1 - p2) / n)
    assert float(np.median(hi - lo)) < float(np.median(wald_independent))


# ------------------------------------------------------------------------------------------------ pairing
def test_pair_arms_rules_and_unmatched_names():
    full = ["Qwen2-VL-7B-Instruct", "InternVL3-8B", "gpt-5-nano"]
    others = {"blind": ["Qwen/Qwen2-VL-7B-Instruct", "internvl3-8b", "gpt-5-nano", "llava", "x/gpt-5-nano"],
              "base": ["my-backbone"]}
    ids = {"base": {"my-backbone": ["/models/InternVL3-8B"]}}
    p = pair_arms(full, others, ids)
    b = p["blind"]
    assert b["renames"] == {"Qwen/Qwen2-VL-7B-Instruct": "Qwen2-VL-7B-Instruct", "internvl3-8b": "InternVL3-8B"}
    assert b["how"] == {"gpt-5-nano": "model name", "Qwen2-VL-7B-Instruct": "model id",
                        "InternVL3-8B": "model name (ignoring case)"}
    assert b["paired"] == full and b["without"] == []
    # an exact name wins over a fuzzy one; a name matching nothing is named with its reason
    assert b["unmatched"] == [{"model": "llava", "reason": "no full-arm model of this name or model id"},
                              {"model": "x/gpt-5-nano", "reason": "'gpt-5-nano' is already paired with 'gpt-5-nano'"}]
    # the model id from run_config.json pairs a run whose name says nothing
    assert p["base"]["renames"] == {"my-backbone": "InternVL3-8B"} and p["base"]["how"] == {"InternVL3-8B": "model id"}
    assert p["base"]["without"] == ["Qwen2-VL-7B-Instruct", "gpt-5-nano"]
    # two full models with the same tail: ambiguous, not guessed
    amb = pair_arms(["a/m", "b/m"], {"blind": ["m"]})["blind"]
    assert amb["paired"] == [] and "several" in amb["unmatched"][0]["reason"]



def test_blind_run_records_read_ids_and_truncation_and_ignore_what_is_not_a_count(tmp_path):
    """`blind_runs_of` reads each blind folder's model id (run_config.json) and its truncated-prompt count
    (manifest.json params), sums folders of one name, and treats a value that is not a count as 0; the
    truncated runs are keyed by the full-arm name they pair with."""
    from audit_hub.readers.pairing import blind_runs_of, truncated_blind_runs

    def folder(name, fp, params):
        d = tmp_path / name
        (d / "data").mkdir(parents=True)
        (d / "run_config.json").write_text(json.dumps({"fingerprint": fp}))
        (d / "manifest.json").write_text(json.dumps({"params": params}))
        (d / "data" / "blind-00000-of-00001.parquet").write_bytes(b"")
        return str(d / "data" / "blind-00000-of-00001.parquet")

    paths = [folder("a", {"model_name": "m1", "model": {"model": "org/M1"}, "max_length": 256},
                    {"n_questions": 100, "n_truncated": 7}),
             folder("b", {"model_name": "m2", "model": "org/M2"}, {"n_questions": 100, "n_truncated": "7"}),
             folder("c", {"model_name": "m3", "model": "org/M3"}, {"n_questions": 100, "n_truncated": True}),
             folder("d", {"model_name": "m1", "model": "org/M1b", "max_length": 512},
                    {"n_questions": 50, "n_truncated": 3})]
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "run_config.json").write_text("{not json")
    # sidecars are never followed through a link nor read unbounded: a manifest linked to /dev/zero is ignored
    # (the run still pairs by its id), a linked run_config gives no record
    z = folder("z", {"model_name": "m4", "model": "org/M4"}, {})
    (tmp_path / "z" / "manifest.json").unlink()
    (tmp_path / "z" / "manifest.json").symlink_to("/dev/zero")
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "run_config.json").symlink_to(tmp_path / "a" / "run_config.json")
    recs = blind_runs_of([*paths, str(tmp_path / "e"), z, str(tmp_path / "l")])
    assert recs.pop("m4") == {"ids": ["org/M4"], "n_questions": 0, "n_truncated": 0, "max_length": None,
                              "unfinished": 0, "n_planned": 0}
    assert set(recs) == {"m1", "m2", "m3"}
    assert recs["m1"] == {"ids": ["org/M1", "org/M1b"], "n_questions": 150, "n_truncated": 10, "max_length": 512,
                          "unfinished": 0, "n_planned": 0}
    assert recs["m2"]["n_truncated"] == 0 and recs["m3"]["n_truncated"] == 0 and recs["m2"]["ids"] == ["org/M2"]
    assert truncated_blind_runs(recs, {"m1": "Model-One"}) == {
        "Model-One": {"n_truncated": 10, "n_questions": 150, "max_length": 512}}


# ------------------------------------------------------------------------------------------------ field
def _frame(runs: list[dict]) -> AuditFrame:
    return AuditFrame.from_tables(_questions(), pd.DataFrame(runs))


def test_judged_blind_arm_compares_both_fields_and_partial_judges_fall_back_to_exact():
    rng = np.random.default_rng(0)
    runs = []
    for m in ("m1", "m2", "m3"):
        f, b = rng.random(N) < 0.7, rng.random(N) < 0.4
        runs += _rows(m, "full", f, judged=f) + _rows(m, "blind", b, judged=b)
    frame = _frame(runs)
    arms = arm_field(frame)
    assert arms["field"] == "hit" and arms["judged_too"] is True
    res = run_audit(frame, AuditConfig(n_permutations=99, run_calibration=False))
    assert res.summary["visual_dependency"]["field"] == "hit"
    assert res.summary["visual_dependency"]["exact_match_arm"]["field"] == "hit_exact"
    assert "overall" in res.judge_dependence  # zero-gain shares under the judge and under exact matching
    assert {g["field"] for g in res.summary["per_model"]["gains"]} == {"hit", "hit_exact"}
    # one blind model without a judge: every pair is compared on exact matching, and the model is named
    runs2 = [r if not (r["model"] == "m2" and r["arm"] == "blind") else {k: v for k, v in r.items() if k != "hit"}
             for r in runs]
    frame2 = _frame(runs2)
    a2 = arm_field(frame2)
    assert a2["field"] == "hit_exact" and a2["models_without_judge"] == {"full": [], "blind": ["m2"]}
    assert "1 of 3 compared models: m2" in a2["why"]
    r2 = run_audit(frame2, AuditConfig(n_permutations=99, run_calibration=False))
    assert r2.summary["visual_dependency"]["field"] == "hit_exact" and r2.summary["primary_field"] == "hit"
    assert r2.summary["correctness_agreement"]["field"] == "hit"


# ------------------------------------------------------------------------------------------------ MG / ML
def _mmstar_runs() -> tuple[list[dict], dict]:
    """Two models, three arms, exact-match correctness designed by hand (20 items)."""
    spec = {
        # model: (full right, blind right, base right)
        "A": (_vec(list(range(16))), _vec(list(range(8)) + [18, 19]), _vec(list(range(12)))),
        "B": (_vec(list(range(12))), _vec(list(range(10))), _vec(list(range(4)) + [19])),
    }
    runs = []
    for m, (f, b, t) in spec.items():
        runs += _rows(m, "full", f, judged=f) + _rows(m, "blind", b) + _rows(m, "base", t)
    return runs, spec


def test_mmstar_multimodal_gain_and_leakage_against_a_hand_computation():
    runs, spec = _mmstar_runs()
    frame = _frame(runs)
    res = run_audit(frame, AuditConfig(n_permutations=99, run_calibration=False))
    pm = res.summary["per_model"]
    assert pm["fields"] == ["hit_exact"]
    mm = {r["model"]: r for r in pm["mmstar"]}
    # by hand. A: S_v = 16/20, S_wv = 10/20, S_t = 12/20 -> MG = 0.30, ML = max(0, 0.50 - 0.60) = 0
    #          B: S_v = 12/20, S_wv = 10/20, S_t =  5/20 -> MG = 0.10, ML = max(0, 0.50 - 0.25) = 0.25
    expect = {"A": (0.80, 0.50, 0.60, 0.30, 0.0), "B": (0.60, 0.50, 0.25, 0.10, 0.25)}
    for m, (sv, swv, st, mg, ml) in expect.items():
        r = mm[m]
        assert (r["S_v"], r["S_wv"], r["S_t"]) == pytest.approx((sv, swv, st))
        assert r["MG"] == pytest.approx(mg) and r["ML"] == pytest.approx(ml)
        assert r["n_items_mg"] == r["n_items_ml"] == N
    # intervals: the paired 2 x 2 tables counted by hand
    # A full vs blind: both right 0-7 (8), full only 8-15 (8), blind only 18-19 (2), neither 16-17 (2)
    _, lo, hi = paired_difference_ci(8, 8, 2, 2)
    assert mm["A"]["MG_ci"] == pytest.approx([float(lo), float(hi)])
    # A blind vs base: both 0-7 (8), blind only 18-19 (2), base only 8-11 (4), neither 12-17 (6); ML clipped at 0
    _, lo, hi = paired_difference_ci(8, 2, 4, 6)
    assert float(hi) > 0 > float(lo)
    assert mm["A"]["ML_ci"] == pytest.approx([0.0, float(hi)])
    # B blind vs base: both 0-3 (4), blind only 4-9 (6), base only 19 (1), neither (9)
    _, lo, hi = paired_difference_ci(4, 6, 1, 9)
    assert mm["B"]["ML_ci"] == pytest.approx([max(0.0, float(lo)), float(hi)])
    # the per-model rows: Wilson intervals of each arm's accuracy; the base arm is listed as its own arm
    rows = {(r["model"], r["arm"]): r for r in pm["rows"]}
    assert set(rows) == {(m, a) for m in "AB" for a in ("full", "blind", "base")}
    lo, hi = wilson_ci(5, 20)
    assert rows[("B", "base")]["accuracy_exact"] == 0.25
    assert rows[("B", "base")]["accuracy_exact_ci"] == pytest.approx([float(lo), float(hi)])
    assert rows[("A", "full")]["accuracy_judged"] == 0.8 and rows[("A", "blind")]["n_judged"] == 0


def test_base_folder_from_benchaudit_blind_is_read_as_the_base_arm(tmp_path):
    """A `benchaudit blind` output given as --base (its rows say arm = blind) is the base arm; the card shows
    the MG / ML table."""
    from audit_hub.cli import main

    runs, _ = _mmstar_runs()
    q = _questions()
    q.to_parquet(tmp_path / "q.parquet")
    df = pd.DataFrame(runs)
    df[df["arm"] == "full"].to_csv(tmp_path / "full.csv", index=False)
    df[df["arm"] == "blind"].drop(columns=["hit"]).to_parquet(tmp_path / "blind.parquet")
    base = df[df["arm"] == "base"].drop(columns=["hit"]).assign(arm="blind")  # as the blind runner writes it
    (tmp_path / "base").mkdir()
    base.to_parquet(tmp_path / "base" / "backbones.parquet")
    out = tmp_path / "r"
    rc = main(["audit", "--questions", str(tmp_path / "q.parquet"), "--runs", str(tmp_path / "full.csv"),
               "--blind", str(tmp_path / "blind.parquet"), "--base", str(tmp_path / "base"), "--out", str(out),
               "--calibration-sims", "0", "--n-permutations", "99", "--no-figures"])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["models"]["base"] == ["A", "B"]
    assert {r["model"]: round(r["ML"], 6) for r in s["per_model"]["mmstar"]} == {"A": 0.0, "B": 0.25}
    card = (out / "README.md").read_text()
    assert "**Multimodal gain and leakage**" in card
    assert "| B | exact match | 60.0% | 50.0% | 25.0% | +10.0 pp" in card


def test_calibration_simulates_a_blind_arm_that_has_exact_matching_only():
    """The null simulator reads each arm in the field it has: against `benchaudit blind` reruns (exact match
    only) the image-gain detector is calibrated on simulated frames that have a blind arm."""
    n, rng = 300, np.random.default_rng(1)
    runs = []
    for m in ("m1", "m2", "m3"):
        f, b = rng.random(n) < 0.7, rng.random(n) < 0.4
        runs += _rows(m, "full", f, judged=f) + _rows(m, "blind", b)
    frame = AuditFrame.from_tables(_questions(n), pd.DataFrame(runs))
    res = run_audit(frame, AuditConfig(n_permutations=99, calibration_sims=6), background_calibration=False)
    cal = res.calibration["visual_dependency"]
    assert cal["n_sims"] == 6 and cal["n_runs"] == 6 and cal["fpr"] is not None


def test_unmatched_blind_name_is_escaped_in_the_card(tmp_path):
    """A blind run's name comes from the user's files: the card shows it escaped, never as HTML or a link."""
    from audit_hub.cli import main

    runs, _ = _mmstar_runs()
    _questions().to_parquet(tmp_path / "q.parquet")
    df = pd.DataFrame(runs)
    df[df["arm"] == "full"].to_csv(tmp_path / "full.csv", index=False)
    bad = "<img src=x onerror=alert(1)>|[a](http://e)"
    blind = df[(df["arm"] == "blind") & (df["model"] == "A")].drop(columns=["hit"])
    pd.concat([blind, blind.assign(model=bad)]).to_parquet(tmp_path / "blind.parquet")
    out = tmp_path / "r"
    assert main(["audit", "--questions", str(tmp_path / "q.parquet"), "--runs", str(tmp_path / "full.csv"),
                 "--blind", str(tmp_path / "blind.parquet"), "--out", str(out), "--calibration-sims", "0",
                 "--n-permutations", "99", "--no-figures"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["pool"]["unmatched_blind"] == [bad] and s["visual_dependency"]["models_full"] == ["A"]
    card = (out / "README.md").read_text()
    assert "<img" not in card and "[a](http://e)" not in card  # no HTML, no link
    assert "&lt;img src=x onerror=alert(1)&gt;\\|\\[a\\](http\\://e)" in card
