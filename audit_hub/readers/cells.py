"""Column and cell helpers every format mapping shares: what one reader returns (:class:`ReadResult`),
cells as text, ID / option / category columns, and the Arrow / categorical column constructors."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..columns import arrow_strings, null_string_array
from ..errors import InputError
from ..schema import LETTERS, is_null

TEXT_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json")


TABLE_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json", ".parquet", ".xlsx")


PICKLE_EXTENSIONS = (".pkl", ".pickle")
#: columns that can hold the question ID, in order of preference
ID_CANDIDATES: tuple[str, ...] = ("question_id", "id", "index", "qid", "doc_id")


#: columns that hold images or other media; never read (or dropped right after reading)
MEDIA_COLUMNS = frozenset({"image", "images", "image_path", "image_base64", "decoded_image", "img", "video",
                           "audio"})


#: spellings of the second-level category seen in the wild
L2_ALIASES = ("l2_category", "l2-category", "L2-category", "L2_category", "l2category", "subcategory")


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
    #: the benchmark the file belongs to, as the harness named it (the key that splits a work_dir into one
    #: audit per benchmark; None: the file names none). Every reader sets it; where each harness keeps the
    #: name is listed in :mod:`audit_hub.readers.grouping`.
    benchmark: str | None = None


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
    try:
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
    except TypeError:  # unhashable cells (a JSON list or object where text was expected): one by one
        out = [cell_to_str(v) for v in s.tolist()]
        return pd.Series([o.strip() if strip and o is not None else o for o in out], index=s.index, dtype=object)
    conv = [cell_to_str(u) for u in uniques]
    if strip:
        conv = [c.strip() if c is not None else None for c in conv]
    table = np.array(conv + [None], dtype=object)
    return pd.Series(table[codes], index=s.index, dtype=object)


def _same_objects(u: np.ndarray, v: np.ndarray) -> bool:
    types = list(map(type, u))
    if types != list(map(type, v)):
        return False
    try:
        eq = np.asarray(u == v, dtype=bool)
    except Exception:  # noqa: BLE001 - values that do not compare: not the same
        return False
    if eq.shape != u.shape:
        return False
    for i in np.flatnonzero(~eq):  # only NaN may differ from itself
        x, y = u[i], v[i]
        if not (isinstance(x, float) and x != x and y != y):
            return False
    fl = np.fromiter((t is float or t is np.float64 for t in types), dtype=bool, count=len(types))
    if fl.any():  # 0.0 == -0.0, but they print differently
        return bool(np.array_equal(np.signbit(u[fl].astype(np.float64)), np.signbit(v[fl].astype(np.float64))))
    return True


def same_cells(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Two parsed tables hold the same cells: the same column names in the same order, dtypes and attrs and,
    cell by cell, equal values of the same type (``1``, ``1.0`` and ``True`` differ; ``0.0`` and ``-0.0``
    differ; NaN equals NaN). A reader that sees the same cells twice may reuse what it made of them."""
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return False
    try:
        if a.attrs != b.attrs:
            return False
    except Exception:  # noqa: BLE001 - attributes that do not compare: not the same
        return False
    for i in range(a.shape[1]):
        x, y = a.iloc[:, i], b.iloc[:, i]
        if x.dtype != y.dtype:
            return False
        u, v = x.to_numpy(), y.to_numpy()
        if u.dtype == object:
            if not _same_objects(u, v):
                return False
        elif u.dtype.kind in "fc":
            if u.tobytes() != v.tobytes():
                return False
        elif not np.array_equal(u, v):
            return False
    return True


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


def split_embedded_options(question: str) -> tuple[str, list[str]]:
    """Options written into the question text -> (stem, options); see :mod:`audit_hub.readers.embedded_options`."""
    from .embedded_options import split_embedded_options as split

    return split(question)


def bool_to_int8(s: pd.Series) -> pd.Series:
    """Nullable boolean -> nullable Int8 (the frame converts numeric columns without Python loops)."""
    if isinstance(s.dtype, pd.BooleanDtype) or (isinstance(s.dtype, pd.ArrowDtype)
                                                and pa.types.is_boolean(s.dtype.pyarrow_dtype)):
        return s.astype("Int8")
    return s


def as_arrow_str(s: pd.Series) -> pd.Series:
    """Any column -> Arrow string column (null for missing)."""
    if isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_string(s.dtype.pyarrow_dtype):
        return s
    return pd.Series(arrow_strings(to_str_series(s).tolist()), index=s.index)


def constant_categorical(value: str, n: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[value])


def is_arrow_dictionary(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_dictionary(s.dtype.pyarrow_dtype)


def is_arrow_bool(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_boolean(s.dtype.pyarrow_dtype)


def null_strings(n: int, index: pd.Index) -> pd.Series:
    """An all-null Arrow string column of length ``n`` (built in C, not from a list of Nones)."""
    return pd.Series(pd.arrays.ArrowExtensionArray(null_string_array(n)), index=index)
