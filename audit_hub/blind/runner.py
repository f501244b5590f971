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
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputError
from ..fmt import count, pct
from ..schema import LETTERS
from . import shards as sh
from .common import BlindResult, Progress, QuestionLists, exact_hit, load_question_table, parse_max_memory
from .inputs import VISION_HINT, collate
from .prompt import ChatFormatter, PromptBuilder
from .scoring import AnswerTokens, ForwardFn, answer_scores, restricted_log_probs

MODES = ("logprob", "generate")
BACKENDS = ("transformers", "openai")
IMAGE_MODES = ("none", "blank")
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
    prompt_style: str = "vlmevalkit"
    image_mode: str = "none"
    device_map: str | None = None
    max_memory: str | None = None
    # served backend (--backend openai)
    backend: str = "transformers"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 16
    request_timeout: float = 120.0
    max_retries: int = 6
    top_logprobs: int = 20
    retry_base_s: float = 1.0  # first backoff step (tests lower it)
    # a model already in memory (scripts/gpu_check.sh builds a random 7B-shaped one on the GPU);
    # ``model`` then names a folder holding its config and tokenizer
    model_object: Any = None
    # CPU threads of the forward passes: "auto" (measured, see audit_hub.blind.threads) or a count
    threads: int | str = "auto"

    def validate(self) -> None:
        from .prompt import check_style

        check_style(self.prompt_style)
        if self.backend not in BACKENDS:
            raise InputError(f"--backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.image_mode not in IMAGE_MODES:
            raise InputError(f"--image-mode must be one of {IMAGE_MODES}, got {self.image_mode!r}")
        from .threads import parse_threads

        self.threads = parse_threads(self.threads)
        if self.backend == "openai" and self.threads != "auto":
            raise InputError("--threads sets the CPU threads of a local model's forward passes; it has no effect "
                             "with --backend openai")
        if self.backend == "openai":
            from .served import validate_served

            validate_served(self)
        elif self.base_url is not None:
            raise InputError("--base-url is for --backend openai")
        if self.device_map is not None and self.device_map not in ("auto", "balanced", "balanced_low_0",
                                                                   "sequential"):
            raise InputError(f"--device-map must be auto, balanced, balanced_low_0 or sequential, "
                             f"got {self.device_map!r}")
        if self.max_memory is not None:
            if self.device_map is None:
                raise InputError("--max-memory needs --device-map")
            parse_max_memory(self.max_memory)
        if self.mode not in MODES:
            raise InputError(f"--mode must be one of {MODES}, got {self.mode!r}")
        if self.truncate not in TRUNCATE:
            raise InputError(f"--truncate must be one of {TRUNCATE}, got {self.truncate!r}")
        if self.dtype not in DTYPES:
            raise InputError(f"--dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        from ..bounds import check_range

        for name, value in (("--batch-size", self.batch_size), ("--max-new-tokens", self.max_new_tokens),
                            ("--limit", self.limit), ("--max-length", self.max_length)):
            check_range(name, value)


# ---------------------------------------------------------------------------------------- inputs
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


def _load_processor(cfg: BlindConfig, required: bool):
    from transformers import AutoProcessor

    kw = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    try:
        return AutoProcessor.from_pretrained(cfg.model, **kw)
    except ImportError as e:
        if not required:
            return None
        missing = re.search(r"\b(torchvision|PIL|pillow|av|decord|timm)\b", str(e), flags=re.IGNORECASE)
        raise InputError(f"--image-mode blank needs the processor of {cfg.model!r}, which needs "
                         f"{missing.group(1).lower() if missing else 'a missing package'}: {VISION_HINT}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        if not required:
            return None
        raise InputError(f"--image-mode blank needs the processor of {cfg.model!r}, which could not be loaded "
                         f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None


def load_tokenizer(cfg: BlindConfig, config):
    """Tokenizer (left padding, a pad token) and, when needed, the processor.

    The text-only path needs only the tokenizer and a chat template; the processor is loaded when the
    tokenizer has no chat template (a VLM whose template lives in the processor) or for
    ``--image-mode blank`` (it must then load: a missing package is named in one line).
    """
    from transformers import AutoTokenizer

    kw = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    processor = None
    try:
        tok = AutoTokenizer.from_pretrained(cfg.model, **kw)
    except (OSError, ValueError, KeyError):
        tok = None
    if cfg.image_mode == "blank":
        try:
            import PIL  # noqa: F401
        except ImportError:
            raise InputError(f"--image-mode blank needs pillow: {VISION_HINT}") from None
        processor = _load_processor(cfg, required=True)
        if getattr(processor, "image_processor", None) is None:
            raise InputError(f"--image-mode blank: the processor of {cfg.model!r} has no image processor")
        tok = tok or getattr(processor, "tokenizer", None)
    elif tok is None or (getattr(config, "vision_config", None) is not None
                         and not getattr(tok, "chat_template", None)):
        processor = _load_processor(cfg, required=False)
        tok = tok or getattr(processor, "tokenizer", None)
    if tok is None:
        raise InputError(f"no tokenizer could be loaded for {cfg.model!r}")
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    if tok.pad_token_id is None:
        raise InputError(f"the tokenizer of {cfg.model!r} has no pad, eos or unk token to pad with")
    return tok, processor


def _process_gpus(state) -> list[int]:
    """GPUs of this process for ``--device-map``: the node's GPUs split evenly among its local processes."""
    import torch

    n = torch.cuda.device_count()
    if n == 0:
        return []
    local_n = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    r = state.local_process_index
    if local_n > n:
        raise InputError(f"--device-map with {local_n} processes on a node with {n} GPU(s): use at most one "
                         "process per GPU group")
    per = n // local_n
    return list(range(r * per, (r + 1) * per))


def load_model(cfg: BlindConfig, config, device, state=None):
    """A causal LM, or an image-text-to-text model used with text only; eval mode.

    Returns ``(model, is_vlm, input_device)``. With ``--device-map`` the weights are placed by
    accelerate's big-model loading across this process's GPUs (and CPU/disk as ``--max-memory`` allows).
    """
    import transformers

    dtype = _torch_dtype(cfg.dtype, device)
    kw: dict[str, Any] = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code, "dtype": dtype}
    offload_dir = None
    if cfg.device_map:
        mm = parse_max_memory(cfg.max_memory) if cfg.max_memory else None
        gpus = _process_gpus(state) if state is not None else []
        if gpus and (state is None or state.num_processes > 1):
            mm = {k: v for k, v in (mm or {}).items() if not isinstance(k, int) or k in gpus} or None
            if mm is None or not any(isinstance(k, int) for k in mm):
                import torch

                mm = {**(mm or {}), **{g: torch.cuda.get_device_properties(g).total_memory for g in gpus}}
        kw["device_map"] = cfg.device_map
        if mm:
            kw["max_memory"] = mm
        if mm:  # anything that does not fit goes to disk (accelerate needs a folder for it)
            import tempfile

            offload_dir = tempfile.mkdtemp(prefix="benchaudit-offload-")
            kw["offload_folder"] = offload_dir
    try:
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(cfg.model, **kw)
            is_vlm = False
        except ValueError:
            cls = getattr(transformers, "AutoModelForImageTextToText", None)
            if cls is None:
                raise
            model = cls.from_pretrained(cfg.model, **kw)
            is_vlm = True
    except ImportError as e:
        raise InputError(f"cannot load {cfg.model!r}: {str(e).splitlines()[0]}") from None
    except (InputError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - corrupt weights (a bogus safetensors header), wrong shapes, ...
        from ..escape import one_line

        if offload_dir:
            import shutil

            shutil.rmtree(offload_dir, ignore_errors=True)
        raise InputError(f"cannot load the weights of {cfg.model!r} ({type(e).__name__}: "
                         f"{one_line(str(e) or type(e).__name__, 200)}); nothing written") from None
    if cfg.device_map:
        devs = {v for v in getattr(model, "hf_device_map", {}).values()}
        ints = sorted(d for d in devs if isinstance(d, int))
        input_device = f"cuda:{ints[0]}" if ints else ("cuda:0" if "cuda" in str(devs) else "cpu")
        model._benchaudit_offload_dir = offload_dir
    else:
        model.to(device)
        input_device = device
    model.eval()
    import torch

    return model, is_vlm, torch.device(input_device)


# ---------------------------------------------------------------------------------------- helpers
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


# ---------------------------------------------------------------------------------------- main entry
def _check_text_only(cfg: BlindConfig, builder: PromptBuilder, chat: ChatFormatter) -> None:
    """A model without a chat template needs an explicit prompt choice (raw text is a different task)."""
    if chat.active or not cfg.chat_template or builder.template is not None or builder.style == "plain":
        return
    raise InputError(f"{cfg.model!r} has no chat template (tokenizer or processor): pass --prompt-style plain "
                     "(a raw completion prompt ending in 'Answer:'), a --prompt-template, or --no-chat-template "
                     "to send the chosen style's text without one")


def _fingerprint(cfg: BlindConfig, mconfig, model_name: str, builder: PromptBuilder, chat: ChatFormatter,
                 limit: int | None) -> dict:
    """What a resumed run must share with the run it resumes (model, prompt, template, decoding)."""
    import hashlib

    return {
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
        "image_mode": cfg.image_mode,
        "benchaudit_version": __version__,
    }


def _encode_share(cfg: BlindConfig, state, mconfig, tok, processor, chat: ChatFormatter, qs: QuestionLists,
                  mine: list[int]):
    """Tokenise this process's share; refuse prompts whose text-only form carries image tokens."""
    from accelerate.utils import gather_object

    from .inputs import encode_blank, encode_text, image_token_ids

    if cfg.image_mode == "blank":
        return encode_blank(processor, chat, [qs.prompts[i] for i in mine])
    enc = encode_text(tok, chat, [chat(qs.prompts[i]) for i in mine])
    img_ids = image_token_ids(mconfig, tok, processor)
    bad = [(qs.qid[i], sorted(img_ids.intersection(ids))) for i, ids in zip(mine, enc.ids)
           if img_ids.intersection(ids)]
    bad = gather_object(bad) if state.num_processes > 1 else bad  # every process raises, none waits
    if bad:
        q0, found = sorted(bad)[0]
        raise InputError(f"the text-only prompt of question {q0!r} (and {len(bad) - 1} more) contains image "
                         f"token(s) {found}: the chat template or prompt of {cfg.model!r} inserts an image "
                         "placeholder, so it cannot run text-only; use --image-mode blank, or "
                         "--no-chat-template / --prompt-template", file=cfg.questions, column="question")
    return enc


def _fit_items(cfg: BlindConfig, state, enc, mine: list[int], qs: QuestionLists, limit: int | None) -> list[dict]:
    """This process's work items, each fitted to the context limit (left-truncated only when asked)."""
    from accelerate.utils import gather_object

    logprob_kind = {"mc", "yesno"} if cfg.mode == "logprob" else set()
    items, overflow = [], []
    for i, ids, extra in zip(mine, enc.ids, enc.per_token):
        gen = qs.atype[i] not in logprob_kind
        need = cfg.max_new_tokens if gen else 0
        truncated = False
        if limit is not None and len(ids) + need > limit:
            if cfg.truncate == "error" or limit - need < 1 or cfg.image_mode == "blank":
                overflow.append((qs.qid[i], len(ids)))
                continue
            ids = ids[len(ids) - (limit - need):]
            truncated = True
        items.append({"i": i, "ids": list(ids), "extra": extra, "gen": gen, "truncated": truncated})
    all_overflow = gather_object(overflow) if state.num_processes > 1 else overflow
    if all_overflow:
        first = sorted(all_overflow)[:3]
        raise InputError(
            f"{len(all_overflow)} prompt(s) do not fit the model's context of {limit} tokens (generated items "
            f"also need room for --max-new-tokens {cfg.max_new_tokens}); first: "
            f"{', '.join(f'{q} ({n} prompt tokens)' for q, n in first)}. Pass --truncate left to keep the last "
            "tokens of such prompts (rows are then marked truncated; not with --image-mode blank), or "
            "--max-length to override the limit", file=cfg.questions, column="question")
    return items


def _prepare_output(cfg: BlindConfig, state, fp: dict, builder: PromptBuilder, chat: ChatFormatter,
                    rows: dict, merged_rows: dict | None) -> None:
    """The main process sets up the output folder and its run configuration; every process waits for it."""
    out = Path(cfg.out)
    state.wait_for_everyone()
    if state.is_main_process:
        sh.open_output(out, [cfg.questions, cfg.model])
        if cfg.overwrite:
            sh.reset_output(out)
        if cfg.overwrite or sh.read_run_config(out) is None:
            sh.write_run_config(out, {
                "fingerprint": fp, "fingerprint_sha256": sh.fingerprint_digest(fp),
                "questions": cfg.questions, "column_map": cfg.column_map, "prompt_template": builder.template,
                "prompt_style": None if builder.template is not None else builder.style,
                "image_mode": cfg.image_mode, "backend": "transformers",
                "device_map": cfg.device_map, "max_memory": cfg.max_memory,
                "chat_template_applied": chat.active, "batch_size": cfg.batch_size,
                "created_unix": time.time(), "seed": 0, "question_rows": rows,
            })
        elif merged_rows is not None:  # resumed with more questions (a larger --limit): record them too
            sh.write_run_config(out, {**sh.read_run_config(out), "question_rows": merged_rows})
    state.wait_for_everyone()  # nobody writes a shard before the output folder is set up


def _base_row(it: dict, qs: QuestionLists, model_name: str) -> dict:
    return {"question_id": qs.qid[it["i"]], "model": model_name, "arm": "blind", "n_prompt_tokens": len(it["ids"]),
            "truncated": it["truncated"], "option_logprobs": None, "gold_prob": None, "letter_mass": None}


def _logprob_row(it: dict, r: int, lt, yt, qs: QuestionLists, model_name: str) -> dict:
    """One scored row: the option (or yes/no) with the highest restricted log-probability."""
    i = it["i"]
    if qs.atype[i] == "mc":
        scores, log_z = lt[0][r].tolist(), float(lt[1][r])
        k = len(qs.options[i])
        labels = LETTERS[:k]
    else:
        scores, log_z = yt[0][r].tolist(), float(yt[1][r])
        k = 2
        labels = ("yes", "no")
    lp = restricted_log_probs(scores, k)
    j = max(range(k), key=lambda x: (lp[x], -x))
    g = labels.index(qs.gold[i]) if qs.gold[i] in labels else None
    m = max(scores[:k])
    mass = math.exp(m + math.log(sum(math.exp(s - m) for s in scores[:k])) - log_z)
    row = _base_row(it, qs, model_name)
    row.update({
        "prediction": labels[j] if qs.atype[i] == "mc" else labels[j].capitalize(),
        "answer": labels[j], "hit_exact": j == g, "option_logprobs": lp,
        "gold_prob": math.exp(lp[g]) if g is not None else None, "letter_mass": mass,
        "scoring": "logprob",
    })
    return row


def _answer_tokens(tok, qs: QuestionLists, items: list[dict]) -> tuple:
    """The token groups of the option letters and of yes/no that logprob scoring reads (None where no item
    needs them); letters without a single-token form, or sharing one, are refused here, before the weights
    are loaded and before anything is written."""
    kmax = max([len(qs.options[it["i"]]) for it in items if qs.atype[it["i"]] == "mc" and not it["gen"]],
               default=0)
    letters = AnswerTokens.letters(tok, kmax) if kmax else None
    yes_no = (AnswerTokens.yes_no(tok) if any(qs.atype[it["i"]] == "yesno" and not it["gen"] for it in items)
              else None)
    return letters, yes_no


class _Scorer:
    """Scores batches of work items with one loaded model and writes their rows to this process's shards."""

    def __init__(self, cfg: BlindConfig, model, tok, forward: ForwardFn, in_device, shared, qs: QuestionLists,
                 model_name: str, answer_tokens: tuple):
        self.cfg, self.model, self.tok, self.forward, self.in_device, self.shared = (
            cfg, model, tok, forward, in_device, shared)
        self.qs, self.model_name, self.writer, self.progress = qs, model_name, None, None
        self.letter_tokens, self.yn_tokens = answer_tokens

    def _collate(self, batch: list[dict]):
        return collate([it["ids"] for it in batch], [it["extra"] for it in batch], self.shared,
                       self.tok.pad_token_id, self.in_device)

    def _emit(self, rows: list[dict]) -> None:
        self.writer.add(rows)
        self.writer.flush()
        self.progress.advance(len(rows))

    def logprob_batch(self, batch: list[dict]) -> None:
        ids, mask, extras = self._collate(batch)
        last = self.forward(ids, mask, **extras)
        lt = answer_scores(last, self.letter_tokens) if self.letter_tokens is not None else None
        yt = answer_scores(last, self.yn_tokens) if self.yn_tokens is not None else None
        self._emit([_logprob_row(it, r, lt, yt, self.qs, self.model_name) for r, it in enumerate(batch)])

    def generate_batch(self, batch: list[dict]) -> None:
        from ..answers import extract_answer

        ids, mask, extras = self._collate(batch)
        gen_out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=self.cfg.max_new_tokens,
                                      do_sample=False, num_beams=1, pad_token_id=self.tok.pad_token_id, **extras)
        texts_out = self.tok.batch_decode(gen_out[:, ids.shape[1]:], skip_special_tokens=True)
        rows = []
        for it, text in zip(batch, texts_out):
            i = it["i"]
            extracted = extract_answer(text, list(self.qs.options[i]), self.qs.atype[i])
            row = _base_row(it, self.qs, self.model_name)
            row.update({"prediction": text, "answer": None if extracted is None else str(extracted),
                        "hit_exact": exact_hit(extracted, self.qs.gold[i], self.qs.atype[i]), "scoring": "generate"})
            rows.append(row)
        self._emit(rows)

    def run(self, items: list[dict], writer, progress) -> dict | None:
        """Log-probability items first, then generated ones; each kind longest first. Returns what
        ``--threads`` did (``manifest.json``'s ``params.cpu_threads``; None on a GPU with ``auto``)."""
        import torch

        from .threads import ThreadChooser, candidate_counts, env_threads

        self.writer, self.progress = writer, progress
        on_cpu = str(self.in_device).startswith("cpu")
        before = torch.get_num_threads()
        chooser, fixed = None, None
        if self.cfg.threads != "auto":
            fixed = int(self.cfg.threads)
        elif on_cpu and env_threads() is None:
            chooser = ThreadChooser(candidate_counts(before))
        size = self.cfg.batch_size
        lp_items = sorted((it for it in items if not it["gen"]), key=lambda it: (-len(it["ids"]), it["i"]))
        gen_items = sorted((it for it in items if it["gen"]), key=lambda it: (-len(it["ids"]), it["i"]))
        kinds = ((lp_items, self.logprob_batch, 0), (gen_items, self.generate_batch, self.cfg.max_new_tokens))
        current = before
        try:
            if fixed is not None:
                torch.set_num_threads(fixed)
            with torch.inference_mode():
                for kind_items, score, extra in kinds:
                    if chooser is not None:
                        chooser.new_kind()
                    for b in range(0, len(kind_items), size):
                        batch = kind_items[b: b + size]
                        if chooser is None:
                            score(batch)
                            continue
                        n = chooser.next_count()
                        if n != current:
                            torch.set_num_threads(n)
                            current = n
                        t0 = time.perf_counter()
                        score(batch)
                        chooser.record(n, time.perf_counter() - t0,
                                       len(batch) * (max(len(it["ids"]) for it in batch) + extra))
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)  # a library caller's session keeps its own setting
        if chooser is not None:
            return chooser.summary()
        if fixed is not None:
            return {"mode": "fixed", "threads": fixed}
        return {"mode": "OMP_NUM_THREADS", "threads": before} if on_cpu else None


def _finish(cfg: BlindConfig, state, model, qid: list[str], summary: dict) -> BlindResult:
    """Merge the shards (main process), write the card, push when asked, print the one-line summary."""
    out = Path(cfg.out)
    offload = getattr(model, "_benchaudit_offload_dir", None)
    if offload:
        import shutil

        shutil.rmtree(offload, ignore_errors=True)
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
        rc = sh.read_run_config(out) or {}
        rc["n_redacted"] = int(rc.get("n_redacted", 0)) + int(summary.get("n_redacted") or 0)  # summed over reruns
        sh.write_run_config(out, rc)
        sh.finish_output(out, summary, cfg.questions, inputs=[cfg.questions], command_line=["benchaudit", "blind"])
        result.table = df
        if cfg.push_to_hub:
            from .hub import push_blind_to_hub

            result.url = push_blind_to_hub(out, cfg.push_to_hub, private=cfg.private)
        acc = summary["accuracy_exact"]
        qps = summary["questions_per_s"]
        print(f"blind: {summary['n_questions']} questions in {out / sh.MERGED_REL} "
              f"({summary['n_new']} new, {summary['n_resumed']} already done) on {count(state.num_processes, 'process', 'processes')}, "
              f"{summary['elapsed_s']:.1f} s, {qps or 0:.1f} q/s; exact-match accuracy {pct(acc)}"
              + (f"; {summary['n_truncated']} truncated" if summary["n_truncated"] else "")
              + (f"; pushed to {result.url}" if result.url else ""), file=sys.stdout, flush=True)
    state.wait_for_everyone()
    return result


def run_blind(cfg: BlindConfig) -> BlindResult:
    """Run (or resume) a blind run; every process calls this. See the module docstring.

    Every check of the inputs (options, questions, model files, chat template, image tokens, context
    length) runs before anything is written to ``cfg.out``.
    """
    cfg.validate()
    sh.check_output_folder(Path(cfg.out), [cfg.questions, cfg.model])  # before anything heavy is imported
    if cfg.backend == "openai":
        from ..errors import require_modules

        require_modules("benchaudit blind --backend openai", ("openai",), extra="api")
        from .served import run_served

        return run_served(cfg)
    from ..errors import require_modules

    require_modules("benchaudit blind", ("torch", "transformers", "accelerate"))
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
    builder = PromptBuilder.from_option(cfg.prompt_template, cfg.prompt_style)
    chat = ChatFormatter(tok, processor, enabled=cfg.chat_template)
    _check_text_only(cfg, builder, chat)
    limit = _context_limit(mconfig, cfg.max_length)

    fp = _fingerprint(cfg, mconfig, model_name, builder, chat, limit)
    sh.check_fingerprint(out, fp, cfg.overwrite)
    rows = sh.question_row_hashes(questions)
    merged_rows = sh.check_question_rows(out, rows, cfg.overwrite)
    done = set() if cfg.overwrite else sh.done_ids(out)
    qs = QuestionLists.from_table(questions, builder)
    pending = [i for i in range(len(questions)) if qs.qid[i] not in done]
    mine = _round_robin_split(state, sorted(pending, key=lambda i: (-len(qs.prompts[i]), i)))
    # Tokenise this process's share and check image tokens and the context limit before loading the model.
    enc = _encode_share(cfg, state, mconfig, tok, processor, chat, qs, mine)
    items = _fit_items(cfg, state, enc, mine, qs, limit)

    answer_tokens = _answer_tokens(tok, qs, items)
    if not (state.is_main_process and cfg.progress):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one set of loading bars, not one per process; none with --no-progress
    if cfg.model_object is not None:
        model, is_vlm, in_device = cfg.model_object, False, next(cfg.model_object.parameters()).device
    else:
        model, is_vlm, in_device = load_model(cfg, mconfig, state.device, state)
    scorer = _Scorer(cfg, model, tok, ForwardFn(model, pass_position_ids=not is_vlm), in_device, enc.shared, qs,
                     model_name, answer_tokens)
    # the weights loaded and the answer tokens are usable (letters that share a token are refused): only now
    # is anything written to the output folder
    _prepare_output(cfg, state, fp, builder, chat, rows, merged_rows)
    fail_after = os.environ.get(FAIL_HOOK_ENV)
    writer = sh.ShardWriter(out, state.process_index, fail_after=int(fail_after) if fail_after else None)
    progress = Progress(cfg.progress and state.is_main_process, len(items),
                        f"blind {model_name}" + (f" (rank 0 of {state.num_processes})" if state.num_processes > 1 else ""))
    t0 = time.perf_counter()
    try:
        cpu_threads = scorer.run(items, writer, progress)
    finally:
        progress.close()
    elapsed = time.perf_counter() - t0
    n_new = int(sum(gather_object([len(items)]) if state.num_processes > 1 else [len(items)]))
    n_redacted = int(sum(gather_object([writer.redacted]) if state.num_processes > 1 else [writer.redacted]))
    state.wait_for_everyone()
    summary = {"model": model_name, "n_new": n_new, "n_resumed": len(questions) - len(pending),
               "image_mode": cfg.image_mode, "prompt_style": None if builder.template is not None else builder.style,
               "processes": state.num_processes, "elapsed_s": elapsed,
               "questions_per_s": n_new / elapsed if elapsed > 0 else None, "n_redacted": n_redacted,
               "cpu_threads": cpu_threads}
    return _finish(cfg, state, model, qs.qid, summary)
