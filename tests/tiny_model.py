"""Build a tiny random-weight Llama model and a small byte-level BPE tokenizer into a folder.

Used by the tests (blind runner, TsT) so that nothing is downloaded: the tokenizer is trained with
``tokenizers`` on a small built-in corpus (plus any ``vocab_words`` the caller adds), wrapped as a
``PreTrainedTokenizerFast`` and saved together with a ``LlamaForCausalLM`` whose weights are drawn
from a seeded generator. Loading the folder back with ``AutoTokenizer`` / ``AutoModelForCausalLM``
works offline.

Byte-level pre-tokenisation means every string can be encoded (no unknown tokens), and single
letters ``"A"`` .. ``"Z"`` as well as their space-prefixed forms ``" A"`` .. ``" Z"`` are single
tokens, which is the shape the blind runner's ``logprob`` mode expects from real tokenizers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# A small chat template in the style of common instruction models. ``add_generation_prompt``
# appends the assistant header so that the next token is the model's answer.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_BASE_CORPUS = [
    "Hint: Please answer the question and provide the correct option letter.",
    "Question: Which of the following is the correct answer to the problem shown?",
    "Options:",
    "Please select the correct answer from the options above.",
    "Answer the question using a single word or phrase.",
    "Answer with the option's letter from the given choices directly.",
    "Is the statement true? Answer Yes or No. yes no Yes No",
    "What is the value of x in the figure? The answer is 12 or 3.5 or 100.",
    "the a an of to in is are was what which how many where when who why color shape number",
    "triangle circle square angle length area red blue green left right top bottom",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
]


def _corpus(vocab_words: Iterable[str] | None) -> list[str]:
    lines = list(_BASE_CORPUS)
    # Letters with and without a leading space, in the forms they appear in prompts and answers.
    lines.append(" ".join(LETTERS))
    lines.append("".join(f"{c}. option {c}\n" for c in LETTERS))
    lines.append(" ".join(f"({c})" for c in LETTERS))
    if vocab_words:
        lines.extend(str(w) for w in vocab_words)
    return lines


def build_tiny_tokenizer(vocab_words: Iterable[str] | None = None, vocab_size: int = 600,
                         chat_template: bool | str = False):
    """A ``PreTrainedTokenizerFast`` with byte-level BPE trained on a small corpus.

    ``chat_template``: ``False`` for none, ``True`` for :data:`CHAT_TEMPLATE`, or a Jinja string.
    Special tokens: ``<s>`` (bos), ``</s>`` (eos), ``<pad>`` (pad), ``<unk>``, and the chat markers.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, min_frequency=1,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_corpus(vocab_words), trainer=trainer)
    # Prepend <s> like Llama tokenizers do (chat-templated text is encoded without it).
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>",
                                   additional_special_tokens=specials[4:])
    if chat_template:
        fast.chat_template = CHAT_TEMPLATE if chat_template is True else str(chat_template)
    return fast


def build_tiny_llama(path: str | os.PathLike, vocab_words: Iterable[str] | None = None, seed: int = 0,
                     hidden: int = 32, layers: int = 2, heads: int = 2, max_position: int = 256,
                     chat_template: bool | str = False, intermediate: int | None = None,
                     vocab_size: int = 600) -> str:
    """Save a random-weight ``LlamaForCausalLM`` + tokenizer into ``path``; return ``str(path)``.

    Deterministic for a given ``seed`` (weights from ``torch.manual_seed(seed)``). The model's
    ``max_position_embeddings`` is ``max_position``, which tests use to provoke context overflow.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = str(path)
    os.makedirs(path, exist_ok=True)
    tok = build_tiny_tokenizer(vocab_words, vocab_size=vocab_size, chat_template=chat_template)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_position,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # Larger-than-default output weights so the random model has decisive, varied preferences.
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        model.lm_head.weight.copy_(torch.randn(model.lm_head.weight.shape, generator=g))
    model.eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


if __name__ == "__main__":  # pragma: no cover - manual helper
    import sys

    print(build_tiny_llama(sys.argv[1] if len(sys.argv) > 1 else "tiny-llama", chat_template=True))
