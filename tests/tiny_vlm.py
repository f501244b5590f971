"""Tiny random-weight VLMs of six real families, built offline from transformers' own classes.

``build_tiny_vlm(family, path)`` saves a model of ``FAMILIES`` (config + random weights from a seeded
generator), a byte-level BPE tokenizer trained in the test (tests/tiny_model.py) with the family's image
special tokens, a chat template that writes the family's image placeholder for ``{"type": "image"}``
parts, and the family's image processor configuration with a small image size. Where the family's
processor can be built here (LLaVA, Idefics3 and Gemma 3 need no torchvision; Qwen2-VL and
LLaVA-OneVision also need a video processor that does), the processor is saved as well.

The text-only path of the blind runner uses only the tokenizer and its chat template.
"""

from __future__ import annotations

import os

# the chat template every tiny family uses: plain-string content, or typed parts with images
_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}@IMG@"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "llava", "llava_onevision", "idefics3", "gemma3")

_TOKENS = {
    "qwen2_vl": (["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"],
                 "<|vision_start|><|image_pad|><|vision_end|>"),
    "qwen2_5_vl": (["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"],
                   "<|vision_start|><|image_pad|><|vision_end|>"),
    "llava": (["<image>"], "<image>\n"),
    "llava_onevision": (["<image>", "<video>"], "<image>\n"),
    "idefics3": (["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"], "<image>"),
    "gemma3": (["<start_of_image>", "<end_of_image>", "<image_soft_token>"], "<start_of_image>"),
}


def _text(tok, **extra) -> dict:
    base = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 512,
            "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    base.update(extra)
    return base


def _build(family: str, tok):
    """(config, model class, image processor, processor class or None, processor kwargs)."""
    import transformers as t

    ids = {s: tok.convert_tokens_to_ids(s) for s in _TOKENS[family][0]}
    if family in ("qwen2_vl", "qwen2_5_vl"):
        text = _text(tok, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                           "mrope_section": [2, 3, 3]})
        if family == "qwen2_vl":
            vision = {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
                      "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
            cfg = t.Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                                  video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                                  vision_end_token_id=ids["<|vision_end|>"])
            model_cls = t.Qwen2VLForConditionalGeneration
        else:
            vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 32,
                      "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56,
                      "fullatt_block_indexes": [1]}
            cfg = t.Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                                     video_token_id=ids["<|video_pad|>"],
                                     vision_start_token_id=ids["<|vision_start|>"],
                                     vision_end_token_id=ids["<|vision_end|>"])
            model_cls = t.Qwen2_5_VLForConditionalGeneration
        ip = t.Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=56 * 56, patch_size=14, merge_size=2,
                                     temporal_patch_size=2)
        proc_cls = t.Qwen2_5_VLProcessor if family == "qwen2_5_vl" else t.Qwen2VLProcessor
        return cfg, model_cls, ip, proc_cls, {}
    if family == "llava":
        vision = t.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                    image_size=28, patch_size=14, projection_dim=32)
        cfg = t.LlavaConfig(vision_config=vision, text_config=t.LlamaConfig(**_text(tok)),
                            image_token_index=ids["<image>"], vision_feature_layer=-1)
        ip = t.CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
        return cfg, t.LlavaForConditionalGeneration, ip, t.LlavaProcessor, {
            "patch_size": 14, "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}
    if family == "llava_onevision":
        vision = t.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                      image_size=28, patch_size=14)
        cfg = t.LlavaOnevisionConfig(vision_config=vision, text_config=t.Qwen2Config(**_text(tok)),
                                     image_token_index=ids["<image>"], video_token_index=ids["<video>"],
                                     image_grid_pinpoints=[[28, 28]], vision_feature_layer=-1,
                                     vision_feature_select_strategy="full")
        ip = t.LlavaOnevisionImageProcessor(size={"height": 28, "width": 28}, image_grid_pinpoints=[[28, 28]])
        return cfg, t.LlavaOnevisionForConditionalGeneration, ip, t.LlavaOnevisionProcessor, {
            "num_image_tokens": 4, "vision_feature_select_strategy": "full"}
    if family == "idefics3":
        vision = t.Idefics3VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, image_size=28, patch_size=14)
        cfg = t.Idefics3Config(vision_config=vision, text_config=t.LlamaConfig(**_text(tok)),
                               image_token_id=ids["<image>"], scale_factor=2)
        ip = t.Idefics3ImageProcessor(size={"longest_edge": 28}, max_image_size={"longest_edge": 28},
                                      do_image_splitting=False)
        return cfg, t.Idefics3ForConditionalGeneration, ip, t.Idefics3Processor, {"image_seq_len": 1}
    if family == "gemma3":
        text = t.Gemma3TextConfig(**_text(tok, head_dim=16, sliding_window=64,
                                          layer_types=["sliding_attention", "full_attention"]))
        vision = t.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                      image_size=28, patch_size=14)
        cfg = t.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                             boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
                             image_token_index=ids["<image_soft_token>"])
        ip = t.Gemma3ImageProcessor(size={"height": 28, "width": 28})
        return cfg, t.Gemma3ForConditionalGeneration, ip, t.Gemma3Processor, {"image_seq_length": 4}
    raise ValueError(family)


def build_tiny_vlm(family: str, path: str | os.PathLike, seed: int = 0, chat_template: str | None = None) -> str:
    """Save a tiny ``family`` model, tokenizer (+ chat template), image processor and, where it can be
    built without torchvision, the processor into ``path``; return ``str(path)``.

    ``chat_template`` overrides the template (tests use one that always inserts an image)."""
    import torch
    from tiny_model import build_tiny_tokenizer

    path = str(path)
    os.makedirs(path, exist_ok=True)
    specials, placeholder = _TOKENS[family]
    tok = build_tiny_tokenizer()
    tok.add_tokens(specials, special_tokens=True)
    if family == "gemma3":  # Gemma3Processor reads these named tokens from the tokenizer
        tok._set_model_specific_special_tokens(special_tokens=dict(zip(("boi_token", "eoi_token", "image_token"),
                                                                       specials)))
    tok.chat_template = chat_template or _TEMPLATE.replace("@IMG@", placeholder)
    cfg, model_cls, ip, proc_cls, proc_kw = _build(family, tok)
    torch.manual_seed(seed)
    model = model_cls(cfg)
    with torch.no_grad():  # decisive, varied next-token preferences
        g = torch.Generator().manual_seed(seed)
        head = model.get_output_embeddings().weight
        head.copy_(torch.randn(head.shape, generator=g))
    model.eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    ip.save_pretrained(path)
    try:
        proc = proc_cls(image_processor=ip, tokenizer=tok, chat_template=tok.chat_template, **proc_kw)
    except (ImportError, ValueError, TypeError, AttributeError):  # needs a video processor (torchvision)
        proc = None
    if proc is not None:
        proc.save_pretrained(path)
    return path
