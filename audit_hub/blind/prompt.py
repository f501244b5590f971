"""Text-only prompts for the blind runner.

The default multiple-choice prompt is VLMEvalKit's ``ImageMCQDataset.build_prompt`` without the image:

.. code-block:: text

    Hint: {hint}                      (only when the question has a hint)
    Question: {question}
    Options:
    A. {option A}
    B. {option B}
    Please select the correct answer from the options above. \n

Yes/no items use ``Question: {question}\\nPlease answer yes or no.`` (VLMEvalKit's Y/N datasets carry
that instruction in the question text) and numeric / free items use ``Question: {question}\\nAnswer the
question using a single word or phrase.`` (VLMEvalKit's VQA instruction). A hint line is prepended in
both cases when present.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..schema import LETTERS

MC_INSTRUCTION = "Please select the correct answer from the options above. \n"
YESNO_INSTRUCTION = "Please answer yes or no."
OPEN_INSTRUCTION = "Answer the question using a single word or phrase."


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


def default_prompt(question: str, options: Sequence[str], answer_type: str, hint: str | None = None) -> str:
    """The default text-only prompt (VLMEvalKit's MCQ prompt for ``mc``; see the module docstring)."""
    hint = _clean(hint).strip()
    out = f"Hint: {hint}\n" if hint else ""
    out += f"Question: {question}\n"
    if answer_type == "mc" and len(options):
        out += "Options:\n" + options_block(options) + "\n" + MC_INSTRUCTION
    elif answer_type == "yesno":
        out += YESNO_INSTRUCTION
    else:
        out += OPEN_INSTRUCTION
    return out


@dataclass(frozen=True)
class PromptBuilder:
    """Renders question rows into prompt strings; ``template=None`` means the default prompt."""

    template: str | None = None

    @classmethod
    def from_option(cls, value: str | None) -> PromptBuilder:
        """Build from the ``--prompt-template`` value: ``None``, a file path, or the template text."""
        if value is None or value == "":
            return cls(None)
        if len(value) < 4096 and "\n" not in value and os.path.isfile(value):
            with open(value, encoding="utf-8") as fh:
                return cls(fh.read())
        return cls(value)

    @property
    def is_jinja(self) -> bool:
        return self.template is not None and ("{{" in self.template or "{%" in self.template)

    @property
    def identity(self) -> str:
        """Stable text that identifies the prompt format (hashed into the run fingerprint)."""
        if self.template is None:
            return "default:vlmevalkit-mcq-v1|" + MC_INSTRUCTION + "|" + YESNO_INSTRUCTION + "|" + OPEN_INSTRUCTION
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
            return default_prompt(question, options, answer_type, hint)
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
            return tpl.render(**fields) if tpl is not None else self.template.format(**fields)
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
                out = self.owner.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                     add_generation_prompt=True)
            except Exception as e:  # template rejected this content form
                last = e
                continue
            if isinstance(out, list):  # some processors return a batch
                out = out[0]
            if not isinstance(content, str):
                self._list_form = True
            return out
        raise InputError(f"the chat template could not be applied ({last}); pass --no-chat-template")
