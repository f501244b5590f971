"""Every number the card states agrees with the file it comes from (issue 27).

The audit CLI is run as a user runs it (a subprocess) on the bundled MATH-Vision example and on two real
VLMEvalKit fixtures (tests/fixtures/vlmevalkit/real). The card (README.md) is parsed: the lede, the
headline table and its cell decomposition, the detector table, the per-category table, the calibration
table, the severity and action tables, the limitations and the judge table; every number is checked
against ``summary.json``, the ``summary`` table or the ``questions``/``runs`` tables, within half a unit
of the last digit printed. The expected values are computed from those files, never written here, so
the test survives changes of the detectors' numbers. The README's quoted demo figures are checked the
same way, and every high or critical item of the demo against its hand-written verdict
(tests/fixtures/high_findings/mathv.json).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_hub.fmt import pct
from audit_hub.report.card import calibration_status
from audit_hub.severity import LEVELS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
VLM = ROOT / "tests" / "fixtures" / "vlmevalkit" / "real"
HIGH_FINDINGS = ROOT / "tests" / "fixtures" / "high_findings" / "mathv.json"


def _sheets(dataset: str) -> list[str]:
    def one(model: str) -> str:
        return str(next((VLM / "outputs" / model).glob(f"*/{model}_{dataset}.xlsx")))

    return ["-q", str(VLM / "LMUData" / f"{dataset}.tsv"), "-r", one("ScriptedGood"), "-r", one("ScriptedMid"),
            "-b", one("ScriptedWeak"), "--calibration-sims", "10"]


CASES = {"mathv": [], "mmstar": ["MMStar"], "pope": ["POPE"]}


@pytest.fixture(scope="module", params=list(CASES))
def report(request, tmp_path_factory):
    name = request.param
    args = _sheets(CASES[name][0]) if CASES[name] else []
    out = tmp_path_factory.mktemp(name) / "report"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-m", "audit_hub", "audit", *args, "--out", str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return _Report(name, out, p.stdout + p.stderr)


class _Report:
    def __init__(self, name: str, folder: Path, console: str):
        self.name, self.folder, self.console = name, folder, console
        self.card = (folder / "README.md").read_text()
        self.body = self.card.split("\n---\n", 1)[1]  # after the YAML header
        self.summary = json.loads((folder / "summary.json").read_text())
        self.questions = pd.read_parquet(folder / "data" / "questions-00000-of-00001.parquet")
        self.table = pd.read_parquet(folder / "data" / "summary-00000-of-00001.parquet")
        self.runs = pd.read_parquet(folder / "data" / "runs-00000-of-00001.parquet")

    def md_table(self, first_header: str, containing: str = "") -> pd.DataFrame:
        """The Markdown table whose header row starts with ``| first_header |`` (and holds ``containing``),
        as strings."""
        lines = self.body.splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first_header} |") and containing in ln)
        rows = []
        for ln in lines[start:]:
            if not ln.startswith("|"):
                break
            rows.append([c.strip() for c in ln.strip().strip("|").split(" | ")])
        return pd.DataFrame(rows[2:], columns=rows[0])


# --------------------------------------------------------------------------------------------- parsing
def num(text: str) -> float:
    return float(text.replace(",", "").replace("%", "").replace("pp", "").strip())


def decimals(text: str) -> int:
    t = text.replace(",", "").replace("%", "").replace("pp", "").strip()
    return len(t.split(".")[1]) if "." in t else 0


def agrees(text: str, value, scale: float = 1.0) -> bool:
    """``text`` (a printed number) is ``value * scale`` to within half a unit of its last digit."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return text.strip() == "n/a"
    return abs(num(text) - float(value) * scale) <= 0.5 * 10 ** -decimals(text) + 1e-9


def interval(text: str) -> tuple[str, str]:
    m = re.fullmatch(r"\[([^,\]]+), ([^\]]+)\](?:%| pp)?", text.strip())
    assert m, text
    return m.group(1), m.group(2)


def assert_pct(text, value, what=""):
    assert agrees(text, value, 100), (what, text, value)


def assert_share_precision(estimate_text: str, ci_text: str, what=""):
    """An interval is printed at the precision of its estimate."""
    lo, hi = interval(ci_text)
    assert decimals(lo) == decimals(hi) == decimals(estimate_text), (what, estimate_text, ci_text)


