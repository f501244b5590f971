"""Several run files into one runs table: files for one (model, arm) are merged on the question ID
(higher-priority kinds win; two different predictions for one question raise), the others are
stacked, and the columns get the documented public dtypes."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..columns import ARROW_STR, arrow_strings
from ..errors import InputError
from ..schema import CORRECTNESS_FIELDS, MISSING, hit_code
from .cells import ReadResult, constant_categorical, null_strings

RUN_KIND_PRIORITY = {"vlmevalkit-judged": 0, "vlmevalkit-auxmatch": 1, "vlmevalkit-extract": 2,
                     "lmms-eval-samples": 3, "lm-eval-samples": 3, "inspect-ai-log": 3, "lighteval-details": 3, "opencompass-predictions": 3, "mathv-output": 3, "generic": 4, "vlmevalkit-sheet": 5}


_OPTIONAL_RUN_COLS = CORRECTNESS_FIELDS


def with_provenance(df: pd.DataFrame, path: str) -> pd.DataFrame:
    """Add ``source_file``/``source_row`` to a one-file run table that left them implicit (row ``i`` is
    data row ``i + 1`` of ``path``); needed before its rows are mixed with another file's."""
    if "source_row" in df.columns:
        return df
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
    """Rows of ``df`` for one (model, arm) key (the arm compared as :func:`_model_arm_keys` does); on the
    codes when both columns are categoricals (the categories are compared, not the rows)."""
    m, a = df["model"], df["arm"]
    if isinstance(m.dtype, pd.CategoricalDtype) and isinstance(a.dtype, pd.CategoricalDtype):
        mi = [i for i, c in enumerate(m.cat.categories) if str(c) == key[0]]
        ai = [i for i, c in enumerate(a.cat.categories) if str(c).strip().lower() == key[1]]
        return np.isin(m.cat.codes.to_numpy(), mi) & np.isin(a.cat.codes.to_numpy(), ai)
    mv = m.astype(object).astype(str).to_numpy()
    av = np.char.lower(np.char.strip(a.astype(object).astype(str).to_numpy().astype(str)))
    return (mv == key[0]) & (av == key[1])


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
    # where each correctness cell came from (a later file may fill it), for error messages
    origin = {c: (merged["source_file"].copy(), merged["source_row"].copy()) for c in CORRECTNESS_FIELDS}
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
            if c in origin:
                fill = (merged[c].isna() & t[c].notna()).to_numpy()
                origin[c][0].iloc[fill] = t["source_file"].to_numpy()[fill]
                origin[c][1].iloc[fill] = t["source_row"].to_numpy()[fill]
            merged[c] = merged[c].where(merged[c].notna(), t[c])
        merged_path = f"{merged_path} + {res.path}"

    def _nullable(v) -> bool:
        return v is None or bool(pd.isna(v))

    out = pd.DataFrame({"question_id": np.asarray(order, dtype=object), "model": key[0], "arm": key[1]})
    for c in ("prediction", "answer"):
        out[c] = arrow_strings([None if _nullable(v) else str(v) for v in merged[c].tolist()])
    for c in CORRECTNESS_FIELDS:
        if merged[c].notna().any():
            vals = []
            for i, v in enumerate(merged[c].tolist()):
                code = MISSING if _nullable(v) else hit_code(v)
                if code is None:
                    raise InputError(f"{c} must be 0/1/true/false or empty, got {v!r}",
                                     file=str(origin[c][0].iloc[i]), row=int(origin[c][1].iloc[i]), column=c)
                vals.append(None if code == MISSING else code)
            out[c] = pd.array(vals, dtype="Int8")
    out["source_file"] = merged["source_file"].astype(str).to_numpy(dtype=object)
    out["source_row"] = pd.to_numeric(merged["source_row"]).to_numpy().astype(np.int64)
    return out, judge


def concat_runs(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate run frames; categoricals are unioned (no object round trip) and columns aligned."""
    from pandas.api.types import union_categoricals

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
        parts = [f[c] if c in f.columns else pd.Series(arrow_strings([None] * len(f))) for f in frames]
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


def public_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The zero-copy Arrow columns of :func:`generic.read_parquet_runs` -> the documented public dtypes
    (categorical IDs/models/arms, Arrow string texts, nullable Int8 flags), as every other reader gives."""
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
        new["prediction"] = null_strings(len(df), df.index)
    return df.assign(**new) if new else df


def runs_from_results(results: list[ReadResult], model_map: dict[str, str] | None = None,
                       ) -> tuple[pd.DataFrame, dict[str, str]]:
    frames = []
    for r in results:
        df = r.runs
        assert df is not None
        if len(results) > 1:  # rows of several files are merged or stacked: each row needs its file and row
            df = with_provenance(df, r.path)
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
        return concat_runs(frames), judges_one
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
    df = concat_runs(out_frames)
    return df, judges


def questions_from_results(results: list[ReadResult]) -> pd.DataFrame:
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
