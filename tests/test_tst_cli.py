"""``benchaudit tst`` / ``benchaudit prune`` end to end, and the light-import rule."""

from __future__ import annotations

import json
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
