"""Blind runs of served models: any OpenAI-compatible chat-completions server (``--backend openai``).

vLLM, SGLang, TGI, LM Studio and hosted APIs all speak this protocol. Requests go through the
maintained ``openai`` package's ``AsyncOpenAI`` client (``pip install 'benchaudit[api]'``); this module
only schedules them, retries them and turns responses into rows.

* One request per question: the prompt of ``--prompt-style`` as the single user turn (the server applies
  the model's chat template); the content is a plain string, so a blind request never carries an image.
  ``temperature=0``, ``max_tokens=--max-new-tokens``.
* Scoring (``scoring`` column): in ``logprob`` mode multiple-choice and yes/no requests ask for
  ``logprobs`` with ``top_logprobs`` (default 20). When the server returns them and at least one option
  letter is among the first generated token's top-k, the answer is the letter with the highest restricted
  log-probability (``scoring = top_logprobs``): as in local ``logprob`` mode, the forms ``"A"`` and
  ``" A"`` are combined by log-sum-exp and the option distribution is renormalised over the letters
  present. Letters absent from the top-k are listed in ``options_missing`` and have a null entry in
  ``option_logprobs`` (their probability is below the smallest top-k probability). Otherwise the
  generated text is parsed by the exact-match parser (``scoring = generate``). A server that rejects
  ``logprobs`` (HTTP 400 naming it) is asked without them from then on.
* Faults: 429, 408, 409 and 5xx, timeouts (``--request-timeout``), connection errors and malformed
  bodies are retried up to ``--max-retries`` times with exponential backoff and full jitter, waiting at
  least what ``Retry-After`` (or ``retry-after-ms``) asks. A rejected key (401/403) or an unknown model
  (404) stops the run at once: nothing more is requested. Any other failure is confined to its question.
* Rows are written as they complete, in the local runner's shard format. When some questions still fail
  after their retries, everything else is kept, the run exits non-zero with the count and the first
  error, and rerunning the same command requests only the missing questions.
* ``run_config.json`` records the base URL without credentials (user info, query and fragment are
  dropped), the model name the server reported, token usage and the number of requests (summed over
  reruns). The key (``OPENAI_API_KEY`` or the variable named by ``--api-key-env``) is never written or
  printed.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .. import __version__
from ..errors import BenchauditError, InputError
from ..fmt import count, pct, plain
from ..schema import LETTERS
from . import shards as sh
from .prompt import PromptBuilder

API_HINT = "pip install 'benchaudit[api]'"
RETRY_STATUS = (408, 409, 429)
BACKOFF_CAP_S = 60.0
RETRY_AFTER_CAP_S = 600.0


class ServedRunFailed(BenchauditError):
    """Some questions failed after all retries; the others are saved (exit code 1)."""

    exit_code = 1


class ServerRejected(BenchauditError):
    """The server refused every request (bad key, no such model): exit code 2, nothing more requested."""

    exit_code = 2


class MalformedResponse(Exception):
    """A 2xx response whose body is not a chat completion, or one of whose fields is malformed (retryable)."""


class RequestTimedOut(Exception):
    """No complete response (headers and body) within ``--request-timeout`` (retryable)."""


def _check_text(value, where: str) -> None:
    """A text field of a response must be valid Unicode (a lone surrogate such as ``\\ud800`` is not)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise MalformedResponse(f"malformed response: {where} is not valid Unicode (lone surrogate at "
                                    f"position {e.start})") from None