# ---------------------------------------------------------------------------------------- the card
def _vd(r: _Report) -> dict | None:
    vd = r.summary.get("visual_dependency") or {}
    return None if not vd or vd.get("skipped") else vd


def test_lede_and_headline_table(report):
    r, vd = report, _vd(report)
    if vd is None:
        pytest.skip("no zero-gain headline on this benchmark")
    m = re.search(r"- (\d[\d,]*(?:\.\d+)?%) of questions show zero aggregate accuracy gain from the image; an item-matched "
                  r"permutation null accounts for (\d[\d,]*(?:\.\d+)?%), leaving ([+-]\d[\d,]*(?:\.\d+)? pp) \(p = (\d[\d,]*(?:\.\d+)?)\)\.", r.body)
    assert m, "lede line missing"
    assert_pct(m.group(1), vd["zero_gain_share"])
    assert_pct(m.group(2), vd["null_mean"])
    assert_pct(m.group(3), vd["excess"])
    assert agrees(m.group(4), vd["p_value"])
    # a permutation p at its resolution 1 / (B + 1): B = 999 -> three decimals, everywhere it is printed
    dec = math.ceil(math.log10(vd["n_permutations"] + 1))
    assert decimals(m.group(4)) == dec
    t = r.md_table("Model pool")
    row = t.iloc[0]
    assert int(num(row["Items"])) == vd["n_items"]
    assert_pct(row["Observed"], vd["zero_gain_share"])
    lo, hi = interval(row["95% CI"])
    assert_pct(lo, vd["share_ci"][0])
    assert_pct(hi, vd["share_ci"][1])
    assert_share_precision(row["Observed"], row["95% CI"])
    assert_pct(row["Null mean"], vd["null_mean"])
    assert_pct(row["Excess"], vd["excess"])
    lo, hi = interval(row["Excess 95% CI"])
    assert_pct(lo, vd["excess_ci"][0])
    assert_pct(hi, vd["excess_ci"][1])
    assert agrees(row["p"], vd["p_value"]) and decimals(row["p"]) == dec
    lomo = {x["dropped_model"]: x for x in vd.get("leave_one_model_out") or []}
    for _, row in t.iloc[1:].iterrows():
        x = lomo[row["Model pool"].removeprefix("without ").replace("\\", "")]
        assert_pct(row["Observed"], x["zero_gain_share"])
        assert_pct(row["Excess"], x["excess"])
        assert agrees(row["p"], x["p_value"]) and decimals(row["p"]) == dec
    # every p of the headline test in the card's text is printed at the same resolution
    for p_txt in re.findall(r"stratified headline: excess [^,]+, p = (\d[\d,]*(?:\.\d+)?)", r.body):
        assert agrees(p_txt, vd["p_value"]) and decimals(p_txt) == dec


def test_headline_says_where_the_excess_is(report):
    r, vd = report, _vd(report)
    if vd is None or not vd["excess"] > 0:
        pytest.skip("no positive zero-gain excess")
    cells = vd["diagonal_cells"]
    top = max(cells, key=lambda c: c["excess"])
    m = re.search(r"Where the excess is: (all of it|most of it|\d[\d,]*(?:\.\d+)?% of it) \(([+-]\d[\d,]*(?:\.\d+)? pp): ([\d,]+) observed, "
                  r"(\d[\d,]*(?:\.\d+)?) expected\) sits in (items [^;.]+)", r.body)
    assert m, "the lede does not say where the excess is"
    share = top["excess"] / vd["excess"]
    assert m.group(1) == ("all of it" if share >= 0.95 else "most of it" if share >= 0.5 else m.group(1))
    assert_pct(m.group(2), top["excess"])
    assert int(num(m.group(3))) == top["observed"] and agrees(m.group(4), top["expected"])
    if top["f"] == 0 and top["b"] == 0:
        assert "not evidence of text-answerability" in m.group(5)
    # the decomposition line: every cell with its counts, under the rule that defines the cells
    line = next(ln for ln in r.body.splitlines() if ln.startswith("Excess by zero-gain cell"))
    if vd.get("pool_level"):
        assert f"f/{len(vd['models_full'])} = b/{len(vd['models_blind'])}" in line
    else:
        assert "(f = b" in line
    for c in cells:
        m = re.search(re.escape(c["label"]) + r": ([+-]\d[\d,]*(?:\.\d+)? pp) \(([\d,]+) observed, (\d[\d,]*(?:\.\d+)?) expected\)", line)
        assert m, c["label"]
        assert_pct(m.group(1), c["excess"])
        assert int(num(m.group(2))) == c["observed"] and agrees(m.group(3), c["expected"])


