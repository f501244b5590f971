"""The audit frame: one validated structure keyed by question ID.

Two tables, validated on construction:

* ``questions``: one row per question. Row ``i`` *is* question code ``i``. Columns
  ``question_id`` (str), ``question``, ``options`` (list of option texts; letters implied by
  position), ``answer`` (gold letter for ``mc``; gold value otherwise), ``answer_type``
  (``mc``, ``yesno``, ``numeric``, ``free``), ``category``, ``l2_category``, ``group_id``,
  ``hint``; derived ``n_options`` (int16) and ``gold_index`` (int16, -1 when not ``mc``).
* ``runs``: long format, one row per (question, model, arm). Stored compactly:
  ``q`` (int32 question code), ``m`` (int16 model code), ``arm`` (int8: 0 full, 1 blind),
  ``prediction`` and ``answer`` (Arrow strings, null when absent), ``hit`` and ``hit_exact``
  (int8: 1 correct, 0 wrong, -1 unknown).

Integer codes keep 50 models x 1,000,000 questions well inside a few GB. Detectors read dense
``(n_questions, n_models)`` matrices from :meth:`AuditFrame.correctness` and
:meth:`AuditFrame.answer_codes`; they never touch strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .errors import InputError

ARMS: tuple[str, ...] = ("full", "blind")
ANSWER_TYPES: tuple[str, ...] = ("mc", "yesno", "numeric", "free")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
QUESTION_COLUMNS = ("question_id", "question", "options", "answer", "answer_type", "category",
                    "l2_category", "group_id", "hint")
OPTIONAL_QUESTION_COLUMNS = ("l2_category", "group_id", "hint")
RUN_COLUMNS = ("question_id", "model", "arm", "prediction", "answer", "hit", "hit_exact")
MISSING = -1  # code for "unknown" in int8 / int16 / int32 matrices

_STR = pd.ArrowDtype(pa.string())
_NUM_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _is_null(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def infer_answer_type(options: Sequence[str], answer: str) -> str:
    """Answer type of one question when the source does not say it."""
    if len(options) > 0:
        return "mc"
    a = str(answer).strip().lower()
    if a in ("yes", "no"):
        return "yesno"
    if _NUM_RE.match(a.replace(",", "")):
        return "numeric"
    return "free"


def _row_of(src_rows: np.ndarray | None, i: int) -> int:
    return int(src_rows[i]) if src_rows is not None else i + 1


@dataclass
class AuditFrame:
    """Validated questions + runs. Build it with :meth:`from_tables` (never directly)."""

    questions: pd.DataFrame
    runs: pd.DataFrame
    models: tuple[str, ...]
    sources: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tables(
        cls,
        questions: pd.DataFrame,
        runs: pd.DataFrame | None = None,
        *,
        questions_source: str = "<questions>",
        runs_source: str = "<runs>",
        sources: list[dict] | None = None,
        meta: dict | None = None,
        compute_exact: bool = True,
    ) -> AuditFrame:
        """Validate and encode. ``runs`` may carry ``source_file`` / ``source_row`` columns
        (set by the readers) so that errors name the original file and row."""
        q = _validate_questions(questions, questions_source)
        if runs is None:
            runs = pd.DataFrame({c: pd.Series([], dtype=object) for c in ("question_id", "model", "arm")})
        r, models = _validate_runs(runs, q, runs_source, compute_exact=compute_exact)
        meta = dict(meta or {})
        answer_dict = r.attrs.pop("_answer_dict", None)
        if answer_dict is not None:
            meta["_answer_dict"] = answer_dict
        return cls(questions=q, runs=r, models=tuple(models), sources=list(sources or []), meta=meta)

    # ------------------------------------------------------------------ basic facts
    @property
    def n_questions(self) -> int:
        return len(self.questions)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def question_ids(self) -> np.ndarray:
        return self.questions["question_id"].to_numpy(dtype=object)

    def question_id_column(self) -> pd.api.extensions.ExtensionArray | np.ndarray:
        """The question IDs as the questions table stores them (zero-copy), for building per-question
        tables: converting :attr:`question_ids` (objects) back to strings costs ~0.2 s per 1e6 rows."""
        return self.questions["question_id"].array

    def arm_code(self, arm: str) -> int:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")
        return ARMS.index(arm)

    def has_arm(self, arm: str) -> bool:
        return len(self.models_in(arm)) > 0

    def models_in(self, arm: str) -> list[str]:
        """Model names with at least one row in ``arm``, in model-code order."""
        key = ("_models_in", arm)
        if key not in self.meta:
            a, m = self.runs["arm"].to_numpy(), self.runs["m"].to_numpy()
            M = len(self.models)
            counts = np.zeros(len(ARMS) * M, np.int64)
            step = 1 << 22
            for lo in range(0, len(a), step):  # both arms in one chunked pass
                counts += np.bincount(a[lo:lo + step].astype(np.int32) * M + m[lo:lo + step],
                                      minlength=len(ARMS) * M)
            for i, name in enumerate(ARMS):
                self.meta[("_models_in", name)] = [self.models[j] for j in np.flatnonzero(counts[i * M:(i + 1) * M])]
        return list(self.meta[key])

    def paired_models(self) -> list[str]:
        """Models present in both arms (visual_dependency pairs by model name)."""
        blind = set(self.models_in("blind"))
        return [m for m in self.models_in("full") if m in blind]

    def has_judged(self, arm: str = "full") -> bool:
        return bool((self.correctness(arm, "hit") >= 0).any())

    @property
    def gold_index(self) -> np.ndarray:
        return self.questions["gold_index"].to_numpy()

    @property
    def n_options(self) -> np.ndarray:
        return self.questions["n_options"].to_numpy()

    @property
    def answer_type(self) -> np.ndarray:
        return self.questions["answer_type"].to_numpy(dtype=object)

    def category_codes(self, column: str = "category") -> tuple[np.ndarray, list[str]]:
        """Integer codes (Q,) and their labels for a question column (missing -> "(none)")."""
        col = self.questions[column].astype(object).where(self.questions[column].notna(), "(none)")
        codes, uniques = pd.factorize(col.astype(str), sort=True)
        return codes.astype(np.int32), [str(u) for u in uniques]

    # ------------------------------------------------------------------ dense matrices
    def _model_index(self, models: Sequence[str] | None) -> np.ndarray:
        if models is None:
            return np.arange(len(self.models))
        lookup = {m: i for i, m in enumerate(self.models)}
        missing = [m for m in models if m not in lookup]
        if missing:
            raise KeyError(f"models not in the frame: {missing}")
        return np.array([lookup[m] for m in models], dtype=np.int64)

    def _dense(self, arm: str, values: np.ndarray, dtype, models: Sequence[str] | None,
               cache_key: str | None = None) -> np.ndarray:
        """Dense (Q, M) matrix of one run column; cached per (column, arm). Callers get a copy-free
        read-only view for all models, or a fresh array for a model subset."""
        key = ("_dense", cache_key, arm)
        out_full = self.meta.get(key) if cache_key else None
        if out_full is None:
            code = self.arm_code(arm)
            a = self.runs["arm"].to_numpy()
            qc_all, mc_all = self.runs["q"].to_numpy(), self.runs["m"].to_numpy()
            M, Q = len(self.models), self.n_questions
            # filled transposed, (M, Q): runs usually come model by model, so the scatter walks memory
            # in order; one blocked transpose then gives the C-ordered (Q, M) matrix
            out_t = np.full((M, Q), MISSING, dtype=dtype)
            flat = out_t.reshape(-1)
            step = 1 << 22
            for lo in range(0, len(a), step):
                sel = a[lo:lo + step] == code
                if sel.all():
                    qc, mc, vals = qc_all[lo:lo + step], mc_all[lo:lo + step], values[lo:lo + step]
                elif sel.any():
                    qc, mc, vals = qc_all[lo:lo + step][sel], mc_all[lo:lo + step][sel], values[lo:lo + step][sel]
                else:
                    continue
                flat[mc.astype(np.int64) * Q + qc] = vals
            out_full = np.ascontiguousarray(out_t.T)
            del out_t, flat
            out_full.setflags(write=False)
            if cache_key:
                self.meta[key] = out_full
        if models is None:
            return out_full
        idx = self._model_index(models)
        if len(idx) == out_full.shape[1] and (idx == np.arange(len(idx))).all():
            return out_full  # all models in code order: the cached read-only matrix, no copy
        return out_full[:, idx]

    def correctness(self, arm: str = "full", field: str = "hit",
                    models: Sequence[str] | None = None) -> np.ndarray:
        """(n_questions, n_models) int8 matrix: 1 correct, 0 wrong, -1 unknown/missing.

        ``field`` is ``hit`` (judged by the harness) or ``hit_exact`` (our exact-match parser).
        Columns follow ``models`` (default: all models of the frame, in code order).
        """
        if field not in ("hit", "hit_exact"):
            raise ValueError("field must be 'hit' or 'hit_exact'")
        return self._dense(arm, self.runs[field].to_numpy(), np.int8, models, cache_key=field)

    def answer_codes(self, arm: str = "full", models: Sequence[str] | None = None) -> np.ndarray:
        """(n_questions, n_models) int32 matrix of chosen-answer codes, -1 unparseable/missing.

        For ``mc`` items the code is the option index (A=0). For other items it is a code that is
        equal exactly when the normalised extracted answers are equal (yes=0, no=1 for yes/no);
        compare against :meth:`gold_codes`.
        """
        return self._dense(arm, self._answer_code_vector(), np.int32, models, cache_key="answer_codes")

    def gold_codes(self) -> np.ndarray:
        """(n_questions,) gold answer in the code space of :meth:`answer_codes`."""
        self._answer_code_vector()
        return self.meta["_gold_codes"]

    def _answer_code_vector(self) -> np.ndarray:
        cached = self.meta.get("_answer_codes")
        if cached is not None:
            return cached
        ad = self.meta.pop("_answer_dict", None)
        if ad is not None and ad[2] is not self.runs["answer"].array._pa_array:  # noqa: SLF001 (answers changed)
            ad = None
        codes, gold = encode_answers(self.questions, self.runs, answer_dict=None if ad is None else ad[:2])
        self.meta["_answer_codes"] = codes
        self.meta["_gold_codes"] = gold
        return codes

    # ------------------------------------------------------------------ export
    def runs_table(self) -> pd.DataFrame:
        """The runs in their public long format (string IDs, nullable booleans)."""
        r = self.runs
        out = pd.DataFrame({
            "question_id": pd.Categorical.from_codes(r["q"].to_numpy(), categories=self.questions["question_id"].astype(str)),
            "model": pd.Categorical.from_codes(r["m"].to_numpy(), categories=list(self.models)),
            "arm": pd.Categorical.from_codes(r["arm"].to_numpy(), categories=list(ARMS)),
            "prediction": r["prediction"],
            "answer": r["answer"],
            "hit": _int8_to_bool(r["hit"].to_numpy()),
            "hit_exact": _int8_to_bool(r["hit_exact"].to_numpy()),
        })
        for c in ("question_id", "model", "arm"):
            out[c] = out[c].astype(str)
        return out

    def questions_table(self) -> pd.DataFrame:
        """The questions in their public format (without derived columns)."""
        return self.questions[list(QUESTION_COLUMNS)].copy()

    def accuracy_table(self) -> pd.DataFrame:
        """Per model and arm: n items, judged and exact-match accuracy, unparseable share."""
        r = self.runs
        M = len(self.models)
        size = 2 * M
        arm, mod = r["arm"].to_numpy(), r["m"].to_numpy()
        h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()
        unp = r["answer"].isna().to_numpy() if len(r) else np.zeros(0, bool)
        # one bincount over (arm, model, hit, hit_exact, unparsed): 18 cells per (arm, model)
        cnt = np.zeros(size * 18, np.int64)
        step = 1 << 22
        for lo in range(0, len(r), step):
            sl = slice(lo, lo + step)
            key = arm[sl].astype(np.int32) * M + mod[sl]
            c = ((key * 3 + (h[sl] + 1)) * 3 + (e[sl] + 1)) * 2 + unp[sl]
            cnt += np.bincount(c, minlength=size * 18)
        cnt = cnt.reshape(size, 3, 3, 2)
        n_items = cnt.sum(axis=(1, 2, 3))
        h_known, h_right = cnt[:, 1:].sum(axis=(1, 2, 3)), cnt[:, 2].sum(axis=(1, 2))
        e_known, e_right = cnt[:, :, 1:].sum(axis=(1, 2, 3)), cnt[:, :, 2].sum(axis=(1, 2))
        unparsed = cnt[..., 1].sum(axis=(1, 2))
        rows = []
        for mm in range(M):  # groupby order: model code, then arm
            for aa in range(2):
                k = aa * M + mm
                if n_items[k] == 0:
                    continue
                rows.append({
                    "model": self.models[mm], "arm": ARMS[aa], "n_items": int(n_items[k]),
                    "n_judged": int(h_known[k]),
                    "accuracy_judged": float(h_right[k] / max(h_known[k], 1)) if h_known[k] else np.nan,
                    "accuracy_exact": float(e_right[k] / max(e_known[k], 1)) if e_known[k] else np.nan,
                    "unparseable_share": float(unparsed[k] / n_items[k]),
                })
        return pd.DataFrame(rows)

    def save(self, directory: str) -> None:
        """Write ``questions.parquet`` and ``runs.parquet`` (public formats) into ``directory``."""
        import os
        os.makedirs(directory, exist_ok=True)
        self.questions_table().to_parquet(os.path.join(directory, "questions.parquet"), index=False)
        self.runs_table().to_parquet(os.path.join(directory, "runs.parquet"), index=False)

    # ------------------------------------------------------------------ derived frames
    def subset_questions(self, keep: np.ndarray | Iterable[str]) -> AuditFrame:
        """A new frame restricted to some questions (bool mask over codes, or question IDs)."""
        keep = np.asarray(list(keep) if not isinstance(keep, np.ndarray) else keep)
        if keep.dtype != bool:
            keep = self.questions["question_id"].isin(set(map(str, keep))).to_numpy()
        new_code = np.full(self.n_questions, -1, dtype=np.int64)
        new_code[keep] = np.arange(int(keep.sum()))
        q = self.questions[keep].reset_index(drop=True)
        rq = new_code[self.runs["q"].to_numpy()]
        r = self.runs[rq >= 0].reset_index(drop=True)
        r["q"] = rq[rq >= 0].astype(np.int32)
        return AuditFrame(questions=q, runs=r, models=self.models, sources=self.sources,
                          meta=_public_meta(self.meta))

    def without_models(self, drop: Iterable[str]) -> AuditFrame:
        drop = set(drop)
        keep_models = [m for m in self.models if m not in drop]
        remap = np.full(len(self.models), -1, dtype=np.int64)
        for new, m in enumerate(keep_models):
            remap[self.models.index(m)] = new
        rm = remap[self.runs["m"].to_numpy()]
        r = self.runs[rm >= 0].reset_index(drop=True)
        r["m"] = rm[rm >= 0].astype(np.int16)
        return AuditFrame(questions=self.questions, runs=r, models=tuple(keep_models),
                          sources=self.sources,
                          meta=_public_meta(self.meta))


def _public_meta(meta: dict) -> dict:
    """Meta without caches (tuple keys or keys starting with '_'), for derived frames."""
    return {k: v for k, v in meta.items() if isinstance(k, str) and not k.startswith("_")}


def _int8_to_bool(a: np.ndarray) -> pd.Series:
    s = pd.Series(a == 1, dtype="boolean")
    s[a < 0] = pd.NA
    return s


# ---------------------------------------------------------------------- validation helpers
def _as_options(v: Any, file: str, row: int) -> list[str]:
    if _is_null(v) if not isinstance(v, (list, tuple, np.ndarray)) else False:
        return []
    if isinstance(v, str):
        s = v.strip()
        if s == "":
            return []
        if s.startswith("["):
            import json
            try:
                parsed = json.loads(s)
            except ValueError as e:
                raise InputError(f"options is not a JSON list ({e})", file=file, row=row, column="options") from None
            return [str(x) for x in parsed]
        raise InputError("options must be a list of option texts", file=file, row=row, column="options")
    if isinstance(v, (list, tuple, np.ndarray)):
        return ["" if _is_null(x) else str(x) for x in v]
    raise InputError(f"options must be a list, got {type(v).__name__}", file=file, row=row, column="options")


def _validate_questions(df: pd.DataFrame, file: str) -> pd.DataFrame:
    if df is None or len(df) == 0:
        raise InputError("the questions table is empty", file=file)
    missing = [c for c in ("question_id", "answer") if c not in df.columns]
    if missing:
        raise InputError(f"missing required column(s) {missing}; found {list(df.columns)}", file=file,
                         column=missing[0])
    src_rows = df["source_row"].to_numpy() if "source_row" in df.columns else None
    if "source_file" in df.columns and len(df):
        file = str(df["source_file"].iloc[0])
    qid = df["question_id"]
    null_id = qid.isna().to_numpy()
    if null_id.any():
        i = int(np.flatnonzero(null_id)[0])
        raise InputError("question_id is empty", file=file, row=_row_of(src_rows, i), column="question_id")
    qid = qid.astype(str).str.strip()
    dup = qid.duplicated(keep="first").to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((qid == qid.iloc[i]).to_numpy())[0])
        raise InputError(f"duplicate question_id {qid.iloc[i]!r} (first seen at row {_row_of(src_rows, first)})",
                         file=file, row=_row_of(src_rows, i), column="question_id")
    n = len(df)

    def col(name, default=None):
        if name in df.columns:
            return df[name].tolist()
        return [default] * n

    options = _options_fast(df["options"]) if "options" in df.columns else [[] for _ in range(n)]
    if options is None:
        options = [_as_options(v, file, _row_of(src_rows, i)) for i, v in enumerate(col("options"))]
    n_opt = np.fromiter((len(o) for o in options), dtype=np.int64, count=n)
    answers, types, gold_idx, simple = _answers_fast(df, n_opt)
    answers_in = types_in = None
    for i in np.flatnonzero(~simple):
        # the rows the vectorised pass could not settle (errors, gold given as option text, ...),
        # one by one with the row-level rules; simple rows never raise, so the first error is the same
        if answers_in is None:
            answers_in, types_in = col("answer"), col("answer_type")
        a = answers_in[i]
        if _is_null(a) or str(a).strip() == "":
            raise InputError("gold answer is empty", file=file, row=_row_of(src_rows, i), column="answer")
        a = str(a).strip()
        t = types_in[i]
        t = infer_answer_type(options[i], a) if _is_null(t) or str(t) == "" else str(t).strip().lower()
        if t not in ANSWER_TYPES:
            raise InputError(f"unknown answer_type {t!r}; expected one of {ANSWER_TYPES}",
                             file=file, row=_row_of(src_rows, i), column="answer_type")
        if t == "mc":
            k = len(options[i])
            if k == 0:
                raise InputError("answer_type is 'mc' but the question has no options",
                                 file=file, row=_row_of(src_rows, i), column="options")
            if k > len(LETTERS):
                raise InputError(f"{k} options; at most 26 are supported", file=file,
                                 row=_row_of(src_rows, i), column="options")
            letter = a.upper()
            if len(letter) != 1 or letter not in LETTERS[:k]:
                # gold given as the option text instead of a letter?
                matches = [j for j, o in enumerate(options[i]) if o.strip() == a]
                if len(matches) == 1:
                    letter = LETTERS[matches[0]]
                else:
                    raise InputError(f"gold {a!r} is not one of the option letters {LETTERS[:k]!r}",
                                     file=file, row=_row_of(src_rows, i), column="answer")
            a = letter
            gold_idx[i] = LETTERS.index(letter)
        elif t == "yesno":
            if a.lower() not in ("yes", "no"):
                raise InputError(f"yes/no gold must be 'yes' or 'no', got {a!r}", file=file,
                                 row=_row_of(src_rows, i), column="answer")
            a = a.lower()
        answers[i] = a
        types[i] = t

    def text_col(name):
        if name not in df.columns:
            return pd.Series([None] * n, dtype=object)
        return _text_series(df[name])

    out = pd.DataFrame({
        "question_id": qid.to_numpy(dtype=object),
        "question": text_col("question").fillna(""),
        "options": options,
        "answer": answers,
        "answer_type": types,
        "category": text_col("category").fillna("(none)"),
        "l2_category": text_col("l2_category"),
        "group_id": text_col("group_id"),
        "hint": text_col("hint"),
    })
    out["n_options"] = n_opt.astype(np.int16)
    out["gold_index"] = gold_idx
    from .question_meta import metadata_columns

    for c in metadata_columns(df.columns):  # question metadata (kept as text)
        if c not in out.columns:
            out[c] = text_col(c)
    return out


def _text_series(s: pd.Series) -> pd.Series:
    """Object Series of ``str`` values with None for missing (str() of non-string values)."""
    s = s.reset_index(drop=True)
    null = s.isna().to_numpy()
    obj = s.astype(object)
    if pd.api.types.infer_dtype(obj, skipna=True) not in ("string", "empty"):
        obj = obj.map(lambda v: v if isinstance(v, str) else str(v))
    return obj.where(~null, None)


def _options_fast(s: pd.Series) -> list[list[str]] | None:
    """Option lists through Arrow when the column is a list of strings (Parquet / Arrow / Python lists);
    None when a row needs the row-level parser (JSON strings, scalars, non-string elements)."""
    import pyarrow.compute as pc

    try:
        chunks = _arrow_chunks(s)
        arr = chunks.combine_chunks() if chunks is not None else pa.array(s, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_null(t):
        return [[] for _ in range(len(arr))]
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return None
    vt = t.value_type
    if not (pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_null(vt)):
        return None
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(arr)
    values = pc.fill_null(values.cast(pa.string()), "") if len(values) else values
    import gc

    ends = np.cumsum(lengths).tolist()
    starts = [0] + ends[:-1]
    was = gc.isenabled()
    gc.disable()  # millions of new lists: the cyclic collector would rescan them over and over
    try:
        vals = values.to_pylist()
        return [vals[a:b] for a, b in zip(starts, ends)]
    finally:
        if was:
            gc.enable()


_LETTER_INDEX = {c: i for i, c in enumerate(LETTERS)}


def _answers_fast(df: pd.DataFrame, n_opt: np.ndarray) -> tuple[list, list, np.ndarray, np.ndarray]:
    """Vectorised gold answers / answer types / gold letters for the rows that follow the plain rules.

    String work is done once per distinct (answer, answer_type) value, then gathered back. Returns
    (answers, types, gold_index, simple); rows with ``simple`` False are left for the row-level loop
    (which raises the errors)."""
    n = len(df)
    gold_idx = np.full(n, MISSING, dtype=np.int16)
    ans = df["answer"].reset_index(drop=True)
    null_a = ans.isna().to_numpy()
    a_codes, a_uniq = pd.factorize(_text_series(ans).fillna(""), use_na_sentinel=False)
    a_u = pd.Series(np.asarray(a_uniq, dtype=object), dtype=object).str.strip()
    low_u = a_u.str.lower().to_numpy(dtype=object)
    a_u = a_u.to_numpy(dtype=object)
    ok = ~null_a & (np.fromiter((len(x) > 0 for x in a_u), bool, count=len(a_u))[a_codes] if len(a_u) else True)
    if "answer_type" in df.columns:
        tcol = df["answer_type"].reset_index(drop=True)
        t_codes, t_uniq = pd.factorize(_text_series(tcol).fillna(""), use_na_sentinel=False)
        t_u = np.asarray(t_uniq, dtype=object)
        given = ~(tcol.isna().to_numpy() | (t_u == "")[t_codes])
        t = np.array([x.strip().lower() for x in t_u], dtype=object)[t_codes]
    else:
        given = np.zeros(n, bool)
        t = np.full(n, "", dtype=object)
    # inferred types where none is given: per distinct answer text
    yn_u = np.isin(low_u, ["yes", "no"])
    num_u = np.array([bool(_NUM_RE.match(x.replace(",", ""))) for x in low_u], dtype=bool)
    is_yn, is_num = yn_u[a_codes], num_u[a_codes]
    inferred = np.where(n_opt > 0, "mc", np.where(is_yn, "yesno", np.where(is_num, "numeric", "free"))).astype(object)
    types = np.where(given, t, inferred).astype(object)
    ok &= np.isin(types, ANSWER_TYPES)
    answers = a_u[a_codes] if len(a_u) else np.full(n, "", dtype=object)
    # mc: a single letter within the item's options
    mc = ok & (types == "mc")
    if mc.any():
        up_u = np.array([x.upper() for x in a_u], dtype=object)
        li_u = np.array([_LETTER_INDEX.get(x, -1) for x in up_u], dtype=np.int64)
        li = li_u[a_codes[mc]]
        k = n_opt[mc]
        good = (li >= 0) & (k >= 1) & (k <= len(LETTERS)) & (li < k)
        idx = np.flatnonzero(mc)
        gi = idx[good]
        gold_idx[gi] = li[good].astype(np.int16)
        answers[gi] = up_u[a_codes[gi]]
        ok[idx[~good]] = False
    yn = ok & (types == "yesno")
    if yn.any():
        good = yn_u[a_codes]
        answers[yn & good] = low_u[a_codes[yn & good]]
        ok[yn & ~good] = False
    return answers.tolist(), types.tolist(), gold_idx, ok


def _arrow_chunks(series: pd.Series) -> pa.ChunkedArray | None:
    """The Arrow chunks behind an ``ArrowDtype`` column (zero-copy), else None."""
    if isinstance(series.dtype, pd.ArrowDtype):
        arr = series.array._pa_array  # noqa: SLF001 (documented attribute of ArrowExtensionArray)
        return arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
    return None


def _small_int(n_values: int) -> type:
    """Smallest signed int dtype that holds codes 0..n_values-1 and -1."""
    if n_values < 127:
        return np.int8
    if n_values < 32767:
        return np.int16
    return np.int32


def _dictionary_chunk_codes(chunks: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a chunked Arrow dictionary column without unifying dictionaries by hashing
    every chunk: consecutive chunks with an equal dictionary (the usual case for Parquet row groups
    written from one categorical) reuse the mapping, so the cost is one pass over the indices."""
    n = len(chunks)
    dicts: list[pa.Array] = []
    seg_of_chunk: list[int] = []
    prev = None
    for ch in chunks.chunks:
        d = ch.dictionary
        if prev is None or not (d is prev or d.equals(prev)):
            dicts.append(d)
            prev = d
        seg_of_chunk.append(len(dicts) - 1)
    # one factorize over the distinct dictionaries (small next to the rows)
    allv = pa.concat_arrays([d.cast(pa.string()) if not pa.types.is_string(d.type) else d for d in dicts]) \
        if dicts else pa.array([], pa.string())
    gcodes, uniques = pd.factorize(pd.Series(pd.arrays.ArrowExtensionArray(allv)), use_na_sentinel=True)
    gcodes = gcodes.astype(np.int32)
    bounds = np.cumsum([0] + [len(d) for d in dicts])
    dtype = _small_int(len(uniques))
    out = np.empty(n, dtype=dtype)
    pos = 0
    identity_of: dict[int, bool] = {}
    for ch, seg in zip(chunks.chunks, seg_of_chunk):
        m = len(ch)
        if m == 0:
            continue
        seg_map = gcodes[bounds[seg]:bounds[seg + 1]].astype(dtype)
        identity = identity_of.get(seg)
        if identity is None:
            identity = identity_of[seg] = bool((seg_map == np.arange(len(seg_map))).all())
        idx = ch.indices
        if identity and not idx.null_count:
            out[pos:pos + m] = idx.to_numpy()
        elif idx.null_count:
            iv = idx.fill_null(0).to_numpy()
            v = seg_map[iv] if len(seg_map) else np.zeros(m, dtype)
            v[~ch.is_valid().to_numpy(zero_copy_only=False)] = -1
            out[pos:pos + m] = v
        else:
            out[pos:pos + m] = seg_map[idx.to_numpy()]
        pos += m
    uniq = np.asarray([str(u) for u in uniques], dtype=object)
    return out, uniq


