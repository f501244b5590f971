"""Input readers: turn the files evaluation harnesses write into tidy pandas tables.

Every reader returns frames in the public formats of :mod:`audit_hub.frame`:

* questions: ``question_id, question, options (list[str]), answer, answer_type, category,
  l2_category, group_id, hint`` (not yet validated);
* runs (long): ``question_id, model, arm, prediction, answer, hit[, hit_exact]`` where ``answer`` is
  the *model's extracted* answer (never the gold), plus ``source_file`` and ``source_row``
  (1-based data row in that file) so that validation errors name the file and the row.

Rules shared by all readers (kept here so they are the same everywhere):

* no reader decodes images (image columns are skipped while reading, or dropped at once) and no
  reader unpickles anything: a ``.pkl`` file is refused with :class:`~audit_hub.errors.InputError`;
* text files must be UTF-8 (a UTF-8 byte-order mark is accepted); otherwise the error names the
  byte offset and the line;
* question IDs are strings (VLMEvalKit's integer ``index`` 12 becomes ``"12"``);
* cell content is never evaluated: list-valued cells are parsed as JSON only.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..input_guard import check_text_head, json_loads

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: columns that can hold the question ID, in order of preference
ID_CANDIDATES: tuple[str, ...] = ("question_id", "id", "index", "qid", "doc_id")
#: columns that hold images or other media; never read (or dropped right after reading)
MEDIA_COLUMNS = frozenset({"image", "images", "image_path", "image_base64", "decoded_image", "img", "video",
                           "audio"})
#: spellings of the second-level category seen in the wild
L2_ALIASES = ("l2_category", "l2-category", "L2-category", "L2_category", "l2category", "subcategory")
TEXT_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json")
TABLE_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json", ".parquet", ".xlsx")
PICKLE_EXTENSIONS = (".pkl", ".pickle")


@dataclass
class ReadResult:
    """What one reader got out of one file."""

    path: str
    kind: str  # e.g. "vlmevalkit-sheet", "vlmevalkit-judged", "lmms-eval-samples", "mathv-output", "generic"
    runs: pd.DataFrame | None = None
    questions: pd.DataFrame | None = None
    judges: dict[str, str] = field(default_factory=dict)  # model -> judge name
    rows: int = 0
    info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- helpers
def options_are_bare_letters(options: Sequence[str] | None) -> bool:
    """True when every option text is just its own letter (``['A', 'B', 'C']``).

    MATH-Vision stores many choices this way because the real options are drawn in the image; a
    detector that compares option texts must not read anything into such options.
    """
    if options is None or len(options) == 0:
        return False
    for i, o in enumerate(options):
        t = str(o).strip().strip("().").upper()
        if i >= len(LETTERS) or t != LETTERS[i]:
            return False
    return True


def refuse_pickle(path: str) -> None:
    """Raise the one error every reader gives for a pickle file."""
    raise InputError(
        "refusing to read a pickle file: unpickling can execute arbitrary code. VLMEvalKit writes "
        ".pkl files only as caches; export the results to .xlsx, .tsv, .csv or .parquet "
        "(e.g. pandas.read_pickle(...).to_excel(...) on a machine you trust) and pass that file",
        file=path)


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


def cell_to_str(v: Any) -> str | None:
    """A cell as text: integral floats lose their ``.0`` (Excel stores 7 as 7.0), nulls -> None."""
    if is_null(v):
        return None
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return str(v)


def to_str_series(s: pd.Series, *, strip: bool = False) -> pd.Series:
    """Column -> object Series of str/None, converting each distinct value once (fast on repeats)."""
    if len(s) == 0:
        return pd.Series([], dtype=object, index=s.index)
    if pd.api.types.is_integer_dtype(s.dtype) and not s.isna().any():
        return pd.Series(s.astype("int64").astype(str).to_numpy(dtype=object), index=s.index, dtype=object)
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = to_str_series(pd.Series(s.cat.categories), strip=strip).to_numpy(dtype=object)
        table = np.append(cats, None).astype(object)
        return pd.Series(table[s.cat.codes.to_numpy()], index=s.index, dtype=object)
    if isinstance(s.dtype, (pd.StringDtype, pd.ArrowDtype)) and pd.api.types.is_string_dtype(s.dtype):
        t = s.str.strip() if strip else s
        return pd.Series(t.to_numpy(dtype=object, na_value=None), index=s.index, dtype=object)
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    conv = [cell_to_str(u) for u in uniques]
    if strip:
        conv = [c.strip() if c is not None else None for c in conv]
    table = np.array(conv + [None], dtype=object)
    return pd.Series(table[codes], index=s.index, dtype=object)


def stem_of(path: str) -> str:
    base = os.path.basename(path)
    for ext in sorted(TABLE_EXTENSIONS + PICKLE_EXTENSIONS, key=len, reverse=True):
        if base.lower().endswith(ext):
            return base[: -len(ext)]
    return os.path.splitext(base)[0]


def ext_of(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def apply_column_map(df: pd.DataFrame, column_map: dict[str, str] | None, file: str) -> pd.DataFrame:
    """Rename columns ``old -> new`` (from ``--map old=new``); a map whose source is absent is ignored."""
    if not column_map:
        return df
    ren = {old: new for old, new in column_map.items() if old in df.columns}
    if not ren:
        return df
    out = df.rename(columns=ren)
    dup = out.columns[out.columns.duplicated()].tolist()
    if dup:
        raise InputError(f"--map renames produce duplicate column(s) {dup}", file=file, column=dup[0])
    return out


def pick_id_column(columns: Iterable[str], df: pd.DataFrame | None = None) -> str | None:
    """First ID candidate column present (and unique, when ``df`` is given)."""
    cols = list(columns)
    present = [c for c in ID_CANDIDATES if c in cols]
    if df is None:
        return present[0] if present else None
    for c in present:
        if not df[c].isna().any() and not df[c].duplicated().any():
            return c
    return present[0] if present else None


def first_present(columns: Iterable[str], names: Iterable[str]) -> str | None:
    cols = set(columns)
    for n in names:
        if n in cols:
            return n
    return None


# ---------------------------------------------------------------------------------------- options
def options_from_letter_columns(df: pd.DataFrame) -> list[list[str]] | None:
    """VLMEvalKit layout: option texts in columns ``A``, ``B``, ... (a row ends at its first empty cell)."""
    letters = []
    for ch in LETTERS:
        if ch in df.columns:
            letters.append(ch)
        else:
            break
    if len(letters) < 2:
        return None
    cols = [to_str_series(df[c]).tolist() for c in letters]
    out: list[list[str]] = []
    for row in zip(*cols):
        opts: list[str] = []
        for v in row:
            if v is None or v.strip() == "" or v.strip().lower() == "nan":
                break
            opts.append(v)
        out.append(opts)
    return out


_OPTIONS_HDR = re.compile(r"(?:^|\n|\s)Options?\s*:\s*", re.IGNORECASE)
_CHOICES_HDR = re.compile(r"(?:^|\n)\s*Choices\s*:\s*\n", re.IGNORECASE)
_PAREN_OPT = re.compile(r"^\s*\(([A-Z])\)\s?(.*)$")


def split_embedded_options(question: str) -> tuple[str, list[str]]:
    """Options written into the question text -> (stem, options); ``(question, [])`` when none.

    Two layouts are understood: MMStar's ``...\\nOptions: A: x, B: y, C: z`` and MathVista's
    ``...\\nChoices:\\n(A) x\\n(B) y``. Letters must run A, B, C, ... in order, so a comma inside
    an option text does not split it.
    """
    if not isinstance(question, str) or not question:
        return question, []
    matches = list(_CHOICES_HDR.finditer(question))
    m = matches[-1] if matches else None
    if m is not None:
        stem, body = question[: m.start()], question[m.end():]
        opts: list[str] = []
        tail: list[str] = []
        for line in body.split("\n"):
            pm = _PAREN_OPT.match(line)
            if pm and not tail and pm.group(1) == LETTERS[len(opts)]:
                opts.append(pm.group(2).strip())
            elif opts and not tail and line.strip() and not line.lstrip().startswith("("):
                if line[:1].isspace():  # wrapped option line
                    opts[-1] = opts[-1] + " " + line.strip()
                else:
                    tail.append(line)
            elif line.strip():
                tail.append(line)
        if len(opts) >= 2:
            return stem.rstrip(), opts
    hdrs = list(_OPTIONS_HDR.finditer(question))
    hdr = hdrs[-1] if hdrs else None
    if hdr is not None:
        stem, body = question[: hdr.start()], question[hdr.end():]
        if body.startswith("A:") or body.startswith("A."):
            sep = body[1]
            starts = [0]
            pos = 0
            for k in range(1, len(LETTERS)):
                pat = re.compile(r"(?:,|;|\n)\s*" + LETTERS[k] + re.escape(sep) + r"\s")
                mm = pat.search(body, pos)
                if not mm:
                    break
                starts.append(mm.start())
                pos = mm.end()
            if len(starts) >= 2:
                opts = []
                for j, s0 in enumerate(starts):
                    end = starts[j + 1] if j + 1 < len(starts) else len(body)
                    piece = body[s0:end].lstrip(",;\n ").strip()
                    piece = piece[2:].strip()  # drop "A:"
                    opts.append(piece)
                return stem.rstrip(), opts
    return question, []


# ---------------------------------------------------------------------------------------- encoding
def check_text_encoding_prefix(path: str, head: bytes) -> None:
    """Reject UTF-16/32 files early with a message that says what to do."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or (len(head) >= 4 and head[1:2] == b"\x00"
                                                                      and head[3:4] == b"\x00"):
        raise InputError("the file is UTF-16 encoded; save it as UTF-8 and try again", file=path, row=None)


