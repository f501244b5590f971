"""Blind (text-only) predictions: ``benchaudit blind`` / ``accelerate launch -m audit_hub.blind``.

Light at import: torch and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

from .prompt import ChatFormatter, PromptBuilder, default_prompt

__all__ = ["BlindConfig", "BlindResult", "ChatFormatter", "PromptBuilder", "default_prompt", "run_blind",
           "push_blind_to_hub"]


def __getattr__(name: str):
    if name in ("BlindConfig", "BlindResult", "run_blind"):
        from . import runner

        return getattr(runner, name)
    if name == "push_blind_to_hub":
        from .hub import push_blind_to_hub

        return push_blind_to_hub
    raise AttributeError(name)
