"""Generic tables (CSV, TSV, JSON lines, JSON, Parquet, Excel) and the column normalisation every
reader shares.

:func:`read_table` reads any of those formats into a DataFrame with a ``source_row`` column
(1-based data row; the line number for JSON lines) and never loads image columns. CSV/TSV go
through ``pyarrow.csv`` with every column read as text (so ``007`` stays ``007`` and quoted
multi-line cells work); Parquet through ``pyarrow.parquet`` with ID/model/arm columns
dictionary-encoded so they arrive as pandas categoricals (the fast path of the audit frame).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..schema import options_cell
from .cells import (
    L2_ALIASES,
    ReadResult,
    as_arrow_str,
    bool_to_int8,
    constant_categorical,
    first_present,
    is_arrow_bool,
    is_arrow_dictionary,
    null_strings,
    options_from_letter_columns,
    pick_id_column,
    split_embedded_options,
    stem_of,
    to_str_series,
)
from .embedded_options import strip_own_letters
from .fileio import is_string_like

PREDICTION_ALIASES = ("prediction", "response", "output", "pred", "model_output")
HIT_ALIASES = ("hit", "correct", "is_correct")


# ---------------------------------------------------------------------------------------- reading


# ---------------------------------------------------------------------------------------- questions


#: columns that hold a question's options as a list, in the order looked for (``candidates``: VLMEvalKit's video
#: sets, "['A. ...', 'B. ...']")
OPTION_COLUMNS = ("options", "choices", "candidates")


def _question_options(df: pd.DataFrame, file: str, rows: np.ndarray, qtext: list):
    """(options per row or None, an Arrow list column kept as it is or None, question texts): options
    from an ``options``/``choices`` column, else VLMEvalKit's letter columns, else embedded in the
    question text (then the stem becomes the question)."""
    n = len(df)
    qtext = list(qtext)
    opt_col = first_present(df.columns, OPTION_COLUMNS)
    options: list[list[str]] | None = None
    arrow_options: pd.Series | None = None  # Arrow list<string> column kept as it is (see read_table)
    if opt_col is not None:
        clean = opt_col in df.attrs.get("clean_list_columns", ())
        if opt_col in df.attrs.get("arrow_list_columns", ()):
            lengths = pc.list_value_length(pa.array(df[opt_col].array))
            if n and (pc.max(lengths).as_py() or 0) > 0:
                arrow_options = df[opt_col].reset_index(drop=True)  # (null rows read as [] by the frame)
        if arrow_options is None:
            cells = df[opt_col].tolist()
            if clean:  # lists of str from _read_parquet: nothing to check per row
                options = [[] if v is None else v for v in cells]
            else:
                options = [[] if v is None else strip_own_letters(options_cell(v, file, int(rows[i])))
                           for i, v in enumerate(cells)]
    if arrow_options is None and (options is None or not any(options)):
        letter_opts = options_from_letter_columns(df)
        if letter_opts is not None:
            options = letter_opts
    if arrow_options is None and (options is None or not any(options)):
        options = [[] for _ in range(n)]
        for i, t in enumerate(qtext):
            stem, opts = split_embedded_options(t) if t is not None else (t, [])
            if opts:
                options[i] = opts
                qtext[i] = stem
    return options, arrow_options, qtext


def _group_ids(df: pd.DataFrame, idcol: str) -> list | None:
    """Circular-copy groups: a ``group_id`` or ``g_index`` column, or VLMEvalKit's ``index`` >= 1,000,000
    (copies share ``index`` mod 1,000,000); None without either."""
    if "group_id" in df.columns:
        return to_str_series(df["group_id"]).tolist()
    elif "g_index" in df.columns:
        return to_str_series(df["g_index"]).tolist()
    elif idcol == "index":
        num = pd.to_numeric(df["index"], errors="coerce")
        if num.notna().all() and (num >= 1_000_000).any():
            return [str(int(v) % 1_000_000) for v in num.tolist()]
    return None


def normalise_questions(df: pd.DataFrame, file: str, *, gold_column: str = "answer") -> pd.DataFrame:
    """Any question table -> the public question format (+ ``source_file``, ``source_row``).

    Recognises the ID column among ``question_id, id, index, qid, doc_id``; options from an
    ``options``/``choices`` column, VLMEvalKit's ``A``..``Z`` columns, or embedded in the question
    text (MMStar ``Options: A: ..``, MathVista ``Choices:\\n(A) ..``; then the stem becomes the
    question); ``l2-category`` spellings; VLMEvalKit circular copies (``index`` >= 1,000,000 or a
    ``g_index`` column) share a ``group_id``.
    """
    n = len(df)
    if n == 0:
        raise InputError("the questions table is empty", file=file)
    rows = df["source_row"].to_numpy() if "source_row" in df.columns else np.arange(1, n + 1)
    idcol = "question_id" if "question_id" in df.columns else pick_id_column(df.columns, df)
    if idcol == "question_id" and "index" in df.columns and df["question_id"].duplicated().any() \
            and not df["index"].duplicated().any():
        idcol = "index"  # VLMEvalKit sheets key by index (HallusionBench's question_id is per figure)
    if idcol is None:
        raise InputError(f"no question ID column (looked for question_id, id, index, qid, doc_id); found "
                         f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=question_id",
                         file=file, column="question_id")
    if gold_column not in df.columns:
        alt = first_present(df.columns, ("gold", "gt_answer", "ground_truth", "label", "target"))
        if alt is None:
            raise InputError(f"missing column {gold_column!r} (the gold answer); found "
                             f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=answer",
                             file=file, column=gold_column)
        gold_column = alt
    qid = to_str_series(df[idcol], strip=True)
    question = to_str_series(df["question"]) if "question" in df.columns else pd.Series([None] * n, dtype=object)
    options, arrow_options, qtext = _question_options(df, file, rows, question.tolist())
    gold = to_str_series(df[gold_column], strip=True).tolist()
    gold, alternatives = split_accepted(gold)
    l2 = first_present(df.columns, L2_ALIASES)
    group = _group_ids(df, idcol)

    def obj(values) -> pd.Series:
        return pd.Series(list(values), dtype=object)

    def text(col: str | None) -> pd.Series:
        return obj(to_str_series(df[col]).tolist()) if col is not None and col in df.columns else obj([None] * n)

    out = pd.DataFrame({
        "question_id": obj(qid.tolist()),
        "question": obj(qtext),
        "options": arrow_options if arrow_options is not None else obj(options),
        "answer": obj(gold),
        "answer_type": obj(_answer_types(df)),
        "category": text("category"),
        "l2_category": text(l2),
        "group_id": obj(group) if group is not None else obj([None] * n),
        "hint": text("hint"),
    })
    if alternatives is None and "gold_alternatives" in df.columns:  # a report's questions, read back
        alternatives = to_str_series(df["gold_alternatives"]).tolist()
    if alternatives is not None:
        out["gold_alternatives"] = obj(alternatives)
    from ..frame.question_meta import as_text, metadata_columns

    for c in metadata_columns(df.columns):  # e.g. HallusionBench's subcategory, visual_input, set_id, figure_id
        out[c] = obj(as_text(df[c].tolist()))
    out["source_file"] = file
    out["source_row"] = np.asarray(rows, dtype=np.int64)
    return out


#: MathVista's vocabulary (its own files, VLMEvalKit's MathVista sheets, lmms-eval's mathvista docs): ``question_type``
#: multi_choice | free_form and ``answer_type`` integer | float | text | list
_QUESTION_TYPES = {"multi_choice": "mc", "multiple_choice": "mc"}
_VALUE_TYPES = {"integer": "numeric", "float": "numeric", "text": "free", "list": "free"}


def _answer_types(df: pd.DataFrame) -> list:
    """The ``answer_type`` cells in the audit's words (mc, yesno, numeric, free; None: inferred from the gold), with
    MathVista's vocabulary read: a ``multi_choice`` question is mc whatever its value type; otherwise integer and
    float are numeric, text and list free. Other values are kept as they are (and refused by the frame)."""
    n = len(df)
    given = to_str_series(df["answer_type"], strip=True).tolist() if "answer_type" in df.columns else [None] * n
    qtype = to_str_series(df["question_type"], strip=True).tolist() if "question_type" in df.columns else None
    out = []
    for i, t in enumerate(given):
        q = _QUESTION_TYPES.get(str(qtype[i]).lower()) if qtype is not None and qtype[i] is not None else None
        low = t.lower() if isinstance(t, str) else None
        out.append(q if q is not None and low not in ("mc", "yesno") else _VALUE_TYPES.get(low, t) if low else t)
    return out


def split_accepted(gold: list) -> tuple[list, list | None]:
    """Gold cells -> (the gold of each question, the JSON list of its accepted answers or None), or the cells as
    they are and None when no cell lists several answers (:func:`audit_hub.schema.accepted_golds`): the first
    accepted answer is the gold the detectors compare with; an answer equal to any of them is right."""
    import json

    from ..schema import GOLD_OR, accepted_golds

    alts: list | None = None
    for i, g in enumerate(gold):
        if isinstance(g, str) and (g.startswith("[") or GOLD_OR in g):
            acc = accepted_golds(g)
            if acc is None:
                continue
            if alts is None:
                gold, alts = list(gold), [None] * len(gold)
            gold[i] = acc[0]
            alts[i] = json.dumps(acc, ensure_ascii=False) if len(acc) > 1 else None
    return gold, alts


# ---------------------------------------------------------------------------------------- runs


def generic_runs(df: pd.DataFrame, file: str, *, arm: str = "full", model: str | None = None,
                 with_questions: bool = True, implicit_rows: bool = False) -> ReadResult:
    """A long run table (``question_id, model, arm, prediction, answer, hit, hit_exact``).

    ``model`` (or the file stem, when the table has no ``model`` column) names the model; an ``arm``
    column in the file wins over the ``arm`` argument. ``answer`` here is the model's extracted
    answer; a ``gold`` column, when present, is kept for :func:`questions` derivation only.

    ``implicit_rows=True`` with a ``df`` that has no ``source_row`` column (from
    :func:`read_parquet_runs`) leaves out ``source_file``/``source_row``: row ``i`` is data row
    ``i + 1`` of ``file``, and :func:`audit_hub.readers.ingest` adds the columns only when it has to merge
    several files (two int64/category columns of 1e8 rows are 0.9 GB). Arrow dictionary and Arrow
    boolean columns are passed through unchanged; the frame reads them without a copy.
    """
    n = len(df)
    implicit = implicit_rows and "source_row" not in df.columns
    if implicit and with_questions and "gold" in df.columns and "question" in df.columns:
        df = df.assign(source_row=np.arange(1, n + 1, dtype=np.int64))  # the questions need real rows
        implicit = False
    idcol = "question_id" if "question_id" in df.columns else pick_id_column(df.columns)
    if idcol is None:
        raise InputError(f"no question ID column (looked for question_id, id, index, qid, doc_id); found "
                         f"{[c for c in df.columns if c != 'source_row']}; use --map OLD=question_id",
                         file=file, column="question_id")
    out: dict[str, Any] = {}  # columns; one DataFrame(copy=False) at the end (setitem would copy each)
    q = df[idcol]
    out["question_id"] = q if isinstance(q.dtype, pd.CategoricalDtype) or is_arrow_dictionary(q) \
        else to_str_series(q, strip=True)
    if model is not None:
        out["model"] = constant_categorical(model, n)
    elif "model" in df.columns:
        m = df["model"]
        out["model"] = m if isinstance(m.dtype, pd.CategoricalDtype) or is_arrow_dictionary(m) \
            else to_str_series(m, strip=True)
    else:
        out["model"] = constant_categorical(stem_of(file), n)
    if "arm" in df.columns:
        out["arm"] = df["arm"]
    else:
        out["arm"] = constant_categorical(arm, n)

    def text(col: str | None) -> pd.Series:
        if col is None:
            return null_strings(n, df.index)
        s = df[col]
        if is_arrow_dictionary(s) and is_string_like(s.dtype.pyarrow_dtype):
            return s  # dictionary of strings: the frame decodes it in C (and reuses its codes for answers)
        if implicit and isinstance(s.dtype, pd.CategoricalDtype) \
                and pd.api.types.infer_dtype(s.cat.categories, skipna=False) == "string":
            return s  # (read_parquet_runs) likewise: the frame converts a categorical of strings in C
        return as_arrow_str(s)

    def flag(col: str) -> pd.Series:
        s = df[col]
        return s if is_arrow_bool(s) else bool_to_int8(s)

    pcol = first_present(df.columns, PREDICTION_ALIASES)
    if pcol is not None or not implicit:  # (fast path: an absent column costs nothing; the frame fills nulls)
        out["prediction"] = text(pcol)
    out["answer"] = text(first_present(df.columns, ("answer", "extracted", "extracted_answer")))
    hcol = first_present(df.columns, HIT_ALIASES)
    if hcol:
        out["hit"] = flag(hcol)
    if "hit_exact" in df.columns:
        out["hit_exact"] = flag("hit_exact")
    if not implicit:
        out["source_file"] = constant_categorical(file, n)
        out["source_row"] = df["source_row"].to_numpy() if "source_row" in df.columns else np.arange(1, n + 1)
    runs = pd.DataFrame({k: pd.Series(v, index=df.index, copy=False) if not isinstance(v, pd.Series) else v
                         for k, v in out.items()}, copy=False).reset_index(drop=True)
    questions = None
    if with_questions and "gold" in df.columns and "question" in df.columns:
        qdf = df.drop(columns=[c for c in ("answer", "prediction") if c in df.columns])
        questions = normalise_questions(qdf.drop_duplicates(subset=[idcol]), file, gold_column="gold")
    return ReadResult(path=file, kind="generic", runs=runs, questions=questions, rows=n,
                      info={"arm_from_file": True} if "arm" in df.columns else {})


def is_generic_run_table(columns) -> bool:
    cols = set(columns)
    has_id = any(c in cols for c in ("question_id", "id", "qid", "doc_id", "index"))
    return has_id and (bool(cols & set(PREDICTION_ALIASES)) or bool(cols & set(HIT_ALIASES))
                       or "hit_exact" in cols)


__all__ = ["HIT_ALIASES", "PREDICTION_ALIASES", "generic_runs", "is_generic_run_table", "normalise_questions"]
