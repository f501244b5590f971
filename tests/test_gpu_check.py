"""scripts/gpu_check.sh --smoke: the GPU check's own steps on CPU (tiny Qwen2, synthetic questions,
run_blind, throughput/MFU lines, 1 vs 2 processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def test_flops_count_hand_computed():
    from gpu_check import QWEN2_7B, flops_per_question, peak_tflops

    c = {"hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 1, "vocab_size": 10}
    # per layer: q,o 2*16 + k,v 2*4*2 + mlp 3*4*8 = 32 + 16 + 96 = 144 -> 2*2*144*L + 2*2*L^2*4 + 2*4*10
    assert flops_per_question(c, 3) == 2 * 2 * 144 * 3 + 2 * 2 * 9 * 4 + 80
    # Qwen2-7B: 6.53e9 non-embedding matmul parameters (2 FLOPs each per token) + one LM-head row
    # (2 x 3584 x 152064 = 1.09e9) for a one-token prompt
    assert flops_per_question(QWEN2_7B, 1) == pytest.approx(2 * 28 * (2 * 3584**2 + 2 * 3584 * 512 + 3 * 3584 * 18944)
                                                            + 2 * 28 * 3584 + 2 * 3584 * 152064)
    assert peak_tflops("NVIDIA H200") == 989.4 and peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0 and peak_tflops("Some new GPU") is None


@pytest.mark.slow
def test_gpu_check_smoke_runs_on_cpu():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), "--smoke", "--n-questions", "16"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(ROOT))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "questions/s" in p.stdout and "prompt tokens/s" in p.stdout and "TFLOP/s" in p.stdout
    assert "16/16 identical answers" in p.stdout and "-> OK" in p.stdout
    summary = json.loads(p.stdout.split("gpu_check json: ")[1].splitlines()[0])
    assert summary["questions"] == 16 and summary["multi_ok"] is True
    assert 100 < summary["mean_tokens"] < 145  # --smoke targets ~120-token prompts