def _token_count(value, name: str) -> int | None:
    """``usage.<name>`` as a non-negative integer (None when absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        from ..escape import one_line

        raise MalformedResponse(f"malformed response: usage.{name} is {one_line(repr(value), 40)}, not a "
                                "non-negative integer")
    return value


# ---------------------------------------------------------------------------------------- validation
def clean_base_url(url: str) -> str:
    """The base URL without user info, query or fragment (where credentials can hide)."""
    p = urlsplit(url)
    host = p.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = host + (f":{p.port}" if p.port else "")
    return urlunsplit((p.scheme, netloc, p.path.rstrip("/"), "", ""))


def validate_served(cfg) -> None:
    if not cfg.base_url:
        raise InputError("--backend openai needs --base-url URL (for example http://localhost:8000/v1)")
    try:
        p = urlsplit(cfg.base_url)
        p.port  # noqa: B018 - raises on a bad port
    except ValueError as e:
        raise InputError(f"--base-url is not a valid URL ({e})") from None
    if p.scheme not in ("http", "https") or not p.hostname:
        raise InputError(f"--base-url must be an http:// or https:// URL, got {clean_base_url(cfg.base_url)!r}")
    from ..scrub import register_secret

    register_secret(os.environ.get(cfg.api_key_env or ""))  # never written or printed, answers included
    if not cfg.api_key_env or not os.environ.get(cfg.api_key_env):
        raise InputError(f"--backend openai needs an API key in the environment variable {cfg.api_key_env or '?'} "
                         "(any value, e.g. EMPTY, for a server without authentication; --api-key-env names "
                         "another variable)")
    if cfg.image_mode != "none":
        raise InputError("--image-mode blank is for local models: a served blind run never sends an image")
    if cfg.device_map is not None or cfg.max_memory is not None:
        raise InputError("--device-map/--max-memory are for local models, not --backend openai")
    from ..bounds import check_range

    for name in ("--concurrency", "--request-timeout", "--max-retries", "--top-logprobs"):
        check_range(name, getattr(cfg, name[2:].replace("-", "_")))


# ---------------------------------------------------------------------------------------- scoring
def _logsumexp(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def score_top_logprobs(top: list[tuple[str, float]], labels: list[str], yes_no: bool):
    """Restricted scoring from the first token's top-k ``(token, logprob)`` pairs.

    Returns ``(option_logprobs, missing, mass)`` with ``None`` for labels absent from the top-k, or
    ``None`` when no label is present at all.
    """
    groups: dict[str, list[float]] = {lab: [] for lab in labels}
    seen: set[str] = set()
    for tok, lp in top:
        if tok in seen or lp is None or not math.isfinite(lp):
            continue
        seen.add(tok)
        key = tok.strip()
        if yes_no:
            key = key.lower()
        if key in groups:
            groups[key].append(float(lp))
    present = {lab: _logsumexp(v) for lab, v in groups.items() if v}
    if not present:
        return None
    z = _logsumexp(list(present.values()))
    lps = [present[lab] - z if lab in present else None for lab in labels]
    missing = [lab for lab in labels if lab not in present]
    mass = min(1.0, sum(math.exp(v) for v in present.values()))
    return lps, missing, mass


# ---------------------------------------------------------------------------------------- retries
def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` / ``Retry-After``), if any."""
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(ra)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def backoff_s(attempt: int, base: float, rng: random.Random, retry_after: float | None) -> float:
    """Full-jitter exponential backoff, never shorter than ``Retry-After``."""
    delay = rng.uniform(0.0, min(BACKOFF_CAP_S, base * (2 ** attempt)))
    if retry_after is not None:
        delay = max(delay, min(retry_after, RETRY_AFTER_CAP_S))
    return delay


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _describe(exc: BaseException) -> str:
    """One line for a failed request (the run's key, registered with :mod:`audit_hub.scrub`, is masked
    should a server echo it)."""
    from ..scrub import scrub

    st = _status(exc)
    msg = scrub(str(exc).splitlines()[0]) if str(exc).strip() else type(exc).__name__
    if len(msg) > 200:
        msg = msg[:197] + "..."
    return f"HTTP {st}: {msg}" if st else f"{type(exc).__name__}: {msg}"


# ---------------------------------------------------------------------------------------- the run
@dataclass
class _Stats:
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    server_models: set = field(default_factory=set)
    adaptations: list = field(default_factory=list)
    redacted: int = 0  # answers from which a known secret (the API key) was removed before writing

    def as_dict(self) -> dict:
        return {"requests": self.requests, "retries": self.retries, "n_redacted": self.redacted,
                "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                          "total_tokens": self.total_tokens},
                "server_models": sorted(self.server_models), "adaptations": list(self.adaptations)}


