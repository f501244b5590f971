"""Text-only prompts for the blind runner.

The default multiple-choice prompt is VLMEvalKit's ``ImageMCQDataset.build_prompt`` without the image:

.. code-block:: text

    Hint: {hint}                      (only when the question has a hint)
    Question: {question}
    Options:
    A. {option A}
    B. {option B}
    Please select the correct answer from the options above. \n

Yes/no items: the question as it is when it already asks for yes or no (MME), else the question plus
``\nPlease answer yes or no.`` (VLMEvalKit's ``ImageYORNDataset``); numeric / free items: the question plus
``\nAnswer the question using a single word or phrase.`` (``ImageVQADataset``). This is
``--prompt-style vlmevalkit``. Other styles: ``lmms-eval`` (lmms-eval's ``mmbench_doc_to_text`` layout
and post-prompt for multiple choice; ``mme_doc_to_text`` for yes/no and short answers),
``lmms-eval-mmstar`` (MMStar's ``Options: A: x, B: y`` question layout with lmms-eval's MMStar
post-prompt) and ``plain`` (a raw completion prompt ending in ``Answer:`` for models without a chat
template). tests/fixtures/blind/harness_prompts.json holds the harnesses' own output for these styles.

A user template (``--prompt-template``, a string or a file) replaces all of these. It is rendered as a
Jinja template when it contains ``{{`` or ``{%``, otherwise with Python's ``str.format``. Fields:
``question``, ``hint`` (empty string when absent), ``options`` (the lettered block ``A. ...`` one per
line, empty for non-multiple-choice items), ``letters`` (``"A, B, C, D"``), ``answer_type`` and
``n_options``.

When the tokenizer has a chat template (and ``--no-chat-template`` is not given) the prompt becomes
the single user turn and the generation prompt is appended, so that the next token is the answer.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..schema import LETTERS

MC_INSTRUCTION = "Please select the correct answer from the options above. \n"
YESNO_INSTRUCTION = "Please answer yes or no."
OPEN_INSTRUCTION = "Answer the question using a single word or phrase."
# lmms-eval's default post-prompts (mmbench_en, mmstar and mme task YAMLs, lmms_eval 0.7.3)
LMMS_MC_POST = "\nAnswer with the option's letter from the given choices directly."
LMMS_MMSTAR_POST = "\nAnswer with the option's letter from the given choices directly"
LMMS_SHORT_POST = "\nAnswer the question using a single word or phrase."
LMMS_YESNO_STRIP = " Please answer yes or no."
LMMS_OPTIONS_HEADER = "There are several options:"

PROMPT_STYLES = ("vlmevalkit", "lmms-eval", "lmms-eval-mmstar", "plain")
STYLE_VERSION = "2"  # bump when a style's text changes (part of the run fingerprint)


def _clean(v: Any) -> str:
    if v is None:
        return ""
    try:
        import pandas as pd

        if pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    return str(v)


def options_block(options: Sequence[str]) -> str:
    """``A. first\\nB. second`` (no trailing newline)."""
    return "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))


def _vlmevalkit(question: str, options: Sequence[str], answer_type: str, hint: str) -> str:
    if answer_type == "mc" and len(options):  # ImageMCQDataset.build_prompt
        out = f"Hint: {hint}\n" if hint else ""
        return out + f"Question: {question}\nOptions:\n" + options_block(options) + "\n" + MC_INSTRUCTION
    if answer_type == "yesno":  # ImageYORNDataset: the question as is (MME carries the instruction);
        # AMBER-like questions without it get VLMEvalKit's appended instruction
        return question if "yes or no" in question.lower() else question + "\n" + YESNO_INSTRUCTION
    return question + "\n" + OPEN_INSTRUCTION  # ImageVQADataset.build_prompt


def _lmms_short(question: str) -> str:  # lmms-eval mme_doc_to_text with the default post-prompt
    return question.strip().replace(LMMS_YESNO_STRIP, "") + LMMS_SHORT_POST


def _lmms_eval(question: str, options: Sequence[str], answer_type: str, hint: str) -> str:
    if answer_type == "mc" and len(options):  # lmms-eval mmbench_doc_to_text (+ create_options_prompt)
        opts = LMMS_OPTIONS_HEADER + "\n" + options_block(options)
        query = f"{hint} {question} {opts}" if hint and hint != "nan" else f"{question} {opts}"
        return query + "\n" + LMMS_MC_POST
    return _lmms_short(question)


def _lmms_eval_mmstar(question: str, options: Sequence[str], answer_type: str, hint: str) -> str:
    if answer_type == "mc" and len(options):  # MMStar's question layout + lmms-eval mmstar_doc_to_text
        stem = question + "\nOptions: " + ", ".join(f"{LETTERS[i]}: {o}" for i, o in enumerate(options))
        return stem.strip() + LMMS_MMSTAR_POST
    return _lmms_short(question)


def _plain(question: str, options: Sequence[str], answer_type: str, hint: str) -> str:
    out = f"{hint}\n" if hint else ""
    out += f"Question: {question}\n"
    if answer_type == "mc" and len(options):
        return out + options_block(options) + "\nAnswer:"
    if answer_type == "yesno":
        return out + "Answer (yes or no):"
    return out + "Answer:"


_STYLE_FN = {"vlmevalkit": _vlmevalkit, "lmms-eval": _lmms_eval, "lmms-eval-mmstar": _lmms_eval_mmstar,
             "plain": _plain}


def check_style(style: str) -> str:
    if style not in _STYLE_FN:
        raise InputError(f"--prompt-style must be one of {', '.join(PROMPT_STYLES)}, got {style!r}")
    return style


def default_prompt(question: str, options: Sequence[str], answer_type: str, hint: str | None = None,
                   style: str = "vlmevalkit") -> str:
    """The built-in text-only prompt of ``style`` (see the module docstring)."""
    return _STYLE_FN[check_style(style)](_clean(question), list(options), answer_type, _clean(hint).strip())


#: bounds of one rendering of a chat template or of a Jinja --prompt-template (real ones take well under
#: a millisecond and emit a few kilobytes)
TEMPLATE_SECONDS = 2.0
TEMPLATE_MAX_CHARS = 4 << 20


class _TemplateBound(BaseException):
    """Raised inside a template's own frames (a BaseException: template code cannot catch it)."""


