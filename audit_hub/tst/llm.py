"""TsT-LLM: k-fold LoRA fine-tuning of a causal LM on the test set's text-only prompts.

For every fold, a fresh copy of the base model gets LoRA adapters (peft), is trained for one epoch
(or ``max_steps``) on the *training folds'* prompts to emit the gold letter, and scores the held-out
fold by P(gold letter), restricted to the question's own letters exactly as the blind runner's
``logprob`` mode does (its :mod:`audit_hub.blind.scoring` and :mod:`audit_hub.blind.prompt` are
reused). The base model's zero-shot score is computed first; ΔTsT = TsT - zero-shot, overall and
per question. Folds come from the same engine as TsT-RF (:mod:`audit_hub.tst.cv`).

Device placement goes through ``accelerate.Accelerator`` so ``accelerate launch -m audit_hub.tst.llm``
works: training batches are sharded over processes (DDP), scoring is split between processes and
gathered. Multiple-choice and yes/no questions are scored; numeric and free-form ones are not.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError


@dataclass
class LlmConfig:
    """TsT-LLM settings (recorded in the summary)."""

    model: str
    k: int = 5
    seed: int = 0
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 8
    lr: float = 2e-4
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    target_modules: list[str] | str | None = None  # None: peft's default for the architecture
    max_length: int = 1024
    chat_template: bool = True
    trust_remote_code: bool = False
    dtype: str = "float32"
    score_batch_size: int = 16


@dataclass
class LlmTstResult:
    """``per_question``: question_id, ``tst_llm_zero_shot`` (base model P(gold)), ``tst_llm_s`` (held-out
    P(gold) after LoRA on the other folds), ``tst_llm_delta`` (= s - zero-shot), ``tst_llm_fold``.
    ``summary``: zero-shot and TsT means, ΔTsT, accuracies, chance, per category, config."""

    per_question: pd.DataFrame
    summary: dict
    extra: dict = field(default_factory=dict)


def _prompts(frame, tokenizer, use_chat: bool) -> tuple:
    """(question codes, prompt texts, K, gold index, is_yesno) for the scorable questions."""
    from ..blind.prompt import ChatFormatter, default_prompt

    q = frame.questions
    at = q["answer_type"].to_numpy(dtype=object)
    sel = np.flatnonzero(np.isin(at, ("mc", "yesno")))
    chat = ChatFormatter(tokenizer, enabled=use_chat)
    texts, K, gold, yn = [], [], [], []
    for i in sel:
        row = q.iloc[i]
        hint = row["hint"] if "hint" in q.columns else None
        texts.append(chat(default_prompt(str(row["question"]), list(row["options"]), at[i], hint)))
        if at[i] == "yesno":
            K.append(2)
            gold.append(0 if str(row["answer"]).lower() == "yes" else 1)
            yn.append(True)
        else:
            K.append(int(row["n_options"]))
            gold.append(int(row["gold_index"]))
            yn.append(False)
    return sel, texts, np.array(K), np.array(gold), np.array(yn), chat.active


def _load(cfg: LlmConfig):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(cfg.model, trust_remote_code=cfg.trust_remote_code)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(cfg.dtype)
    if dtype is None:
        raise InputError(f"unknown dtype {cfg.dtype!r}; use float32, bfloat16 or float16")

    def model_factory():
        return AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype, trust_remote_code=cfg.trust_remote_code)

    return tok, model_factory


def _batches(idx: np.ndarray, size: int):
    for s in range(0, len(idx), size):
        yield idx[s:s + size]


def _encode(tok, texts: list[str], add_special: bool, max_length: int) -> list[list[int]]:
    enc = tok(texts, add_special_tokens=add_special)["input_ids"]
    # keep the end of over-long prompts (the answer instruction is last)
    return [ids[-max_length:] for ids in enc]


def _score(accelerator, model, tok, enc: list[list[int]], rows: np.ndarray, K: np.ndarray, gold: np.ndarray,
           yn: np.ndarray, tokens_mc, tokens_yn, batch_size: int) -> np.ndarray:
    """P(gold) for ``rows`` (indices into the prompt arrays), split between processes and gathered."""
    import torch

    from ..blind.scoring import ForwardFn, answer_scores, pad_left, restricted_log_probs

    fwd = ForwardFn(accelerator.unwrap_model(model))
    out: dict[int, float] = {}
    with accelerator.split_between_processes(list(map(int, rows))) as mine:
        mine = np.asarray(mine, dtype=np.int64)
        with torch.no_grad():
            for b in _batches(mine, batch_size):
                ids, mask = pad_left([enc[i] for i in b], tok.pad_token_id, accelerator.device)
                last = fwd(ids, mask)
                for is_yn, toks in ((False, tokens_mc), (True, tokens_yn)):
                    sel = np.flatnonzero(yn[b] == is_yn)
                    if len(sel) == 0 or toks is None:
                        continue
                    scores, _ = answer_scores(last[torch.as_tensor(sel, device=last.device)], toks)
                    for j, r in zip(sel, b[sel]):
                        lp = restricted_log_probs(scores[j].tolist(), int(K[r]))
                        out[int(r)] = math.exp(lp[int(gold[r])])
    from accelerate.utils import gather_object

    gathered = gather_object([out])
    merged: dict[int, float] = {}
    for d in gathered:
        merged.update(d)
    return np.array([merged[int(r)] for r in rows], dtype=np.float64)


def _train_fold(accelerator, cfg: LlmConfig, model_factory, tok, enc, train_rows: np.ndarray, gold_tok: np.ndarray,
                seed: int):
    """A fresh base model + LoRA, trained on ``train_rows`` to emit the gold answer token."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    base = model_factory()
    lcfg = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.target_modules, task_type="CAUSAL_LM")
    model = get_peft_model(base, lcfg)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    rng = np.random.default_rng(seed)
    order = train_rows[rng.permutation(len(train_rows))]
    loader = torch.utils.data.DataLoader(list(map(int, order)), batch_size=cfg.batch_size, shuffle=False,
                                         collate_fn=lambda b: b)
    from ..blind.scoring import pad_left, position_ids_from_mask

    model, opt, loader = accelerator.prepare(model, opt, loader)
    steps = 0
    done = False
    losses = []
    for _ in range(cfg.epochs):
        for batch in loader:
            ids, mask = pad_left([enc[i] for i in batch], tok.pad_token_id, accelerator.device)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask),
                           use_cache=False).logits[:, -1, :].float()
            target = torch.as_tensor(gold_tok[np.asarray(batch)], device=logits.device)
            loss = torch.nn.functional.cross_entropy(logits, target)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(float(loss.detach()))
            steps += 1
            if cfg.max_steps and steps >= cfg.max_steps:
                done = True
                break
        if done:
            break
    model.eval()
    return model, {"steps": steps, "first_loss": losses[0] if losses else None,
                   "last_loss": losses[-1] if losses else None}


