"""Scoring one batch of prompts: restricted next-token distribution (``logprob``) or greedy decoding.

``logprob`` mode runs one forward pass per question and reads only the last position's logits. Each
option letter is represented by the single-token forms of ``"A"`` and ``" A"`` (bare and
space-prefixed; many tokenizers encode them as different tokens, and which one a model emits depends
on the prompt's last character and the chat template). A letter's score is the log-sum-exp of its
forms' logits, i.e. the log of the total probability the model puts on writing that letter; the
letter distribution is the softmax of these scores over the question's own letters (A..K for K
options), so it sums to one. Forms that tokenize to several tokens are not used; a letter with no
single-token form is an error (use ``--mode generate``). Yes/no items use the same rule over
``Yes``/``yes``/``No``/``no`` with and without a leading space.

Because normalisation is over the restricted set, the full-vocabulary softmax is never needed; the
share of probability mass on the answer tokens is still reported as ``letter_mass`` so that a model
that does not answer with a letter at all is visible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..schema import LETTERS

YES_FORMS = ("Yes", " Yes", "yes", " yes", "YES", " YES")
NO_FORMS = ("No", " No", "no", " no", "NO", " NO")


def single_token_ids(tokenizer, forms: Sequence[str]) -> list[int]:
    """Token IDs of those ``forms`` that encode to exactly one token (deduplicated, in order)."""
    out: list[int] = []
    for f in forms:
        ids = tokenizer.encode(f, add_special_tokens=False)
        # Multi-token forms are skipped: SentencePiece tokenizers may encode " A" as ["▁", "A"],
        # and then the bare form (which they encode as "▁A") covers the letter.
        if len(ids) == 1 and ids[0] not in out:
            out.append(int(ids[0]))
    return out


@dataclass(frozen=True)
class AnswerTokens:
    """Token-ID groups: ``groups[j]`` holds the token IDs that spell answer ``j``.

    For multiple choice ``j`` indexes letters A..Z; for yes/no ``j`` is 0 (yes) or 1 (no).
    """

    groups: tuple[tuple[int, ...], ...]
    labels: tuple[str, ...]

    @classmethod
    def letters(cls, tokenizer, n: int) -> AnswerTokens:
        groups, labels = [], []
        seen: dict[int, str] = {}
        for c in LETTERS[:n]:
            ids = single_token_ids(tokenizer, (c, " " + c))
            if not ids:
                raise InputError(f"the tokenizer has no single-token form of option letter {c!r}; "
                                 "logprob scoring needs one (use --mode generate)")
            for t in ids:
                if t in seen:
                    raise InputError(f"option letters {seen[t]!r} and {c!r} share token {t}; "
                                     "logprob scoring cannot tell them apart (use --mode generate)")
                seen[t] = c
            groups.append(tuple(ids))
            labels.append(c)
        return cls(tuple(groups), tuple(labels))

    @classmethod
    def yes_no(cls, tokenizer) -> AnswerTokens:
        y = single_token_ids(tokenizer, YES_FORMS)
        n = single_token_ids(tokenizer, NO_FORMS)
        if not y or not n or set(y) & set(n):
            raise InputError("the tokenizer has no single-token 'Yes'/'No' forms; use --mode generate")
        return cls((tuple(y), tuple(n)), ("yes", "no"))

    def index_tensors(self, device):
        """``(ids, valid)``: (n_answers, max_forms) token IDs padded with 0 and a validity mask."""
        import torch

        width = max(len(g) for g in self.groups)
        ids = torch.zeros((len(self.groups), width), dtype=torch.long)
        valid = torch.zeros((len(self.groups), width), dtype=torch.bool)
        for j, g in enumerate(self.groups):
            ids[j, : len(g)] = torch.tensor(g, dtype=torch.long)
            valid[j, : len(g)] = True
        return ids.to(device), valid.to(device)


def answer_scores(last_logits, tokens: AnswerTokens):
    """``(scores, log_z)``: (B, n_answers) log-sum-exp of each answer's token-form logits and the
    (B,) log-partition over the whole vocabulary (for the answer-token mass). Float32 throughout."""
    import torch

    logits = last_logits.float()
    ids, valid = tokens.index_tensors(logits.device)
    gathered = logits[:, ids.reshape(-1)].reshape(logits.shape[0], *ids.shape)  # (B, A, F)
    gathered = gathered.masked_fill(~valid.unsqueeze(0), float("-inf"))
    scores = torch.logsumexp(gathered, dim=-1)  # (B, A)
    log_z = torch.logsumexp(logits, dim=-1)  # (B,)
    return scores.cpu(), log_z.cpu()


def restricted_log_probs(scores_row: Sequence[float], k: int) -> list[float]:
    """Normalised log-probabilities over the first ``k`` answers of one row (sum of exp = 1)."""
    s = [float(x) for x in scores_row[:k]]
    m = max(s)
    lz = m + math.log(sum(math.exp(x - m) for x in s))
    return [x - lz for x in s]


def pad_left(seqs: list[list[int]], pad_id: int, device):
    """Left-pad token id lists into (ids, attention_mask) tensors on ``device`` (the answer position is
    then the last column for every row)."""
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    return ids.to(device), mask.to(device)


def position_ids_from_mask(attention_mask):
    """Positions 0.. counted over real tokens only, so left padding does not shift them."""
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.clamp_(min=0)


class ForwardFn:
    """Calls the model for the last position's logits only (``logits_to_keep=1`` when supported)."""

    def __init__(self, model, pass_position_ids: bool = True):
        import inspect

        self.model = model
        params = inspect.signature(model.forward).parameters
        accepts_kwargs = any(p.kind == p.VAR_KEYWORD for p in params.values())
        if "logits_to_keep" in params:
            self.keep_kw = "logits_to_keep"
        elif "num_logits_to_keep" in params:
            self.keep_kw = "num_logits_to_keep"
        else:
            self.keep_kw = None
        self.pass_position_ids = pass_position_ids and ("position_ids" in params or accepts_kwargs)

    def __call__(self, input_ids, attention_mask, **extras):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False, **extras}
        if self.pass_position_ids:
            kwargs["position_ids"] = position_ids_from_mask(attention_mask)
        if self.keep_kw:
            kwargs[self.keep_kw] = 1
        out = self.model(**kwargs)
        return out.logits[:, -1, :]
