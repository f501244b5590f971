"""Model inputs of the local blind runner: text-only token IDs, or text plus one blank (white) image.

``--image-mode none`` (default) tokenises the chat-templated prompt with the tokenizer only; the
processor is not needed and the prompt must not contain an image token (a chat template that inserts
one cannot run text-only: that is an error, not a silent mismatch).

``--image-mode blank`` runs the model's processor on the chat-templated prompt with one white image at
the processor's default size (:func:`default_image_size`), for models that misbehave without an image.
Every question gets the same blank image, so the image tensors (``pixel_values``, ``image_grid_thw``,
...) are computed once and repeated per batch row; only the token-level tensors are per question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError

# config attributes naming tokens that only appear next to image/video inputs
IMAGE_TOKEN_ATTRS = ("image_token_id", "image_token_index", "video_token_id", "video_token_index",
                     "vision_start_token_id", "boi_token_index", "boi_token_id")
VISION_HINT = "pip install 'benchaudit[vision]'  (torchvision matching torch==2.13.0, and pillow)"
PIXEL_RANGE_SIDE = 448  # side of the blank image for processors with a pixel budget (Qwen2-VL family)


def image_token_ids(config, tok=None, processor=None) -> set[int]:
    """Token IDs that mark image content for this model (from its config and processor)."""
    out: set[int] = set()
    for name in IMAGE_TOKEN_ATTRS:
        v = getattr(config, name, None)
        if isinstance(v, int) and v >= 0:
            out.add(v)
    for name in ("image_token_id", "video_token_id"):
        v = getattr(processor, name, None) if processor is not None else None
        if isinstance(v, int) and v >= 0:
            out.add(v)
    if tok is not None and processor is not None:
        t = getattr(processor, "image_token", None)
        if isinstance(t, str) and t:
            tid = tok.convert_tokens_to_ids(t)
            if isinstance(tid, int) and tid != tok.unk_token_id:
                out.add(tid)
    return out


def default_image_size(image_processor) -> tuple[int, int]:
    """``(width, height)`` of the blank image: the size the processor resizes to by default.

    ``height``/``width`` (crop size first, as CLIP-style processors crop after resizing); a
    ``shortest_edge`` or ``longest_edge`` length gives a square of that side; processors with a pixel
    budget (``min_pixels``/``max_pixels``, the Qwen2-VL family) get a 448 x 448 square clipped into the
    budget.
    """
    def get(d, key):
        if d is None:
            return None
        v = d.get(key) if isinstance(d, dict) else getattr(d, key, None)
        return v if v else None

    size = getattr(image_processor, "size", None)
    crop = getattr(image_processor, "crop_size", None)
    min_px = getattr(image_processor, "min_pixels", None) or get(size, "min_pixels")
    max_px = getattr(image_processor, "max_pixels", None) or get(size, "max_pixels")
    if min_px is not None or max_px is not None:
        side = PIXEL_RANGE_SIDE
        if min_px:
            side = max(side, math.ceil(math.sqrt(min_px)))
        if max_px:
            side = min(side, math.floor(math.sqrt(max_px)))
        return side, side
    for d in (crop, size):
        if get(d, "height") and get(d, "width"):
            return int(get(d, "width")), int(get(d, "height"))
    for key in ("shortest_edge", "longest_edge"):
        if get(size, key):
            return int(get(size, key)), int(get(size, key))
    raise InputError(f"--image-mode blank: cannot tell the default image size of {type(image_processor).__name__} "
                     f"(size={size!r})")


def blank_image(image_processor):
    from PIL import Image

    w, h = default_image_size(image_processor)
    return Image.new("RGB", (w, h), (255, 255, 255))


@dataclass
class Encoded:
    """Token IDs of every prompt, per-token extra tensors (e.g. ``token_type_ids``) and the shared
    image tensors (one copy; repeated per batch row at collation)."""

    ids: list[list[int]]
    per_token: list[dict[str, list[int]]]
    shared: dict[str, Any] = field(default_factory=dict)


def encode_text(tok, chat, texts: list[str]) -> Encoded:
    """Text-only: the tokenizer alone (chat-templated text carries its own special tokens)."""
    enc = tok(texts, add_special_tokens=not chat.active)["input_ids"] if texts else []
    return Encoded([list(x) for x in enc], [{} for _ in enc])


def blank_prompt_text(processor, chat, prompt: str) -> tuple[str, bool]:
    """The prompt with one image placeholder, through the processor's chat template when it has one.
    Returns ``(text, templated)``."""
    if getattr(processor, "chat_template", None):
        msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
        from .prompt import template_bounds

        with template_bounds("the processor's chat template") as bound:
            out = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            bound["text"] = out if isinstance(out, str) else None
        return (out[0] if isinstance(out, list) else out), True
    token = getattr(processor, "image_token", None) or "<image>"
    return chat(f"{token}\n{prompt}"), chat.active


def encode_blank(processor, chat, prompts: list[str]) -> Encoded:
    """Processor outputs for ``prompts`` each with the same blank image."""
    img = blank_image(processor.image_processor)
    ids: list[list[int]] = []
    per_token: list[dict[str, list[int]]] = []
    shared: dict[str, Any] = {}
    for p in prompts:
        text, templated = blank_prompt_text(processor, chat, p)
        try:
            out = processor(text=[text], images=[img], return_tensors="pt", add_special_tokens=not templated)
        except ImportError as e:
            raise InputError(f"--image-mode blank: the processor needs a missing package ({e}); {VISION_HINT}") from None
        row = out["input_ids"][0].tolist()
        ids.append(row)
        extra = {}
        for k, v in out.items():
            if k in ("input_ids", "attention_mask") or not hasattr(v, "shape"):
                continue
            if tuple(v.shape) == tuple(out["input_ids"].shape):
                extra[k] = v[0].tolist()
            elif not shared or k not in shared:
                shared[k] = v
        per_token.append(extra)
    return Encoded(ids, per_token, shared)


def collate(ids: list[list[int]], per_token: list[dict[str, list[int]]], shared: dict[str, Any], pad_id: int,
            device) -> tuple[Any, Any, dict[str, Any]]:
    """Left-padded ``(input_ids, attention_mask, extras)`` on ``device``; image tensors repeated per row."""
    import torch

    from .scoring import pad_left

    input_ids, mask = pad_left(ids, pad_id, device)
    extras: dict[str, Any] = {}
    if per_token and per_token[0]:
        for k in per_token[0]:
            t, _ = pad_left([pt[k] for pt in per_token], 0, device)
            extras[k] = t
    for k, v in shared.items():
        extras[k] = torch.cat([v] * len(ids), dim=0).to(device)
    return input_ids, mask, extras
