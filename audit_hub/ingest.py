"""The single entry point from files on disk to one validated :class:`~audit_hub.frame.AuditFrame`.

* :func:`load_questions` -- a questions file (CSV/TSV/JSONL/JSON/Parquet/XLSX, a VLMEvalKit dataset
  TSV, MATH-V ``test.jsonl``, a saved frame folder, a local Hub-layout folder) or a Hub id
  ``org/name[:config][@revision]``.
* :func:`load_runs` -- run files, folders (every recognised file inside) or globs, auto-detected:
  VLMEvalKit prediction / judged / auxmatch sheets, lmms-eval samples, MATH-V outputs, generic long
  tables. Several files for the same model (a prediction sheet and its judged sheet) are merged on
  the question ID; the judge per model goes to ``df.attrs['judges']``.
* :func:`questions_from_runs` -- the questions carried inside run files (VLMEvalKit sheets,
  lmms-eval ``doc`` fields, generic runs with a ``gold`` column).
* :func:`build_frame` -- all of the above, validated, with provenance in ``frame.sources`` and the
  model pools in ``frame.meta['pool']``.

Pairing of full and blind runs is by model name. When the blind pool is a different set of models
(MATH-V: the text-only run is GPT-4, the image runs are other models), ``meta['pool']['pool_level']``
is true and ``meta['pool']['note']`` says so; the audit continues with a pool-level comparison.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .errors import InputError
from .input_guard import check_input_path, reading, skip_reason
from .io_utils import sha256_file
from .readers import (
    PICKLE_EXTENSIONS,
    TABLE_EXTENSIONS,
    ReadResult,
    ensure_nonempty,
    ext_of,
    peek_json_line,
    refuse_pickle,
    stem_of,
)

RUN_KIND_PRIORITY = {"vlmevalkit-judged": 0, "vlmevalkit-auxmatch": 1, "vlmevalkit-extract": 2,
                     "lmms-eval-samples": 3, "mathv-output": 3, "generic": 4, "vlmevalkit-sheet": 5}
_OPTIONAL_RUN_COLS = ("hit", "hit_exact")


# ---------------------------------------------------------------------------------------- small API
def parse_column_map(items: Sequence[str] | None) -> dict[str, str]:
    """``["old=new", ...]`` (from ``--map``) -> ``{"old": "new"}``; malformed items raise InputError."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            if part.count("=") != 1:
                raise InputError(f"--map expects OLD=NEW, got {part!r}")
            old, new = (s.strip() for s in part.split("="))
            if not old or not new:
                raise InputError(f"--map expects OLD=NEW with both names non-empty, got {part!r}")
            if old in out and out[old] != new:
                raise InputError(f"--map gives two new names for {old!r}: {out[old]!r} and {new!r}")
            out[old] = new
    return out


def file_sha256(path: str) -> str:
    """Streamed SHA-256 of a file (constant memory)."""
    return sha256_file(path)


def _source(path: str, kind: str, rows: int, info: dict | None = None, *, hash_files: bool = True) -> dict:
    d: dict[str, Any] = {"path": os.path.abspath(path), "kind": kind,
                         "bytes": os.path.getsize(path), "rows": int(rows)}
    d["sha256"] = file_sha256(path) if hash_files else None
    for k, v in (info or {}).items():
        if v is not None and k not in d:
            d[k] = v
    return d