def _to_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Factorize a column into (codes, uniques); -1 for null. Codes use the smallest int dtype that fits.

    Categorical and Arrow dictionary columns reuse their codes (no hashing of the rows)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = np.asarray(series.cat.categories.astype(str), dtype=object)
        return series.cat.codes.to_numpy(), cats
    chunks = _arrow_chunks(series)
    if chunks is not None and pa.types.is_dictionary(chunks.type):
        return _dictionary_chunk_codes(chunks)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return codes.astype(_small_int(len(uniques)), copy=False), np.asarray([str(u) for u in uniques], dtype=object)


def _hit_to_int8(series: pd.Series | None, n: int, where, col: str) -> np.ndarray:
    """A correctness column -> int8 (1/0/-1). ``where(i)`` gives the file and row of run row ``i``."""
    if series is None:
        return np.full(n, MISSING, dtype=np.int8)
    s = series
    if s.dtype == bool:
        return s.to_numpy().view(np.int8).copy()
    chunks = _arrow_chunks(s)
    if chunks is not None and (pa.types.is_boolean(chunks.type) or pa.types.is_integer(chunks.type)):
        import pyarrow.compute as pc

        if pa.types.is_integer(chunks.type):
            bad = pc.and_(pc.not_equal(chunks, 0), pc.not_equal(chunks, 1))
            if pc.any(bad).as_py():
                i = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False) == True)[0])  # noqa: E712
                raise InputError(f"{col} must be 0/1/true/false or empty, got {chunks[i].as_py()!r}",
                                 **where(i), column=col)
        return pc.fill_null(pc.cast(chunks, pa.int8()), -1).to_numpy().astype(np.int8, copy=False)
    if pd.api.types.is_bool_dtype(s.dtype):
        out = np.full(n, MISSING, dtype=np.int8)
        v = s.to_numpy(dtype=object, na_value=None)
        mask = pd.notna(s).to_numpy()
        out[mask] = np.asarray(v[mask], dtype=bool).astype(np.int8)
        return out
    if pd.api.types.is_numeric_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isnan(v) & (v != 0) & (v != 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{col} must be 0/1/true/false or empty, got {v[i]!r}",
                             **where(i), column=col)
        out = np.full(n, MISSING, dtype=np.int8)
        ok = ~np.isnan(v)
        out[ok] = v[ok].astype(np.int8)
        return out
    # strings / objects: map via unique values
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    table = np.empty(len(uniques), dtype=np.int8)
    truthy = {"1", "true", "t", "yes", "y", "1.0", "correct"}
    falsy = {"0", "false", "f", "no", "n", "0.0", "incorrect", "wrong"}
    for j, u in enumerate(uniques):
        if isinstance(u, (bool, np.bool_)):
            table[j] = int(u)
            continue
        k = str(u).strip().lower()
        if k in truthy:
            table[j] = 1
        elif k in falsy:
            table[j] = 0
        elif k in ("", "nan", "none", "null"):
            table[j] = MISSING
        else:
            i = int(np.flatnonzero(codes == j)[0])
            raise InputError(f"{col} must be 0/1/true/false or empty, got {u!r}",
                             **where(i), column=col)
    out = np.full(n, MISSING, dtype=np.int8)
    ok = codes >= 0
    out[ok] = table[codes[ok]]
    return out


