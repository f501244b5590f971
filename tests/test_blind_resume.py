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