def run_tst_llm(frame, cfg: LlmConfig, *, group_column: str | None = None, accelerator=None,
                progress=None) -> LlmTstResult:
    """Zero-shot, then k-fold LoRA TsT of ``cfg.model`` on the frame's mc / yes-no questions."""
    import torch
    from accelerate import Accelerator

    from ..blind.scoring import AnswerTokens
    from .cv import fold_assignments
    from .rf import group_units

    accelerator = accelerator or Accelerator(cpu=not torch.cuda.is_available())
    tok, model_factory = _load(cfg)
    sel, texts, K, gold, yn, chat_active = _prompts(frame, tok, cfg.chat_template)
    if len(sel) < cfg.k:
        raise InputError(f"TsT-LLM needs at least k={cfg.k} multiple-choice or yes/no questions; found {len(sel)}")
    tokens_mc = AnswerTokens.letters(tok, int(K[~yn].max())) if (~yn).any() else None
    tokens_yn = AnswerTokens.yes_no(tok) if yn.any() else None
    gold_tok = np.array([(tokens_yn if yn[i] else tokens_mc).groups[int(gold[i])][0] for i in range(len(sel))])
    enc = _encode(tok, texts, not chat_active, cfg.max_length)
    rows = np.arange(len(sel))
    # zero-shot
    base = accelerator.prepare(model_factory())
    base.eval()
    zs = _score(accelerator, base, tok, enc, rows, K, gold, yn, tokens_mc, tokens_yn, cfg.score_batch_size)
    del base
    # folds (same engine as TsT-RF; one repeat)
    q = frame.questions
    cat_codes, cat_labels = frame.category_codes("category")
    groups = group_units(q, group_column)
    assign = fold_assignments(cat_codes[sel], None if groups is None else groups[sel], k=cfg.k, repeats=1,
                              seed=cfg.seed)[0]
    s = np.full(len(sel), np.nan)
    fold_info = []
    for f in range(cfg.k):
        test = np.flatnonzero(assign == f)
        train = np.flatnonzero(assign != f)
        model, info = _train_fold(accelerator, cfg, model_factory, tok, enc, train, gold_tok, cfg.seed * 1000 + f)
        s[test] = _score(accelerator, model, tok, enc, test, K, gold, yn, tokens_mc, tokens_yn, cfg.score_batch_size)
        fold_info.append({"fold": f, "n_train": int(len(train)), "n_test": int(len(test)), **info})
        del model
        accelerator.free_memory()
        if progress is not None:
            progress()
    n_q = frame.n_questions
    full = {c: np.full(n_q, np.nan) for c in ("zs", "s")}
    full["zs"][sel] = zs
    full["s"][sel] = s
    fold_full = np.full(n_q, -1, dtype=np.int64)
    fold_full[sel] = assign
    per_q = pd.DataFrame({"question_id": q["question_id"].astype(str).to_numpy(),
                          "tst_llm_zero_shot": full["zs"], "tst_llm_s": full["s"],
                          "tst_llm_delta": full["s"] - full["zs"], "tst_llm_fold": fold_full})
    chance = 1.0 / K
    per_cat = []
    for c in np.unique(cat_codes[sel]):
        m = cat_codes[sel] == c
        per_cat.append({"category": cat_labels[c], "n": int(m.sum()), "zero_shot_mean_p_gold": float(zs[m].mean()),
                        "tst_mean_p_gold": float(s[m].mean()), "delta_tst": float((s - zs)[m].mean()),
                        "chance": float(chance[m].mean())})
    summary = {
        "method": "TsT-LLM", "model": cfg.model, "n_scored": int(len(sel)),
        "zero_shot_mean_p_gold": float(zs.mean()), "tst_mean_p_gold": float(s.mean()),
        "delta_tst": float((s - zs).mean()), "chance": float(chance.mean()),
        "scoring": "P(gold letter) restricted to the question's letters (blind runner logprob scoring)",
        "per_category": per_cat, "folds": fold_info, "config": asdict(cfg), "group_column": group_column,
        "fold_seed": cfg.seed,
    }
    return LlmTstResult(per_question=per_q, summary=summary)


