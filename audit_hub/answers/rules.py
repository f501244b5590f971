"""Judge-free exact-match answer parser: free-text prediction -> option letter / yes-no / number.

Why: the audit must not depend on an LLM judge. This module reads the answer a model committed to
with fixed, documented rules, so that ``hit_exact`` is reproducible and an unparseable answer is
visible as such (``None``) instead of silently counting as some letter.

Rules, in priority order (the full description with examples is ``docs/answer_extraction.md``).
Every rule runs on a *cleaned* text: Unicode NFKC (full-width letters, digits and brackets become
ASCII), unit superscripts dropped (``cm²`` -> ``cm``), the minus sign ``−`` read as ``-``, markdown
emphasis and code marks removed (``**B**``, ``__B__``, ``*B*``, backticks), LaTeX wrappers unwrapped
(``\\text{B}``, ``\\textbf{B}``, ``\\mathrm{..}``, ``$..$``, ``\\(..\\)``); ``\\boxed{..}`` becomes an
answer *candidate*.
A failed call's error message left as the prediction (:func:`is_service_error`: "Error code: 429 - ...",
"Request timed out.", a JSON error body) is unparseable in every answer type.

Multiple choice (``mc``, K options, letters ``A`` .. K-th letter):

1. Answer candidates: ``\\boxed{..}``; explicit statements ("The answer is (B)", "Answer: b",
   "Final answer: C", "The correct option is D", "I choose B", "答案是B", "答案：B", "选B");
   letter-first statements ("B is the correct answer", "Option C is correct"). The candidate that
   occurs *last* in the text wins. Its span (up to the end of the sentence) is read: a letter at its
   start -> that letter; two different letters joined by or/and/,/ ("A or B", "either B or C",
   "A and C") -> unparseable. Without a letter, the span is compared with the option texts (rule 3);
   if that fails too, the previous candidate is tried.
2. A leading letter with a delimiter: "B.", "B)", "(B)", "[B]", "B:", "(C) 45", "B - 45", a lone
   letter ("B", "b"), an upper-case letter alone on the first line. Followed by "or (C)" etc. ->
   unparseable.
   A letter is never read from an English word: a lone "A"/"I"/"a" (or any lower-case letter)
   followed by a word ("A cat is", "I think", "a triangle") is not a letter unless it is bracketed.
   Letters and option texts that are letters (rules 1, 2, 4): a letter beyond the K options is
   read as the option whose text it is ("$S$", Roman "I", "O" among ["S","I","M","O","N"]) or as
   an option the whole text/span equals ("I. only"), else unparseable; a letter inside the range
   whose text is *another* option's text (options ["A","B","C","E",..], answer "E") is ambiguous
   -> unparseable. Options that are their own letters (MATH-Vision ["A",..,"E"]) read normally.
3. The whole text equals exactly one option text after normalisation (NFKC, casefold, LaTeX
   unwrapped, ``^\\circ`` -> °): compared whitespace-collapsed, then numerically if the text is a
   number (a unit word after the number is ignored, so "45.0" = "45", "15°" = "$15^{\\circ}$",
   "-3" != "3"), then with whitespace removed ("$\\pi$:$12$" = "$\\pi: 12$"), then with all
   punctuation removed. Two options matching at one level -> unparseable.
4. Trailing-letter conventions at the very end: "... Therefore, B.", "... so (C)", "... option D",
   "...: B", a lone letter on the last line, "... (E)." ("A or (B)." at the end -> unparseable).
5. Refusals -> unparseable: "cannot determine", "can't be determined", "not enough information",
   "I'm sorry", "unable to", "none of the above" (when no option says so), "please provide", "no
   image provided", .. . Skipped for questions whose own options contain such a phrase.
6. The text *contains* exactly one option text as a whole word/phrase and no other option (only
   options of 2+ characters after normalisation; an option found only inside a longer matched
   option does not count). Searched in the whole text up to 300 characters, else in its last
   sentence only, so long chains of reasoning that mention options in passing are not misread.
7. Otherwise unparseable (``None``).

yes/no: the last candidate's span (cut at the first comma) holding "yes" or "no" (both -> None);
a leading yes/no word ("Yes, there is", "No."; "Yes or no" -> None); a trailing "..., so yes.";
refusals -> None; otherwise None.

numeric: the last number in the last candidate span that holds one, else (unless the text is a
refusal) the last number in the text. Numbers: integers, decimals, negatives (``-3``, ``−3``),
thousands separators (``1,000``; a comma followed by exactly three digits), scientific notation (``1e3``,
``2.5e-3``), fractions ``a/b`` and
``\\frac{a}{b}`` (also ``\\dfrac``, ``\\tfrac``), a percent sign or unit is dropped ("50%" -> 50,
*not* 0.5). The canonical form is :func:`audit_hub.schema.normalise_value` of the float ('45',
'0.5', '-3').

free: the last candidate's span, else (unless a refusal) the whole text; whitespace-collapsed,
casefolded, trailing period removed. A text that is a single number is written canonically.

Scoring (:func:`score_exact`): unparseable counts as wrong; numbers (numeric and free) compare with
relative tolerance 1e-6 ('1/2' == '0.5' == '\\frac{1}{2}', '1,000' == '1000', '50%' == '50').

:func:`fill_answers_and_exact` applies the rules to a whole runs table: it factorises the texts with
Arrow, reads each distinct text once (memoised), resolves bare letters / yes-no / numbers with
vectorised gathers, and only calls the per-question option rules for the remaining
(text, question) pairs.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import pandas as pd

from ..schema import ANSWER_TYPES, LETTERS, normalise_value

__all__ = ["extract_answer", "score_exact", "canonical_gold", "REL_TOL"]

REL_TOL = 1e-6
TYPE_CODE = {t: i for i, t in enumerate(ANSWER_TYPES)}
_BOX_OPEN, _BOX_CLOSE = "\x02", "\x03"
_CONTAINS_WHOLE_TEXT_MAX = 300

# ---------------------------------------------------------------------------------------------
# cleaning

_UNITS = r"(?:[kcmdµμ]?m|in|ft|yd|mi|units?|cm|dm|km|mm)"
_SUPERSCRIPT_UNIT = re.compile(r"\b(" + _UNITS + r")\s*[²³]")
_SUPERSCRIPT = re.compile(r"[²³]")
_LATEX_CARET_UNIT = re.compile(r"\b(" + _UNITS + r")\}?\s*\^\s*\{?\s*[23]\s*\}?")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree\b|\\circ\b")
_MD_MARKS = re.compile(r"\*\*|__|`+")
_MD_ITALIC = re.compile(r"(?<![\w*])\*([^*\s][^*\n]{0,80}?)\*(?![\w*])")
_LATEX_WRAP = re.compile(
    r"\\(?:text(?:bf|rm|it|tt|sf|normal|up)?|math(?:rm|bf|it|sf|tt|bb|cal|bfit)?|mbox|operatorname|"
    r"boldsymbol|bm|fbox|displaystyle|underline|emph)\s*\{([^{}]*)\}")
_LATEX_SPACES = re.compile(r"\\[,;:! ]|~|\\quad|\\qquad|\\left|\\right|\\displaystyle|\\textstyle")
_LATEX_DELIMS = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$")
_DIGIT_GROUP = re.compile(r"(?<=\d)(?:\{,\}|\\,)(?=\d{3}\b)")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _unbox(s: str) -> str:
    """Replace ``\\boxed{...}`` (brace-matched) by sentinel-delimited content."""
    out = []
    i = 0
    for m in _BOXED.finditer(s):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(s) and depth:
            c = s[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            j += 1
        content = s[m.end(): j - 1] if depth == 0 else s[m.end():]
        out.append(s[i:m.start()])
        out.append(_BOX_OPEN + content.replace(_BOX_OPEN, "").replace(_BOX_CLOSE, "") + _BOX_CLOSE)
        i = j
    out.append(s[i:])
    return "".join(out)


def _clean(s: str) -> str:
    """Normalise a raw prediction (see module docstring). Boxed content is kept in sentinels."""
    if not s.isascii():
        s = _SUPERSCRIPT_UNIT.sub(r"\1", s)
        s = _SUPERSCRIPT.sub(lambda m: "^2" if m.group(0) == "²" else "^3", s)
        s = s.replace("\u2212", "-")
        s = unicodedata.normalize("NFKC", s)
    if "*" in s or "_" in s or "`" in s:
        s = _MD_MARKS.sub("", s)
        if "*" in s:
            s = _MD_ITALIC.sub(r"\1", s)
    if "\\" in s or "$" in s or "~" in s:
        if "box" in s:
            s = _unbox(s)
        s = _DIGIT_GROUP.sub("", s)
        for _ in range(4):
            s2 = _LATEX_WRAP.sub(r"\1", s)
            if s2 == s:
                break
            s = s2
        s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
        s = _LATEX_CARET_UNIT.sub(r"\1", s)
        if "circ" in s or "degree" in s:
            s = _DEGREE.sub("°", s)
        s = _LATEX_SPACES.sub(" ", s)
        s = _LATEX_DELIMS.sub("", s)
    if "^" in s:  # a unit's exponent in plain text ("1 m^2", "150 cm^{2}") is not a number of the answer
        s = _LATEX_CARET_UNIT.sub(r"\1", s)
    return s.strip()


# ---------------------------------------------------------------------------------------------
# service errors: a call that failed and left its error message as the prediction

_SERVICE_ERROR = re.compile(
    r"error\s*code\s*[:=]?\s*[1-5]\d\d\b"
    r"|\b(?:RateLimit|APIConnection|APITimeout|APIStatus|InternalServer|ServiceUnavailable|BadRequest"
    r"|Authentication|PermissionDenied|UnprocessableEntity|ResourceExhausted|DeadlineExceeded|HTTP|API|"
    r"ReadTimeout|ConnectTimeout|Connection)(?:Error|Exception)\s*[:(]"
    r"|[\"']error[\"']\s*:\s*\{"
    r"|\b(?:insufficient_quota|exceeded\s+your\s+current\s+quota|invalid_request_error|overloaded_error"
    r"|content_filter|resource\s+has\s+been\s+exhausted)\b"
    r"|traceback\s+\(most\s+recent\s+call\s+last\)"
    r"|\brate[\s_-]?limit(?:ed)?\b.{0,40}?\b(?:exceeded|reached)\b"
    r"|^\s*(?:request\s+timed\s+out|connection\s+error)\.?\s*$",  # the openai SDK's timeout and connection messages
    re.IGNORECASE | re.DOTALL)
# phrases that are an error only beside a status code or an error word ("Service unavailable" alone may be a
# sign's text read from an image)
_SERVICE_PHRASE = re.compile(
    r"\b(?:too\s+many\s+requests|service\s+(?:temporarily\s+)?unavailable|bad\s+gateway|gateway\s+time-?out"
    r"|internal\s+server\s+error|(?:request|read|connection)\s+timed?\s*-?\s*out"
    r"|connection\s+(?:refused|reset|aborted))\b", re.IGNORECASE)
_SERVICE_CONTEXT = re.compile(r"\b[45]\d\d\b|\b(?:error|exception|failed|failure|retry|retries)\b", re.IGNORECASE)
_SERVICE_HEAD = 300
_SERVICE_KW = re.compile(r"error|exception|traceback|timed|limit|quota|content_filter|exhausted|unavailable|gateway"
                         r"|too many|refused|reset|aborted")


def is_service_error(raw: str) -> bool:
    """Whether a prediction is a failed call's error message ("Error code: 429 - rate limit exceeded",
    "openai.APIConnectionError: ...", a JSON error body) rather than an answer. Only the first
    300 characters are read, so a long answer that quotes an error later is still read."""
    head = raw[:_SERVICE_HEAD]
    if _SERVICE_KW.search(head.lower()) is None:  # speed: the full patterns only run beside a keyword
        return False
    if _SERVICE_ERROR.search(head) is not None:
        return True
    m = _SERVICE_PHRASE.search(head)
    if m is None:
        return False
    return _SERVICE_CONTEXT.search(head[: m.start()] + " " + head[m.end():]) is not None


def _read(raw: str) -> str:
    """The cleaned text the rules read; empty (unparseable) for a failed call's error message."""
    return "" if is_service_error(raw) else _clean(raw)


