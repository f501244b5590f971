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

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import InputError
from .io_utils import sha256_file
from .readers.cells import PICKLE_EXTENSIONS, TABLE_EXTENSIONS, ext_of, stem_of
from .readers.dispatch import materialise_hub_specs, read_all
from .readers.fileio import ensure_nonempty, peek_json_line, read_table, refuse_pickle
from .readers.merge import (
    concat_runs,
    public_runs,
    questions_from_results,
    runs_from_results,
    with_provenance,
)


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
def load_questions(spec: str, *, column_map: dict[str, str] | None = None, revision: str | None = None,
                   split: str | None = None, arrow_options: bool = False) -> pd.DataFrame:
    """Questions in the public format (not yet validated); ``df.attrs['sources']`` records provenance.

    ``arrow_options=True`` (used by :func:`build_frame`) lets a Parquet list-of-string ``options``
    column stay a ``pd.ArrowDtype`` list column instead of Python lists; the frame validates either."""
    from .readers import generic, hf, lmms_eval, mathv, vlmevalkit

    spec = str(spec)
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
    df = read_table(spec, column_map, dictionary=False, arrow_lists=arrow_options)
    if "image" in df.columns:
        df = df.drop(columns=["image"])
    if vlmevalkit.is_vlmevalkit_sheet(df.columns) or "index" in df.columns:
        kind = "vlmevalkit"
        df = df.drop(columns=[c for c in ("prediction", "hit", "log", "extracted", "score", "res") if c in df.columns])
    q = generic.normalise_questions(df, spec)
    q.attrs["sources"] = [_source(spec, f"{kind}-questions", len(q))]
    return q


# ---------------------------------------------------------------------------------------- run files


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
    specs, hub = materialise_hub_specs(specs)
    results, skipped = read_all(specs, arm=arm, questions=questions, column_map=column_map,
                                 dataset_hint=dataset_hint, model=model, metric=metric, with_questions=False)
    df, judges = runs_from_results(results, model_map)
    df = public_runs(with_provenance(df, results[0].path))  # the public table always names file and row
    df.attrs["judges"] = judges
    sources = [_source(r.path, r.kind, r.rows, r.info, hash_files=hash_files) for r in results]
    for src in sources:
        for folder, info in hub.items():
            if os.path.abspath(str(src.get("path", ""))).startswith(folder + os.sep):
                src.update(info)
    df.attrs["sources"] = sources
    df.attrs["skipped"] = skipped
    return df


def questions_from_runs(specs: Sequence[str] | str, *, column_map: dict[str, str] | None = None,
                        dataset_hint: str | None = None) -> pd.DataFrame:
    """The questions table carried by run files (first file wins; conflicting golds raise)."""
    if isinstance(specs, (str, os.PathLike)):
        specs = [str(specs)]
    results, _ = read_all(specs, arm="full", questions=None, column_map=column_map, dataset_hint=dataset_hint,
                           model=None, metric=None)
    q = questions_from_results(results)
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
    full_res, skipped = read_all(runs, arm="full", questions=None, column_map=column_map, dataset_hint=dataset_hint,
                                  model=model, metric=metric, with_questions=need_q) if runs else ([], [])
    blind_res, skipped_b = read_all(blind, arm="blind", questions=None, column_map=column_map,
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
        questions = questions_from_results(full_res + blind_res)
        qsrc = "<questions from the run files>"
    full_df, full_judges = runs_from_results(full_res, model_map) if full_res else (None, {})
    blind_df, blind_judges = runs_from_results(blind_res, model_map) if blind_res else (None, {})
    runs_source = ", ".join(map(str, runs + blind))
    if full_df is not None and blind_df is not None:
        full_df = with_provenance(full_df, full_res[0].path)  # implicit rows only when one file per arm
        blind_df = with_provenance(blind_df, blind_res[0].path)
    elif "source_row" not in (full_df if full_df is not None else blind_df).columns:
        runs_source = (full_res or blind_res)[0].path  # one file: row i of the table is its data row i + 1
    runs_df = concat_runs([d for d in (full_df, blind_df) if d is not None])
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