def main(argv: list[str] | None = None) -> int:
    """``accelerate launch -m audit_hub.tst.llm --questions FILE --model DIR --out DIR``."""
    p = argparse.ArgumentParser(prog="python -m audit_hub.tst.llm", description=__doc__.splitlines()[0])
    p.add_argument("--questions", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--group-column", default=None)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--no-chat-template", action="store_true")
    p.add_argument("--trust-remote-code", action="store_true")
    a = p.parse_args(argv)
    import sys

    import torch
    from accelerate import Accelerator

    from ..errors import BenchauditError
    from ..frame.core import AuditFrame
    from ..hub.folders import atomic_dir, to_jsonable, write_hub_folder
    from ..readers.ingest import load_questions

    try:
        qdf = load_questions(a.questions)
        frame = AuditFrame.from_tables(qdf, None, questions_source=a.questions, sources=qdf.attrs.get("sources", []))
        cfg = LlmConfig(model=a.model, k=a.k, seed=a.seed, epochs=a.epochs, max_steps=a.max_steps,
                        batch_size=a.batch_size, lr=a.lr, lora_r=a.lora_r, lora_alpha=2 * a.lora_r, dtype=a.dtype,
                        chat_template=not a.no_chat_template, trust_remote_code=a.trust_remote_code)
        acc = Accelerator(cpu=not torch.cuda.is_available())
        res = run_tst_llm(frame, cfg, group_column=a.group_column, accelerator=acc)
    except BenchauditError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if acc.is_main_process:
        from .output import yaml_configs

        card = yaml_configs([("questions", "train", "data/questions-*.parquet")]) + (
            "\n# TsT-LLM\n\n"
            f"- model: {cfg.model}\n- zero-shot mean P(gold): {100 * res.summary['zero_shot_mean_p_gold']:.1f}%\n"
            f"- TsT mean P(gold): {100 * res.summary['tst_mean_p_gold']:.1f}%\n"
            f"- ΔTsT: {100 * res.summary['delta_tst']:+.1f} points\n")
        with atomic_dir(a.out, command="tst-llm", inputs=[a.questions, a.model]) as tmp:
            write_hub_folder(tmp, {"questions": res.per_question}, card, to_jsonable({"tst_llm": res.summary}),
                             {"tool": "benchaudit", "command": ["python", "-m", "audit_hub.tst.llm", *sys.argv[1:]],
                              "inputs": frame.sources})
        print(f"TsT-LLM zero-shot {100 * res.summary['zero_shot_mean_p_gold']:.1f}% -> TsT "
              f"{100 * res.summary['tst_mean_p_gold']:.1f}% (ΔTsT {100 * res.summary['delta_tst']:+.1f}) -> {a.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