# ---------------------------------------------------------------------------------------- questions
@reading(0)
def load_questions(spec: str, *, column_map: dict[str, str] | None = None, revision: str | None = None,
                   split: str | None = None, arrow_options: bool = False) -> pd.DataFrame:
    """Questions in the public format (not yet validated); ``df.attrs['sources']`` records provenance.

    ``arrow_options=True`` (used by :func:`build_frame`) lets a Parquet list-of-string ``options``
    column stay a ``pd.ArrowDtype`` list column instead of Python lists; the frame validates either."""
    from .readers import generic, hf, lmms_eval, mathv, vlmevalkit

    spec = str(spec)
    if os.path.lexists(spec):
        check_input_path(spec)
    if os.path.isdir(spec):
        saved = os.path.join(spec, "questions.parquet")
        if os.path.isfile(saved):
            return load_questions(saved, column_map=column_map, arrow_options=arrow_options)
        if hf.is_hub_layout_folder(spec):
            q, info = hf.load_hub_questions(spec, revision=revision, column_map=column_map, split=split)
            q.attrs["sources"] = [info]
            return q
        raise InputError("the folder holds no questions.parquet and is not a Hugging Face dataset folder "
                         "(data/*.parquet + README.md)", file=spec)
    if not os.path.exists(spec):
        if any(ch in spec for ch in "*?["):
            raise InputError("the questions must be one file, not a glob", file=spec)
        if hf.parse_hub_spec(spec) is not None and not spec.endswith(TABLE_EXTENSIONS):
            q, info = hf.load_hub_questions(spec, revision=revision, column_map=column_map, split=split)
            q.attrs["sources"] = [info]
            return q
        raise InputError("no such file or folder", file=spec)
    ext = ext_of(spec)
    if ext in PICKLE_EXTENSIONS:
        refuse_pickle(spec)
    if ext not in TABLE_EXTENSIONS:
        raise InputError(f"unknown file type {ext or '(no extension)'!r} for questions; expected one of "
                         f"{' '.join(TABLE_EXTENSIONS)}", file=spec)
    ensure_nonempty(spec)
    kind = "generic"
    if ext == ".jsonl":
        rec = peek_json_line(spec)
        if rec is None:
            raise InputError("the file has no JSON lines", file=spec)
        if mathv.is_mathv_questions_record(rec):
            q = mathv.read_questions(spec)
            q.attrs["sources"] = [_source(spec, "mathv-questions", len(q))]
            return q
        if lmms_eval.is_lmms_eval_record(rec):
            res = lmms_eval.read_samples(spec)
            if res.questions is None:
                raise InputError("the lmms-eval samples carry no gold answers (target)", file=spec, column="target")
            q = res.questions
            q.attrs["sources"] = [_source(spec, "lmms-eval-samples", len(q))]
            return q
    df = generic.read_table(spec, column_map, dictionary=False, arrow_lists=arrow_options)
    if "image" in df.columns:
        df = df.drop(columns=["image"])
    if vlmevalkit.is_vlmevalkit_sheet(df.columns) or "index" in df.columns:
        kind = "vlmevalkit"
        df = df.drop(columns=[c for c in ("prediction", "hit", "log", "extracted", "score", "res") if c in df.columns])
    q = generic.normalise_questions(df, spec)
    q.attrs["sources"] = [_source(spec, f"{kind}-questions", len(q))]
    return q


# ---------------------------------------------------------------------------------------- run files
def _expand(specs: Sequence[str]) -> list[tuple[str, bool]]:
    """Specs -> [(file, explicit)]; ``explicit`` is False for files found inside a folder or a glob."""
    out: list[tuple[str, bool]] = []
    for spec in specs:
        spec = str(spec)
        if os.path.lexists(spec):
            check_input_path(spec)
        if os.path.isdir(spec):
            found = []
            for root, dirs, files in os.walk(spec):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
            if not found:
                raise InputError("the folder is empty", file=spec)
            out.extend((f, False) for f in found)
        elif os.path.isfile(spec):
            out.append((spec, True))
        elif any(ch in spec for ch in "*?["):
            matches = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
            if not matches:
                raise InputError("the pattern matches no files", file=spec)
            out.extend((p, False) for p in matches)
        else:
            raise InputError("no such file or folder", file=spec)
    seen: set[str] = set()
    uniq = []
    for p, e in out:
        a = os.path.abspath(p)
        if a not in seen:
            seen.add(a)
            uniq.append((p, e))
    return uniq