# ---------------------------------------------------------------------------------------------
# answer candidates (boxed, explicit statements, letter-first statements)

_CONNECT = (r"(?:\s*[:：=]|\s+(?:is|are|was|would\s+be|should\s+be|will\s+be|must\s+be|might\s+be|"
            r"could\s+be|seems\s+to\s+be|appears\s+to\s+be|becomes)\b)(?:\s*[:：])?")
_CUE = re.compile(
    r"(?:\b(?:final\s+(?:answer|choice|option)s?(?:" + _CONNECT + r")?"
    r"|(?:correct|right|best|proper|true)\s+(?:answer|option|choice|letter)(?:\s+(?:option|choice|letter))?s?"
    + _CONNECT +
    r"|answers?(?:\s+(?:option|choice|letter))?(?:\s+(?:to|for)\s+(?:this|the)\s+(?:question|problem))?"
    + _CONNECT +
    r"|(?:my|the)\s+(?:choice|option|pick|selection)" + _CONNECT +
    r"|(?:i|we)(?:\s+would|\s+will|'d|'ll)?\s+(?:choose|pick|select|go\s+with|opt\s+for)\b)"
    r"|答案\s*(?:是|为|為|[:：])?|选择?\s*(?=[A-Za-z(\[]))",
    re.IGNORECASE)
