"""The judge-free answer parser, in three parts:

* :mod:`.rules`: one text -> option letter / yes-no / value (:func:`extract_answer`), the gold's
  canonical form (:func:`canonical_gold`) and exact-match scoring (:func:`score_exact`);
* :mod:`.fill`: the same rules over a whole runs table, vectorised (:func:`fill_answers_and_exact`),
  returning the frame's answer codes with the texts;
* :mod:`.codes`: the answer code space the frame keeps (:func:`encode_ids`; :func:`encode_text` for
  answers that arrive as text).

The rules are documented in ``docs/answer_extraction.md``.
"""

from __future__ import annotations

from .codes import AnswerCodes, encode_ids, encode_text
from .fill import ParsedAnswers, fill_answers_and_exact
from .rules import REL_TOL, canonical_gold, extract_answer, score_exact

__all__ = ["REL_TOL", "AnswerCodes", "ParsedAnswers", "canonical_gold", "encode_ids", "encode_text", "extract_answer",
           "fill_answers_and_exact", "score_exact"]
