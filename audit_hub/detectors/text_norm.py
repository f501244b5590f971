"""Normalisation of option and answer texts, shared by the option detectors.

One implementation, vectorised over *unique* strings with pyarrow compute kernels (C++), with a small
Python step only for the strings that need exact number handling. The steps, in order:

1. Unicode NFKC, then light LaTeX clean-up: ``$`` removed, ``\\frac{a}{b}`` -> ``a/b``,
   ``\\mathrm{x}``/``\\text{x}`` -> ``x``, ``^{\\circ}`` -> ``°``, ``\\left``/``\\right``/spacing
   commands and ``~`` -> space, braces dropped.
2. Case folding (``str.casefold`` semantics; pyarrow lower-casing for ASCII, Python casefold for the rest).
3. Letter prefixes stripped: ``"A. x"``, ``"A) x"``, ``"(A) x"``, ``"a: x"`` -> ``"x"``. A text that is
   *only* a letter (``"A"``, ``"(B)"``, ``"c)"``) is a *bare letter* and is left alone; see
   :func:`bare_letter_index`.
4. Whitespace collapsed, trailing punctuation (``.,;:!?``) and surrounding quotes removed.
5. Numbers: every number token is rewritten canonically with exact rational arithmetic, so
   ``"0.5" == ".50" == "1/2" == "2/4"`` and ``"1,000" == "1000"``; a text that is a number as a whole
   is flagged ``is_number`` (compare those numerically only, never by edit distance).

``skeleton`` is the normalised text with each number token replaced by ``#``: two different texts
with the same skeleton differ only in their numbers (``"option 1-2"`` vs ``"option 1-3"``), which is a
numeric difference, not a near duplicate.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from ..schema import canonical_number, parse_number

# RE2 patterns (pyarrow); order matters
_LATEX_RULES: tuple[tuple[str, str], ...] = (
    (r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"\1/\2"),
    (r"\\(?:mathrm|text|textrm|textbf|mathbf|mathit|operatorname|rm|bf)\s*\{([^{}]*)\}", r"\1"),
    (r"\^\s*\{?\s*\\circ\s*\}?", "°"),
    (r"\\(?:circ|degree)", "°"),
    (r"\\(?:left|right)\b", ""),
    (r"\\[,;:! ]", " "),
    (r"\\%", "%"),
    (r"\\cdot", "*"),
    (r"\\times", "×"),
    (r"[$~]", " "),
    (r"[{}]", ""),
)
# letter prefix followed by content: "(a) x", "a) x", "a. x", "a: x" (after lower-casing)
_PREFIX_RE = r"^\s*(?:\(\s*[a-z]\s*\)\s*|[a-z]\s*\)\s+|[a-z]\s*[.:]\s+)(\S)"
_TRAIL_PUNCT_RE = r"[\s.,;:!?]+$"
_QUOTES_RE = r"^[\"'`]+|[\"'`]+$"
_WS_RE = r"\s+"
# a number token (possibly a fraction, possibly with thousands separators)
_NUM_TOKEN = r"(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:\s*/\s*\d+)?"
_NUM_TOKEN_PY = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d*|\.\d+|\d+)(?:\s*/\s*(?:\d+))?")
_WHOLE_NUMBER_RE = r"^[-+−]?\s*(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.?\d*|\.\d+)(?:\s*/\s*\d+)?$"
# strings whose number tokens may change under canonicalisation
_NEEDS_NUM_FIX_RE = r"\d\.|\.\d|\d\s*/\s*\d|(^|[^\d.])0\d|\d,\d{3}|−"
_SKELETON_RE = r"\d+(?:\.\d+)?"
# roman numerals as whole tokens ("II only" vs "III only" differ in a number, not in wording)
_ROMAN_RE = r"(^|[^a-z#])(?:x{1,3}(?:ix|iv|vi{0,3}|i{1,3})?|ix|iv|vi{0,3}|i{1,3})($|[^a-z#])"
_BARE_RE = r"^[\s(\[]*(?P<l>[a-z])[\s)\].:]*$"


def _fix_numbers(text: str) -> str:
    text = text.replace("−", "-")

    def repl(m: re.Match) -> str:
        v = parse_number(m.group(0))
        return canonical_number(v) if v is not None else m.group(0)

    return _NUM_TOKEN_PY.sub(repl, text)


@dataclass
class NormalisedTexts:
    """Result of :func:`normalise_many`, one entry per input string (all numpy arrays)."""

    text: np.ndarray          # object: normalised text
    arrow: object             # the same texts as a pyarrow string array
    is_number: np.ndarray     # bool: the whole text is a number (text is then its canonical value)
    bare_letter: np.ndarray   # int8: 0..25 when the raw text is only a letter ("A", "(b)", "c)"), else -1
    n_chars: np.ndarray       # int32: length of the normalised text
    n_tokens: np.ndarray      # int32: whitespace tokens of the normalised text

    def codes(self) -> tuple[np.ndarray, np.ndarray]:
        """(int64 codes, unique texts as an object array): equal codes iff equal normalised texts."""
        enc = self.arrow.dictionary_encode()
        return (enc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object))

    @property
    def skeleton(self) -> np.ndarray:
        """Texts with number tokens replaced by ``#`` (see :func:`skeletons`)."""
        return skeletons(self.text)