_LETTER_FIRST = re.compile(
    r"(?<![A-Za-z0-9'])(?:(?:option|choice)\s+)?(?:[(\[]([A-Za-z])[)\]]|((?-i:[A-Z])))\s+"
    r"(?:is|would\s+be|should\s+be|seems\s+to\s+be)\s+(?:the\s+)?"
    r"(?:(?:most\s+)?(?:correct|right|best)(?:\s+(?:answer|option|choice))?|answer)\b",
    re.IGNORECASE)
# Speed: the full regexes above are slow to scan a long text with, so a cheap keyword scan of the
# lower-cased text finds where they can match and they run only in a window around each keyword.
_CUE_KW = re.compile(r"answer|option|choice|choose|pick|select|go with|opt for|答案|选|選")
_LETTER_FIRST_KW = re.compile(r"correct|right|best|answer")


_NOUN_CUE = re.compile(
    r"(?:answer|option|choice|letter)s?(?:\s+(?:option|choice|letter))?"
    r"(?:\s+(?:to|for)\s+(?:this|the)\s+(?:question|problem))?(" + _CONNECT + r")?", re.IGNORECASE)
_NOUN_BEFORE = re.compile(r"(?:final|correct|right|best|proper|true|my|the|your)\s+(?:answer\s+)?$")
_VERB_BEFORE = re.compile(r"\b(?:i|we)(?:\s+would|\s+will|'d|'ll)?\s+$")
_CJK_CUE = re.compile(r"答案\s*(?:是|为|為|[:：])?|[选選]择?\s*(?=[A-Za-z(\[])")


