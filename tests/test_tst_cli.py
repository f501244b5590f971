"""``benchaudit tst`` / ``benchaudit prune`` end to end, and the light-import rule."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
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
                "excess", "excess_ci"} <= set(b)
