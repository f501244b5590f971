"""The blind runner: text-only predictions of a language model on a benchmark's questions.

Runs under ``accelerate`` (one process, several GPUs, several nodes): questions are sorted by prompt
length, dealt round-robin to the processes (through ``PartialState.split_between_processes``, so that
every process gets a similar mix of long and short prompts), batched with left padding, and scored;
each process writes its own Parquet shards as it goes, and the main process merges them at the end
(see :mod:`audit_hub.blind.shards`). The output folder must be on a filesystem every process can see.

Scoring (see :mod:`audit_hub.blind.scoring`): ``logprob`` mode (default) scores multiple-choice and
yes/no items with one forward pass each; numeric and free-form items are always generated greedily
and parsed with the exact-match parser. ``generate`` mode generates for every item.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputError
from ..schema import LETTERS
from . import shards as sh
from .prompt import ChatFormatter, PromptBuilder
from .scoring import AnswerTokens, ForwardFn, answer_scores, pad_left, restricted_log_probs

MODES = ("logprob", "generate")
TRUNCATE = ("error", "left")
DTYPES = {"auto": None, "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
          "float32": "float32", "fp32": "float32"}
FAIL_HOOK_ENV = "BENCHAUDIT_BLIND_FAIL_AFTER_SHARDS"


@dataclass
class BlindConfig:
    """Settings of one blind run (the CLI options, one to one)."""

    model: str
    questions: str
    out: str
    model_name: str | None = None
    column_map: dict[str, str] | None = None
    prompt_template: str | None = None
    chat_template: bool = True
    mode: str = "logprob"
    batch_size: int = 8
    max_new_tokens: int = 32
    dtype: str = "auto"
    trust_remote_code: bool = False
    revision: str | None = None
    max_length: int | None = None
    truncate: str = "error"
    overwrite: bool = False
    limit: int | None = None
    push_to_hub: str | None = None
    private: bool = False
    progress: bool = True
    cpu: bool = False
    keep_shards: bool = False

    def validate(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"--mode must be one of {MODES}, got {self.mode!r}")
        if self.truncate not in TRUNCATE:
            raise InputError(f"--truncate must be one of {TRUNCATE}, got {self.truncate!r}")
        if self.dtype not in DTYPES:
            raise InputError(f"--dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.batch_size < 1:
            raise InputError("--batch-size must be at least 1")
        if self.max_new_tokens < 1:
            raise InputError("--max-new-tokens must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise InputError("--limit must be at least 1")


@dataclass
class BlindResult:
    """What a process returns: the summary (all processes) and the merged table (main process)."""

    summary: dict
    table: Any = None
    out: Path | None = None
    url: str | None = None
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- inputs
def load_question_table(spec: str, column_map: dict[str, str] | None = None):
    """Questions through the core reader, validated by :class:`AuditFrame` (images are ignored)."""
    from ..frame import AuditFrame

    try:
        from ..ingest import load_questions
    except ImportError:  # pragma: no cover - only while the core reader is missing
        load_questions = None
    if load_questions is not None:
        q = load_questions(spec, column_map=column_map)
        if not hasattr(q, "columns") and hasattr(q, "questions"):
            q = q.questions
    else:  # pragma: no cover
        import pandas as pd

        if spec.endswith(".parquet"):
            q = pd.read_parquet(spec)
        elif spec.endswith((".jsonl", ".json")):
            q = pd.read_json(spec, lines=spec.endswith(".jsonl"))
        else:
            raise InputError("cannot read questions without audit_hub.ingest", file=spec)
        if column_map:
            q = q.rename(columns={v: k for k, v in column_map.items()})
    return AuditFrame.from_tables(q, questions_source=spec).questions


def default_model_name(model: str) -> str:
    p = Path(model)
    return p.resolve().name if p.is_dir() else model


def _torch_dtype(name: str, device):
    import torch

    resolved = DTYPES[name] or ("bfloat16" if device.type == "cuda" else "float32")
    return getattr(torch, resolved)


def _context_limit(config, override: int | None) -> int | None:
    if override:
        return int(override)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = getattr(text, attr, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def load_tokenizer(cfg: BlindConfig, config):
    """Tokenizer (left padding, a pad token) and, for image-text-to-text models, the processor."""
    from transformers import AutoTokenizer

    kw = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    processor = None
    try:
        tok = AutoTokenizer.from_pretrained(cfg.model, **kw)
    except (OSError, ValueError, KeyError):
        tok = None
    if tok is None or (getattr(config, "vision_config", None) is not None and not getattr(tok, "chat_template", None)):
        try:
            from transformers import AutoProcessor

            processor = AutoProcessor.from_pretrained(cfg.model, **kw)
            tok = tok or getattr(processor, "tokenizer", None)
        except (OSError, ValueError, KeyError, ImportError):
            processor = None
    if tok is None:
        raise InputError(f"no tokenizer could be loaded for {cfg.model!r}")
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    if tok.pad_token_id is None:
        raise InputError(f"the tokenizer of {cfg.model!r} has no pad, eos or unk token to pad with")
    return tok, processor


def load_model(cfg: BlindConfig, config, device):
    """A causal LM, or an image-text-to-text model used with text only; eval mode on ``device``."""
    import transformers

    dtype = _torch_dtype(cfg.dtype, device)
    kw = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code, "dtype": dtype}
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(cfg.model, **kw)
        is_vlm = False
    except ValueError:
        cls = getattr(transformers, "AutoModelForImageTextToText", None)
        if cls is None:
            raise
        model = cls.from_pretrained(cfg.model, **kw)
        is_vlm = True
    model.to(device)
    model.eval()
    return model, is_vlm


# ---------------------------------------------------------------------------------------- helpers
def _exact(extracted, gold: str, answer_type: str) -> bool | None:
    from ..answers import score_exact

    v = score_exact(extracted, gold, answer_type)
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    try:
        iv = int(v)
    except (TypeError, ValueError):
        return None
    return None if iv < 0 else bool(iv)


def _round_robin_split(state, order: list[int]) -> list[int]:
    """This process's share of ``order`` (sorted by length): items ``rank, rank+n, ...``.

    Arranged so that ``split_between_processes`` (contiguous chunks) hands out exactly these.
    """
    n, r = state.num_processes, state.process_index
    arranged = [x for k in range(n) for x in order[k::n]]
    with state.split_between_processes(arranged) as mine:
        mine = list(mine)
    if mine != order[r::n]:  # a different chunking rule in some accelerate version
        mine = order[r::n]
    return mine


class _Progress:
    """rich progress bar on the main process, with questions per second."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.bar = None
        self.t0 = time.perf_counter()
        self.done = 0
        if enabled and total > 0:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[qps]} q/s"), TimeRemainingColumn(),
                                console=Console(stderr=True), transient=False)
            self.task = self.bar.add_task(label, total=total, qps="-")
            self.bar.start()

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            dt = max(time.perf_counter() - self.t0, 1e-9)
            self.bar.update(self.task, advance=n, qps=f"{self.done / dt:.1f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------------------------------- main entry
def run_blind(cfg: BlindConfig) -> BlindResult:
    """Run (or resume) a blind run; every process calls this. See the module docstring."""
    cfg.validate()
    sh.check_output_folder(Path(cfg.out), [cfg.questions, cfg.model])  # before anything heavy is imported
    import torch
    from accelerate import PartialState
    from accelerate.utils import gather_object
    from transformers import AutoConfig

    use_cpu = cfg.cpu or not torch.cuda.is_available() or os.environ.get("ACCELERATE_USE_CPU", "").lower() in (
        "1", "true", "yes")
    state = PartialState(cpu=use_cpu)
    torch.manual_seed(0)
    out = Path(cfg.out)
    questions = load_question_table(cfg.questions, cfg.column_map)
    if cfg.limit is not None:
        questions = questions.iloc[: cfg.limit].reset_index(drop=True)
    model_name = cfg.model_name or default_model_name(cfg.model)

    try:
        mconfig = AutoConfig.from_pretrained(cfg.model, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load the model configuration of {cfg.model!r}: {e}") from None
    tok, processor = load_tokenizer(cfg, mconfig)
    builder = PromptBuilder.from_option(cfg.prompt_template)
    chat = ChatFormatter(tok, processor, enabled=cfg.chat_template)
    limit = _context_limit(mconfig, cfg.max_length)

    import hashlib

    fp = {
        "model": sh.model_fingerprint(cfg.model, mconfig.to_json_string(), getattr(mconfig, "_commit_hash", None),
                                      cfg.revision),
        "model_name": model_name,
        "prompt_sha256": builder.sha256,
        "chat_template_sha256": hashlib.sha256(chat.template_text.encode("utf-8")).hexdigest() if chat.active else None,
        "mode": cfg.mode,
        "dtype": cfg.dtype,
        "max_new_tokens": cfg.max_new_tokens,
        "truncate": cfg.truncate,
        "max_length": limit,
        "benchaudit_version": __version__,
    }
    sh.check_fingerprint(out, fp, cfg.overwrite)
    rows = sh.question_row_hashes(questions)
    merged_rows = sh.check_question_rows(out, rows, cfg.overwrite)
    state.wait_for_everyone()
    if state.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        if cfg.overwrite:
            sh.reset_output(out)
        if cfg.overwrite or sh.read_run_config(out) is None:
            sh.write_run_config(out, {
                "fingerprint": fp, "fingerprint_sha256": sh.fingerprint_digest(fp),
                "questions": cfg.questions, "column_map": cfg.column_map, "prompt_template": builder.template,
                "chat_template_applied": chat.active, "batch_size": cfg.batch_size,
                "created_unix": time.time(), "seed": 0, "question_rows": rows,
            })
        elif merged_rows is not None:  # resumed with more questions (a larger --limit): record them too
            sh.write_run_config(out, {**sh.read_run_config(out), "question_rows": merged_rows})
    state.wait_for_everyone()
    done = sh.done_ids(out)
    state.wait_for_everyone()  # nobody writes a shard before every process has read the done set

    qid = questions["question_id"].astype(str).tolist()
    atype = questions["answer_type"].tolist()
    options = questions["options"].tolist()
    prompts = [builder.render(questions["question"].iat[i], options[i], atype[i], questions["hint"].iat[i],
                              question_id=qid[i]) for i in range(len(questions))]
    pending = [i for i in range(len(questions)) if qid[i] not in done]
    order = sorted(pending, key=lambda i: (-len(prompts[i]), i))
    mine = _round_robin_split(state, order)

    # Tokenise this process's share and check the context limit before loading the model.
    texts = [chat(prompts[i]) for i in mine]
    enc = tok(texts, add_special_tokens=not chat.active)["input_ids"] if texts else []
    logprob_kind = {"mc", "yesno"} if cfg.mode == "logprob" else set()
    items, overflow = [], []
    for i, ids in zip(mine, enc):
        gen = atype[i] not in logprob_kind
        need = cfg.max_new_tokens if gen else 0
        truncated = False
        if limit is not None and len(ids) + need > limit:
            if cfg.truncate == "error" or limit - need < 1:
                overflow.append((qid[i], len(ids)))
                continue
            ids = ids[len(ids) - (limit - need):]
            truncated = True
        items.append({"i": i, "ids": list(ids), "gen": gen, "truncated": truncated})
    all_overflow = gather_object(overflow) if state.num_processes > 1 else overflow
    if all_overflow:
        first = sorted(all_overflow)[:3]
        raise InputError(
            f"{len(all_overflow)} prompt(s) do not fit the model's context of {limit} tokens (generated items "
            f"also need room for --max-new-tokens {cfg.max_new_tokens}); first: "
            f"{', '.join(f'{q} ({n} prompt tokens)' for q, n in first)}. Pass --truncate left to keep the last "
            "tokens of such prompts (rows are then marked truncated), or --max-length to override the limit",
            file=cfg.questions, column="question")

    if not state.is_main_process:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one set of loading bars, not one per process
    model, is_vlm = load_model(cfg, mconfig, state.device)
    forward = ForwardFn(model, pass_position_ids=not is_vlm)
    kmax = max([len(options[it["i"]]) for it in items if atype[it["i"]] == "mc" and not it["gen"]], default=0)
    letter_tokens = AnswerTokens.letters(tok, kmax) if kmax else None
    yn_tokens = AnswerTokens.yes_no(tok) if any(atype[it["i"]] == "yesno" and not it["gen"] for it in items) else None

    fail_after = os.environ.get(FAIL_HOOK_ENV)
    writer = sh.ShardWriter(out, state.process_index, fail_after=int(fail_after) if fail_after else None)
    progress = _Progress(cfg.progress and state.is_main_process, len(items),
                         f"blind {model_name}" + (f" (rank 0 of {state.num_processes})" if state.num_processes > 1 else ""))
    t0 = time.perf_counter()
    gold = questions["answer"].astype(str).tolist()

    def base_row(it) -> dict:
        i = it["i"]
        return {"question_id": qid[i], "model": model_name, "arm": "blind", "n_prompt_tokens": len(it["ids"]),
                "truncated": it["truncated"], "option_logprobs": None, "gold_prob": None, "letter_mass": None}

    lp_items = sorted((it for it in items if not it["gen"]), key=lambda it: (-len(it["ids"]), it["i"]))
    gen_items = sorted((it for it in items if it["gen"]), key=lambda it: (-len(it["ids"]), it["i"]))
    try:
        with torch.inference_mode():
            for b in range(0, len(lp_items), cfg.batch_size):
                batch = lp_items[b: b + cfg.batch_size]
                ids, mask = pad_left([it["ids"] for it in batch], tok.pad_token_id, state.device)
                last = forward(ids, mask)
                rows = []
                lt = answer_scores(last, letter_tokens) if letter_tokens is not None else None
                yt = answer_scores(last, yn_tokens) if yn_tokens is not None else None
                for r, it in enumerate(batch):
                    i = it["i"]
                    if atype[i] == "mc":
                        scores, log_z = lt[0][r].tolist(), float(lt[1][r])
                        k = len(options[i])
                        labels = LETTERS[:k]
                    else:
                        scores, log_z = yt[0][r].tolist(), float(yt[1][r])
                        k = 2
                        labels = ("yes", "no")
                    lp = restricted_log_probs(scores, k)
                    j = max(range(k), key=lambda x: (lp[x], -x))
                    g = labels.index(gold[i]) if gold[i] in labels else None
                    m = max(scores[:k])
                    mass = math.exp(m + math.log(sum(math.exp(s - m) for s in scores[:k])) - log_z)
                    row = base_row(it)
                    row.update({
                        "prediction": labels[j] if atype[i] == "mc" else labels[j].capitalize(),
                        "answer": labels[j], "hit_exact": j == g, "option_logprobs": lp,
                        "gold_prob": math.exp(lp[g]) if g is not None else None, "letter_mass": mass,
                        "scoring": "logprob",
                    })
                    rows.append(row)
                writer.add(rows)
                writer.flush()
                progress.advance(len(batch))
            if gen_items:
                from ..answers import extract_answer

                for b in range(0, len(gen_items), cfg.batch_size):
                    batch = gen_items[b: b + cfg.batch_size]
                    ids, mask = pad_left([it["ids"] for it in batch], tok.pad_token_id, state.device)
                    gen_out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=cfg.max_new_tokens,
                                             do_sample=False, num_beams=1, pad_token_id=tok.pad_token_id)
                    texts_out = tok.batch_decode(gen_out[:, ids.shape[1]:], skip_special_tokens=True)
                    rows = []
                    for it, text in zip(batch, texts_out):
                        i = it["i"]
                        extracted = extract_answer(text, list(options[i]), atype[i])
                        row = base_row(it)
                        row.update({"prediction": text, "answer": None if extracted is None else str(extracted),
                                    "hit_exact": _exact(extracted, gold[i], atype[i]), "scoring": "generate"})
                        rows.append(row)
                    writer.add(rows)
                    writer.flush()
                    progress.advance(len(batch))
    finally:
        progress.close()
    elapsed = time.perf_counter() - t0
    n_new_all = gather_object([len(items)]) if state.num_processes > 1 else [len(items)]
    n_new = int(sum(n_new_all))
    state.wait_for_everyone()

    summary = {"model": model_name, "n_new": n_new, "n_resumed": len(questions) - len(pending),
               "processes": state.num_processes, "elapsed_s": elapsed,
               "questions_per_s": n_new / elapsed if elapsed > 0 else None}
    result = BlindResult(summary=summary, out=out)
    if state.is_main_process:
        df = sh.merge(out, qid, keep_shards=cfg.keep_shards)
        he = df["hit_exact"].dropna()
        gp = df["gold_prob"].dropna()
        summary.update({
            "n_questions": len(df),
            "accuracy_exact": float(he.astype(bool).mean()) if len(he) else None,
            "mean_gold_prob": round(float(gp.astype(float).mean()), 6) if len(gp) else None,
            "n_truncated": int(df["truncated"].fillna(False).astype(bool).sum()),
        })
        (out / "README.md").write_text(sh.card_markdown(model_name, summary, cfg.questions), encoding="utf-8")
        result.table = df
        if cfg.push_to_hub:
            from .hub import push_blind_to_hub

            result.url = push_blind_to_hub(out, cfg.push_to_hub, private=cfg.private)
        acc = summary["accuracy_exact"]
        qps = summary["questions_per_s"]
        print(f"blind: {summary['n_questions']} questions in {out / sh.MERGED_REL} "
              f"({n_new} new, {summary['n_resumed']} already done) on {state.num_processes} process(es), "
              f"{elapsed:.1f} s, {qps or 0:.1f} q/s; exact-match accuracy "
              f"{'n/a' if acc is None else f'{acc:.4f}'}"
              + (f"; {summary['n_truncated']} truncated" if summary["n_truncated"] else "")
              + (f"; pushed to {result.url}" if result.url else ""), file=sys.stdout, flush=True)
    state.wait_for_everyone()
    return result