def test_detector_table_counts(report):
    r = report
    t = r.md_table("Detector")
    n = len(r.questions)
    for _, row in t.iterrows():
        name = row["Detector"].strip("`")
        s = r.summary.get(name) or {}
        if row["Status"] != "ran":
            continue
        assert int(num(row["Questions flagged"])) == int(r.questions[f"is_{name}_issue"].sum()), name
        m = re.fullmatch(r"([\d,]+) of ([\d,]+)(?:; excluded: (.*))?", row["Items used (excluded)"])
        assert m, row["Items used (excluded)"]
        used, total = int(num(m.group(1))), int(num(m.group(2)))
        exc = s.get("excluded") or {}
        assert total == n and used == s["n_items"] and used + sum(exc.values()) == n, name
        for reason, k in exc.items():
            assert f"({k:,})" in (m.group(3) or ""), (name, reason)


def test_per_category_table(report):
    r = report
    if not r.body.count("| Category | Items |"):
        pytest.skip("no per-category table")
    t = r.md_table("Category")
    st = r.table[r.table["primary"]]
    vd = st[(st.detector == "visual_dependency") & (st.statistic == "zero_gain_share") & (st.category != "(all)")]
    ce = st[(st.detector == "consensus_error") & (st.statistic == "unanimous_non_gold_share")
            & (st.category != "(all)")]
    vd, ce = vd.set_index("category"), ce.set_index("category")
    cat_sizes = r.questions["category"].astype(str).value_counts()
    for _, row in t.iterrows():
        c = row["Category"].replace("\\", "")
        if c in vd.index:
            v = vd.loc[c]
            assert int(num(row["Items"])) == v["n_items"] == cat_sizes[c], c
            assert_pct(row["Zero-gain share"], v["estimate"], c)
            assert_pct(row["Null mean"], v["null_mean"], c)
            assert_pct(row["Excess"], v["excess"], c)
            assert agrees(row["p (BH)"], v["p_adjusted"]), (c, row["p (BH)"], v["p_adjusted"])
        col = next(k for k in t.columns if k.startswith("Unanimous non-gold"))
        m = re.fullmatch(r"([\d,]+) of ([\d,]+) \((\d[\d,]*(?:\.\d+)?%)\)", row[col])
        if c in ce.index:
            assert m, row[col]
            e = ce.loc[c]
            k, denom = int(num(m.group(1))), int(num(m.group(2)))
            # the stated denominator is the share's own: the category's eligible items
            assert denom == e["n_items"] and k == round(e["estimate"] * e["n_items"]), c
            assert_pct(m.group(3), k / denom, c)


def test_severity_and_action_tables(report):
    r = report
    q = r.questions
    sev = r.md_table("Level")
    for _, row in sev.iterrows():
        lv = row["Level"].strip("*")
        assert int(num(row["Questions"])) == int((q["severity"] == lv).sum()), lv
    act = r.md_table("Action")
    for _, row in act.iterrows():
        a = row["Action"].strip("*")
        assert int(num(row["Questions"])) == int((q["suggested_action"] == a).sum()), a
    m = re.search(r"- ([\d,]+) of ([\d,]+) questions have a finding at medium severity or above", r.body)
    rank = {lv: i for i, lv in enumerate(LEVELS)}
    medium_up = int((q["severity"].map(rank) >= rank["medium"]).sum())
    assert m and int(num(m.group(1))) == medium_up and int(num(m.group(2))) == len(q)


