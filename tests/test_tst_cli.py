"""``benchaudit tst`` / ``benchaudit prune`` end to end, and the light-import rule."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import typer

from audit_hub.tst.synthetic import make_synthetic


def _app():
    from audit_hub.commands import tst

    app = typer.Typer()
    tst.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command so typer keeps subcommand names
        pass

    return app


def test_tst_and_prune_commands(tmp_path):
    from typer.testing import CliRunner

    qf = tmp_path / "q.jsonl"
    make_synthetic(300, planted=True, numeric_share=0.1, seed=21).to_json(qf, orient="records", lines=True)
    runner = CliRunner()
    r = runner.invoke(_app(), ["tst", "--questions", str(qf), "--out", str(tmp_path / "t"), "--repeats", "1", "--null-permutations", "9",
                               "--k", "4"])
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "t" / "summary.json").read_text())["tst"]
    assert {"accuracy", "mean_p_gold", "chance", "majority_baseline"} <= set(s)
    q = pd.read_parquet(tmp_path / "t" / "data" / "questions-00000-of-00001.parquet")
    assert {"question_id", "tst_s", "tst_s_minus_chance"} <= set(q.columns) and len(q) == 300
    r = runner.invoke(_app(), ["prune", "--questions", str(qf), "--out", str(tmp_path / "p"), "--budget", "20",
                               "--step", "10", "--repeats", "1", "--k", "4", "--random-seeds", "5"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "p" / "pruned_benchmark" / "README.md").exists()
    # bad input -> InputError (the CLI's main() turns it into exit code 2)
    r = runner.invoke(_app(), ["prune", "--questions", str(qf), "--out", str(tmp_path / "x"), "--budgets", "all=x"])
    from audit_hub.errors import InputError

    assert isinstance(r.exception, InputError)
    assert not (tmp_path / "x").exists()


def test_command_module_is_light():
    code = ("import sys, audit_hub.commands.tst; bad=[m for m in ('sklearn','torch','transformers','pandas') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_audit_card_shows_the_tst_table(tmp_path):
    """``benchaudit audit --tst``: the report card carries the per-format TsT table and its null."""
    from test_report import make_fake_result

    from audit_hub.frame.core import AuditFrame
    from audit_hub.report import write_report
    from audit_hub.tst.rf import run_tst_rf

    f = AuditFrame.from_tables(make_synthetic(150, planted=True, numeric_share=0.3, seed=3))
    res = run_tst_rf(f, k=3, repeats=1, null_permutations=9, n_estimators=5, null_trees=5, importances=False)
    r = make_fake_result()
    r.summary["tst"] = res.summary
    inp = tmp_path / "runs.csv"
    inp.write_text("question_id,model\nq0,m0\n")
    write_report(r, tmp_path / "rep", command_line=["benchaudit", "audit", "--tst"],
                 inputs=[{"path": str(inp), "kind": "runs"}])
    card = (tmp_path / "rep" / "README.md").read_text()
    assert "## Test-set Stress-Test (TsT-RF)" in card
    assert "| all (n-weighted) |" in card and "| choice |" in card and "| numeric |" in card
    assert "expected calibration error" in card


def test_tst_report_card_and_printed_lines(tmp_path):
    from audit_hub.frame.core import AuditFrame
    from audit_hub.tst.output import summary_lines, write_tst_report
    from audit_hub.tst.rf import run_tst_rf

    f = AuditFrame.from_tables(make_synthetic(150, planted=True, numeric_share=0.3, seed=4))
    res = run_tst_rf(f, k=3, repeats=1, null_permutations=9, n_estimators=5, null_trees=5, importances=False)
    lines = summary_lines(res.summary)
    assert [ln.split()[0] for ln in lines[1:4]] == ["choice", "numeric", "all"]
    assert all("null test" in ln and "p = " in ln and ("chance" in ln or "median baseline" in ln) for ln in lines[1:4])
    assert "excess = null test - null mean" in lines[4]
    # issue 27: each line leads with the excess over the null; the score sits beside chance in words
    # (numeric: the category-median baseline by name, a fitted baseline the permutation null can sit below)
    for ln in lines[1:4]:
        base = "the category-median baseline" if ln.split()[0] == "numeric" else "chance"
        assert ln.index("excess over the null") < ln.index(base)
        assert re.search(r"(above|at|below) " + base + r" \(\d+\.\d%\)", ln), ln
    # 9 permutations: p at its resolution 1/10, one decimal
    assert all(re.search(r"p = [01]\.\d \(null test", ln) for ln in lines[1:4]), lines
    out = write_tst_report(f, res, tmp_path / "t", command_line=["benchaudit", "tst"])
    card = (out / "README.md").read_text()
    assert "![Reliability of TsT-RF P(gold)](figures/tst_reliability.png)" in card
    assert (out / "figures" / "tst_reliability.png").stat().st_size > 1000
    s = json.loads((out / "summary.json").read_text())["tst"]
    assert set(s["by_format"]) == {"choice", "numeric"}
    for b in s["by_format"].values():
        assert {"n", "accuracy", "accuracy_ci", "chance", "majority_baseline", "p_value", "null_mean", "null_sd",
                "excess", "excess_ci", "score_vs_chance", "reading"} <= set(b)
        lo, hi = b["accuracy_ci"]
        assert b["score_vs_chance"] == ("above" if lo > b["chance"] else "below" if hi < b["chance"] else "at")
        assert b["reading"] == ("no_evidence" if b["p_value"] > 0.05 else
                                "shortcut" if b["score_vs_chance"] == "above" else "information_only")


def test_a_null_test_that_rejects_without_a_score_above_chance_is_not_called_a_shortcut():
    """MATH-V's numeric questions (the bundled example, `benchaudit tst`, seed 0): the null test gives 16.0% against
    a null of 12.9% (p = 0.01) while the MRA, 16.2% [14.8, 17.6], sits at the category-median baseline of 16.2%.
    Forests fitted to shuffled answers lose to the median; the excess is what the text saves them from losing,
    not a shortcut. The console and card say so; a format above chance, or one the null test does not reject,
    gets no such sentence."""
    from audit_hub.tst.output import _reading_bullets, reading_words, summary_lines
    from audit_hub.tst.rf import score_vs_chance, tst_reading

    numeric = {"n": 1414, "accuracy": 0.162, "accuracy_ci": [0.148, 0.176], "chance": 0.162,
               "majority_baseline": 0.162, "test_statistic": 0.160, "null_mean": 0.129, "null_sd": 0.0058,
               "excess": 0.031, "excess_ci": [0.020, 0.042], "p_value": 0.01}
    choice = {"n": 1532, "accuracy": 0.290, "accuracy_ci": [0.273, 0.306], "chance": 0.2, "majority_baseline": 0.2,
              "test_statistic": 0.240, "null_mean": 0.199, "null_sd": 0.0095, "excess": 0.041,
              "excess_ci": [0.023, 0.060], "p_value": 0.01}
    assert (score_vs_chance(numeric), tst_reading(numeric)) == ("at", "information_only")
    assert (score_vs_chance(choice), tst_reading(choice)) == ("above", "shortcut")
    assert tst_reading({**choice, "p_value": 0.2}) == "no_evidence" and tst_reading({**choice, "p_value": None}) is None
    w = reading_words(numeric, "MRA", 99)
    assert w == ("the text carries information on the answers (p = 0.01 against the null), but the MRA is not above "
                 "the category-median baseline: forests fitted to shuffled answers score below it (12.9% vs 16.2%), "
                 "so the excess is what the text saves a forest from losing, not a shortcut beyond the "
                 "category-median baseline")
    # a null at chance: the interval reaching chance is the reason
    assert reading_words({**numeric, "null_mean": 0.17}, "MRA", 99).endswith(
        "(its interval reaches it), so there is no evidence of a shortcut beyond the category-median baseline")
    assert reading_words(choice, "accuracy", 99) is None
    summary = {"n_questions": 2946, "n_scored": 2946, "accuracy": 0.228, "accuracy_ci": [0.217, 0.24],
               "chance": 0.182, "majority_baseline": 0.182, "test_statistic": 0.202, "null_mean": 0.165,
               "null_sd": 0.0054, "excess": 0.036, "excess_ci": [0.026, 0.047], "p_value": 0.01,
               "params": {"k": 5, "repeats": 3, "seed": 0, "group_column": None, "n_estimators": 30, "null_trees": 10},
               "null": {"n_permutations": 99}, "by_format": {"choice": choice, "numeric": numeric}}
    lines = summary_lines(summary)
    assert lines[2].split()[0] == "numeric" and lines[3].strip() == f"({w})" and lines[4].split()[0] == "all"
    assert _reading_bullets(summary) == [f"- **numeric**: {w}."]


def test_an_unknown_calibration_is_refused_before_the_questions_are_read(tmp_path):
    """`--calibration foo` named an internal parameter ("calibrate must be one of ...") after reading the file."""
    from cli_run import run_cli

    import audit_hub.api as api
    from audit_hub.errors import InputError

    res = run_cli("tst", "-q", tmp_path / "missing.parquet", "--calibration", "foo", "--out", tmp_path / "o")
    assert res.returncode == 2 and res.stderr.strip() == "error: --calibration must be one of isotonic, power, none, got 'foo'"
    with pytest.raises(InputError, match="--calibration must be one of isotonic, power, none, got 'foo'"):
        api.tst(str(tmp_path / "missing.parquet"), calibration="foo")


def test_without_a_null_the_output_says_so_and_tst_llm_is_printed():
    """`--null-permutations 0` printed "null: 0 label permutations" and a card headed "excess over the permutation
    null" full of n/a; `--llm` put ΔTsT on the card only."""
    from audit_hub.tst.output import llm_line, summary_lines

    b = {"n": 10, "accuracy": 0.3, "accuracy_ci": [0.1, 0.5], "chance": 0.25, "majority_baseline": 0.3,
         "p_value": None}
    s = {"n_questions": 10, "n_scored": 10, "params": {"k": 2, "repeats": 1, "seed": 0, "group_column": None},
         "null": {"n_permutations": 0}, "by_format": {"choice": b}, **b}
    head = summary_lines(s)[0]
    assert "1 repeat," in head and "no permutation null (--null-permutations 0): no p-values, no excess" in head
    assert llm_line({"model": "tiny\x1b[31m", "zero_shot_mean_p_gold": 0.25, "tst_mean_p_gold": 0.3125,
                     "delta_tst": 0.0625}) == (
        "TsT-LLM (tiny\\x1b[31m): mean P(gold) zero-shot 25.0%, after k-fold LoRA 31.2%; ΔTsT +6.2 pp")
