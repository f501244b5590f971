"""Blind runner resumability: a process killed after its first shard loses nothing on rerun."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_blind import make_questions  # noqa: E402
from test_blind_multiproc import ROOT, _args, _env, tiny_setup  # noqa: E402

pytest.importorskip("torch")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("blindkill"))


def test_kill_after_first_shard_then_resume(setup):
    import subprocess

    from audit_hub.blind.runner import BlindConfig, run_blind

    out = setup["root"] / "killed"
    p = subprocess.run([sys.executable, "-m", "audit_hub.blind", *_args(setup, out)], capture_output=True, text=True,
                       timeout=180, env=_env(BENCHAUDIT_BLIND_FAIL_AFTER_SHARDS="1"), cwd=str(ROOT))
    assert p.returncode == 17, p.stderr[-3000:]  # died hard, like a kill
    shards = sorted((out / "shards").glob("rank*.parquet"))
    assert [s.name for s in shards] == ["rank0-00000.parquet"]
    assert len(pd.read_parquet(shards[0])) == 3  # exactly the first batch survived
    assert not (out / "data").exists()

    res = run_blind(BlindConfig(model=setup["model"], questions=setup["questions"], out=str(out), batch_size=3,
                                model_name="tiny", progress=False))
    assert res.summary["n_resumed"] == 3 and res.summary["n_new"] == 10
    merged = pd.read_parquet(out / "data" / "blind-00000-of-00001.parquet")
    expect = list(make_questions(n_mc=10, n_yn=3, seed=5)["question_id"])
    assert list(merged["question_id"]) == expect  # no duplicate, none missing
    assert not (out / "shards").exists()


def test_an_audit_of_a_stopped_blind_run_says_so_and_a_finished_one_does_not(setup):
    """The README's loop with the blind rerun killed after its first shard (a real stopped output: shards and
    run_config.json, no manifest.json): the audit reads the three answers there and says the run was stopped, on the
    console and the card; once resumed to the end, it says nothing of the kind."""
    import json
    import subprocess

    from cli_run import run_cli

    from audit_hub.blind.runner import BlindConfig, run_blind

    out = setup["root"] / "stopped"
    p = subprocess.run([sys.executable, "-m", "audit_hub.blind", *_args(setup, out)], capture_output=True, text=True,
                       timeout=180, env=_env(BENCHAUDIT_BLIND_FAIL_AFTER_SHARDS="1"), cwd=str(ROOT))
    assert p.returncode == 17, p.stderr[-3000:]
    q = pd.read_parquet(setup["questions"])
    runs = pd.DataFrame([(qid, f"m{j}", "full", ("A" if (i + j) % 2 else "B") if t == "mc" else "yes")
                         for i, (qid, t) in enumerate(zip(q["question_id"], q["answer_type"])) for j in range(3)],
                        columns=["question_id", "model", "arm", "prediction"])
    rp = setup["root"] / "full_runs.parquet"
    runs.to_parquet(rp)
    said = "stopped before it finished (no manifest.json): tiny (blind arm, started on 13 questions)"
    res = run_cli("audit", "-q", setup["questions"], "-r", rp, "-b", out, "--out", setup["root"] / "rep1",
                  "--calibration-sims", "0", "--no-figures")
    assert res.returncode == 0, res.stderr
    assert said in " ".join(res.stderr.split())
    pool = json.loads((setup["root"] / "rep1" / "summary.json").read_text())["pool"]
    assert pool["pairing"]["blind"]["unfinished"] == {"tiny": {"folders": 1, "n_planned": 13}}
    assert said in (setup["root"] / "rep1" / "README.md").read_text()
    run_blind(BlindConfig(model=setup["model"], questions=setup["questions"], out=str(out), batch_size=3,
                          model_name="tiny", progress=False))
    res = run_cli("audit", "-q", setup["questions"], "-r", rp, "-b", out, "--out", setup["root"] / "rep2",
                  "--calibration-sims", "0", "--no-figures")
    assert res.returncode == 0, res.stderr
    assert "stopped before it finished" not in res.stderr
    assert json.loads((setup["root"] / "rep2" / "summary.json").read_text())["pool"]["unfinished_note"] is None