def _on_subset(arr, mask: np.ndarray, fn):
    """Apply an arrow->arrow function to the masked elements only (fast path for the rest)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not mask.any():
        return arr
    if mask.all():
        return fn(arr)
    sub = fn(arr.filter(pa.array(mask)))
    return pc.replace_with_mask(arr, pa.array(mask), sub)


def _complex_pipeline(a):
    import pyarrow.compute as pc

    for pat, rep in _LATEX_RULES:
        a = pc.replace_substring_regex(a, pat, rep)
    a = pc.replace_substring_regex(a, _WS_RE, " ")
    a = pc.utf8_trim_whitespace(a)
    a = pc.replace_substring_regex(a, _PREFIX_RE, r"\1")
    a = pc.replace_substring_regex(a, _TRAIL_PUNCT_RE, "")
    a = pc.replace_substring_regex(a, _QUOTES_RE, "")
    return pc.utf8_trim_whitespace(a)


def normalise_many(strings) -> NormalisedTexts:
    """Normalise many strings at once (see the module docstring). None is treated as "".

    ``strings`` is a sequence of str/None or a pyarrow string array. Cost is a few vectorised passes;
    the regex pipeline runs only on texts with characters other than letters, digits, spaces and
    hyphens, and Python only on texts whose numbers must be rewritten.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(strings, (pa.Array, pa.ChunkedArray)):
        raw = pc.fill_null(strings.cast(pa.string()), "")
        if isinstance(raw, pa.ChunkedArray):
            raw = raw.combine_chunks()
    else:
        raw = pa.array(["" if s is None else str(s) for s in strings], type=pa.string())
    n = len(raw)
    a = pc.utf8_normalize(raw, "NFKC")
    ascii_mask = pc.string_is_ascii(a).to_numpy(zero_copy_only=False)
    a = pc.utf8_lower(a)
    if not ascii_mask.all():  # exact casefold semantics (e.g. "ß" -> "ss") for the few non-ASCII texts
        vals = a.to_pylist()
        for i in np.flatnonzero(~ascii_mask):
            vals[i] = unicodedata.normalize("NFKC", vals[i].casefold())
        a = pa.array(vals, type=pa.string())
    # bare letters are judged on the text before any stripping
    short = pc.less_equal(pc.utf8_length(a), 8).to_numpy(zero_copy_only=False)
    bare = np.full(n, -1, dtype=np.int8)
    if short.any():
        idx = np.flatnonzero(short)
        m = pc.extract_regex(a.take(pa.array(idx)), _BARE_RE)
        ok = pc.is_valid(m).to_numpy(zero_copy_only=False)
        if ok.any():
            letters = pc.struct_field(m, [0]).to_numpy(zero_copy_only=False)
            bare[idx[ok]] = [ord(c) - 97 for c in letters[ok]]
    simple = pc.match_substring_regex(a, r"^[a-z0-9]+(?:[ -][a-z0-9]+)*$").to_numpy(zero_copy_only=False)
    a = _on_subset(a, ~simple, _complex_pipeline)
    # numbers: exact canonical form, Python only where a token can change
    first = pc.utf8_slice_codeunits(a, 0, 1)
    maybe_num = pc.is_in(first, pa.array(list("0123456789+-.−"))).to_numpy(zero_copy_only=False)
    whole = np.zeros(n, dtype=bool)
    if maybe_num.any():
        idx = np.flatnonzero(maybe_num)
        whole[idx] = pc.match_substring_regex(a.take(pa.array(idx)), _WHOLE_NUMBER_RE).to_numpy(
            zero_copy_only=False)
    has_digit = pc.match_substring_regex(a, r"\d").to_numpy(zero_copy_only=False)
    fix = np.zeros(n, dtype=bool)
    if has_digit.any():
        idx = np.flatnonzero(has_digit)
        fix[idx] = pc.match_substring_regex(a.take(pa.array(idx)), _NEEDS_NUM_FIX_RE).to_numpy(
            zero_copy_only=False)
    todo = np.flatnonzero(fix | whole)
    is_number = np.zeros(n, dtype=bool)
    if len(todo):
        sub = a.take(pa.array(todo)).to_pylist()
        for k, i in enumerate(todo):
            t = sub[k]
            if whole[i]:
                v = parse_number(t)
                if v is not None:
                    sub[k] = canonical_number(v)
                    is_number[i] = True
                    continue
            sub[k] = _fix_numbers(t)
        mask = np.zeros(n, dtype=bool)
        mask[todo] = True
        a = pc.replace_with_mask(a, pa.array(mask), pa.array(sub, type=pa.string()))
    n_chars = pc.utf8_length(a).to_numpy(zero_copy_only=False).astype(np.int32)
    spaces = pc.count_substring(a, " ").to_numpy(zero_copy_only=False)
    n_tokens = np.where(n_chars > 0, spaces + 1, 0).astype(np.int32)
    text = np.asarray(a.to_numpy(zero_copy_only=False), dtype=object)
    return NormalisedTexts(text=text, arrow=a, is_number=is_number, bare_letter=bare, n_chars=n_chars,
                           n_tokens=n_tokens)