@reading(0)
def _read_run_file(path: str, explicit: bool, *, arm: str, questions: pd.DataFrame | None,
                   column_map: dict[str, str] | None, dataset_hint: str | None, model: str | None,
                   metric: str | None, with_questions: bool = True) -> ReadResult | str:
    """One file -> ReadResult, or a string saying why a file found in a folder was skipped."""
    from .readers import generic, lmms_eval, mathv, vlmevalkit

    if explicit:
        check_input_path(path, allow_dir=False)
    elif (why := skip_reason(path)) is not None:
        return why
    ext = ext_of(path)
    if ext in PICKLE_EXTENSIONS:
        if explicit:
            refuse_pickle(path)
        return "pickle cache (never unpickled; export it to .xlsx/.tsv/.parquet to use it)"
    if ext not in TABLE_EXTENSIONS:
        if explicit:
            raise InputError(f"unknown file type {ext or '(no extension)'!r}; expected one of "
                             f"{' '.join(TABLE_EXTENSIONS)}", file=path)
        return f"not a table file ({ext or 'no extension'})"
    if explicit:
        ensure_nonempty(path)
    elif os.path.getsize(path) == 0:
        return "empty file"
    if ext == ".jsonl":
        rec = peek_json_line(path)
        if rec is None:
            if explicit:
                raise InputError("the file has no JSON lines", file=path)
            return "no JSON lines"
        if lmms_eval.is_lmms_eval_record(rec):
            return lmms_eval.read_samples(path, arm=arm, model=model, metric=metric)
        if mathv.is_mathv_output_record(rec):
            return mathv.read_outputs(path, arm=arm, model=model, questions=questions)
        if mathv.is_mathv_questions_record(rec):
            if explicit:
                raise InputError("this is a MATH-V questions file (data/test.jsonl); pass it as the questions, "
                                 "not as a run", file=path)
            return "MATH-V questions file"
    if ext == ".parquet":  # a long run table: zero-copy Arrow columns, row numbers left implicit
        cmap = column_map or {}
        cols = [cmap.get(c, c) for c in generic.parquet_column_names(path)]
        if not ("model" not in cols and vlmevalkit.is_vlmevalkit_sheet(cols)) and generic.is_generic_run_table(cols):
            df = generic.read_parquet_runs(path, column_map)
            return generic.generic_runs(df, path, arm=arm, model=model, with_questions=with_questions,
                                        implicit_rows=True)

    def keep(cols: list[str]) -> list[str] | None:
        """Without questions, a VLMEvalKit sheet needs only its ID, prediction and judge columns."""
        if with_questions or "model" in cols or not vlmevalkit.is_vlmevalkit_sheet(cols):
            return None
        return [c for c in cols if c in vlmevalkit.RUN_COLUMNS]

    try:
        df = generic.read_table(path, column_map, keep=keep)
    except InputError:
        if explicit or ext != ".json":
            raise
        return "JSON file that is not a table (e.g. a summary)"
    cols = list(df.columns)
    if "model" not in cols and vlmevalkit.is_vlmevalkit_sheet(cols):
        return vlmevalkit.read_sheet(df, path, arm=arm, dataset_hint=dataset_hint, model=model,
                                     with_questions=with_questions)
    if generic.is_generic_run_table(cols):
        return generic.generic_runs(df, path, arm=arm, model=model, with_questions=with_questions)
    if explicit:
        shown = [c for c in cols if c != "source_row"]
        raise InputError(f"not a run file: no prediction or hit column (found {shown}); use --map OLD=prediction "
                         "or pass it as the questions", file=path, column="prediction")
    return "no prediction/hit column (summary or dataset file)"


def _read_all(specs: Sequence[str], *, arm: str, questions: pd.DataFrame | None, column_map, dataset_hint,
              model, metric, with_questions: bool = True) -> tuple[list[ReadResult], list[dict]]:
    results: list[ReadResult] = []
    skipped: list[dict] = []
    for path, explicit in _expand(specs):
        r = _read_run_file(path, explicit, arm=arm, questions=questions, column_map=column_map,
                           dataset_hint=dataset_hint, model=model, metric=metric, with_questions=with_questions)
        if isinstance(r, str):
            skipped.append({"path": os.path.abspath(path), "reason": r})
        else:
            results.append(r)
    if not results:
        where = ", ".join(map(str, specs))
        reasons = "; ".join(f"{os.path.basename(s['path'])}: {s['reason']}" for s in skipped[:5])
        raise InputError(f"no run files recognised in {where}" + (f" (skipped {reasons})" if reasons else ""))
    return results, skipped


def _with_provenance(df: pd.DataFrame, path: str) -> pd.DataFrame:
    """Add ``source_file``/``source_row`` to a one-file run table that left them implicit (row ``i`` is
    data row ``i + 1`` of ``path``); needed before its rows are mixed with another file's."""
    if "source_row" in df.columns:
        return df
    from .readers.generic import constant_categorical

    n = len(df)
    return df.assign(source_file=constant_categorical(path, n), source_row=np.arange(1, n + 1, dtype=np.int64))


