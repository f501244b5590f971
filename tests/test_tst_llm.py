"""TsT-LLM on CPU with a tiny random Llama: LoRA on the training folds learns a planted letter bias."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("peft")
pytest.importorskip("accelerate")

from audit_hub.frame.core import AuditFrame  # noqa: E402


def _frame(planted: bool, n: int = 40) -> AuditFrame:
    rng = np.random.default_rng(1)
    rows = [{"question_id": f"q{i:02d}", "question": f"Which color is the shape number {i}?",
             "options": ["red", "blue", "green", "left"],
             "answer": "B" if planted else "ABCD"[rng.integers(0, 4)], "answer_type": "mc", "category": "c"}
            for i in range(n)]
    return AuditFrame.from_tables(pd.DataFrame(rows))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny"), seed=0, chat_template=True)


@pytest.mark.slow
def test_lora_learns_planted_letter_and_not_null(tiny):
    from audit_hub.tst.llm import LlmConfig, run_tst_llm

    cfg = LlmConfig(model=tiny, k=2, seed=0, lr=5e-3, batch_size=4, lora_r=4)
    planted = run_tst_llm(_frame(True), cfg)
    s = planted.summary
    assert s["chance"] == pytest.approx(0.25)
    assert s["tst_mean_p_gold"] > 0.45 and s["delta_tst"] > 0.3, s
    pq = planted.per_question
    np.testing.assert_allclose(pq["tst_llm_delta"], pq["tst_llm_s"] - pq["tst_llm_zero_shot"])
    assert set(pq["tst_llm_fold"]) == {0, 1}
    assert all(f["steps"] == 5 for f in s["folds"])
    null = run_tst_llm(_frame(False), cfg).summary
    assert null["tst_mean_p_gold"] < 0.4, null
    assert null["tst_mean_p_gold"] < s["tst_mean_p_gold"] - 0.1