def _merge_stats(old: dict | None, new: dict) -> dict:
    if not old:
        return new
    out = dict(new)
    out["requests"] = old.get("requests", 0) + new["requests"]
    out["retries"] = old.get("retries", 0) + new["retries"]
    out["n_redacted"] = old.get("n_redacted", 0) + new["n_redacted"]
    out["usage"] = {k: old.get("usage", {}).get(k, 0) + v for k, v in new["usage"].items()}
    out["server_models"] = sorted(set(old.get("server_models", [])) | set(new["server_models"]))
    out["adaptations"] = sorted(set(old.get("adaptations", [])) | set(new["adaptations"]))
    return out


def _parse_completion(raw) -> Any:
    try:
        comp = raw.parse()
    except Exception as e:  # body that is not JSON / not the expected shape
        raise MalformedResponse(f"malformed response body ({type(e).__name__}: {str(e)[:120]})") from None
    choices = getattr(comp, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise MalformedResponse("malformed response body (no choices[0].message)")
    return comp


def run_served(cfg):
    """Blind run against an OpenAI-compatible server (see the module docstring)."""
    try:
        import openai
    except ImportError:
        raise InputError(f"--backend openai needs the openai package: {API_HINT}") from None
    from .common import Progress, QuestionLists, exact_hit, load_question_table

    out = Path(cfg.out)
    questions = load_question_table(cfg.questions, cfg.column_map)
    if cfg.limit is not None:
        questions = questions.iloc[: cfg.limit].reset_index(drop=True)
    model_name = cfg.model_name or cfg.model
    builder = PromptBuilder.from_option(cfg.prompt_template, cfg.prompt_style)
    base_url = clean_base_url(cfg.base_url)
    # the endpoint is not part of the identity (a restarted server may move); the manifest lists them all
    fp = {"backend": "openai", "model": cfg.model, "model_name": model_name,
          "prompt_sha256": builder.sha256, "mode": cfg.mode, "max_new_tokens": cfg.max_new_tokens,
          "top_logprobs": cfg.top_logprobs if cfg.mode == "logprob" else None, "image_mode": "none",
          "benchaudit_version": __version__}
    sh.check_fingerprint(out, fp, cfg.overwrite)
    done = set() if cfg.overwrite else sh.done_ids(out)
    qs = QuestionLists.from_table(questions, builder)
    qid = qs.qid
    pending = [i for i in range(len(questions)) if qid[i] not in done]

    existed = out.exists()
    sh.open_output(out, [cfg.questions])
    if cfg.overwrite:
        sh.reset_output(out)
    old_rc = sh.read_run_config(out)
    if cfg.overwrite or old_rc is None:
        old_rc = {"fingerprint": fp, "fingerprint_sha256": sh.fingerprint_digest(fp), "questions": cfg.questions,
                  "column_map": cfg.column_map, "prompt_template": builder.template,
                  "prompt_style": None if builder.template is not None else builder.style, "image_mode": "none",
                  "backend": "openai", "base_url": base_url, "model": cfg.model,
                  "concurrency": cfg.concurrency, "created_unix": time.time(), "seed": 0}
        sh.write_run_config(out, old_rc)

    stats = _Stats()
    writer = sh.ShardWriter(out, 0)
    progress = Progress(cfg.progress, len(pending), f"blind {model_name} (served)")
    failures: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    try:
        fatal = asyncio.run(_Requester(cfg, openai, stats, writer, progress, failures, qs, model_name,
                                       exact_hit).run(pending))
    finally:
        writer.flush()
        progress.close()
    elapsed = time.perf_counter() - t0
    rc = sh.read_run_config(out) or old_rc
    stats.redacted = writer.redacted
    rc["served"] = _merge_stats(rc.get("served"), stats.as_dict())
    rc["base_urls"] = sorted(set(rc.get("base_urls", [])) | {base_url})
    sh.write_run_config(out, rc)
    if fatal is not None:
        if writer.written_rows == 0 and not sh.done_ids(out):  # nothing at all came back: leave no trace
            sh.reset_output(out)
            if not existed:
                from ..hub.output import remove_empty_folder

                remove_empty_folder(out)
        raise ServerRejected(fatal)
    summary = {"model": model_name, "n_new": writer.written_rows, "n_resumed": len(questions) - len(pending),
               "processes": 1, "elapsed_s": elapsed, "backend": "openai", "image_mode": "none",
               "prompt_style": None if builder.template is not None else builder.style,
               "questions_per_s": writer.written_rows / elapsed if elapsed > 0 else None,
               "requests": stats.requests, "n_failed": len(failures), "n_redacted": rc["served"]["n_redacted"]}
    if failures:
        first_q, first_e = failures[0]
        raise ServedRunFailed(
            f"{len(failures)} of {count(len(pending), 'question')} failed after {cfg.max_retries} retries (first: "
            f"{first_q}: {first_e}); the other {writer.written_rows} rows are saved in {out / 'shards'}; rerun "
            "the same command to request only the missing questions")
    return _finish_served(cfg, qid, summary, stats, base_url)


def _finish_served(cfg, qid: list[str], summary: dict, stats: _Stats, base_url: str):
    """Merge the shards, write the card, push when asked and print the one-line summary."""
    from .common import BlindResult

    out = Path(cfg.out)
    df = sh.merge(out, qid, keep_shards=cfg.keep_shards)
    he = df["hit_exact"].dropna()
    gp = df["gold_prob"].dropna()
    summary.update({"n_questions": len(df),
                    "accuracy_exact": float(he.astype(bool).mean()) if len(he) else None,
                    "mean_gold_prob": round(float(gp.astype(float).mean()), 6) if len(gp) else None,
                    "n_truncated": 0,
                    "scoring": {k: int(v) for k, v in df["scoring"].value_counts().items()}})
    sh.finish_output(out, summary, cfg.questions, inputs=[cfg.questions], command_line=["benchaudit", "blind"])
    result = BlindResult(summary=summary, table=df, out=out)
    if cfg.push_to_hub:
        from .hub import push_blind_to_hub

        result.url = push_blind_to_hub(out, cfg.push_to_hub, private=cfg.private)
    acc = summary["accuracy_exact"]
    print(f"blind: {summary['n_questions']} questions in {out / sh.MERGED_REL} ({summary['n_new']} new, "
          f"{summary['n_resumed']} already done) from {base_url} ({', '.join(stats.server_models) or cfg.model}), "
          f"{stats.requests} requests, {summary['elapsed_s']:.1f} s; scoring {plain(summary['scoring'])}; "
          f"exact-match accuracy {pct(acc)}"
          + (f"; {count(summary['n_redacted'], 'answer')} carried the API key, removed before writing (n_redacted in "
             f"{sh.CONFIG_NAME})" if summary.get("n_redacted") else "")
          + (f"; pushed to {result.url}" if result.url else ""),
          file=sys.stdout, flush=True)
    return result


class _Requester:
    """Sends one chat completion per pending question, with bounded concurrency, retries and adaptation.

    Optional parameters a server rejects with a 400 (logprobs, ``temperature=0``, ``max_tokens``) are
    dropped or renamed once for the whole run. Authentication or model errors stop the run (``fatal``);
    any other failure is recorded per question, so a rerun requests only those.
    """

    def __init__(self, cfg, openai, stats: _Stats, writer, progress, failures: list, qs, model_name: str, exact):
        self.cfg, self.openai, self.stats, self.writer, self.progress = cfg, openai, stats, writer, progress
        self.failures, self.qs, self.model_name, self.exact = failures, qs, model_name, exact
        self.rng = random.Random(0)
        self.logprobs = cfg.mode == "logprob" and cfg.top_logprobs > 0
        self.temperature = True
        self.max_tokens_key = "max_tokens"
        self.fatal: str | None = None
        self.last_flush = time.monotonic()
        self.flush_every = max(8, cfg.concurrency)
        self.retryable = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                          openai.APIConnectionError, openai.APIResponseValidationError, MalformedResponse,
                          RequestTimedOut)
        self.client = None

    def request_kwargs(self, i: int, want_lp: bool) -> dict:
        kw: dict[str, Any] = {"model": self.cfg.model, "messages": [{"role": "user", "content": self.qs.prompts[i]}],
                              self.max_tokens_key: self.cfg.max_new_tokens}
        if self.temperature:
            kw["temperature"] = 0
        if want_lp:
            kw["logprobs"] = True
            kw["top_logprobs"] = self.cfg.top_logprobs
        return kw

    def adapt(self, exc) -> bool:
        """A 400 naming an optional parameter: stop sending it (once, for the whole run)."""
        msg = str(exc).lower()
        if self.logprobs and "logprob" in msg:
            self.logprobs = False
            self.stats.adaptations.append("no logprobs (rejected by the server)")
            return True
        if self.temperature and "temperature" in msg:
            self.temperature = False
            self.stats.adaptations.append("default temperature (temperature=0 rejected)")
            return True
        if self.max_tokens_key == "max_tokens" and "max_tokens" in msg:
            self.max_tokens_key = "max_completion_tokens"
            self.stats.adaptations.append("max_completion_tokens instead of max_tokens")
            return True
        return False

    def row_for(self, i: int, comp, used_lp: bool) -> dict:
        """The run row of one completion: scored from top logprobs where possible, else parsed from the text."""
        from ..answers import extract_answer

        qs = self.qs
        choice = comp.choices[0]
        usage = getattr(comp, "usage", None)
        row = {"question_id": qs.qid[i], "model": self.model_name, "arm": "blind", "truncated": False,
               "n_prompt_tokens": getattr(usage, "prompt_tokens", None), "option_logprobs": None,
               "gold_prob": None, "letter_mass": None, "options_missing": None}
        labels = list(LETTERS[: len(qs.options[i])]) if qs.atype[i] == "mc" else ["yes", "no"]
        scored = None
        if used_lp and qs.atype[i] in ("mc", "yesno"):
            content = getattr(getattr(choice, "logprobs", None), "content", None) or []
            if content:
                top = [(t.token, t.logprob) for t in (content[0].top_logprobs or [])]
                if not top:
                    top = [(content[0].token, content[0].logprob)]
                scored = score_top_logprobs(top, labels, qs.atype[i] == "yesno")
        if scored is not None:
            lps, missing, mass = scored
            j = max((x for x in range(len(labels)) if lps[x] is not None), key=lambda x: (lps[x], -x))
            g = labels.index(qs.gold[i]) if qs.gold[i] in labels else None
            row.update({"prediction": labels[j] if qs.atype[i] == "mc" else labels[j].capitalize(),
                        "answer": labels[j], "hit_exact": j == g, "option_logprobs": lps,
                        "gold_prob": math.exp(lps[g]) if g is not None and lps[g] is not None else None,
                        "letter_mass": mass, "options_missing": missing, "scoring": "top_logprobs"})
        else:
            extracted = extract_answer(choice.message.content or "", qs.options[i], qs.atype[i])
            row.update({"prediction": choice.message.content or "",
                        "answer": None if extracted is None else str(extracted),
                        "hit_exact": self.exact(extracted, qs.gold[i], qs.atype[i]), "scoring": "generate"})
        return row

    def _is_retryable(self, e: BaseException) -> bool:
        return isinstance(e, self.retryable) or (
            isinstance(e, self.openai.APIStatusError) and (_status(e) in RETRY_STATUS or (_status(e) or 0) >= 500))

    async def _request(self, i: int, want_lp: bool):
        """One request, bounded as a whole (connection, headers and body) by ``--request-timeout``: a body
        that never ends is a timeout like any other. Returns the question's row and the reported usage."""
        async def call():
            raw = await self.client.chat.completions.with_raw_response.create(**self.request_kwargs(i, want_lp))
            return _parse_completion(raw)

        try:
            comp = await asyncio.wait_for(call(), self.cfg.request_timeout)
        except asyncio.TimeoutError:
            raise RequestTimedOut(f"no complete response within --request-timeout {self.cfg.request_timeout:g} s "
                                  "(headers and body)") from None
        return self.checked_row(i, comp, want_lp)

    def checked_row(self, i: int, comp, want_lp: bool):
        """The row and usage of a 2xx completion; a malformed field (text that is not valid Unicode, a
        token count that is not a non-negative integer, a shape the scorer cannot read) is a
        :class:`MalformedResponse` of this question only."""
        usage = getattr(comp, "usage", None)
        counts = {k: _token_count(getattr(usage, k, None), k) for k in
                  ("prompt_tokens", "completion_tokens", "total_tokens")} if usage is not None else {}
        model = getattr(comp, "model", None)
        _check_text(model, "model")
        try:
            row = self.row_for(i, comp, want_lp)
        except MalformedResponse:
            raise
        except Exception as e:  # noqa: BLE001 - an unexpected shape inside a 2xx body
            raise MalformedResponse(f"unreadable response ({type(e).__name__}: {str(e)[:120]})") from None
        for k in ("prediction", "answer"):
            _check_text(row.get(k), "choices[0].message.content")
        return row, counts, (str(model) if model else None)

    async def _complete(self, i: int):
        """The row of question ``i`` and its usage, or None when it failed or the run stopped."""
        openai, attempt = self.openai, 0
        while True:
            if self.fatal is not None:
                return None
            want_lp = self.logprobs and self.qs.atype[i] in ("mc", "yesno")
            self.stats.requests += 1
            try:
                return await self._request(i, want_lp)
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as e:
                if self.fatal is None:
                    what = ("the API key in $" + self.cfg.api_key_env if _status(e) in (401, 403)
                            else f"model {self.cfg.model!r}")
                    self.fatal = (f"{clean_base_url(self.cfg.base_url)} rejected {what} "
                                  f"({_describe(e)}); no further requests were sent")
                return None
            except openai.BadRequestError as e:
                if self.adapt(e):
                    continue
                self.failures.append((self.qs.qid[i], _describe(e)))
                return None
            except Exception as e:
                if not self._is_retryable(e) or attempt >= self.cfg.max_retries:
                    self.failures.append((self.qs.qid[i], _describe(e)))
                    return None
                self.stats.retries += 1
                # the slot stays taken while waiting: a server asking to slow down gets fewer requests
                await asyncio.sleep(backoff_s(attempt, self.cfg.retry_base_s, self.rng, retry_after_s(e)))
                attempt += 1

    def _record(self, i: int, row: dict, counts: dict, model: str | None) -> None:
        stats = self.stats
        stats.prompt_tokens += counts.get("prompt_tokens") or 0
        stats.completion_tokens += counts.get("completion_tokens") or 0
        stats.total_tokens += counts.get("total_tokens") or 0
        if model:
            stats.server_models.add(model)
        self.writer.add([row])
        self.progress.advance(1)
        now = time.monotonic()
        if len(self.writer.rows) >= self.flush_every or now - self.last_flush > 2.0:
            self.writer.flush()
            self.last_flush = now

    async def run(self, pending: list[int]) -> str | None:
        """Request every pending question; the fatal error's text, or None."""
        cfg = self.cfg
        self.client = self.openai.AsyncOpenAI(api_key=os.environ[cfg.api_key_env], base_url=cfg.base_url.rstrip("/"),
                                              timeout=cfg.request_timeout, max_retries=0)
        sem = asyncio.Semaphore(cfg.concurrency)

        async def one(i: int) -> None:
            async with sem:
                done = await self._complete(i)
            if done is not None:
                self._record(i, *done)

        try:
            await asyncio.gather(*[asyncio.ensure_future(one(i)) for i in pending])
        finally:
            await self.client.close()
        return self.fatal
