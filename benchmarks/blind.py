"""Throughput of the blind runner's ``logprob`` mode.

1. CPU (always): questions per second of ``logprob`` mode (one forward pass per question, last-position
   logits only, option letters read from the next-token distribution) against the common alternative of
   scoring each option as a separate continuation (how lm-evaluation-harness scores multiple choice: one
   sequence ``prompt + " A"``, ``prompt + " B"``, ... per option, full logits, log-softmax of the
   continuation token). Same random-weight Llama, same 4-option questions, same batch size (sequences per
   forward pass), same length-sorted left-padded batching. Prints the ratio (target: >= 3x).
   Also times the full runner (``run_blind``: tokenisation, shards, merge) on the same questions.
2. CPU threads, the product (always): ``benchaudit blind`` as a child process (wall, peak RSS) on the same
   questions with ``--threads auto`` (the default) and each fixed count, on an idle machine and with one busy
   process beside it (a Python loop on one core, as another job on a shared machine). Target: the default
   within 15% of the best fixed count in both conditions (no fixed count is: on 2 cores, more threads win
   idle and lose 2x under load). The child's ``manifest.json`` says which counts ``auto`` ran.
3. GPU (only when CUDA is available): a random-weight model with the shape of Llama-2-7B in bf16; tokens
   per second of the ``logprob`` forward pass and model FLOPs utilisation against ``--peak-tflops``
   (default 989, the H200/H100 SXM dense bf16 peak). Target: >= 50% MFU. Prints that it was skipped
   otherwise.

Run: ``.venv/bin/python benchmarks/blind.py`` (section 1 under a minute on one idle CPU core, section 2
about 6 minutes on 2 cores);
``--smoke`` runs every step at a tiny size (seconds; CI). For the full GPU check of the product
(random 7B model, 2,000 questions through ``run_blind``, MFU, 1 vs 2 processes) run
``scripts/gpu_check.sh``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def make_questions(n: int, seed: int):
    import pandas as pd

    rng = np.random.default_rng(seed)
    words = ("red blue green circle square triangle left right top bottom area angle length shape figure "
             "number color value").split()
    rows = []
    for i in range(n):
        q = " ".join(rng.choice(words, size=int(rng.integers(20, 60)))) + "?"
        opts = [" ".join(rng.choice(words, size=int(rng.integers(2, 6)))) for _ in range(4)]
        rows.append({"question_id": f"q{i:05d}", "question": q, "options": opts, "answer": "ABCD"[i % 4],
                     "answer_type": "mc", "category": "bench", "hint": None})
    return pd.DataFrame(rows)


def _batches(seqs: list[list[int]], bs: int):
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    for b in range(0, len(order), bs):
        yield [order[j] for j in range(b, min(b + bs, len(order)))]


def logprob_mode(model, tok, prompts_ids, bs, device, space_only: bool = False):
    """The runner's scoring path: one pass per question, last-position logits, letter groups.
    ``space_only`` keeps only the " A" forms (to check agreement with the per-option baseline)."""
    import torch

    from audit_hub.blind.scoring import AnswerTokens, ForwardFn, answer_scores, restricted_log_probs
    from audit_hub.blind.scoring import pad_left as _pad_left

    fwd = ForwardFn(model)
    letters = AnswerTokens.letters(tok, 4)
    if space_only:
        letters = AnswerTokens(tuple((tok.encode(" " + c, add_special_tokens=False)[0],) for c in "ABCD"),
                               letters.labels)
    pred = [None] * len(prompts_ids)
    with torch.inference_mode():
        for idx in _batches(prompts_ids, bs):
            ids, mask = _pad_left([prompts_ids[i] for i in idx], tok.pad_token_id, device)
            scores, _ = answer_scores(fwd(ids, mask), letters)
            for r, i in enumerate(idx):
                lp = restricted_log_probs(scores[r].tolist(), 4)
                pred[i] = int(np.argmax(lp))
    return pred


def per_option_mode(model, tok, prompts_ids, bs, device):
    """lm-evaluation-harness style: every option is its own sequence ``prompt + " X"``; full logits;
    log-softmax; the continuation token's log-probability; argmax over the question's options."""
    import torch

    from audit_hub.blind.scoring import pad_left as _pad_left
    from audit_hub.blind.scoring import position_ids_from_mask

    cont = [tok.encode(" " + c, add_special_tokens=False) for c in "ABCD"]
    seqs, owner = [], []
    for i, p in enumerate(prompts_ids):
        for j, c in enumerate(cont):
            seqs.append(p + c)
            owner.append((i, j, len(c)))
    ll = np.zeros((len(prompts_ids), 4))
    with torch.inference_mode():
        for idx in _batches(seqs, bs):
            ids, mask = _pad_left([seqs[s] for s in idx], tok.pad_token_id, device)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask),
                           use_cache=False).logits
            logp = torch.log_softmax(logits.float(), dim=-1)
            for r, s in enumerate(idx):
                i, j, n = owner[s]
                tgt = ids[r, -n:]
                ll[i, j] = float(logp[r, -n - 1:-1].gather(-1, tgt.unsqueeze(-1)).sum())
    return [int(np.argmax(row)) for row in ll]


def cpu_benchmark(args) -> None:
    import torch
    from tiny_model import build_tiny_llama
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from audit_hub.blind.prompt import ChatFormatter, default_prompt

    torch.manual_seed(0)
    torch.set_num_threads(max(1, args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llama(Path(tmp) / "m", seed=0, hidden=args.hidden, layers=args.layers, heads=args.heads,
                                max_position=1024, chat_template=True, intermediate=4 * args.hidden)
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        q = make_questions(args.n_questions, seed=0)
        chat = ChatFormatter(tok)
        texts = [chat(default_prompt(r.question, r.options, "mc", r.hint)) for r in q.itertuples()]
        prompts_ids = tok(texts, add_special_tokens=False)["input_ids"]
        n_params = sum(p.numel() for p in model.parameters())
        mean_len = float(np.mean([len(p) for p in prompts_ids]))
        print(f"CPU: random Llama, {n_params / 1e6:.2f} M parameters (hidden {args.hidden}, {args.layers} layers), "
              f"{len(prompts_ids)} 4-option questions, mean prompt {mean_len:.0f} tokens, batch size {args.batch_size}, "
              f"{torch.get_num_threads()} threads")
        device = torch.device("cpu")
        logprob_mode(model, tok, prompts_ids[: args.batch_size], args.batch_size, device)  # warm-up
        per_option_mode(model, tok, prompts_ids[: args.batch_size], args.batch_size, device)
        t0 = time.perf_counter()
        a = logprob_mode(model, tok, prompts_ids, args.batch_size, device)
        t_lp = time.perf_counter() - t0
        t0 = time.perf_counter()
        b = per_option_mode(model, tok, prompts_ids, args.batch_size, device)
        t_po = time.perf_counter() - t0
        qps_lp, qps_po = len(a) / t_lp, len(b) / t_po
        same_forms = logprob_mode(model, tok, prompts_ids, args.batch_size, device, space_only=True)
        agree = float(np.mean(np.array(same_forms) == np.array(b)))
        print(f"  logprob mode (1 pass/question):      {qps_lp:8.1f} questions/s")
        print(f"  per-option continuations (4 passes): {qps_po:8.1f} questions/s")
        print(f"  ratio: {qps_lp / qps_po:.2f}x (target >= 3x); restricted to the same ' A' token forms, "
              f"the two approaches pick the same letter on {agree:.1%} of questions")

        from audit_hub.blind.runner import BlindConfig, run_blind

        qp = Path(tmp) / "q.parquet"
        q.to_parquet(qp)
        t0 = time.perf_counter()
        res = run_blind(BlindConfig(model=path, questions=str(qp), out=str(Path(tmp) / "out"),
                                    batch_size=args.batch_size, progress=False, model_name="bench"))
        t_run = time.perf_counter() - t0
        print(f"  full runner (load + tokenise + score + shards + merge): {len(res.table) / t_run:.1f} questions/s "
              f"({t_run:.1f} s wall, scoring {res.summary['questions_per_s']:.1f} q/s)")


def llama7b_flops_per_token(cfg, ctx: int) -> float:
    """Forward FLOPs per prompt token: 2 x (non-embedding matmul parameters) + attention scores/values
    (2 x 2 x layers x ctx/2 x hidden, causal average) ; the LM head runs on one position per sequence."""
    h, i, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    kv = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * i  # q,o + k,v + gate,up,down
    dense = 2 * layers * per_layer
    attn = 2 * 2 * layers * h * ctx / 2
    return dense + attn


def gpu_benchmark(args) -> None:
    import torch

    if not torch.cuda.is_available() or args.skip_gpu:
        print("GPU: skipped (no CUDA device)" if not args.skip_gpu else "GPU: skipped (--skip-gpu)")
        return
    from transformers import LlamaConfig, LlamaForCausalLM

    from audit_hub.blind.scoring import ForwardFn

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(prev)
    fwd = ForwardFn(model)
    name = torch.cuda.get_device_name(0)
    L, B = args.gpu_seq_len, args.gpu_batch_size
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(100, cfg.vocab_size, (B, L), device="cuda", generator=g)
    mask = torch.ones_like(ids)
    # realistic left padding: the shortest quarter of each batch is 20% shorter
    mask[: B // 4, : L // 5] = 0
    with torch.inference_mode():
        for _ in range(3):
            fwd(ids, mask)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.gpu_iters):
            fwd(ids, mask)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / args.gpu_iters
    real_tokens = int(mask.sum())
    flops = llama7b_flops_per_token(cfg, L) * B * L + 2 * cfg.hidden_size * cfg.vocab_size * B
    tflops = flops / dt / 1e12
    print(f"GPU: {name}, random Llama-2-7B shape in bf16, batch {B} x {L} tokens (with left padding), "
          f"{args.gpu_iters} timed passes")
    print(f"  {B / dt:.1f} questions/s, {B * L / dt:,.0f} tokens/s ({real_tokens / dt:,.0f} non-padding tokens/s)")
    print(f"  {tflops:.0f} TFLOP/s = {tflops / args.peak_tflops:.1%} MFU of {args.peak_tflops:.0f} TFLOP/s dense bf16 "
          "peak (target >= 50%)")


BUSY_LOOP = "import time\nt = time.time() + {secs}\nwhile time.time() < t:\n    pass\n"


def threads_benchmark(args) -> None:
    """Section 2: the CLI with ``--threads auto`` against fixed counts, idle and beside one busy process."""
    import json
    import subprocess

    import torch
    from _measure import benchaudit_cmd, child_env, measure
    from tiny_model import build_tiny_llama

    from audit_hub.blind.threads import candidate_counts

    counts = candidate_counts(torch.get_num_threads())
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llama(Path(tmp) / "m", seed=0, hidden=args.t_hidden, layers=args.t_layers,
                                heads=args.t_heads, max_position=2048, chat_template=True)
        qp = Path(tmp) / "q.parquet"
        make_questions(args.t_questions, seed=1).to_parquet(qp)
        env = child_env(str(ROOT))
        print(f"CPU threads: `benchaudit blind` (child process) on {args.t_questions} questions, random Llama hidden "
              f"{args.t_hidden} x {args.t_layers} layers, batch size 8; fixed counts {counts}")
        for load in ("idle", "one busy process"):
            walls = {}
            for setting in ["auto", *map(str, counts)]:
                out = Path(tmp) / f"out-{load[:4]}-{setting}"
                busy = (subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(secs=3600)])
                        if load != "idle" else None)
                try:
                    r = measure([*benchaudit_cmd(), "blind", "-m", path, "-q", str(qp), "-o", str(out),
                                 "--threads", setting, "--no-progress"], env=env, timeout=1800)
                finally:
                    if busy is not None:
                        busy.kill()
                        busy.wait()
                if r["rc"] != 0:
                    raise SystemExit(f"blind --threads {setting} failed: {r['stderr_tail'][-800:]}")
                walls[setting] = r["wall_s"]
                ct = json.loads((out / "manifest.json").read_text())["params"].get("cpu_threads") or {}
                ran = ct.get("batches_per_count", {ct.get("threads"): "all"})
                print(f"  [{load}] --threads {setting:>4}: wall {r['wall_s']:6.1f} s, peak RSS "
                      f"{r['peak_rss_gb'] * 1024:5.0f} MB, batches per thread count {ran}")
            best = min(v for k, v in walls.items() if k != "auto")
            ratio = walls["auto"] / best
            print(f"  [{load}] target auto <= 1.15 x the best fixed count: {ratio:.2f} x "
                  f"{'PASS' if ratio <= 1.15 else 'FAIL'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-questions", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--gpu-batch-size", type=int, default=32)
    ap.add_argument("--gpu-seq-len", type=int, default=512)
    ap.add_argument("--gpu-iters", type=int, default=10)
    ap.add_argument("--t-questions", type=int, default=600, help="section 2: questions per run")
    ap.add_argument("--t-hidden", type=int, default=512)
    ap.add_argument("--t-layers", type=int, default=4)
    ap.add_argument("--t-heads", type=int, default=8)
    ap.add_argument("--skip-threads", action="store_true")
    ap.add_argument("--skip-gpu", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, no GPU part (CI)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n_questions, args.batch_size, args.hidden, args.layers, args.heads = 8, 4, 32, 1, 2
        args.t_questions, args.t_hidden, args.t_layers, args.t_heads = 24, 32, 1, 2
        args.skip_gpu = True
    if not args.skip_cpu:
        cpu_benchmark(args)
    if not args.skip_threads:
        threads_benchmark(args)
    gpu_benchmark(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