def _find_cues(t: str, low: str):
    """(start, end) of explicit answer statements; the answer span starts at ``end``.

    Same language as :data:`_CUE`, but anchored at keywords found by a fast scan."""
    last_end = 0
    for k in _CUE_KW.finditer(low):
        p = k.start()
        if p < last_end:
            continue
        w = k.group()
        if w in ("answer", "option", "choice"):
            if p > 0 and low[p - 1].isalpha():
                continue
            m = _NOUN_CUE.match(t, p)
            if m is None:
                continue
            before = _NOUN_BEFORE.search(low, max(0, p - 24), p)
            if m.group(1) is None:
                # "Final answer B" needs no connector; anything else does
                if before is None or not before.group().startswith("final"):
                    continue
            elif w != "answer" and before is None:
                continue  # "option is" alone ("this option is wrong") is no answer statement
            start = before.start() if before is not None else p
            last_end = m.end()
            yield start, m.end()
        elif w in ("答案", "选", "選"):
            m = _CJK_CUE.match(t, p)
            if m is not None:
                last_end = m.end()
                yield p, m.end()
        else:  # choose / pick / select / go with / opt for: needs "I" / "we" before it
            if (p > 0 and low[p - 1].isalpha()) or (k.end() < len(low) and low[k.end()].isalpha()):
                continue
            b = _VERB_BEFORE.search(low, max(0, p - 16), p)
            if b is not None:
                last_end = k.end()
                yield b.start(), k.end()


def _letter_first(t: str, low: str, same: bool):
    """Matches of :data:`_LETTER_FIRST` ("B is the correct answer"), searched near keywords only."""
    if not same:
        yield from _LETTER_FIRST.finditer(t)
        return
    last_end = 0
    for k in _LETTER_FIRST_KW.finditer(low):
        p = k.start()
        pre = low[max(0, p - 24):p]
        if p < last_end or (" is " not in pre and " be " not in pre):
            continue
        m = _LETTER_FIRST.search(t, max(last_end, p - 48), min(len(t), k.end() + 8))
        if m is not None and m.end() >= k.end():
            last_end = m.end()
            yield m


_SPAN_END = re.compile(r"\n|[.!?;。](?=\s|$)")
_BOXED_CONTENT = re.compile(_BOX_OPEN + "([^" + _BOX_OPEN + _BOX_CLOSE + "]*)" + _BOX_CLOSE)


def _candidates(t: str) -> list[tuple[int, str, str | None]]:
    """(position, span, letter-or-None) of answer candidates in the cleaned text, by position.

    ``letter`` is set only for letter-first statements ("B is the correct answer")."""
    out: list[tuple[int, str, str | None]] = []
    if _BOX_OPEN in t:
        for m in _BOXED_CONTENT.finditer(t):
            out.append((m.start(), m.group(1).strip(), None))
    low = t.lower()
    same = len(low) == len(t)
    for start, end in (_find_cues(t, low) if same else ((m.start(), m.end()) for m in _CUE.finditer(t))):
        rest = t[end: end + 240]
        e = _SPAN_END.search(rest)
        span = rest[: e.start()] if e else rest
        if _BOX_OPEN in span or _BOX_CLOSE in span:
            span = span.replace(_BOX_OPEN, "").replace(_BOX_CLOSE, "")
        out.append((start, span.strip(), None))
    for m in _letter_first(t, low, same):
        out.append((m.start(), "", (m.group(1) or m.group(2)).upper()))
    if len(out) > 1:
        out.sort(key=lambda c: c[0])
    return out


# ---------------------------------------------------------------------------------------------
# letters

_SPAN_FILL = re.compile(
    r"(?:[\s:：=\"'“”‘’]+|(?:therefore|thus|hence|so|clearly|probably|likely|most\s+likely|definitely|"
    r"certainly|actually|indeed|then|simply|just|either|both|option|choice|letter|answer|the|is)\b[\s:,]*)*",
    re.IGNORECASE)
_SPAN_LETTER = re.compile(r"([(\[]\s*)?([A-Za-z])\s*([)\]])?(?![A-Za-z0-9'’])")
_WORD_AFTER = re.compile(r"[ \t]+([A-Za-z0-9]+)")
_CONNECTORS = frozenset(
    "because since as which with for from given due according based that this option choice "
    "is it seems corresponds represents matches".split())
_CONFLICT = re.compile(
    r"\s*(?:,\s*(?:or|and)\b|,|/|&|\+|\bor\b|\band\b|\bvs\.?)\s*(?:(?:option|choice)\s+)?[(\[]?\s*([A-Za-z])\s*[)\]]?"
    r"(?![A-Za-z0-9'’])", re.IGNORECASE)
_LEAD = re.compile(
    r"\s*(?:[(\[]\s*([A-Za-z])\s*[)\]]"
    r"|([A-Z])(?=\s*[):：\]]|\.(?![A-Za-z])|\s+[-–—]\s|[ \t]*(?:\n|$))"
    r"|([a-z])(?=\s*[):]|\.(?![A-Za-z])|\s*$))")
_TRAIL = re.compile(
    r"(?:\b(?:therefore|thus|hence|so)\b,?\s*(?:(?:it'?s|it\s+is|we\s+get|we\s+have)\s+)?(?:(?:option|choice)\s+)?"
    r"[(\[]?([A-Za-z])[)\]]?"
    r"|\b(?:option|choice)\s+[(\[]?([A-Za-z])[)\]]?"
    r"|[(\[]([A-Za-z])[)\]]"
    r"|(?:[:：=]|\b(?:get|choose|pick|select)\b)\s*[(\[]?((?-i:[A-Z]))[)\]]?"
    r"|\n\s*[(\[]?((?-i:[A-Z]))[)\]]?)"
    r"\s*[.!]?\s*$",
    re.IGNORECASE)
