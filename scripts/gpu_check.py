"""GPU check of the blind runner: throughput and MFU of ``logprob`` scoring on a 7B-shaped model.

Run ``scripts/gpu_check.sh`` (one command, under 5 minutes on one GPU, nothing downloaded):

1. builds a random-weight model with Qwen2-7B's shape (hidden 3584, 28 layers, GQA 28/4 heads,
   intermediate 18944, vocabulary 152064) in bf16 directly on the GPU;
2. writes 2,000 synthetic multiple-choice questions of about 300 prompt tokens (after the chat
   template) and scores them with the product's own runner (``run_blind``: tokenisation, length-sorted
   left-padded batches, last-position logits, shards, merge) in ``logprob`` mode, with the runner's
   default batch size unless ``--batch-size`` is given;
3. prints questions/s, prompt tokens/s and model FLOPs utilisation against the device's dense bf16
   peak (a table of common GPUs; ``--peak-tflops`` for others);
4. with 2 or more GPUs, runs the same questions with 2 processes (``torchrun``, one GPU each) and checks
   that the answers are identical (a differing answer is reported with its top-2 margin; bf16 ties
   closer than 1e-2 in log-probability are listed separately, anything else fails the check).

``--smoke`` runs the same steps on CPU with a tiny model and 40 questions (CI).
FLOPs per question: 2 x (non-embedding matmul parameters) x L + 2 x layers x L^2 x hidden (causal
attention scores and values) + 2 x hidden x vocab (one LM-head row), L = prompt tokens; padding is not
counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

QWEN2_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
            "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
            "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
SMOKE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1024, "max_position_embeddings": 2048, "rope_theta": 1000000.0,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
# dense bf16 peak TFLOP/s (no sparsity), by a substring of torch.cuda.get_device_name()
PEAKS = [("H200", 989.4), ("H100 SXM", 989.4), ("H100 80GB HBM3", 989.4), ("H100 NVL", 835.0), ("H100 PCIe", 756.0),
         ("H100", 756.0), ("GH200", 989.4), ("B200", 2250.0), ("B100", 1750.0), ("A100", 312.0), ("L40S", 362.0),
         ("L40", 181.0), ("L4", 121.0), ("A10G", 70.0), ("A10", 125.0), ("RTX 4090", 165.2), ("A6000", 154.8),
         ("MI300X", 1307.4), ("MI250X", 383.0)]
WORDS = ("red blue green circle square triangle left right top bottom area angle length shape figure number color "
         "value what which how many where the a of to in is").split()


def peak_tflops(name: str) -> float | None:
    for key, v in PEAKS:
        if key.lower() in name.lower():
            return v
    return None


def flops_per_question(c: dict, n_tokens: int) -> float:
    h, i, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * i  # q, o; k, v; gate, up, down
    return 2.0 * layers * per_layer * n_tokens + 2.0 * layers * n_tokens * n_tokens * h + 2.0 * h * c["vocab_size"]


def make_inputs(folder: Path, n: int, target_tokens: int, shape: dict) -> Path:
    """Tokenizer (trained here) + config.json in ``folder``; questions of ~``target_tokens`` prompt
    tokens in ``folder / questions.parquet``."""
    import numpy as np
    import pandas as pd
    from tiny_model import build_tiny_tokenizer
    from transformers import Qwen2Config

    from audit_hub.blind.prompt import ChatFormatter, default_prompt

    tok = build_tiny_tokenizer(chat_template=True)
    tok.save_pretrained(folder)
    cfg = Qwen2Config(**{**shape, "vocab_size": max(shape["vocab_size"], len(tok))}, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg.save_pretrained(folder)
    rng = np.random.default_rng(0)
    chat = ChatFormatter(tok)
    def n_tok(words: int) -> int:
        opts = [" ".join(rng.choice(WORDS, 3)) for _ in range(4)]
        text = chat(default_prompt(" ".join(rng.choice(WORDS, words)) + "?", opts, "mc"))
        return len(tok(text, add_special_tokens=False)["input_ids"])

    overhead = n_tok(1)
    per_word = (n_tok(401) - overhead) / 400.0
    rows = []
    for k in range(n):
        want = int(rng.integers(int(0.8 * target_tokens), int(1.2 * target_tokens) + 1))
        n_words = max(1, round((want - overhead) / per_word))
        q = " ".join(rng.choice(WORDS, n_words)) + "?"
        opts = [" ".join(rng.choice(WORDS, 3)) for _ in range(4)]
        rows.append({"question_id": f"g{k:05d}", "question": q, "options": opts, "answer": "ABCD"[k % 4],
                     "answer_type": "mc", "category": "synthetic", "hint": None})
    qp = folder / "questions.parquet"
    pd.DataFrame(rows).to_parquet(qp)
    return qp


def build_model(folder: Path, device, dtype):
    import torch
    from transformers import AutoConfig, Qwen2ForCausalLM

    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    return model.eval(), cfg


def score(folder: Path, qp: Path, out: Path, device, dtype, batch_size: int | None):
    from audit_hub.blind.runner import BlindConfig, run_blind

    model, cfg = build_model(folder, device, dtype)
    kw = {"batch_size": batch_size} if batch_size else {}
    t0 = time.perf_counter()
    res = run_blind(BlindConfig(model=str(folder), questions=str(qp), out=str(out), model_name="gpu-check",
                                progress=False, overwrite=True, model_object=model, cpu=device.type == "cpu",
                                dtype="bfloat16" if dtype is not None and "bfloat16" in str(dtype) else "float32",
                                **kw))
    wall = time.perf_counter() - t0
    return res, cfg, wall


def worker(args) -> int:
    """One process of the 2-process check (under torchrun): its own GPU, same seed, same questions."""
    import torch

    rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{rank}") if torch.cuda.is_available() and not args.smoke else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    score(Path(args.folder), Path(args.folder) / "questions.parquet", Path(args.out), device, dtype, args.batch_size)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model, 40 questions (CI)")
    ap.add_argument("--n-questions", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=None, help="target prompt tokens per question (default 300)")
    ap.add_argument("--batch-size", type=int, default=None, help="default: the runner's default")
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--no-multi", action="store_true", help="skip the 1 vs 2 processes check")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    import torch

    t_start = time.perf_counter()
    if not args.smoke and not torch.cuda.is_available():
        print("gpu_check: no CUDA device visible; run with --smoke for the CPU version", file=sys.stderr)
        return 2
    device = torch.device("cpu") if args.smoke else torch.device("cuda:0")
    dtype = torch.float32 if args.smoke else torch.bfloat16
    shape = SMOKE if args.smoke else QWEN2_7B
    n = args.n_questions or (40 if args.smoke else 2000)
    target = args.tokens or (120 if args.smoke else 300)
    name = "CPU" if args.smoke else torch.cuda.get_device_name(0)
    peak = args.peak_tflops or (None if args.smoke else peak_tflops(name))
    tmp = Path(tempfile.mkdtemp(prefix="benchaudit-gpu-check-"))
    try:
        folder = tmp / "model"
        folder.mkdir()
        qp = make_inputs(folder, n, target, shape)
        res, cfg, wall = score(folder, qp, tmp / "one", device, dtype, args.batch_size)
        table = res.table
        c = cfg.to_dict()
        toks = table["n_prompt_tokens"].astype(int).tolist()
        flops = sum(flops_per_question(c, L) for L in toks)
        scoring_s = res.summary["elapsed_s"]
        p_total = (c["vocab_size"] * c["hidden_size"] * 2 + c["num_hidden_layers"] * (
            2 * c["hidden_size"] ** 2 + 2 * c["hidden_size"] * c["num_key_value_heads"] * (
                c["hidden_size"] // c["num_attention_heads"]) + 3 * c["hidden_size"] * c["intermediate_size"]))
        print(f"gpu_check: {name}; random Qwen2 {'smoke' if args.smoke else '7B'}-shaped model "
              f"({p_total / 1e9:.2f} B parameters, {str(dtype).replace('torch.', '')}, SDPA), {len(table)} questions, "
              f"mean {sum(toks) / len(toks):.0f} prompt tokens (min {min(toks)}, max {max(toks)}), batch size "
              f"{args.batch_size or 'default (8)'}")
        print(f"  scoring: {len(table) / scoring_s:,.1f} questions/s, {sum(toks) / scoring_s:,.0f} prompt tokens/s "
              f"({scoring_s:.1f} s; whole run_blind call {wall:.1f} s)")
        tflops = flops / scoring_s / 1e12
        if peak:
            print(f"  MFU: {tflops:,.1f} TFLOP/s of {peak:,.1f} dense bf16 peak = {tflops / peak:.1%} (target >= 50%)")
        else:
            print(f"  MFU: {tflops:,.3f} TFLOP/s achieved; no dense bf16 peak known for this device "
                  "(pass --peak-tflops)")
        del res
        n_gpu = torch.cuda.device_count() if not args.smoke else 0
        ok = True
        if (n_gpu >= 2 or args.smoke) and not args.no_multi:
            torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
            env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
            cmd = [torchrun, "--standalone", "--nproc_per_node", "2", str(Path(__file__).resolve()), "--worker",
                   "--folder", str(folder), "--out", str(tmp / "two")]
            if args.smoke:
                cmd.append("--smoke")
                env["ACCELERATE_USE_CPU"] = "1"
            if args.batch_size:
                cmd += ["--batch-size", str(args.batch_size)]
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            if p.returncode != 0:
                print(f"  2 processes: FAILED (exit {p.returncode})\n{p.stderr[-3000:]}")
                return 1
            import numpy as np
            import pandas as pd

            two = pd.read_parquet(tmp / "two" / "data" / "blind-00000-of-00001.parquet").set_index("question_id")
            one = table.set_index("question_id")
            diff = [q for q in one.index if one.loc[q, "answer"] != two.loc[q, "answer"]]
            ties, real = [], []
            for q in diff:
                lp = np.sort(np.asarray(one.loc[q, "option_logprobs"], float))[::-1]
                (ties if lp[0] - lp[1] < 1e-2 else real).append(q)
            dmax = max(float(np.abs(np.asarray(a, float) - np.asarray(b, float)).max())
                       for a, b in zip(one["option_logprobs"], two.loc[one.index, "option_logprobs"]))
            ok = not real
            print(f"  1 vs 2 processes ({'CPU' if args.smoke else 'one GPU each'}, {time.perf_counter() - t0:.0f} s): "
                  f"{len(one) - len(diff)}/{len(one)} identical answers; {len(ties)} near-ties (margin < 1e-2) "
                  f"differ, {len(real)} other answers differ; max |option log-prob difference| {dmax:.2e} -> "
                  f"{'OK' if ok else 'FAILED'}")
        else:
            print(f"  1 vs 2 processes: skipped ({n_gpu} GPU visible)" if not args.no_multi else
                  "  1 vs 2 processes: skipped (--no-multi)")
        print(f"gpu_check: total {time.perf_counter() - t_start:.0f} s")
        summary = {"device": name, "questions": len(table), "mean_tokens": sum(toks) / len(toks),
                   "questions_per_s": len(table) / scoring_s, "tokens_per_s": sum(toks) / scoring_s,
                   "tflops": tflops, "mfu": tflops / peak if peak else None, "multi_ok": ok}
        print("gpu_check json: " + json.dumps(summary))
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
