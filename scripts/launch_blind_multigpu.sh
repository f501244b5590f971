#!/usr/bin/env bash
# Blind (text-only) predictions on every GPU of this machine, or of several machines.
#
#   scripts/launch_blind_multigpu.sh MODEL QUESTIONS OUT [extra benchaudit-blind options...]
#
# One process per GPU (accelerate's data parallelism: the questions are dealt out, the model is
# replicated). The output folder must be on a filesystem all processes see. Rerun the same command
# after a crash to resume. Environment knobs:
#   NUM_GPUS      processes on this machine (default: all visible GPUs)
#   NUM_MACHINES  machines (default 1); for several, also set MACHINE_RANK, MAIN_IP, MAIN_PORT
#   BATCH_SIZE    questions per forward pass per GPU (default 32)
# Example:
#   scripts/launch_blind_multigpu.sh Qwen/Qwen2-VL-7B-Instruct lmms-lab/MMStar runs/blind-qwen2vl \
#       --model-name Qwen2-VL-7B-Instruct
set -euo pipefail

if [ "$#" -lt 3 ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
MODEL="$1"; QUESTIONS="$2"; OUT="$3"; shift 3

if [ -z "${NUM_GPUS:-}" ]; then
  NUM_GPUS=$(python -c "import torch; print(max(torch.cuda.device_count(), 1))")
fi
NUM_MACHINES="${NUM_MACHINES:-1}"
BATCH_SIZE="${BATCH_SIZE:-32}"

LAUNCH=(accelerate launch --num_processes "$((NUM_GPUS * NUM_MACHINES))" --num_machines "$NUM_MACHINES"
        --mixed_precision no --dynamo_backend no)
if [ "$NUM_GPUS" -gt 1 ] || [ "$NUM_MACHINES" -gt 1 ]; then
  LAUNCH+=(--multi_gpu)
fi
if [ "$NUM_MACHINES" -gt 1 ]; then
  LAUNCH+=(--machine_rank "${MACHINE_RANK:?set MACHINE_RANK}" --main_process_ip "${MAIN_IP:?set MAIN_IP}"
           --main_process_port "${MAIN_PORT:-29500}")
fi

export TOKENIZERS_PARALLELISM=false
exec "${LAUNCH[@]}" -m audit_hub.blind --model "$MODEL" --questions "$QUESTIONS" --out "$OUT" \
  --batch-size "$BATCH_SIZE" "$@"