_TRAIL_CONFLICT = re.compile(
    r"[(\[]?(?<![A-Za-z0-9])([A-Za-z])[)\]]?\s*(?:,\s*(?:or|and)\b|,|/|&|\bor\b|\band\b)\s*"
    r"(?:(?:option|choice)\s+)?[(\[]?$",
    re.IGNORECASE)

_NO_LETTER, _CONFLICTING = -1, -3


def letter_code(ch: str) -> int:
    return ord(ch.upper()) - 65


def _span_letter(span: str) -> int:
    """Letter index at the start of an answer span, -1 when there is none, -3 when conflicting."""
    pos = _SPAN_FILL.match(span).end()
    m = _SPAN_LETTER.match(span, pos)
    if m is None:
        return _NO_LETTER
    ch = m.group(2)
    bracketed = m.group(1) is not None or m.group(3) is not None
    if not bracketed and (ch in "AI" or ch.islower()):
        w = _WORD_AFTER.match(span, m.end())
        if w is not None and w.group(1).lower() not in _CONNECTORS:
            return _NO_LETTER  # "a triangle", "I think", "A cat"
    c = _CONFLICT.match(span, m.end())
    if c is not None and c.group(1).upper() != ch.upper():
        return _CONFLICTING
    return letter_code(ch)


def _lead_letter(t: str) -> tuple[int, bool]:
    """(letter index | -1 | -3, pure) for a letter at the very start of the cleaned text.

    ``pure`` is True when nothing but punctuation follows the letter."""
    m = _LEAD.match(t)
    if m is None:
        return _NO_LETTER, False
    ch = m.group(1) or m.group(2) or m.group(3)
    rest = t[m.end():]
    c = _CONFLICT.match(rest)
    if c is not None and c.group(1).upper() != ch.upper():
        return _CONFLICTING, False
    pure = rest.strip(" \t\n.:;)]!") == ""
    return letter_code(ch), pure


def _trail_letter(t: str) -> int:
    """Letter of a trailing convention ("... Therefore, B."), -1 none, -3 conflicting."""
    # cheap pre-check: the text must end with a standalone letter (plus ")", "]", ".", "!")
    e = t.rstrip(" \t\n.!").rstrip(")]")
    if not e or not e[-1].isascii() or not e[-1].isalpha() or (len(e) > 1 and e[-2].isalnum()):
        return _NO_LETTER
    tail = t[-80:]
    m = _TRAIL.search(tail)
    if m is None:
        return _NO_LETTER
    gi = next(i for i in range(1, 6) if m.group(i))
    ch = m.group(gi)
    before = tail[: m.start(gi)].rstrip()
    c = _TRAIL_CONFLICT.search(before) if before else None
    if c is not None and c.group(1).upper() != ch.upper():
        return _CONFLICTING
    return letter_code(ch)


# ---------------------------------------------------------------------------------------------
# refusals

_REFUSAL = re.compile(
    r"\b(?:can ?not|can't|could ?not|couldn't|unable to|impossible to|not possible to|no way to)\s+"
    r"(?:be\s+)?(?:determine|determined|tell|told|say|answer|answered|know|known|infer|inferred|"
    r"solve|solved|decide|decided|calculate|calculated|identify|identified|see|view|access|provide|"
    r"work(?:ed)?\s+out|find|found|conclude|concluded|judge|confirm|verify)\b"
    r"|\b(?:not|no)\s+(?:enough|sufficient|adequate)\s+(?:information|info|context|data|details|evidence)"
    r"|\binsufficient\s+(?:information|info|data|context|details|evidence)"
    r"|\bi'?m\s+sorry|\bi\s+am\s+sorry|\bsorry,|\bas\s+an\s+ai\b|\bunable\s+to\b"
    r"|\bnone\s+of\s+the\s+(?:above|options|choices|answers|given)"
    r"|\bno\s+(?:image|figure|picture|diagram|graph)s?\s+(?:is\s+|was\s+|were\s+|has\s+been\s+)?"
    r"(?:provided|given|attached|shown|included|available)"
    r"|\bwithout\s+(?:the|an|any|a)\s+(?:image|figure|picture|diagram|graph|visual)"
    r"|\b(?:please|need\s+to|you\s+need\s+to)\s+provide\b|\bprovide\s+more\s+(?:details|information|context)"
    r"|\bnot\s+(?:clear|possible)\s+(?:from|to\s+(?:determine|tell|say))",
    re.IGNORECASE)


_REFUSAL_KW = re.compile(r"not|n't|sorry|unable|impossible|none|no |without|provide|insufficient|as an ai")


def _is_refusal(t: str) -> bool:
    low = t.lower()
    if len(low) != len(t):
        return _REFUSAL.search(t) is not None
    for k in _REFUSAL_KW.finditer(low):
        if _REFUSAL.search(t, max(0, k.start() - 24), min(len(t), k.end() + 64)) is not None:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# numbers

