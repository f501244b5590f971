"""``benchaudit blind``: text-only (blind) predictions of a language model, resumable and multi-GPU.

The same command runs under ``accelerate launch -m audit_hub.blind ...`` (one process per GPU).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt


def register(app: typer.Typer) -> None:
    @app.command("blind")
    def blind(
        model: str = typer.Option(..., "--model", "-m", help="Local folder or Hub id of a causal LM, or of an "
                                  "image-text-to-text VLM (run with text only); with --backend openai, the "
                                  "model name the server knows."),
        questions: str = typer.Option(..., "--questions", "-q", help="Benchmark questions: a file or a Hub "
                                      "dataset id with a question-ID column (as `benchaudit audit` reads them)."),
        out: Path = typer.Option(..., "--out", "-o", help="Output folder (resumable: rerun the same command "
                                 "after a crash to continue)."),
        model_name: str | None = typer.Option(None, "--model-name", help="Model name written to the rows; "
                                                 "use the full run's name so the audit pairs them. Default: "
                                                 "the Hub id or the folder name."),
        column_map: list[str] | None = typer.Option(None, "--map", help="Column rename OLD=NEW; repeatable."),
        prompt_template: str | None = typer.Option(
            None, "--prompt-template", help="Prompt template text or file: Jinja when it contains '{{' or '{%', "
            "else str.format; fields {question} {hint} {options} {letters} {answer_type} {n_options}. "
            "Default: VLMEvalKit's multiple-choice prompt without the image."),
        chat_template: bool = typer.Option(True, "--chat-template/--no-chat-template",
                                           help="Apply the tokenizer's chat template when it has one."),
        mode: str = typer.Option("logprob", "--mode", help="logprob: one forward pass per multiple-choice or "
                                 "yes/no item, answer from the option-letter distribution; generate: greedy "
                                 "decoding + exact-match parser. Numeric/free items always generate."),
        batch_size: int = typer.Option(8, "--batch-size", **opt("--batch-size"), help="Questions per forward pass (per process)."),
        max_new_tokens: int = typer.Option(32, "--max-new-tokens", **opt("--max-new-tokens"), help="Generation length for generated items."),
        dtype: str = typer.Option("auto", "--dtype", help="auto (bf16 on GPU, float32 on CPU), bfloat16, "
                                  "float16 or float32."),
        trust_remote_code: bool = typer.Option(False, "--trust-remote-code",
                                               help="Allow the model repository's own code to run."),
        revision: str | None = typer.Option(None, "--revision", help="Hub revision of the model."),
        max_length: int | None = typer.Option(None, "--max-length", **opt("--max-length"), help="Context limit in tokens "
                                                 "(default: the model's max_position_embeddings)."),
        truncate: str = typer.Option("error", "--truncate", help="Prompts longer than the context: error "
                                     "(default) or left (keep the last tokens; rows marked truncated)."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Discard an existing output written with "
                                       "another model, prompt or mode."),
        limit: int | None = typer.Option(None, "--limit", **opt("--limit"), help="Only the first N questions (smoke tests)."),
        push_to_hub: str | None = typer.Option(None, "--push-to-hub", help="Publish the merged output as "
                                                  "Hub dataset ORG/NAME."),
        private: bool = typer.Option(False, "--private", help="Create the Hub dataset as private."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on the main process."),
        cpu: bool = typer.Option(False, "--cpu", help="Run on CPU even when a GPU is present."),
        threads: str = typer.Option("auto", "--threads", metavar="auto|INT", help="CPU threads of the forward "
                                    "passes. auto (on CPU): measured on the first batches and again every 48, "
                                    "so a busy machine gets fewer (kept as OMP_NUM_THREADS says when it is set)."),
        keep_shards: bool = typer.Option(False, "--keep-shards", help="Keep per-process shards after the merge."),
        prompt_style: str = typer.Option("vlmevalkit", "--prompt-style", help="Built-in prompt: vlmevalkit "
                                         "(default; VLMEvalKit's MCQ / Y/N / VQA prompts), lmms-eval (MMBench "
                                         "layout and post-prompt), lmms-eval-mmstar, or plain (raw 'Answer:' "
                                         "prompt for models without a chat template)."),
        image_mode: str = typer.Option("none", "--image-mode", help="none: text only (default); blank: one white "
                                       "image at the processor's default size (local models; needs .[vision] "
                                       "for some processors)."),
        device_map: str | None = typer.Option(None, "--device-map", help="auto: spread a model larger than one "
                                                 "GPU over this process's GPUs (accelerate big-model loading)."),
        max_memory: str | None = typer.Option(None, "--max-memory", help="Per-device limits for --device-map, "
                                                 "e.g. 0=70GiB,1=70GiB,cpu=200GiB."),
        backend: str = typer.Option("transformers", "--backend", help="transformers (local model) or openai "
                                    "(any OpenAI-compatible chat-completions server: vLLM, SGLang, TGI, APIs)."),
        base_url: str | None = typer.Option(None, "--base-url", help="Server URL for --backend openai, e.g. "
                                               "http://localhost:8000/v1."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Environment variable that "
                                        "holds the API key (never written anywhere)."),
        concurrency: int = typer.Option(16, "--concurrency", **opt("--concurrency"), help="Requests in flight (--backend openai)."),
        request_timeout: float = typer.Option(120.0, "--request-timeout", **opt("--request-timeout"), help="Seconds before a request is "
                                              "abandoned and retried (--backend openai)."),
        max_retries: int = typer.Option(6, "--max-retries", **opt("--max-retries"), help="Retries per request on 429/5xx/timeouts/"
                                        "malformed bodies (--backend openai)."),
        top_logprobs: int = typer.Option(20, "--top-logprobs", **opt("--top-logprobs"), help="top_logprobs asked of the server in "
                                         "logprob mode (0 = generate and parse only)."),
    ) -> None:
        """Text-only (blind) predictions; launch with `accelerate launch -m audit_hub.blind` for several GPUs."""
        from ..api import blind as run

        run(model, questions, out, model_name=model_name, column_map=list(column_map or []) or None,
            prompt_template=prompt_template, chat_template=chat_template, mode=mode, batch_size=batch_size,
            max_new_tokens=max_new_tokens, dtype=dtype, trust_remote_code=trust_remote_code, revision=revision,
            max_length=max_length, truncate=truncate, overwrite=overwrite, limit=limit, push_to_hub=push_to_hub,
            private=private, progress=progress, cpu=cpu, threads=threads, keep_shards=keep_shards, prompt_style=prompt_style,
            image_mode=image_mode, device_map=device_map, max_memory=max_memory, backend=backend,
            base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
            request_timeout=request_timeout, max_retries=max_retries, top_logprobs=top_logprobs)
