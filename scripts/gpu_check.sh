#!/usr/bin/env bash
# GPU check of the blind runner (one command, < 5 minutes on one GPU, nothing downloaded):
#
#   scripts/gpu_check.sh            random Qwen2-7B-shaped model in bf16 on GPU 0, logprob scoring of 2,000
#                                   synthetic ~300-token questions through run_blind; prints questions/s,
#                                   tokens/s and MFU against the GPU's dense bf16 peak; with >= 2 GPUs also
#                                   checks that 1 and 2 processes give identical answers
#   scripts/gpu_check.sh --smoke    the same steps on CPU with a tiny model (CI)
#   options: --batch-size N  --n-questions N  --tokens N  --peak-tflops X  --no-multi
#
# Uses the current python when it has torch, transformers and accelerate; otherwise the repository's
# .venv (created by scripts/_env.sh with torch==2.13.0).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if python3 -c "import torch, transformers, accelerate, pandas, pyarrow" >/dev/null 2>&1; then
  PY=python3
else
  # shellcheck source=scripts/_env.sh
  source "$ROOT/scripts/_env.sh"
  PY="$VENV/bin/python"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout 600 "$PY" "$ROOT/scripts/gpu_check.py" "$@"