def raise_bad_utf8(path: str) -> None:
    """Stream the file through a UTF-8 decoder and raise naming the first bad byte (offset and line)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    line = 1
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            try:
                dec.decode(chunk, final=False)
            except UnicodeDecodeError as e:
                bad = offset + e.start
                line += chunk[: e.start].count(b"\n")
                raise InputError(
                    f"not valid UTF-8 text: byte 0x{chunk[e.start]:02x} at byte offset {bad} (line {line}); "
                    "the file seems to use another encoding (e.g. Latin-1 / cp1252); save it as UTF-8",
                    file=path, row=None) from None
            line += chunk.count(b"\n")
            offset += len(chunk)
        try:
            dec.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InputError(f"not valid UTF-8 text: the file ends inside a multi-byte character (byte offset {offset})",
                             file=path) from None


def read_head(path: str, n: int = 4096) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def ensure_nonempty(path: str) -> None:
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise InputError(f"cannot read the file ({e.strerror})", file=path) from None
    if size == 0:
        raise InputError("the file is empty (0 bytes)", file=path)


# ---------------------------------------------------------------------------------------- JSON lines
def iter_json_lines(path: str):
    """Yield ``(line_number, record)`` for each non-blank line; bad JSON/encoding names the line."""
    with open(path, "rb") as fh:
        offset = 0
        for lineno, raw in enumerate(fh, start=1):
            start = offset
            offset += len(raw)
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[3:]
                start += 3
            if lineno == 1:
                check_text_encoding_prefix(path, raw[:8])
                check_text_head(path, raw[:4096])
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"not valid UTF-8 text at byte offset {start + e.start} (line {lineno}); "
                                 "save the file as UTF-8", file=path, row=lineno) from None
            rec = json_loads(text, path, row=lineno, where=f"line {lineno}: ")
            if not isinstance(rec, dict):
                raise InputError(f"line {lineno} is a JSON {type(rec).__name__}, expected an object",
                                 file=path, row=lineno)
            yield lineno, rec


def peek_json_line(path: str) -> dict | None:
    """First record of a JSON-lines file (None when it has none)."""
    for _, rec in iter_json_lines(path):
        return rec
    return None


def load_json_records(path: str) -> tuple[list[dict], list[int]]:
    """A ``.json`` file holding a list of objects, ``{"data": [...]}``, or ``{id: {...}}`` -> records."""
    ensure_nonempty(path)
    raw = open(path, "rb").read()
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[3:]
    check_text_encoding_prefix(path, raw[:8])
    check_text_head(path, raw[:4096])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(f"not valid UTF-8 text at byte offset {e.start} (line {line}); save the file as UTF-8",
                         file=path) from None
    if not text.strip():
        raise InputError("the file is empty", file=path)
    obj = json_loads(text, path)
    if isinstance(obj, dict) and isinstance(obj.get("data"), list):
        obj = obj["data"]
    if isinstance(obj, list):
        bad = [i for i, r in enumerate(obj) if not isinstance(r, dict)]
        if bad:
            raise InputError(f"item {bad[0] + 1} of the JSON list is not an object", file=path, row=bad[0] + 1)
        return obj, list(range(1, len(obj) + 1))
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        recs = []
        for k, v in obj.items():
            r = dict(v)
            if not any(c in r for c in ID_CANDIDATES):
                r["question_id"] = k
            recs.append(r)
        return recs, list(range(1, len(recs) + 1))
    raise InputError("JSON file is not a table (expected a list of objects or an object of objects)", file=path)