def _model_arm_keys(df: pd.DataFrame) -> set[tuple[str, str]]:
    m, a = df["model"], df["arm"]
    if isinstance(m.dtype, pd.CategoricalDtype) and isinstance(a.dtype, pd.CategoricalDtype):
        mc = m.cat.codes.to_numpy().astype(np.int64)
        ac = a.cat.codes.to_numpy().astype(np.int64)
        k = np.flatnonzero(np.bincount(mc * (len(a.cat.categories) + 1) + ac))
        mcat, acat = list(m.cat.categories), list(a.cat.categories)
        return {(str(mcat[x // (len(acat) + 1)]), str(acat[x % (len(acat) + 1)]).strip().lower()) for x in k}
    pairs = pd.DataFrame({"m": m.astype(object).astype(str), "a": a.astype(object).astype(str)}).drop_duplicates()
    return {(mm, aa.strip().lower()) for mm, aa in zip(pairs["m"], pairs["a"])}


def _rows_for(df: pd.DataFrame, key: tuple[str, str]) -> np.ndarray:
    m = df["model"].astype(object).astype(str).to_numpy()
    a = np.char.lower(df["arm"].astype(object).astype(str).to_numpy().astype(str))
    return (m == key[0]) & (a == key[1])


def _merge_parts(parts: list[tuple[ReadResult, pd.DataFrame]], key: tuple[str, str]) -> tuple[pd.DataFrame, str | None]:
    """Merge several files' rows for one (model, arm) on question_id; higher-priority kinds win."""
    parts = sorted(parts, key=lambda p: RUN_KIND_PRIORITY.get(p[0].kind, 9))
    judges = {p[0].judges.get(key[0]) for p in parts if "hit" in p[1].columns and p[1]["hit"].notna().any()}
    judges.discard(None)
    llm = sorted(j for j in judges if j != "exact_matching")
    if len(llm) > 1:
        files = [os.path.basename(p[0].path) for p in parts]
        raise InputError(f"model {key[0]!r} has judged results from several judges {llm} ({files}); "
                         "pass the files of one judge")
    judge = llm[0] if llm else (next(iter(judges)) if judges else None)
    cols = ["prediction", "answer", "hit", "hit_exact", "source_file", "source_row"]
    tables = []
    for res, df in parts:
        d = pd.DataFrame({"question_id": df["question_id"].astype(object).astype(str).str.strip().to_numpy()})
        for c in cols:
            d[c] = df[c].astype(object).to_numpy() if c in df.columns else None
            d[c] = d[c].where(d[c].notna(), None)
        if judge is not None and res.judges.get(key[0]) not in (judge, None):
            d["hit"] = None  # a lower-priority judge (exact_matching) does not override the chosen one
        tables.append((res, d.drop_duplicates(subset=["question_id"], keep="first").set_index("question_id")))
    order = pd.unique(np.concatenate([t.index.to_numpy(dtype=object) for _, t in tables]))
    merged = tables[0][1].reindex(order)
    merged_path = tables[0][0].path
    for res, t in tables[1:]:
        t = t.reindex(order)
        lp, rp = merged["prediction"], t["prediction"]
        both = (lp.notna() & rp.notna()).to_numpy()
        if both.any():
            diff = both & (lp.astype(str).str.strip() != rp.astype(str).str.strip()).to_numpy()
            if diff.any():
                i = int(np.flatnonzero(diff)[0])
                raise InputError(
                    f"two different predictions for question {order[i]!r} of model {key[0]!r}: "
                    f"{merged_path} row {merged['source_row'].iloc[i]} vs {res.path} row {t['source_row'].iloc[i]}; "
                    "are these two different runs (or two datasets) under one model name?",
                    file=res.path, row=int(t["source_row"].iloc[i]), column="prediction")
        for c in cols:
            merged[c] = merged[c].where(merged[c].notna(), t[c])
        merged_path = f"{merged_path} + {res.path}"
    from .readers.generic import ARROW_STR

    def _nullable(v) -> bool:
        return v is None or bool(pd.isna(v))

    out = pd.DataFrame({"question_id": np.asarray(order, dtype=object), "model": key[0], "arm": key[1]})
    for c in ("prediction", "answer"):
        out[c] = pd.array([None if _nullable(v) else str(v) for v in merged[c].tolist()], dtype=ARROW_STR)
    for c in ("hit", "hit_exact"):
        if merged[c].notna().any():
            vals = []
            for i, v in enumerate(merged[c].tolist()):
                k = None if _nullable(v) else str(v).strip().lower()
                if k is None or k in ("", "nan", "none", "null"):
                    vals.append(None)
                elif k in ("1", "true", "1.0", "yes", "correct"):
                    vals.append(1)
                elif k in ("0", "false", "0.0", "no", "incorrect", "wrong"):
                    vals.append(0)
                else:
                    raise InputError(f"{c} must be 0/1/true/false or empty, got {v!r}",
                                     file=str(merged["source_file"].iloc[i]),
                                     row=int(merged["source_row"].iloc[i]), column=c)
            out[c] = pd.array(vals, dtype="Int8")
    out["source_file"] = merged["source_file"].astype(str).to_numpy(dtype=object)
    out["source_row"] = pd.to_numeric(merged["source_row"]).to_numpy().astype(np.int64)
    return out, judge


def _concat_runs(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate run frames; categoricals are unioned (no object round trip) and columns aligned."""
    from pandas.api.types import union_categoricals

    from .readers.generic import ARROW_STR

    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    has = {c: [c in f.columns for f in frames] for c in _OPTIONAL_RUN_COLS}
    out_cols: dict[str, Any] = {}
    n = sum(len(f) for f in frames)
    for c in ("question_id", "model", "arm", "source_file"):
        series = [_arrow_dictionary_to_categorical(f[c]) for f in frames]
        if all(isinstance(s.dtype, pd.CategoricalDtype) for s in series):
            series = [s.cat.rename_categories([str(x) for x in s.cat.categories]) for s in series]
            out_cols[c] = union_categoricals([s.array for s in series])
        else:
            out_cols[c] = np.concatenate([s.astype(object).to_numpy(dtype=object) for s in series]) if n else []
    for c in ("prediction", "answer"):
        parts = [f[c] if c in f.columns else pd.Series(pd.array([None] * len(f), dtype=ARROW_STR)) for f in frames]
        out_cols[c] = pd.concat([p.astype(ARROW_STR).reset_index(drop=True) for p in parts], ignore_index=True).array
    if any(has["hit"]):
        out_cols["hit"] = _concat_flags([f["hit"] if "hit" in f.columns else None for f in frames],
                                        [len(f) for f in frames])
    if all(has["hit_exact"]):  # mixed: drop it so the frame extracts the same way for every row
        out_cols["hit_exact"] = _concat_flags([f["hit_exact"] for f in frames], [len(f) for f in frames])
    out_cols["source_row"] = np.concatenate([np.asarray(f["source_row"], dtype=np.int64) for f in frames])
    return pd.DataFrame(out_cols)


def _concat_flags(parts: list[pd.Series | None], lengths: list[int]):
    """hit / hit_exact of several files as one column: nullable Int8 when every part converts (bool,
    0/1 numbers or digit strings); otherwise object values (text such as "True" from CSV stays text, so
    the frame applies its own 0/1/true/false rules and names the bad row)."""
    try:
        cols = [p.astype("Int8") if p is not None else pd.Series(pd.array([None] * k, dtype="Int8"))
                for p, k in zip(parts, lengths)]
        return pd.concat([c.reset_index(drop=True) for c in cols], ignore_index=True).array
    except (ValueError, TypeError):
        pass
    vals = [np.full(k, None, dtype=object) if p is None else p.astype(object).where(p.notna(), None).to_numpy()
            for p, k in zip(parts, lengths)]
    return np.concatenate(vals)


def _arrow_dictionary_to_categorical(s: pd.Series) -> pd.Series:
    """An Arrow dictionary column (from :func:`generic.read_parquet_runs`) -> pandas Categorical with
    str categories, for the code paths that merge several files; other columns are returned as they are."""
    if not (isinstance(s.dtype, pd.ArrowDtype) and pa.types.is_dictionary(s.dtype.pyarrow_dtype)):
        return s
    arr = s.array._pa_array  # noqa: SLF001 (documented attribute of ArrowExtensionArray)
    arr = arr.unify_dictionaries() if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
    if arr.num_chunks == 0:
        return pd.Series(pd.Categorical([]), index=s.index)
    cats = arr.chunk(0).dictionary
    cats = cats.cast(pa.string()) if not pa.types.is_string(cats.type) else cats
    codes = np.concatenate([c.indices.fill_null(-1).to_numpy().astype(np.int32) for c in arr.chunks])
    return pd.Series(pd.Categorical.from_codes(codes, categories=np.asarray(cats.to_pylist(), dtype=object)),
                     index=s.index)


def _public_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The zero-copy Arrow columns of :func:`generic.read_parquet_runs` -> the documented public dtypes
    (categorical IDs/models/arms, Arrow string texts, nullable Int8 flags), as every other reader gives."""
    from .readers.generic import ARROW_STR

    new: dict[str, Any] = {}
    for c in df.columns:
        s = df[c]
        if c in ("prediction", "answer") and isinstance(s.dtype, pd.CategoricalDtype):
            new[c] = pd.Series(pd.arrays.ArrowExtensionArray(pa.array(s, from_pandas=True).cast(pa.string())),
                               index=df.index)
            continue
        if not isinstance(s.dtype, pd.ArrowDtype):
            continue
        t = s.dtype.pyarrow_dtype
        if c in ("question_id", "model", "arm", "source_file") and pa.types.is_dictionary(t):
            new[c] = _arrow_dictionary_to_categorical(s)
        elif c in ("prediction", "answer") and pa.types.is_dictionary(t):
            new[c] = s.astype(ARROW_STR)
        elif c in _OPTIONAL_RUN_COLS and pa.types.is_boolean(t):
            new[c] = s.astype("Int8")
    if "prediction" not in df.columns:  # the fast reader leaves an absent prediction column out
        new["prediction"] = pd.Series(pd.arrays.ArrowExtensionArray(pa.nulls(len(df), pa.string())), index=df.index)
    return df.assign(**new) if new else df


def _runs_from_results(results: list[ReadResult], model_map: dict[str, str] | None = None,
                       ) -> tuple[pd.DataFrame, dict[str, str]]:
    frames = []
    for r in results:
        df = r.runs
        assert df is not None
        if len(results) > 1:  # rows of several files are merged or stacked: each row needs its file and row
            df = _with_provenance(df, r.path)
            df = df.assign(**{c: _arrow_dictionary_to_categorical(df[c]) for c in ("question_id", "model", "arm")
                              if c in df.columns})
        if model_map:
            m = _arrow_dictionary_to_categorical(df["model"])
            if isinstance(m.dtype, pd.CategoricalDtype):
                df = df.assign(model=m.cat.rename_categories([model_map.get(str(x), str(x)) for x in m.cat.categories]))
            else:
                df = df.assign(model=m.astype(object).map(lambda x: model_map.get(str(x), x)))
            r.judges = {model_map.get(k, k): v for k, v in r.judges.items()}
        r.runs = df
        frames.append(df)
    if len(frames) == 1:  # one file: nothing to merge across files
        judges_one = {k: v for k, v in results[0].judges.items() if v}
        return _concat_runs(frames), judges_one
    keys = [_model_arm_keys(f) for f in frames]
    count: dict[tuple[str, str], int] = {}
    for ks in keys:
        for k in ks:
            count[k] = count.get(k, 0) + 1
    shared = {k for k, c in count.items() if c > 1}
    judges: dict[str, str] = {}
    out_frames: list[pd.DataFrame] = []
    if not shared:
        out_frames = frames
        for r in results:
            judges.update({k: v for k, v in r.judges.items() if v})
    else:
        by_key: dict[tuple[str, str], list[tuple[ReadResult, pd.DataFrame]]] = {k: [] for k in shared}
        for r, f, ks in zip(results, frames, keys):
            mine = ks & shared
            if not mine:
                out_frames.append(f)
                judges.update({k: v for k, v in r.judges.items() if v})
                continue
            rest = np.ones(len(f), dtype=bool)
            for k in mine:
                sel = _rows_for(f, k)
                rest &= ~sel
                by_key[k].append((r, f[sel]))
            if rest.any():
                out_frames.append(f[rest])
                judges.update({k: v for k, v in r.judges.items() if v and (k, "full") not in mine
                               and (k, "blind") not in mine})
        for k in sorted(shared):
            merged, judge = _merge_parts(by_key[k], k)
            out_frames.append(merged)
            if judge:
                judges[k[0]] = judge
    df = _concat_runs(out_frames)
    return df, judges


def load_runs(specs: Sequence[str] | str, *, arm: str = "full", questions: pd.DataFrame | None = None,
              column_map: dict[str, str] | None = None, dataset_hint: str | None = None, model: str | None = None,
              model_map: dict[str, str] | None = None, metric: str | None = None,
              hash_files: bool = True) -> pd.DataFrame:
    """Run files -> one long runs table (public format + ``source_file``/``source_row``).

    ``specs``: files, folders (all recognised files inside; summaries, dataset files and pickle
    caches there are skipped and listed in ``df.attrs['skipped']``) or globs. ``arm`` applies to
    files without an ``arm`` column. ``model`` overrides the model name of every file given;
    ``model_map`` renames models afterwards (``{"GPT4-CoT (Text Only)": "GPT4-CoT"}``), which is how
    a blind run is paired with a full run of another file name. ``dataset_hint`` is the dataset
    name used to split VLMEvalKit file names (``{model}_{dataset}``). ``metric`` chooses the
    lmms-eval metric field that gives ``hit``.

    ``df.attrs``: ``judges`` ``{model: judge}``, ``sources`` (list of dicts), ``skipped``.
    """
    if isinstance(specs, (str, os.PathLike)):
        specs = [str(specs)]
    if arm not in ("full", "blind"):
        raise InputError(f"arm must be 'full' or 'blind', got {arm!r}")
    specs, hub = _materialise_hub_specs(specs)
    results, skipped = _read_all(specs, arm=arm, questions=questions, column_map=column_map,
                                 dataset_hint=dataset_hint, model=model, metric=metric, with_questions=False)
    df, judges = _runs_from_results(results, model_map)
    df = _public_runs(_with_provenance(df, results[0].path))  # the public table always names file and row
    df.attrs["judges"] = judges
    sources = [_source(r.path, r.kind, r.rows, r.info, hash_files=hash_files) for r in results]
    for src in sources:
        for folder, info in hub.items():
            if os.path.abspath(str(src.get("path", ""))).startswith(folder + os.sep):
                src.update(info)
    df.attrs["sources"] = sources
    df.attrs["skipped"] = skipped
    return df


def _materialise_hub_specs(specs: Sequence[str]) -> tuple[list[str], dict[str, dict]]:
    """Replace Hub dataset ids (``org/name[@revision]``) among run specs by local snapshot folders.

    A spec that exists on disk, or looks like a glob, is left alone. The snapshot is fetched with
    ``huggingface_hub.snapshot_download`` (the usual cache and token; offline mode honoured) and
    its resolved commit is recorded for the manifest."""
    from .readers import hf

    out: list[str] = []
    hub: dict[str, dict] = {}
    for spec in specs:
        spec = str(spec)
        parsed = None
        if not os.path.exists(spec) and not any(ch in spec for ch in "*?[") and not spec.endswith(TABLE_EXTENSIONS):
            parsed = hf.parse_hub_spec(spec)
        if parsed is None:
            out.append(spec)
            continue
        repo, config, rev = parsed
        try:
            from huggingface_hub import snapshot_download

            folder = snapshot_download(repo_id=repo, repo_type="dataset", revision=rev)
        except Exception as e:  # noqa: BLE001 - one clear message whatever the client raises
            first = str(e).splitlines()[0] if str(e) else ""
            raise InputError(f"cannot fetch the Hub dataset ({type(e).__name__}: {first})", file=spec) from None
        folder = os.path.abspath(folder)
        sha = os.path.basename(folder) if re.fullmatch(r"[0-9a-f]{40}", os.path.basename(folder)) else None
        hub[folder] = {"repo_id": repo, "config": config, "revision": rev, "resolved_commit": sha, "hub_spec": spec}
        out.append(os.path.join(folder, "data") if os.path.isdir(os.path.join(folder, "data")) else folder)
    return out, hub


def _questions_from_results(results: list[ReadResult]) -> pd.DataFrame:
    qs = [r.questions for r in results if r.questions is not None]
    if not qs:
        kinds = sorted({r.kind for r in results})
        raise InputError(f"none of the run files carries the questions (kinds: {kinds}); pass the questions file "
                         "(e.g. the VLMEvalKit dataset TSV or MATH-V data/test.jsonl)")
    allq = pd.concat(qs, ignore_index=True)
    allq["question_id"] = allq["question_id"].astype(str).str.strip()
    first = allq.drop_duplicates(subset=["question_id"], keep="first").reset_index(drop=True)
    if len(first) < len(allq):
        gold = dict(zip(first["question_id"], first["answer"].astype(str).str.strip().str.upper()))
        origin = dict(zip(first["question_id"], zip(first["source_file"], first["source_row"])))
        other = allq[allq.duplicated(subset=["question_id"], keep="first")]
        g2 = other["answer"].astype(str).str.strip().str.upper()
        bad = g2.to_numpy() != other["question_id"].map(gold).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            row = other.iloc[i]
            f0, r0 = origin[row["question_id"]]
            raise InputError(f"question {row['question_id']!r} has gold {row['answer']!r} here but "
                             f"{gold[row['question_id']]!r} in {f0} row {r0}; are the files from different datasets?",
                             file=str(row["source_file"]), row=int(row["source_row"]), column="answer")
    return first


def questions_from_runs(specs: Sequence[str] | str, *, column_map: dict[str, str] | None = None,
                        dataset_hint: str | None = None) -> pd.DataFrame:
    """The questions table carried by run files (first file wins; conflicting golds raise)."""
    if isinstance(specs, (str, os.PathLike)):
        specs = [str(specs)]
    results, _ = _read_all(specs, arm="full", questions=None, column_map=column_map, dataset_hint=dataset_hint,
                           model=None, metric=None)
    q = _questions_from_results(results)
    q.attrs["sources"] = [_source(r.path, r.kind, r.rows, r.info) for r in results if r.questions is not None]
    return q


# ---------------------------------------------------------------------------------------- the frame
def pool_summary(full_models: Sequence[str], blind_models: Sequence[str]) -> dict:
    """Which models pair by name across arms; a note when the blind pool is a different set."""
    full, blind = list(full_models), list(blind_models)
    paired = [m for m in full if m in set(blind)]
    # visual_dependency pairs models by name; only with no model in both arms does it fall back to
    # comparing the two pools' mean accuracies (pool level)
    pool_level = bool(blind) and bool(full) and not paired
    note = None
    if pool_level:
        note = (f"no model appears in both arms (full: {len(full)}, blind: {len(blind)}); full-vs-blind "
                "comparisons are made at pool level (pool means), not per model")
    elif blind and set(blind) != set(full):
        unpaired = [m for m in full + blind if m not in set(paired)]
        note = (f"the blind pool ({len(blind)} model(s)) differs from the full pool ({len(full)} model(s)); "
                f"visual_dependency pairs the {len(paired)} model(s) present in both arms and leaves out "
                f"{unpaired[:5]}" + (" ..." if len(unpaired) > 5 else ""))
    return {"full_models": full, "blind_models": blind, "paired": paired, "pool_level": pool_level, "note": note}


def build_frame(questions_spec: str | None, runs: Sequence[str], blind: Sequence[str] = (), *,
                column_map: dict[str, str] | None = None, revision: str | None = None,
                dataset_hint: str | None = None, model: str | None = None, blind_model: str | None = None,
                model_map: dict[str, str] | None = None, metric: str | None = None, split: str | None = None,
                compute_exact: bool = True):
    """Read questions and runs, validate them into an :class:`AuditFrame`, record provenance.

    ``questions_spec=None`` derives the questions from the run files. ``compute_exact=False`` skips
    the exact-match extraction (``hit_exact`` stays unknown unless the runs carry it). The dataset name used to split
    VLMEvalKit file names defaults to the questions file stem (``MMBench_DEV_EN.tsv``).
    """
    from .frame import AuditFrame

    runs = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs or [])
    blind = [blind] if isinstance(blind, (str, os.PathLike)) else list(blind or [])
    if not runs and not blind:
        raise InputError("no run files given")
    sources: list[dict] = []
    if dataset_hint is None and questions_spec is not None and os.path.isfile(str(questions_spec)):
        dataset_hint = stem_of(str(questions_spec))
    need_q = questions_spec is None
    full_res, skipped = _read_all(runs, arm="full", questions=None, column_map=column_map, dataset_hint=dataset_hint,
                                  model=model, metric=metric, with_questions=need_q) if runs else ([], [])
    blind_res, skipped_b = _read_all(blind, arm="blind", questions=None, column_map=column_map,
                                     dataset_hint=dataset_hint, model=blind_model, metric=metric,
                                     with_questions=need_q) if blind else ([], [])
    if questions_spec is not None:
        questions = load_questions(str(questions_spec), column_map=column_map, revision=revision, split=split,
                                   arrow_options=True)
        sources.extend(questions.attrs.get("sources", []))
        qsrc = str(questions_spec)
        # MATH-V outputs: single-letter answers become option letters only for mc questions
        mc_ids = set(questions.loc[questions["answer_type"].astype(str) == "mc", "question_id"].astype(str)) \
            if "answer_type" in questions.columns else None
        if mc_ids is not None:
            for r in full_res + blind_res:
                if r.kind == "mathv-output" and r.runs is not None:
                    ans = r.runs["answer"].astype(object)
                    qid = r.runs["question_id"].astype(str)
                    single = ans.notna() & (ans.astype(str).str.len() == 1) & ~qid.isin(mc_ids)
                    if single.any():  # restore MATH-V's lower-case text for non-mc items
                        r.runs.loc[single, "answer"] = ans[single].astype(str).str.lower()
    else:
        questions = _questions_from_results(full_res + blind_res)
        qsrc = "<questions from the run files>"
    full_df, full_judges = _runs_from_results(full_res, model_map) if full_res else (None, {})
    blind_df, blind_judges = _runs_from_results(blind_res, model_map) if blind_res else (None, {})
    runs_source = ", ".join(map(str, runs + blind))
    if full_df is not None and blind_df is not None:
        full_df = _with_provenance(full_df, full_res[0].path)  # implicit rows only when one file per arm
        blind_df = _with_provenance(blind_df, blind_res[0].path)
    elif "source_row" not in (full_df if full_df is not None else blind_df).columns:
        runs_source = (full_res or blind_res)[0].path  # one file: row i of the table is its data row i + 1
    runs_df = _concat_runs([d for d in (full_df, blind_df) if d is not None])
    del full_df, blind_df
    for r in full_res + blind_res:
        sources.append(_source(r.path, r.kind, r.rows, r.info))
    frame = AuditFrame.from_tables(
        questions, runs_df, questions_source=qsrc, runs_source=runs_source,
        sources=sources, compute_exact=compute_exact,
        meta={"judges": full_judges, "judges_blind": blind_judges, "skipped": skipped + skipped_b,
              "column_map": dict(column_map or {}), "dataset_hint": dataset_hint,
              "dataset": _dataset_meta(questions_spec, dataset_hint, sources)},
    )
    frame.meta["benchmark"] = frame.meta["dataset"]["name"]
    frame.meta["pool"] = pool_summary(frame.models_in("full"), frame.models_in("blind"))
    return frame


def _dataset_meta(questions_spec: str | None, dataset_hint: str | None, sources: list[dict]) -> dict:
    """What was audited, for the card and manifest: a name, and the Hub repo / revision / resolved
    commit when the questions came from the Hub."""
    name = dataset_hint
    if not name and questions_spec:
        spec = str(questions_spec)
        name = Path(spec).stem if os.path.exists(spec) else spec.split("@")[0]
    out: dict = {"name": name or "benchmark"}
    for src in sources:
        if src.get("repo_id"):
            out.update({"repo_id": src["repo_id"], "revision": src.get("revision"),
                        "resolved_commit": src.get("resolved_commit") or src.get("commit_sha")})
            break
    return out