_FRAC = re.compile(r"(-)?\\frac\s*\{\s*(-?[\d.,]+)\s*\}\s*\{\s*(-?[\d.,]+)\s*\}")
_NUMBER = re.compile(
    r"(?<![\w.])(-)?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE]([+-]?\d{1,4})(?![\w.]))?(?![\d])"
    r"(?:\s*/\s*(\d+(?:\.\d+)?)(?![\d.]))?")
_FULL_NUMBER = re.compile(
    r"\s*[+]?(-)?\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE]([+-]?\d+))?"
    r"(?:\s*/\s*(\d+(?:\.\d+)?))?\s*%?\s*(?P<unit>[^\W\d_]{1,12}\.?|°)?\s*\.?\s*$")
_NUM_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}


def _frac_sub(m: re.Match) -> str:
    a, b = m.group(2).replace(",", ""), m.group(3).replace(",", "")
    neg = "-" if m.group(1) else ""
    return f" {neg}{a}/{b} "


def _to_float(sign: str | None, a: str, b: str | None, exp: str | None = None) -> float | None:
    try:
        x = float(a.replace(",", ""))
        if exp is not None:
            x *= 10.0 ** int(exp)
        if b is not None:
            d = float(b)
            if d == 0:
                return None
            x /= d
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(x):
        return None
    return -x if sign else x


def _numbers(t: str) -> list[float]:
    """All numbers in a cleaned text, in order (fractions evaluated, % and units dropped)."""
    if "\\frac" in t:
        t = _FRAC.sub(_frac_sub, t)
    out = []
    for m in _NUMBER.finditer(t):
        x = _to_float(m.group(1), m.group(2), m.group(4), m.group(3))
        if x is not None:
            out.append(x)
    return out


_HAS_DIGIT = re.compile(r"\d")


def num_full(s: str, allow_unit: bool = False) -> float | None:
    """The value of a text that is a single number (fraction, %, thousands) -- else None."""
    if not s or _HAS_DIGIT.search(s) is None:
        return None
    t = _clean(s) if ("\\" in s or "$" in s or not s.isascii()) else s
    if "\\frac" in t:
        t = _FRAC.sub(_frac_sub, t).strip()
    m = _FULL_NUMBER.match(t)
    if m is None or (m.group("unit") and not allow_unit):
        return None
    return _to_float(m.group(1), m.group(2), m.group(4), m.group(3))


def _canon_num(x: float) -> str:
    if x == 0:
        x = 0.0
    return normalise_value(repr(x))


# ---------------------------------------------------------------------------------------------
# option matching (option-dependent rules)

LOOSE_DROP = re.compile(r"[\W_]+")
_SPACES = re.compile(r"\s+")
_BRACE1 = re.compile(r"\{(\w)\}")


def compact_key(strict: str) -> str:
    """Math-safe comparison key: no whitespace, ``{x}`` -> ``x`` for one character, no final period."""
    return _BRACE1.sub(r"\1", _SPACES.sub("", strict)).rstrip(".")


def strict_key(s: str) -> str:
    t = _clean(s).replace(_BOX_OPEN, "").replace(_BOX_CLOSE, "")
    t = " ".join(t.casefold().split())
    return t.strip(" .;:!\"'“”")


class Options:
    """Normalised forms of one question's options (built once per question)."""

    __slots__ = ("k", "strict", "compact", "loose", "nums", "patterns", "allow_refusal", "letter_text")

    def __init__(self, options: Sequence[str]):
        self.k = len(options)
        self.strict = [strict_key(str(o)) for o in options]
        self.compact = [compact_key(s) for s in self.strict]
        self.loose = [LOOSE_DROP.sub("", s) for s in self.strict]
        self.nums = [num_full(s, allow_unit=True) for s in self.strict]
        # options whose text is a single letter ("$S$", "(c)", Roman "I"): letter code -> option index
        self.letter_text: dict[int, int] = {}
        for j, lo in enumerate(self.loose):
            if len(lo) == 1 and "a" <= lo <= "z":
                self.letter_text.setdefault(letter_code(lo), j)
        self.patterns: list[re.Pattern | None] | None = None  # compiled on first use
        # a question whose options contain a refusal phrase ("This cannot be worked out") keeps it
        self.allow_refusal = not any(_is_refusal(s) for s in self.strict)

    def _patterns(self) -> list[re.Pattern | None]:
        if self.patterns is None:
            pats: list[re.Pattern | None] = []
            for s in self.strict:
                if len(s) >= 2:
                    lb = r"(?<![\w.-])" if s[0].isdigit() else r"(?<![\w.])"
                    pats.append(re.compile(lb + re.escape(s) + r"(?![\w]|\.\d)"))
                else:
                    pats.append(None)
            self.patterns = pats
        return self.patterns

    def exact(self, text: str) -> int:
        """Index of the single option the whole text equals, else -1."""
        s = strict_key(text)
        if not s:
            return -1
        hits = [j for j, o in enumerate(self.strict) if o == s]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            return -1
        x = num_full(s, allow_unit=True)
        if x is not None:
            hits = [j for j, v in enumerate(self.nums) if v is not None and _close(v, x)]
            if len(hits) == 1:
                return hits[0]
            if any(v is not None for v in self.nums):
                return -1  # numbers compare numerically only ("-3" is not "3")
        c = compact_key(s)
        hits = [j for j, o in enumerate(self.compact) if o == c]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            return -1
        lo = LOOSE_DROP.sub("", s)
        if lo:
            hits = [j for j, o in enumerate(self.loose) if o == lo]
            if len(hits) == 1:
                return hits[0]
        return -1

    def contains(self, text: str) -> int:
        """Index of the single option contained (whole word/phrase) in the text, else -1."""
        t = " ".join(text.replace(_BOX_OPEN, " ").replace(_BOX_CLOSE, " ").casefold().split())
        if len(t) > _CONTAINS_WHOLE_TEXT_MAX:
            t = _last_sentence(t)
        spans: list[tuple[int, int, int]] = []
        for j, p in enumerate(self._patterns()):
            if p is not None:
                spans.extend((m.start(), m.end(), j) for m in p.finditer(t))
        if not spans:
            return -1
        found = set()
        for a, b, j in spans:
            if not any(a2 <= a and b <= b2 and (b2 - a2) > (b - a) for a2, b2, _ in spans):
                found.add(j)
        return found.pop() if len(found) == 1 else -1