def skeletons(texts) -> np.ndarray:
    """Normalised texts with each number token (digits, or a lower-case roman numeral up to xxxix as a
    whole word) replaced by ``#``: two different texts with the same skeleton differ only in their
    numbers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    b = texts if isinstance(texts, pa.Array) else pa.array(list(texts), type=pa.string())
    has_digit = pc.match_substring_regex(b, r"\d").to_numpy(zero_copy_only=False)
    b = _on_subset(b, has_digit, lambda x: pc.replace_substring_regex(x, _SKELETON_RE, "#"))
    maybe_roman = pc.match_substring_regex(b, r"(^|[^a-z])[ivx]+($|[^a-z])").to_numpy(zero_copy_only=False)

    def roman(x):
        # two passes so that adjacent numerals sharing a separator ("i ii") are both replaced
        for _ in range(2):
            x = pc.replace_substring_regex(x, _ROMAN_RE, r"\1#\2")
        return x

    b = _on_subset(b, maybe_roman, roman)
    return np.asarray(b.to_numpy(zero_copy_only=False), dtype=object)


def normalise_text(text: str) -> str:
    """Normalised form of one text (same rules as :func:`normalise_many`)."""
    return str(normalise_many([text]).text[0])


def strip_letter_prefix(text: str) -> str:
    """``"A. foo"`` / ``"(b) foo"`` / ``"c) foo"`` -> ``"foo"`` (case kept); bare letters unchanged."""
    m = re.match(r"^\s*(?:\(\s*[A-Za-z]\s*\)\s*|[A-Za-z]\s*\)\s+|[A-Za-z]\s*[.:]\s+)(?=\S)", text)
    return text[m.end():] if m else text


def bare_letter_index(text: str) -> int:
    """0..25 when ``text`` is only an option letter (``"A"``, ``"(b)"``, ``"C)"``, ``"d."``), else -1."""
    return int(normalise_many([text]).bare_letter[0])


def is_bare_letter_option(text: str, position: int) -> bool:
    """True when the option text at ``position`` (A=0) is just its own letter: the real option is
    elsewhere (in the image, as in MATH-Vision), so the text says nothing about the option."""
    return bare_letter_index(text) == position


def same_value(a: str, b: str) -> bool:
    """Two answer/option texts are the same after normalisation (numbers compared exactly)."""
    n = normalise_many([a, b])
    return bool(n.text[0] == n.text[1])
