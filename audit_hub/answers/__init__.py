"""The judge-free answer parser, in three parts:

* :mod:`.rules`: one text -> option letter / yes-no / value (:func:`extract_answer`), the gold's
  canonical form (:func:`canonical_gold`) and exact-match scoring (:func:`score_exact`);
* :mod:`.fill`: the same rules over a whole runs table, vectorised (:func:`fill_answers_and_exact`);
* :mod:`.codes`: the answer code space the frame keeps (:func:`encode_answers`).

The rules are documented in ``docs/answer_extraction.md``.
"""

from __future__ import annotations

from .codes import encode_answers
from .fill import fill_answers_and_exact
from .rules import REL_TOL, canonical_gold, extract_answer, score_exact

__all__ = ["REL_TOL", "canonical_gold", "encode_answers", "extract_answer", "fill_answers_and_exact", "score_exact"]