@contextmanager
def template_bounds(what: str, seconds: float = TEMPLATE_SECONDS, max_chars: int = TEMPLATE_MAX_CHARS) -> Iterator[dict]:
    """Bound the rendering of Jinja templates inside the block: at most ``seconds`` and ``max_chars``
    characters of output, or one :class:`InputError` naming ``what``. The block stores its rendered text in
    ``bound["text"]`` (the yielded dict) for the size check.

    The time bound: on the main thread a one-shot ``SIGALRM`` timer (no cost per line) whose handler raises
    inside the template's Python frames; elsewhere (or when a real-time timer is already in use) a trace
    function on the template's own frames (Jinja compiles a template to Python whose frames carry the file
    name ``<template>``), checking the clock every 256 lines and counting the characters they yield. The
    sandbox (jinja2.sandbox, which transformers also uses) keeps its own checks."""
    import signal
    import threading

    deadline = time.monotonic() + seconds
    state = {"lines": 0, "chars": 0, "text": None}
    use_alarm = (threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
                 and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))

    def local(frame, event, arg):
        if event == "line":
            state["lines"] += 1
            if not state["lines"] & 255 and time.monotonic() > deadline:
                raise _TemplateBound(f"ran longer than {seconds:g} s")
        elif event == "return" and isinstance(arg, str):
            state["chars"] += len(arg)
            if state["chars"] > max_chars:
                raise _TemplateBound(f"emitted more than {max_chars:,} characters")
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == "<template>" else None

    def on_alarm(signum, frame):
        raise _TemplateBound(f"ran longer than {seconds:g} s")

    previous_trace = sys.gettrace()
    previous_handler = None
    if use_alarm:
        previous_handler = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    else:
        sys.settrace(tracer)
    try:
        yield state
        text = state["text"]
        if isinstance(text, str) and len(text) > max_chars:
            raise _TemplateBound(f"emitted more than {max_chars:,} characters")
    except _TemplateBound as e:
        raise InputError(f"{what} {e} while rendering one prompt and was stopped; refusing a template that "
                         "loops or explodes (pass --no-chat-template or a --prompt-template)") from None
    except MemoryError:
        raise InputError(f"{what} ran out of memory while rendering one prompt; refusing it") from None
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_handler)
        else:
            sys.settrace(previous_trace)


