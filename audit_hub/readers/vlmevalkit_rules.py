"""VLMEvalKit's scoring rules, re-stated so its sheets are scored the way VLMEvalKit scores them.

Written from VLMEvalKit's behaviour (``vlmeval/dataset/utils/yorn.py`` ``YOrN_Extraction``,
``vlmeval/smp/misc.py`` ``process_punctuation``, ``vlmeval/dataset/utils/multiple_choice.py``
``mcq_circular_eval``), checked against files its own ``run.py`` wrote (tests/fixtures/vlmevalkit/real).

Yes/no (HallusionBench, POPE, MME, AMBER): the prediction is lower-cased; punctuation
``; / [ ] " { } ( ) = + \\ _ - > < @ ` , ? !`` is deleted when the text has it next to a space (or has a
digit-comma-digit group), otherwise replaced by a space; a period not between digits is deleted (at
most 32 of them, a quirk of the original); the words are split on whitespace. "yes" among the words
and not "no" -> yes; "no" and not "yes" -> no; otherwise unknown (None). Whole words only: "not",
"nothing" or "yes." after punctuation handling count as what they are.

CircularEval (MMBench, CCBench and other circular sets): the option-shifted copies of one question
share ``g_index`` (or ``index mod 1e6``); a question is right only when every copy is; under the
``exact_matching`` judge a copy whose answer cannot be read fails its group (VLMEvalKit gives
``hit=0``, "Failed in Prefetch"), as does any copy answered wrong.
"""

from __future__ import annotations

import re

YES, NO = "yes", "no"
_PUNCT = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
_DIGIT_COMMA = re.compile(r"(\d)(,)(\d)")
_LONE_PERIOD = re.compile(r"(?<!\d)\.(?!\d)")
#: VLMEvalKit passes ``re.UNICODE`` (32) where ``re.sub`` expects ``count``
_PERIOD_LIMIT = 32
#: circular copies: index = original index + k * CIRCULAR_OFFSET
CIRCULAR_OFFSET = 1_000_000


def _punctuation(text: str) -> str:
    out = text
    glued = _DIGIT_COMMA.search(text) is not None
    for p in _PUNCT:
        if glued or (p + " ") in text or (" " + p) in text:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _LONE_PERIOD.sub("", out, count=_PERIOD_LIMIT)


def yes_no(prediction: str | None) -> str | None:
    """VLMEvalKit's yes/no reading of a free-text prediction: "yes", "no" or None (unknown)."""
    if prediction is None:
        return None
    words = set(_punctuation(str(prediction).lower()).split())
    has_yes, has_no = YES in words, NO in words
    if has_yes and not has_no:
        return YES
    if has_no and not has_yes:
        return NO
    return None


__all__ = ["yes_no", "CIRCULAR_OFFSET", "YES", "NO"]