_SENT_SPLIT = re.compile(r"(?:[.!?。](?=\s)|\n)")


def _last_sentence(t: str) -> str:
    t = t.rstrip(" .!?\n")
    parts = _SENT_SPLIT.split(t)
    return parts[-1] if parts else t


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(REL_TOL * max(abs(a), abs(b)), 1e-12)


# ---------------------------------------------------------------------------------------------
# per-text parses (option-independent, memoised)

DEPENDS = -2  # the letter depends on the option texts


class MCParse:
    __slots__ = ("text", "cands", "lead", "pure", "trail", "refusal", "indep")

    def __init__(self, raw: str):
        t = _read(raw)
        self.text = t
        cands = []
        for _, span, letter in _candidates(t):
            code = letter_code(letter) if letter is not None else _span_letter(span)
            cands.append((code, span))
        self.cands = cands
        self.lead, self.pure = _lead_letter(t) if t else (_NO_LETTER, False)
        self.trail = _NO_LETTER
        self.refusal = False
        # the answer when it does not depend on the option texts (DEPENDS otherwise)
        indep = DEPENDS
        if not t:
            indep = _NO_LETTER
        elif cands:
            code = cands[-1][0]
            if code >= 0 or code == _CONFLICTING:
                indep = code
        elif self.lead >= 0 or self.lead == _CONFLICTING:
            indep = self.lead
        self.indep = indep
        if indep == DEPENDS and t:
            self.trail = _trail_letter(t)
            self.refusal = _is_refusal(t)


@lru_cache(maxsize=1 << 16)
def _mc_parse(raw: str) -> MCParse:
    return MCParse(raw)


def _read_letter(code: int, opts: Options) -> int:
    """Option index a letter reading stands for, given option texts that are letters themselves.

    A letter whose text is *another* option's text (options ``["A", "B", "D", "F", "G"]``,
    answer "D") is ambiguous -> -1. A letter beyond the K options is read as the option whose
    text it is ("$S$", Roman numeral "I"), else -1."""
    j = opts.letter_text.get(code, -1)
    if code < opts.k:
        return code if j < 0 or j == code else -1
    return j


def resolve_mc(p: MCParse, opts: Options) -> int:
    """Apply the mc rules in priority order; letter index or -1."""
    if not p.text:
        return -1
    for code, span in reversed(p.cands):
        if code == _CONFLICTING:
            return -1
        if code >= 0:
            j = _read_letter(code, opts)
            if j < 0 and code >= opts.k and span:
                j = opts.exact(span)  # "I. only" as an option text
            return j
        if span:
            j = opts.exact(span)
            if j < 0:
                j = opts.contains(span)
            if j >= 0:
                return j
    if p.lead == _CONFLICTING:
        return -1
    if p.lead >= 0:
        j = _read_letter(p.lead, opts)
        if j < 0 and p.lead >= opts.k:
            j = opts.exact(p.text)  # "I. only", "V" as option texts
        return j
    j = opts.exact(p.text)
    if j >= 0:
        return j
    if p.trail == _CONFLICTING:
        return -1
    if p.trail >= 0:
        return _read_letter(p.trail, opts)
    if p.refusal and opts.allow_refusal:
        return -1
    return opts.contains(p.text)


_YN = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_YN_LEAD = re.compile(r"[\W_]*(yes|no)\b(?:\s*(?:/|,|or|and)?\s*(yes|no)\b)?", re.IGNORECASE)
_YN_TRAIL = re.compile(r"\b(?:therefore|thus|hence|so|answer)\b[\s,:]*(?:(?:it\s+is|is)\s+)?(yes|no)\W*$",
                       re.IGNORECASE)
_YN_CUT = re.compile(r"[,.;!?\n]")