@dataclass(frozen=True)
class PromptBuilder:
    """Renders question rows into prompt strings; ``template=None`` means the default prompt."""

    template: str | None = None
    style: str = "vlmevalkit"

    @classmethod
    def from_option(cls, value: str | None, style: str = "vlmevalkit") -> PromptBuilder:
        """Build from the ``--prompt-template`` value: ``None``, a file path, or the template text."""
        check_style(style)
        if value is None or value == "":
            return cls(None, style)
        if len(value) < 4096 and "\n" not in value and os.path.isfile(value):
            with open(value, encoding="utf-8") as fh:
                return cls(fh.read(), style)
        return cls(value, style)

    @property
    def is_jinja(self) -> bool:
        return self.template is not None and ("{{" in self.template or "{%" in self.template)

    @property
    def identity(self) -> str:
        """Stable text that identifies the prompt format (hashed into the run fingerprint)."""
        if self.template is None:
            return f"style:{self.style}:v{STYLE_VERSION}"
        return ("jinja:" if self.is_jinja else "format:") + self.template

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.identity.encode("utf-8")).hexdigest()

    def _compiled(self):
        if not self.is_jinja:
            return None
        cached = self.__dict__.get("_jinja")
        if cached is None:
            from jinja2 import StrictUndefined
            from jinja2.sandbox import SandboxedEnvironment

            env = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)
            cached = env.from_string(self.template)
            object.__setattr__(self, "_jinja", cached)
        return cached

    def render(self, question: str, options: Sequence[str], answer_type: str, hint: str | None = None,
               question_id: str | None = None) -> str:
        if self.template is None:
            return default_prompt(question, options, answer_type, hint, self.style)
        fields = {
            "question": _clean(question),
            "hint": _clean(hint),
            "options": options_block(options) if answer_type == "mc" else "",
            "letters": ", ".join(LETTERS[: len(options)]) if answer_type == "mc" else "",
            "answer_type": answer_type,
            "n_options": len(options),
        }
        try:
            tpl = self._compiled()
            if tpl is None:
                return self.template.format(**fields)
            with template_bounds("--prompt-template") as bound:
                bound["text"] = tpl.render(**fields)
            return bound["text"]
        except InputError:
            raise
        except (KeyError, IndexError, ValueError) as e:
            raise InputError(f"--prompt-template cannot be rendered for question {question_id!r}: "
                             f"{type(e).__name__}: {e}; fields are {sorted(fields)}") from None
        except Exception as e:  # jinja2 errors (undefined field, syntax)
            raise InputError(f"--prompt-template cannot be rendered for question {question_id!r}: "
                             f"{type(e).__name__}: {e}; fields are {sorted(fields)}") from None


class ChatFormatter:
    """Wraps a prompt as one user turn with the tokenizer's (or processor's) chat template.

    Image-text-to-text processors often expect ``content`` as a list of typed parts; we try the
    plain-string form first and fall back to ``[{"type": "text", "text": ...}]``.
    """

    def __init__(self, tokenizer, processor=None, enabled: bool = True):
        self.tokenizer = tokenizer
        self.processor = processor
        owner = None
        if enabled:
            if getattr(tokenizer, "chat_template", None):
                owner = tokenizer
            elif processor is not None and getattr(processor, "chat_template", None):
                owner = processor
        self.owner = owner
        self._list_form = False

    @property
    def active(self) -> bool:
        return self.owner is not None

    @property
    def template_text(self) -> str:
        if self.owner is None:
            return ""
        t = self.owner.chat_template
        return t if isinstance(t, str) else repr(t)

    def __call__(self, prompt: str) -> str:
        if self.owner is None:
            return prompt
        forms = ([prompt, [{"type": "text", "text": prompt}]] if not self._list_form
                 else [[{"type": "text", "text": prompt}]])
        last: Exception | None = None
        for content in forms:
            try:
                with template_bounds("the chat template") as bound:
                    out = self.owner.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                         add_generation_prompt=True)
                    bound["text"] = out if isinstance(out, str) else None
            except InputError:
                raise
            except Exception as e:  # template rejected this content form
                last = e
                continue
            if isinstance(out, list):  # some processors return a batch
                out = out[0]
            if not isinstance(content, str):
                self._list_form = True
            return out
        raise InputError(f"the chat template could not be applied ({last}); pass --no-chat-template")