def _validate_runs(runs: pd.DataFrame, q: pd.DataFrame, file: str, *, compute_exact: bool):
    n = len(runs)
    src_rows = runs["source_row"].to_numpy() if "source_row" in runs.columns else None
    src_files = runs["source_file"] if "source_file" in runs.columns else None

    def where(i: int) -> dict:
        f = str(src_files.iloc[i]) if src_files is not None else file
        return {"file": f, "row": _row_of(src_rows, i)}

    if n == 0:
        empty = pd.DataFrame({"q": np.array([], np.int32), "m": np.array([], np.int16),
                              "arm": np.array([], np.int8),
                              "prediction": pd.Series([], dtype=_STR), "answer": pd.Series([], dtype=_STR),
                              "hit": np.array([], np.int8), "hit_exact": np.array([], np.int8)})
        return empty, []
    for c in ("question_id", "model"):
        if c not in runs.columns:
            raise InputError(f"missing required column {c!r}; found {list(runs.columns)}", file=file, column=c)
    # question ids -> codes (int32 / int16 / int8 throughout: 1e8 rows must stay within a few GB)
    qcodes_raw, quniq = _to_codes(runs["question_id"])
    if (qcodes_raw < 0).any():
        i = int(np.flatnonzero(qcodes_raw < 0)[0])
        raise InputError("question_id is empty", **where(i), column="question_id")
    quniq = np.array([s.strip() for s in quniq], dtype=object)
    lookup = pd.Index(q["question_id"].astype(str)).get_indexer(quniq).astype(np.int32)
    if len(lookup) == len(q) and (lookup == np.arange(len(lookup))).all():
        qcodes = qcodes_raw  # the runs' dictionary is the questions table in order: codes are final
    else:
        qcodes = lookup[qcodes_raw]
    unknown = qcodes < 0
    if unknown.any():
        bad_ids = pd.unique(quniq[qcodes_raw[unknown]])
        i = int(np.flatnonzero(unknown)[0])
        raise InputError(
            f"{len(bad_ids)} question ID(s) in the runs are not in the questions table "
            f"({int(unknown.sum())} rows); first five: {list(map(str, bad_ids[:5]))}",
            **where(i), column="question_id")
    del qcodes_raw, unknown
    # models (first-appearance / category order, stripped of nothing: names are kept verbatim)
    mcodes, models = _to_codes(runs["model"])
    if (mcodes < 0).any():
        i = int(np.flatnonzero(mcodes < 0)[0])
        raise InputError("model is empty", **where(i), column="model")
    if len(models) > 32000:
        raise InputError(f"{len(models)} distinct models; at most 32,000 are supported", file=file, column="model")
    mcodes = mcodes.astype(np.int16, copy=False)
    # arms
    if "arm" in runs.columns:
        acodes_raw, auniq = _to_codes(runs["arm"])
        amap = np.array([ARMS.index(a.strip().lower()) if a.strip().lower() in ARMS else -1 for a in auniq],
                        dtype=np.int8)
        if (acodes_raw < 0).any():
            i = int(np.flatnonzero(acodes_raw < 0)[0])
            raise InputError(f"arm is empty; expected one of {ARMS}", **where(i), column="arm")
        acodes = amap[acodes_raw] if len(amap) else np.zeros(n, np.int8)
        del acodes_raw
        if (acodes < 0).any():
            i = int(np.flatnonzero(acodes < 0)[0])
            raise InputError(f"unknown arm {auniq[_to_codes(runs['arm'])[0][i]]!r}; expected one of {ARMS}",
                             **where(i), column="arm")
    else:
        acodes = np.zeros(n, dtype=np.int8)
    # duplicates of (question, model, arm): O(n) check through a dense bitmap filled in chunks of int64
    # keys (no n-long int64 array), sort only on failure
    nq, nm = len(q), len(models)

    def keys(lo: int, hi: int) -> np.ndarray:
        return (acodes[lo:hi].astype(np.int64) * nm + mcodes[lo:hi]) * nq + qcodes[lo:hi]

    step = 1 << 23
    if nq * nm * 2 <= 1_000_000_000:
        seen = np.zeros(nq * nm * 2, dtype=np.bool_)
        for lo in range(0, n, step):
            seen[keys(lo, lo + step)] = True
        has_dup = int(np.count_nonzero(seen)) != n
        del seen
    else:
        has_dup = True  # fall back to the sort below
    if has_dup:
        key = keys(0, n)
        order = np.argsort(key, kind="stable")
        sk = key[order]
        d = np.flatnonzero(sk[1:] == sk[:-1])
        if len(d):
            i = int(order[d[0] + 1])
            first = int(order[d[0]])
            raise InputError(
                f"duplicate row for question {q['question_id'].iloc[qcodes[i]]!r}, model {models[mcodes[i]]!r}, "
                f"arm {ARMS[acodes[i]]!r} (first seen at row {where(first)['row']})",
                **where(i), column="question_id")
        del key, order, sk

    def str_col(name):
        if name not in runs.columns:
            return pd.arrays.ArrowExtensionArray(pa.nulls(n, pa.string()))
        return to_arrow_strings(runs[name])

    answer_dict = None
    if "answer" in runs.columns and "hit_exact" in runs.columns:
        col_a = runs["answer"]
        if isinstance(col_a.dtype, pd.CategoricalDtype) or (
                isinstance(col_a.dtype, pd.ArrowDtype) and pa.types.is_dictionary(col_a.dtype.pyarrow_dtype)):
            answer_dict = _to_codes(col_a)  # the answer codes for encode_answers, at no hashing cost
    prediction = str_col("prediction")
    answer = str_col("answer")
    hit = _hit_to_int8(runs["hit"] if "hit" in runs.columns else None, n, where, "hit")
    out = pd.DataFrame({
        "q": qcodes.astype(np.int32, copy=False), "m": mcodes, "arm": acodes.astype(np.int8, copy=False),
        "prediction": prediction,
        "answer": answer, "hit": hit,
    }, copy=False)
    if answer_dict is not None:
        out.attrs["_answer_dict"] = (answer_dict[0], answer_dict[1], out["answer"].array._pa_array)  # noqa: SLF001
    if "hit_exact" in runs.columns:
        out["hit_exact"] = _hit_to_int8(runs["hit_exact"], n, where, "hit_exact")
    elif compute_exact:
        from .extract import fill_answers_and_exact
        out["answer"], out["hit_exact"] = fill_answers_and_exact(q, out)
    else:
        out["hit_exact"] = np.full(n, MISSING, dtype=np.int8)
    return out, list(models)