def test_calibration_table(report):
    r = report
    cal = r.summary.get("calibration") or {}
    if not cal:
        pytest.skip("no calibration")
    lines = r.body.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| Detector | False-positive rate"))
    rows = [[c.strip() for c in ln.strip().strip("|").split(" | ")] for ln in lines[start + 2:]
            if ln.startswith("|")][: len(cal)]
    for name, fpr, ci_txt, nominal, n_sims, status, *_ in rows:
        c = cal[name]
        assert_pct(fpr, c["fpr"], name)
        if c.get("fpr_ci"):
            lo, hi = interval(ci_txt)
            assert_pct(lo, c["fpr_ci"][0], name)
            assert_pct(hi, c["fpr_ci"][1], name)
            assert_share_precision(fpr, ci_txt, name)
        assert_pct(nominal, c.get("nominal"), name)
        assert int(num(n_sims)) == c["n_sims"]
        assert status == calibration_status(c)
        # never "within calibration" when the interval lies wholly on one side of the nominal rate
        if status == "within calibration":
            assert c["fpr_ci"][0] <= c["nominal"] <= c["fpr_ci"][1], name
            # and only when the simulations rule out a rate the verdict would call out of calibration
            # (a detector that expects no flags and raised none is decided by its count alone)
            assert c["decided"] and (c["nominal"] == 0 or c["fpr_ci"][1] <= 1.5 * c["nominal"]), name
        if status.startswith("not decided"):
            assert c["decided"] is False, name
            reg = c.get("undecided_regime")
            if reg:  # a regime's own rate above the margin, not enough simulations to call it out
                rg = c["regimes"][reg]
                assert rg["fpr"] >= 1.5 * rg["nominal"] and not rg["out_of_calibration"], name
                assert f"in the {reg.replace('_', ' ')} regime its rate is {pct(rg['fpr'])}" in status, name
            else:
                assert c["fpr_ci"][1] > 1.5 * c["nominal"], name
                assert f"rates up to {pct(c['fpr_ci'][1])} possible" in status, name
    # the limitations name exactly the detectors whose calibration is not decided
    open_ = [n for n, c in cal.items() if isinstance(c, dict) and c.get("decided") is False]
    line = next((ln for ln in lines if ln.startswith("- Calibration not decided by the ")), None)
    if open_:
        assert line is not None and line.split(" for ", 1)[1].split(":")[0] == ", ".join(open_), line
    else:
        assert line is None, line


def test_holm_table_says_how_each_headline_test_holds_on_this_benchmarks_nulls(report):
    """Every headline p-value in the Holm table sits beside its calibration word, the one the calibration table
    and summary.json give (``calibration_word``)."""
    from audit_hub.report.card import calibration_word

    r = report
    tests = (r.summary.get("multiplicity") or {}).get("tests") or {}
    if not tests:
        pytest.skip("no headline tests")
    lines = r.body.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| Detector | p | p (Holm) |"))
    assert lines[start].rstrip().endswith("| Calibration on this benchmark's nulls |")
    rows = [[c.strip() for c in ln.strip().strip("|").split(" | ")] for ln in lines[start + 2:start + 2 + len(tests)]]
    cal = r.summary.get("calibration") or {}
    assert [row[0] for row in rows] == list(tests)
    for name, _p, _ph, word in rows:
        want = calibration_word(cal[name]) if isinstance(cal.get(name), dict) else "not run"
        assert word == want, (name, word, want)
        assert word in ("out of calibration", "not decided", "conservative", "within calibration", "not run"), word


def test_limitations_counts(report):
    r = report
    ds = r.summary.get("distractor_similarity") or {}
    m = re.search(r"- ([\d,]+) multiple-choice items have options that are bare letters", r.body)
    if ds.get("n_bare_letter_option_items"):
        assert m and int(num(m.group(1))) == ds["n_bare_letter_option_items"]
    else:
        assert m is None
    m = re.search(r"- ([\d,]+) items are free-form", r.body)
    if m:
        assert int(num(m.group(1))) == int((r.questions["n_options"] == 0).sum())


def test_unanimous_non_gold_everywhere(report):
    r = report
    ce = r.summary.get("consensus_error") or {}
    if not ce or ce.get("skipped"):
        pytest.skip("no consensus_error")
    n = ce["n_unanimous_non_gold"]
    m = re.search(r"- ([\d,]+) questions?(?: of the ([\d,]+) items that at least ([\d,]+) of the ([\d,]+) models "
                  r"answered parseably)? (?:has|have) a unanimous non-gold answer \((\d[\d,]*(?:\.\d+)?) expected", r.body)
    assert m and int(num(m.group(1))) == n and agrees(m.group(5), ce["expected_under_independence"])
    # the unanimity rule's own denominator, named where it is not every item the detector audits
    if ce["n_eligible"] < len(r.questions):
        assert [int(num(g)) for g in m.group(2, 3, 4)] == [ce["n_eligible"], ce["params"]["min_answered"],
                                                          ce["n_models"]]
    else:
        assert m.group(2) is None
    m = re.search(r"unanimous non-gold consensus: ([\d,]+) items? \(expected under independence (\d[\d,]*(?:\.\d+)?)\)",
                  " ".join(r.console.split()))
    assert m and int(num(m.group(1))) == n and agrees(m.group(2), ce["expected_under_independence"])


