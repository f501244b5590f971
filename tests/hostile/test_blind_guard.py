"""`benchaudit blind`: the resume fingerprint covers the question rows used, the prompt template, the chat
template and the model revision; the output folder obeys the same rules as every other output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from audit_hub.blind import shards as sh

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))


def _questions(n=6):
    return pd.DataFrame({"question_id": [f"q{i}" for i in range(n)], "question": [f"Q{i}?" for i in range(n)],
                         "hint": [None] * n, "options": [["a", "b", "c"]] * n, "answer": ["A"] * n,
                         "answer_type": ["mc"] * n, "n_options": [3] * n})


@pytest.mark.parametrize("change", ["text", "options", "gold", "hint", "answer_type"])
def test_a_changed_question_row_is_refused_on_resume(tmp_path, change):
    from audit_hub.errors import InputError

    a = _questions()
    b = a.copy()
    if change == "text":
        b.loc[2, "question"] = "Q2 changed?"
    elif change == "options":
        b.at[3, "options"] = ["a", "b", "d"]
    elif change == "gold":
        b.loc[4, "answer"] = "B"
    elif change == "hint":
        b.loc[0, "hint"] = "look left"
    elif change == "answer_type":
        b.loc[1, "answer_type"] = "yesno"
    sh.write_run_config(tmp_path, {"fingerprint": {}, "question_rows": sh.question_row_hashes(a)})
    assert sh.check_question_rows(tmp_path, sh.question_row_hashes(a.copy()), overwrite=False) is None
    with pytest.raises(InputError, match="question_rows"):
        sh.check_question_rows(tmp_path, sh.question_row_hashes(b), overwrite=False)
    assert sh.check_question_rows(tmp_path, sh.question_row_hashes(b), overwrite=True) is None


def test_more_questions_resume_and_are_recorded(tmp_path):
    a = _questions(6)
    sh.write_run_config(tmp_path, {"fingerprint": {}, "question_rows": sh.question_row_hashes(a.iloc[:3])})
    merged = sh.check_question_rows(tmp_path, sh.question_row_hashes(a), overwrite=False)
    assert merged == sh.question_row_hashes(a)


@pytest.mark.parametrize("key", ["prompt_sha256", "chat_template_sha256", "model"])
def test_any_fingerprint_change_is_refused_unless_overwrite(tmp_path, key):
    from audit_hub.errors import InputError

    fp = {"prompt_sha256": "b" * 64, "chat_template_sha256": "c" * 64,
          "model": {"model": "m", "revision": "v1", "commit": "abc"}}
    sh.write_run_config(tmp_path, {"fingerprint": fp})
    new = dict(fp)
    new[key] = {"model": "m", "revision": "v2", "commit": "def"} if key == "model" else "f" * 64
    with pytest.raises(InputError, match=key):
        sh.check_fingerprint(tmp_path, new, overwrite=False)
    sh.check_fingerprint(tmp_path, new, overwrite=True)


@pytest.mark.parametrize("out", [".", "inputs", "inputs/q.parquet", "notes.txt", "foreign"])
def test_blind_refuses_unsafe_out(ws, out):
    pytest.importorskip("torch")
    _questions().to_parquet(ws.root / "inputs" / "q.parquet")
    (ws.root / "notes.txt").write_text("keep")
    (ws.root / "foreign").mkdir()
    (ws.root / "foreign" / "x.txt").write_text("keep")
    before = ws.snap()
    res = ws.cli("blind", "--model", "no-such-model", "--questions", "inputs/q.parquet", "--out", out, "--cpu")
    ws.check_refused(res, before, out=None)
    assert "--out" in res.error_lines[0], res


@pytest.mark.slow
def test_rerun_with_changed_questions_after_a_kill_is_refused(tmp_path):
    """The reported case: killed after two shards, rerun with the same IDs but new options and gold."""
    pytest.importorskip("torch")
    from test_blind import make_questions
    from tiny_model import build_tiny_llama

    model = build_tiny_llama(tmp_path / "model", seed=3, chat_template=True)
    qp = tmp_path / "q.parquet"
    q = make_questions(n_mc=10, n_yn=2, seed=5)
    q.to_parquet(qp)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(TESTS.parent), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", BENCHAUDIT_BLIND_FAIL_AFTER_SHARDS="2")
    args = ["--model", str(model), "--questions", str(qp), "--out", str(out), "--batch-size", "3",
            "--model-name", "tiny", "--no-progress", "--cpu"]
    p = subprocess.run([sys.executable, "-m", "audit_hub.blind", *args], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 17, p.stderr[-2000:]
    assert len(list((out / "shards").glob("rank*.parquet"))) == 2
    q2 = q.copy()
    mc = q2["answer"].isin(list("ABCDE"))
    q2.loc[mc, "options"] = pd.Series([list(reversed(o)) for o in q2.loc[mc, "options"]], index=q2.index[mc])
    q2.loc[mc, "answer"] = ["B" if a == "A" else "A" for a in q2.loc[mc, "answer"]]
    q2.to_parquet(qp)
    env.pop("BENCHAUDIT_BLIND_FAIL_AFTER_SHARDS")
    p = subprocess.run([sys.executable, "-m", "audit_hub.cli", "blind", *args], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "question_rows" in p.stderr and "--overwrite" in p.stderr and "Traceback" not in p.stderr
    assert not (out / "data").exists()
    p = subprocess.run([sys.executable, "-m", "audit_hub.cli", "blind", *args, "--overwrite"], capture_output=True,
                       text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    merged = pd.read_parquet(out / "data" / "blind-00000-of-00001.parquet")
    assert len(merged) == len(q2)