def encode_answers(questions: pd.DataFrame, runs: pd.DataFrame, *,
                   answer_dict: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Map each run row's extracted answer and each question's gold to comparable int codes.

    Works on the distinct answer strings only (Arrow dictionary encoding), then one gather per row.
    ``answer_dict`` = (codes per row with -1 for null, unique strings), when the caller already has the
    dictionary of ``runs["answer"]`` (a categorical / dictionary-encoded input column): then no string
    is hashed at all.
    """
    kmax = int(questions["n_options"].max()) if len(questions) else 0
    kmax = max(kmax, 2)
    atype = questions["answer_type"].to_numpy(dtype=object)
    gold = np.full(len(questions), MISSING, dtype=np.int32)
    is_mc = atype == "mc"
    gold[is_mc] = questions["gold_index"].to_numpy()[is_mc]
    is_yn = atype == "yesno"
    gold_ans = questions["answer"].astype(str).str.strip().str.lower().to_numpy(dtype=object)
    gold[is_yn] = np.where(gold_ans[is_yn] == "yes", 0, 1)

    n = len(runs)
    codes = np.full(n, MISSING, dtype=np.int32)
    if n == 0:
        return codes, gold
    if answer_dict is not None:
        fcodes, uniq = answer_dict
        # number the values as a dictionary_encode of the rows would (first appearance; unused
        # categories dropped), so codes do not depend on how the input column was encoded
        order = _first_appearance(fcodes, len(uniq))
        remap = np.full(len(uniq) + 1, -1, np.int32)
        remap[order + 1] = np.arange(len(order), dtype=np.int32)
        uniq = [uniq[i] for i in order]
        fcodes_raw = fcodes
    else:
        fcodes, uniq = _dictionary_codes(runs["answer"])
        fcodes_raw, remap = None, None
    other_q = (atype == "numeric") | (atype == "free")
    if len(uniq) == 0:
        gold[other_q] = kmax + pd.factorize(pd.Series(_canonical_gold_values(questions, other_q)[other_q]))[0]
        return codes, gold
    uniq_norm = [str(u).strip() for u in uniq]
    letter_idx = np.array([LETTERS.index(u.upper()) if len(u) == 1 and u.upper() in LETTERS else -1
                           for u in uniq_norm], dtype=np.int32)
    yn_idx = np.array([0 if u.lower() == "yes" else (1 if u.lower() == "no" else -1) for u in uniq_norm],
                      dtype=np.int32)
    norm = [normalise_value(u) for u in uniq_norm]
    # free / numeric values share one global code space above the option range; golds go through the
    # parser's canonical form first (e.g. "\\frac{2}{5}" -> "0.4"), as extracted answers did
    g_norm = _canonical_gold_values(questions, other_q)
    free_codes_u, free_uniq = pd.factorize(pd.Series(norm + g_norm.tolist()))
    free_u = free_codes_u[: len(uniq_norm)].astype(np.int32) + kmax
    gold_free = free_codes_u[len(uniq_norm):].astype(np.int32) + kmax
    gold[other_q] = gold_free[other_q]
    # per question: 0 mc, 1 yes/no, 2 numeric/free, 3 other; per (question type, unique answer): the code
    qtype = np.full(len(questions), 3, np.int8)
    qtype[is_mc] = 0
    qtype[is_yn] = 1
    qtype[other_q] = 2
    qk = questions["n_options"].to_numpy().astype(np.int32)
    # one gather per row from a (question type x unique answer) table; an mc letter beyond the item's
    # options is unparseable. Chunked, so no n-long temporaries pile up.
    U1 = len(uniq) + 1
    table = np.full((4, U1), MISSING, np.int32)   # column 0: null / unparseable
    table[0, 1:] = letter_idx
    table[1, 1:] = yn_idx
    table[2, 1:] = free_u
    if remap is not None:  # columns indexed by the input's dictionary codes instead
        table = table[:, np.concatenate([[0], remap[1:] + 1])]
        table[:, 1:][:, remap[1:] < 0] = MISSING
        fcodes = fcodes_raw
    U1 = table.shape[1]
    table = np.ascontiguousarray(table).reshape(-1)
    q_off = (qtype.astype(np.int32) * U1 + 1)   # + 1: code -1 (null) lands in column 0
    limit = np.where(qtype == 0, qk, np.iinfo(np.int32).max).astype(np.int32)
    rq = runs["q"].to_numpy()
    step = 1 << 22
    for lo in range(0, n, step):
        qq = rq[lo:lo + step]
        c = table[q_off[qq] + fcodes[lo:lo + step]]
        c[c >= limit[qq]] = MISSING
        codes[lo:lo + step] = c
    return codes, gold


def _canonical_gold_values(questions: pd.DataFrame, other_q: np.ndarray) -> np.ndarray:
    """(Q,) object array: for numeric / free items the gold in the exact-match parser's canonical form
    passed through :func:`normalise_value`; "" elsewhere. Computed once per distinct (gold, type)."""
    from .extract import canonical_gold

    out = np.full(len(questions), "", dtype=object)
    if not other_q.any():
        return out
    gold = questions["answer"].astype(str).to_numpy(dtype=object)[other_q]
    typ = questions["answer_type"].to_numpy(dtype=object)[other_q]
    pairs = pd.MultiIndex.from_arrays([gold, typ])
    codes, uniq = pd.factorize(pairs)
    vals = []
    for g, t in uniq:
        c = canonical_gold(g, t)
        vals.append(normalise_value(c if c is not None else g))
    out[other_q] = np.asarray(vals, dtype=object)[codes]
    return out


def _first_appearance(codes: np.ndarray, n_values: int, step: int = 1 << 22) -> np.ndarray:
    """The values 0..n_values-1 that occur in ``codes`` (-1 = null), ordered by first occurrence.
    Scans in chunks and stops once every value has been seen (usually within the first chunk)."""
    first = np.full(n_values, np.iinfo(np.int64).max, np.int64)
    seen = np.zeros(n_values, bool)
    for lo in range(0, len(codes), step):
        c = np.asarray(codes[lo:lo + step])
        present = np.bincount(c[c >= 0], minlength=n_values).astype(bool) if n_values else seen
        new = present & ~seen
        if new.any():
            u, pos = np.unique(c, return_index=True)
            keep = u >= 0
            u, pos = u[keep], pos[keep]
            sel = new[u]
            first[u[sel]] = pos[sel] + lo
            seen |= new
            if seen.all():
                break
    present_codes = np.flatnonzero(seen)
    return present_codes[np.argsort(first[present_codes], kind="stable")]


def to_arrow_strings(series: pd.Series) -> pd.api.extensions.ExtensionArray:
    """Any column (object, categorical, Arrow, numeric) -> Arrow string array, without Python objects
    for the common cases (categoricals and Arrow columns convert in C)."""
    import pyarrow.compute as pc

    s = series
    if isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_string(s.dtype.pyarrow_dtype):
        return s.array
    chunks = _arrow_chunks(s)
    if chunks is not None and pa.types.is_dictionary(chunks.type) and pa.types.is_string(chunks.type.value_type):
        return pd.arrays.ArrowExtensionArray(chunks.cast(pa.string()))
    try:
        arr = pa.array(s, from_pandas=True)
        if pa.types.is_dictionary(arr.type):
            arr = arr.cast(pa.string()) if pa.types.is_string(arr.type.value_type) else \
                pc.cast(arr.dictionary_decode(), pa.string())
        elif not pa.types.is_string(arr.type):
            if pa.types.is_large_string(arr.type):
                arr = arr.cast(pa.string())
            else:
                raise pa.ArrowInvalid("not strings")
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        vals = s.astype(object).where(s.notna(), None).tolist()
        arr = pa.array([None if v is None else str(v) for v in vals], type=pa.string())
    return pd.arrays.ArrowExtensionArray(arr)


def _dictionary_codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """(codes with -1 for null, unique strings) of a string column, computed in Arrow."""
    arr = pa.array(to_arrow_strings(series))
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    enc = arr.dictionary_encode()
    idx = enc.indices.to_numpy(zero_copy_only=False)
    codes = np.where(pd.isna(idx), -1, idx).astype(np.int64) if enc.null_count else idx.astype(np.int64)
    return codes, enc.dictionary.to_pylist()


def normalise_value(v: str) -> str:
    """Canonical text of a numeric or free answer: numbers as shortest float repr, text casefolded."""
    s = str(v).strip()
    t = s.replace(",", "").replace("$", "").strip()
    if _NUM_RE.match(t):
        try:
            x = float(t)
            return repr(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)
        except ValueError:
            pass
    return " ".join(s.casefold().split())
