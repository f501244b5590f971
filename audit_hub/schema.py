"""The audit's vocabulary, defined once: arms, answer types, option letters, the missing code, the
canonical form of an answer value, the truth table of correctness cells and the options cell.

Every other module imports these from here; none defines its own copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from .errors import InputError

#: The arms of an audit: ``full`` the model with the image, ``blind`` the same model with the image removed
#: (``benchaudit blind``, ``--blind``), ``base`` its language backbone alone, text only (``--base``). Arm
#: codes in the frame are the positions in this tuple.
ARMS: tuple[str, ...] = ("full", "blind", "base")
#: What each arm is, in words (CLI, card) and as MMStar's symbol for its score (Chen et al. 2024,
#: MMStar-Benchmark/MMStar eval/README.md: S_v with images, S_wv the LVLM without images, S_t the LLM base).
ARM_DESCRIPTIONS: dict[str, str] = {"full": "with the image", "blind": "the same model, image removed",
                                    "base": "the language backbone alone, text only"}
ARM_SYMBOLS: dict[str, str] = {"full": "S_v", "blind": "S_wv", "base": "S_t"}


ANSWER_TYPES: tuple[str, ...] = ("mc", "yesno", "numeric", "free")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
QUESTION_COLUMNS = ("question_id", "question", "options", "answer", "answer_type", "category",
                    "l2_category", "group_id", "hint")
OPTIONAL_QUESTION_COLUMNS = ("l2_category", "group_id", "hint")
#: a run row's correctness columns: ``hit`` as the harness judged it, ``hit_exact`` by benchaudit's exact match
CORRECTNESS_FIELDS: tuple[str, ...] = ("hit", "hit_exact")
RUN_COLUMNS = ("question_id", "model", "arm", "prediction", "answer", *CORRECTNESS_FIELDS)


def check_correctness_field(field: str) -> None:
    """A ValueError unless ``field`` names one of :data:`CORRECTNESS_FIELDS`."""
    if field not in CORRECTNESS_FIELDS:
        raise ValueError("field must be " + " or ".join(repr(f) for f in CORRECTNESS_FIELDS) + f", got {field!r}")
MISSING = -1  # code for "unknown" in int8 / int16 / int32 matrices

#: Correctness cells: the one truth table of every reader and the frame (compared stripped, lower-case).
HIT_TRUE = frozenset({"1", "true", "t", "yes", "y", "1.0", "correct"})
HIT_FALSE = frozenset({"0", "false", "f", "no", "n", "0.0", "incorrect", "wrong"})
HIT_NULL = frozenset({"", "nan", "none", "null"})


def hit_code(v: Any) -> int | None:
    """A correctness cell -> 1 (right), 0 (wrong), :data:`MISSING` (empty); None when it is not one of
    the accepted spellings (the caller names the file, row and column)."""
    if v is None:
        return MISSING
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (float, np.floating)) and np.isnan(v):
        return MISSING
    k = str(v).strip().lower()
    if k in HIT_TRUE:
        return 1
    if k in HIT_FALSE:
        return 0
    if k in HIT_NULL:
        return MISSING
    return None


NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def infer_answer_type(options: Sequence[str], answer: str) -> str:
    """Answer type of one question when the source does not say it."""
    if len(options) > 0:
        return "mc"
    a = str(answer).strip().lower()
    if a in ("yes", "no"):
        return "yesno"
    if NUMBER_RE.match(a.replace(",", "")):
        return "numeric"
    return "free"


#: MM-Vet's "any of these" gold syntax ("cat<OR>kitten"); "<AND>" (all required) is left as it is
GOLD_OR = "<OR>"
_MAX_LIST_CELL = 20_000
#: the longest options cell read as a Python list (``ast.literal_eval`` of a longer text is not attempted)
_MAX_OPTIONS_CELL = 1_000_000


def _quoted_list(t: str) -> bool:
    """Does ``t`` look like a list of quoted strings ("['42']", '["a", "b",]')? VLMEvalKit's VQA and OCRBench sets
    store their golds as ``str(list)``, lmms-eval's samples ``str(target)``. String tests only (a regular expression
    here backtracked quadratically on a 20 KB cell of spaces)."""
    if not (t.startswith("[") and t.endswith("]")):
        return False
    inner = t[1:-1].strip()
    if inner.endswith(","):
        inner = inner[:-1].rstrip()
    return len(inner) >= 2 and inner[0] in "'\"" and inner[-1] in "'\""


def accepted_golds(cell: Any) -> list[str] | None:
    """The accepted answers of a gold cell that lists several ("['hello', 'Hello']", "cat<OR>kitten"), in order,
    deduplicated, empty entries dropped; None for an ordinary gold. A list of numbers ("[1, 2]", MathVista's
    list-type golds) is one answer, not alternatives. Parsed with ``ast.literal_eval`` (literals only, never code)."""
    if not isinstance(cell, str):
        return None
    t = cell.strip()
    items: list | None = None
    if len(t) <= _MAX_LIST_CELL and _quoted_list(t):
        v = _python_list(t)
        if v and all(isinstance(x, str) for x in v):
            items = v
    elif GOLD_OR in t and "<AND>" not in t:
        items = t.split(GOLD_OR)
    if items is None:
        return None
    out: list[str] = []
    for x in items:
        x = x.strip()
        if x and x not in out:
            out.append(x)
    return out or None


def normalise_value(v: str) -> str:
    """Canonical text of a numeric or free answer: numbers as shortest float repr, text casefolded."""
    s = str(v).strip()
    t = s.replace(",", "").replace("$", "").strip()
    if NUMBER_RE.match(t):
        try:
            x = float(t)
            return repr(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)
        except ValueError:
            pass
    return " ".join(s.casefold().split())


def is_null(v: Any) -> bool:
    """Missing value test that works for scalars, lists and arrays."""
    if v is None:
        return True
    if isinstance(v, (list, tuple, dict, np.ndarray)):
        return False
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _python_list(s: str) -> list | None:
    """A Python list literal of strings and numbers (``str(list)``, as VLMEvalKit and lmms-eval write lists into text
    cells), read with ``ast.literal_eval`` (literals only, never code); None for anything else."""
    import ast

    if len(s) > _MAX_OPTIONS_CELL:
        return None
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) or x is None for x in v):
        return list(v)
    return None


def options_cell(v: Any, file: str, row: int, clean: bool = False) -> list[str]:
    """One options cell (a list, an array, a JSON list in text, or empty) -> list of option texts.

    ``clean``: the caller guarantees a list of str is already clean (returned as is).
    """
    if type(v) is list and (clean or all(type(x) is str for x in v)):
        return v
    if isinstance(v, (list, tuple, np.ndarray)):
        return ["" if is_null(x) else str(x) for x in v]
    if is_null(v):
        return []
    s = str(v).strip()
    if s == "":
        return []
    if s.startswith("["):
        try:
            parsed = json.loads(s)
        except RecursionError:
            raise InputError("options are nested too deeply to be a list of option texts", file=file, row=row,
                             column="options") from None
        except ValueError as e:
            parsed = _python_list(s)  # VLMEvalKit writes str(list): "['3/11', '8/11']"
            if parsed is None:
                raise InputError(f"options is not a JSON list ({e}) nor a Python list of strings; write options as a "
                                 "JSON list of strings", file=file, row=row, column="options") from None
        if not isinstance(parsed, list):
            raise InputError("options must be a JSON list", file=file, row=row, column="options")
        return ["" if x is None else str(x) for x in parsed]
    raise InputError("options must be a list of option texts (a JSON list in text files)",
                     file=file, row=row, column="options")


# Number forms. Three functions read numbers, on purpose; they answer different questions and
# unifying them would change results (tests/test_number_forms.py pins each difference):
#  * :func:`parse_number` / :func:`canonical_number` (here): the EXACT value of a text that is a
#    plain number as a whole ("1/3" -> Fraction(1, 3) -> "1/3"; "1,2" and "50%" are not numbers).
#    Used by text_norm for option identity (distractor similarity), where 1/3 and
#    0.3333333333333333 must stay different options.
#  * ``audit_hub.answers.rules.num_full``: the FLOAT value the answer parser extracts from model
#    output and golds (LaTeX \frac, %, units with ``allow_unit``, exponents: "\frac{2}{5}" -> 0.4,
#    "50%" -> 50.0, "1e3" -> 1000.0); compared with a tolerance and written through
#    :func:`normalise_value` of its float repr ("1/3" -> "0.3333333333333333"). The frame's
#    free/numeric code space is built from those strings, so an exact form here would renumber codes.
#  * ``audit_hub.tst.features.first_number``: the FIRST number anywhere in a text, NaN if none
#    ("x=2" -> 2.0, "1/3" -> 1.0); a TsT feature of an answer's shape, not a canonical form.
# :func:`normalise_value` is the one canonical TEXT of a numeric/free answer value.


def canonical_number(x: Fraction) -> str:
    """Canonical text of an exact rational: integer, terminating decimal, or ``p/q``."""
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return f"{x.numerator}/{x.denominator}"
    with localcontext() as ctx:
        ctx.prec = 60
        s = format((Decimal(x.numerator) / Decimal(x.denominator)).normalize(), "f")
    return s


def parse_number(text: str) -> Fraction | None:
    """Exact value of a text that is a number as a whole (``"0.50"``, ``".5"``, ``"1/2"``, ``"1,000"``,
    ``"-3"``), else None. Fractions with a zero denominator are not numbers."""
    t = text.strip().replace("−", "-").replace(" ", "")
    if not t:
        return None
    sign = 1
    if t[0] in "+-":
        sign = -1 if t[0] == "-" else 1
        t = t[1:]
    if not re.fullmatch(r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.?\d*|\.\d+)(?:/\d+)?", t):
        return None
    num, _, den = t.partition("/")
    try:
        v = Fraction(num.replace(",", ""))
        if den:
            if int(den) == 0:
                return None
            v = v / int(den)
    except (ValueError, ZeroDivisionError):
        return None
    return sign * v