@lru_cache(maxsize=1 << 16)
def resolve_yesno(raw: str) -> str | None:
    t = _read(raw)
    if not t:
        return None
    for _, span, letter in reversed(_candidates(t)):
        if letter is not None:
            continue
        c = _YN_CUT.search(span)
        words = {w.lower() for w in _YN.findall(span[: c.start()] if c else span)}
        if len(words) == 2:
            return None
        if len(words) == 1:
            return words.pop()
    m = _YN_LEAD.match(t)
    if m is not None:
        if m.group(2) and m.group(2).lower() != m.group(1).lower():
            return None
        return m.group(1).lower()
    m = _YN_TRAIL.search(t[-120:])
    if m is not None:
        return m.group(1).lower()
    return None


@lru_cache(maxsize=1 << 16)
def resolve_numeric(raw: str) -> str | None:
    t = _read(raw)
    if not t:
        return None
    for _, span, letter in reversed(_candidates(t)):
        if letter is None and span:
            nums = _numbers(span)
            if nums:
                return _canon_num(nums[-1])
    if _is_refusal(t):
        return None
    nums = _numbers(t)
    if nums:
        return _canon_num(nums[-1])
    w = t.strip(" .!").lower()
    if w in _NUM_WORDS:
        return str(_NUM_WORDS[w])
    return None


def _free_norm(s: str) -> str | None:
    s = " ".join(s.replace(_BOX_OPEN, "").replace(_BOX_CLOSE, "").casefold().split())
    s = s.strip(" .;:!\"'“”")
    if not s:
        return None
    x = num_full(s)
    return _canon_num(x) if x is not None else s


@lru_cache(maxsize=1 << 16)
def resolve_free(raw: str) -> str | None:
    t = _read(raw)
    if not t:
        return None
    for _, span, letter in reversed(_candidates(t)):
        if letter is None and span:
            v = _free_norm(span)
            if v is not None:
                return v
    if _is_refusal(t):
        return None
    return _free_norm(t)


# ---------------------------------------------------------------------------------------------
# public API


def extract_answer(prediction: str | None, options: Sequence[str] | None, answer_type: str) -> str | None:
    """Read the answer a free-text prediction commits to; ``None`` when unparseable.

    Returns an upper-case option letter for ``mc``, ``'yes'``/``'no'`` for ``yesno``, a canonical
    number string (``'45'``, ``'0.5'``, ``'-3'``) for ``numeric`` and a whitespace-normalised,
    casefolded string for ``free``. See the module docstring for the rules and their order.
    """
    if answer_type not in TYPE_CODE:
        raise ValueError(f"unknown answer_type {answer_type!r}; expected one of {ANSWER_TYPES}")
    if prediction is None:
        return None
    try:
        if pd.isna(prediction):
            return None
    except (TypeError, ValueError):
        pass
    raw = str(prediction)
    if answer_type == "mc":
        opts = Options([] if options is None else [str(o) for o in options])
        j = resolve_mc(_mc_parse(raw), opts)
        return LETTERS[j] if 0 <= j < opts.k else None
    if answer_type == "yesno":
        return resolve_yesno(raw)
    if answer_type == "numeric":
        return resolve_numeric(raw)
    return resolve_free(raw)


def canonical_gold(gold: str | None, answer_type: str) -> str | None:
    """The gold answer in the form :func:`extract_answer` returns; ``None`` when unusable."""
    if gold is None:
        return None
    try:
        if pd.isna(gold):
            return None
    except (TypeError, ValueError):
        pass
    g = str(gold).strip()
    if not g:
        return None
    if answer_type == "mc":
        g = g.strip("()[]. ").upper()
        return g if len(g) == 1 and g in LETTERS else None
    if answer_type == "yesno":
        g = g.lower().strip(".! ")
        return g if g in ("yes", "no") else None
    if answer_type == "numeric":
        x = num_full(g, allow_unit=True)
        return _canon_num(x) if x is not None else _free_norm(_clean(g))
    if answer_type == "free":
        return _free_norm(_clean(g))
    raise ValueError(f"unknown answer_type {answer_type!r}; expected one of {ANSWER_TYPES}")


def score_exact(extracted: str | None, gold: str, answer_type: str) -> bool | None:
    """Exact-match correctness of an extracted answer.

    ``None`` only when the gold is unusable (empty, or not a letter for ``mc``); an unparseable
    prediction (``extracted is None``) is wrong. Numbers (``numeric`` and number-valued ``free``)
    compare numerically with relative tolerance :data:`REL_TOL` (1e-6): ``'1/2' == '0.5'``,
    ``'1,000' == '1000'``, ``'50%' == '50'`` (a percent sign is a unit, so ``'50%' != '0.5'``).
    """
    g = canonical_gold(gold, answer_type)
    if g is None:
        return None
    if extracted is None:
        return False
    try:
        if pd.isna(extracted):
            return False
    except (TypeError, ValueError):
        pass
    e = str(extracted).strip()
    if answer_type == "mc":
        return e.upper() == g
    if answer_type == "yesno":
        return e.lower() == g
    e_norm = _free_norm(_clean(e))
    if e_norm == g or (e_norm is not None and compact_key(e_norm) == compact_key(g)):
        return True
    xe = num_full(e, allow_unit=answer_type == "numeric")
    xg = num_full(str(gold).strip(), allow_unit=answer_type == "numeric")
    return bool(xe is not None and xg is not None and _close(xe, xg))