def test_judge_table_from_the_runs(report):
    r = report
    if "| Model | Arm | Items scored both ways" not in r.body:
        pytest.skip("one correctness field")
    t = r.md_table("Model", "Items scored both ways")
    runs = r.runs.dropna(subset=["hit", "hit_exact"])
    for _, row in t.iterrows():
        g = runs[(runs["model"] == row["Model"].replace("\\", "")) & (runs["arm"] == row["Arm"])]
        assert int(num(row["Items scored both ways"])) == len(g), row["Model"]
        k = int((g["hit"] != g["hit_exact"]).sum())
        assert int(num(row["Judge != exact match"])) == k
        assert_pct(row["Share"], k / len(g))


def test_fleiss_interval_at_the_estimate_precision(report):
    m = re.search(r"Fleiss kappa (-?\d[\d,]*(?:\.\d+)?) \(95% CI (\[[^\]]+\])\)", report.body)
    if not m:
        pytest.skip("no Fleiss kappa line")
    fk = report.summary["fleiss_kappa_agreement"]
    assert agrees(m.group(1), fk["kappa"])
    lo, hi = interval(m.group(2))
    assert agrees(lo, fk["kappa_ci"][0]) and agrees(hi, fk["kappa_ci"][1])
    assert decimals(lo) == decimals(hi) == decimals(m.group(1))


def test_no_python_reprs_reach_the_reader(report):
    text = report.body + "\n" + report.console
    for pat in (r"\{'", r"\['", r"': ", r"\bNone\b(?! of)", r"\bnan%", r"\d\.\d{7,}"):
        hits = re.findall(r".{0,40}" + pat + r".{0,40}", text)
        hits = [h for h in hits if "None as trailing padding" not in h]  # the placeholder rule's own words
        assert not hits, (pat, hits[:3])


def test_console_lines_fit_the_terminal(report):
    assert max(len(ln) for ln in report.console.splitlines()) <= 100


# ------------------------------------------------------------------------------ the demo: README, reviews
def _mathv(report):
    if report.name != "mathv":
        pytest.skip("bundled example only")
    return report


def test_readme_quoted_figures(report):
    r = _mathv(report)
    readme = " ".join((ROOT / "README.md").read_text().split())
    para = readme[readme.index("What the demo finds on MATH-Vision"):readme.index("Every detector states")]
    vd, ce, ao = r.summary["visual_dependency"], r.summary["consensus_error"], r.summary["answer_options_distribution"]
    m = re.search(r"\((\d+) image-enabled models", para)
    assert int(m.group(1)) == len(vd["models_full"])
    m = re.search(r"(\d[\d,]*(?:\.\d+)?%) of questions gain nothing from the image, against a permutation null of (\d[\d,]*(?:\.\d+)?%)", para)
    assert_pct(m.group(1), vd["zero_gain_share"])
    assert_pct(m.group(2), vd["null_mean"])
    m = re.search(r"excess ([+-]\d[\d,]*(?:\.\d+)?) pp \[([+-]\d[\d,]*(?:\.\d+)?), ([+-]\d[\d,]*(?:\.\d+)?)\], p = (\d[\d,]*(?:\.\d+)?)", para)
    assert_pct(m.group(1), vd["excess"])
    assert_pct(m.group(2), vd["excess_ci"][0])
    assert_pct(m.group(3), vd["excess_ci"][1])
    assert agrees(m.group(4), vd["p_value"])
    cells = vd["diagonal_cells"]
    top = max(cells, key=lambda c: c["excess"])
    m = re.search(r"all of it sits in the ([\d,]+) questions no model solves with or without the image "
                  r"\(([\d,]+) expected\)", para)
    assert top["f"] == 0 and top["excess"] / vd["excess"] >= 0.95
    assert int(num(m.group(1))) == top["observed"] and agrees(m.group(2), top["expected"])
    solv = next(c for c in cells if "blind-solvable" in c["label"])
    m = re.search(r"blind-solvable cell holds (\d+) question", para)
    assert int(m.group(1)) == solv["observed"]
    m = re.search(r"(\d+) questions have a unanimous non-gold answer \((\d+) critical", para)
    assert int(m.group(1)) == ce["n_unanimous_non_gold"] and int(m.group(2)) == ce["n_critical"]
    m = re.search(r"the (\d+)-model pool is too weak", para)
    assert int(m.group(1)) == ce["n_models"] and ce["pool_too_weak"]
    m = re.search(r"recall at (\d+)% wrong golds: (\d+)%", para)
    assert_pct(m.group(1) + "%", ce["detection"]["error_rate"])
    assert_pct(m.group(2) + "%", ce["detection"]["recall"])
    m = re.search(r"gold positions uniform \(p = (\d[\d,]*(?:\.\d+)?)\)", para)
    assert agrees(m.group(1), ao["p_value"]) and ao["p_value"] > r.summary["alpha"]


