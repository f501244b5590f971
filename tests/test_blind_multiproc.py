"""Blind runner across processes: two CPU processes (torchrun, gloo) give exactly what one gives."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_blind import make_questions  # noqa: E402
from tiny_model import build_tiny_llama  # noqa: E402

pytest.importorskip("torch")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _env(**extra) -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra)
    return env


def tiny_setup(root: Path) -> dict:
    """The tiny model and 13 questions the multi-process and resume tests run on, written under ``root``."""
    model = build_tiny_llama(root / "model", seed=3, chat_template=True)
    qp = root / "q.parquet"
    make_questions(n_mc=10, n_yn=3, seed=5).to_parquet(qp)
    return {"root": root, "model": model, "questions": str(qp)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("blindmp"))


def _args(setup, out, *extra) -> list[str]:
    return ["--model", setup["model"], "--questions", setup["questions"], "--out", str(out), "--batch-size", "3",
            "--model-name", "tiny", "--no-progress", *extra]


def test_two_processes_equal_one(setup):
    from audit_hub.blind.runner import BlindConfig, run_blind

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not available")
    out2 = setup["root"] / "two"
    p = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "audit_hub.blind",
                        *_args(setup, out2, "--keep-shards")], capture_output=True, text=True, timeout=240,
                       env=_env(), cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "on 2 processes" in p.stdout
    shard_ranks = {f.name.split("-")[0] for f in (out2 / "shards").iterdir()}
    assert shard_ranks == {"rank0", "rank1"}  # both processes really scored questions
    two = pd.read_parquet(out2 / "data" / "blind-00000-of-00001.parquet").set_index("question_id")

    one = run_blind(BlindConfig(model=setup["model"], questions=setup["questions"], out=str(setup["root"] / "one"),
                                batch_size=3, model_name="tiny", progress=False)).table.set_index("question_id")
    assert list(two.index) == list(one.index)  # same rows, same (questions-table) order
    assert (two["answer"] == one["answer"]).all()
    assert (two["prediction"] == one["prediction"]).all()
    assert (two["hit_exact"] == one["hit_exact"]).all()
    for qid in one.index:
        np.testing.assert_allclose(np.exp(two.loc[qid, "option_logprobs"]), np.exp(one.loc[qid, "option_logprobs"]),
                                   atol=1e-6, rtol=0)
    np.testing.assert_allclose(two["gold_prob"].to_numpy(float), one["gold_prob"].to_numpy(float), atol=1e-6, rtol=0)