def test_every_high_finding_has_a_reviewed_verdict(report):
    r = _mathv(report)
    review = {k: v for k, v in json.loads(HIGH_FINDINGS.read_text()).items() if not k.startswith("_")}
    q = r.questions.set_index(r.questions["question_id"].astype(str))
    high = set(q.index[q["severity"].isin(["high", "critical"])])
    missing = sorted(high - set(review))
    assert not missing, (f"high/critical items without a hand-written verdict in {HIGH_FINDINGS.name}: "
                         + "; ".join(f"{i}: {q.loc[i, 'rationale']}" for i in missing))
    for qid, v in review.items():
        assert v["verdict"] in ("real", "false") and len(v["reason"]) > 40, qid
        assert q.loc[qid, f"{v['detector']}_severity"] in LEVELS, qid
        if v["verdict"] == "real":  # a real defect that stops being reported is a lost finding
            assert qid in high, (qid, "a reviewed real defect is no longer high or critical")
        elif not v.get("open"):  # a false finding that was fixed stays fixed
            assert qid not in high, (qid, q.loc[qid, "rationale"])


def test_review_fixture_counts_match_the_card(report):
    """The card's 'Most severe questions' lists the high and critical items first: each has a verdict."""
    r = _mathv(report)
    review = json.loads(HIGH_FINDINGS.read_text())
    t = r.md_table("Question")
    listed = [x.strip("`") for x, s in zip(t["Question"], t["Severity"]) if s in ("high", "critical")]
    assert listed and all(x in review for x in listed)
    assert np.isin(listed, r.questions["question_id"].astype(str)).all()


def test_no_p_value_finer_than_the_permutation_resolution(report):
    """No 'p = 0.0010' beside 'p = 0.001': with B permutations no p in the card has more decimals than the
    resolution 1 / (B + 1) shows (analytic p-values are printed with at most three, except one printed beside the
    level it is compared with, which gets the digits that tell it from the level: fmt.fmt_p_vs, "p = 0.0504 over
    16 categories, above 0.05")."""
    B = report.summary.get("n_permutations") or 999
    dec = max(3, math.ceil(math.log10(B + 1)))
    for m in re.finditer(r"\bp = (\d\.\d+)([^;)]{0,40})", report.body):
        p_txt, after = m.group(1), m.group(2)
        if re.search(r"(above|below) 0\.05\b", after):
            assert decimals(p_txt) <= 5 and float(p_txt) != 0.05, p_txt
            continue
        assert decimals(p_txt) <= dec, p_txt


def test_every_interval_is_printed_at_its_estimates_precision(report):
    """Card-vs-data review: the per-model table printed "8.5% [7.58, 9.57]%" beside "11.1% [10.0, 12.3]%" (the
    interval at its half-width's precision). Every "estimate [lo, hi]" pair of a share or a difference in points,
    anywhere on the card, has one number of decimals."""
    pat = re.compile(r"([-+]?\d[\d,]*(?:\.\d+)?)(%| pp) \[([-+]?\d[\d,]*(?:\.\d+)?), ([-+]?\d[\d,]*(?:\.\d+)?)\](%| pp)")
    found = pat.findall(report.body)
    assert found, "no interval on the card"
    bad = [f"{e}{u} [{lo}, {hi}]{u2}" for e, u, lo, hi, u2 in found if len({decimals(e), decimals(lo), decimals(hi)}) > 1]
    assert not bad, bad
