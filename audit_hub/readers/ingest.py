"""The single entry point from files on disk to one validated :class:`~audit_hub.frame.core.AuditFrame`.

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
  the dataset name (model pairing across arms: ``engine.run.pool_summary``).

Pairing of full and blind runs is by model name. When the blind pool is a different set of models
(MATH-V: the text-only run is GPT-4, the image runs are other models), ``meta['pool']['pool_level']``
is true and ``meta['pool']['note']`` says so; the audit continues with a pool-level comparison.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import InputError
from ..fmt import count
from ..hub.folders import sha256_file
from ..schema import ARMS
from .cells import constant_categorical, stem_of
from .dispatch import materialise_hub_specs, read_all, read_questions
from .hf import SPLIT_PREFERENCE
from .mathv import restore_non_mc_answers
from .merge import (
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


def _source(path: str, kind: str, rows: int, info: dict | None = None, *, hash_files: bool = True) -> dict:
    d: dict[str, Any] = {"path": os.path.abspath(path), "kind": kind,
                         "bytes": os.path.getsize(path), "rows": int(rows)}
    d["sha256"] = sha256_file(path) if hash_files else None
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
    q, path, kind, hub_info = read_questions(spec, column_map=column_map, revision=revision, split=split,
                                             arrow_options=arrow_options)
    q.attrs["sources"] = [hub_info] if hub_info is not None else [_source(path, kind, len(q))]
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
    if arm not in ARMS:
        raise InputError(f"arm must be one of {ARMS}, got {arm!r}")
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
def build_frame(questions_spec: str | None, runs: Sequence[str], blind: Sequence[str] = (), *, base: Sequence[str] = (),
                column_map: dict[str, str] | None = None, revision: str | None = None,
                dataset_hint: str | None = None, model: str | None = None, blind_model: str | None = None,
                model_map: dict[str, str] | None = None, metric: str | None = None, split: str | None = None,
                compute_exact: bool = True, allow_unparsed_options: bool = False, worker=None,
                as_given: bool = False):
    """Read questions and runs, validate them into an :class:`AuditFrame`, record provenance.

    ``blind``: the same models with the image removed; ``base``: their language backbones alone, text only
    (every row of these files is read as that arm). Their runs are paired with the full-arm models by
    :func:`~audit_hub.readers.pairing.pair_arms` and renamed to the full-arm names; ``meta['pairing']`` records
    how, and which runs paired with no full-arm model. ``questions_spec=None`` derives the questions from the run
    files. ``compute_exact=False`` skips the exact-match extraction (``hit_exact`` stays unknown unless the runs
    carry it). The dataset name used to split VLMEvalKit file names defaults to the questions file stem
    (``MMBench_DEV_EN.tsv``). ``worker``: a started :class:`~audit_hub.engine.worker.WorkerProcess` that reads
    some of the run files beside this process.
    """
    from ..clock import stage

    runs = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs or [])
    blind = [blind] if isinstance(blind, (str, os.PathLike)) else list(blind or [])
    base = [base] if isinstance(base, (str, os.PathLike)) else list(base or [])
    if not runs and not blind:
        raise InputError("no run files given")
    if dataset_hint is None and questions_spec is not None and os.path.isfile(str(questions_spec)):
        dataset_hint = stem_of(str(questions_spec))
    with stage("read"):  # parse the files into tables (timed for the manifest and --verbose)
        full_res, blind_res, skipped = read_run_files(
            runs, blind, column_map=column_map, dataset_hint=dataset_hint, model=model, blind_model=blind_model,
            metric=metric, with_questions=questions_spec is None, worker=worker, as_given=as_given)
        base_res, skipped_t = read_base_files(base, column_map=column_map, dataset_hint=dataset_hint,
                                              metric=metric, worker=worker)
    return frame_from_results(questions_spec, full_res, blind_res, skipped + skipped_t, column_map=column_map,
                              revision=revision, dataset_hint=dataset_hint, model_map=model_map, split=split,
                              compute_exact=compute_exact, allow_unparsed_options=allow_unparsed_options,
                              specs=runs + blind + base, base_res=base_res)


def read_base_files(base: Sequence[str], *, column_map: dict[str, str] | None = None,
                    dataset_hint: str | None = None, metric: str | None = None, worker=None) -> tuple[list, list[dict]]:
    """The ``--base`` run files (language backbones, text only), read once: (results, files skipped)."""
    if not base:
        return [], []
    return read_all(list(base), arm="base", questions=None, column_map=column_map, dataset_hint=dataset_hint,
                    model=None, metric=metric, with_questions=False, worker=worker)


def read_run_files(runs: Sequence[str], blind: Sequence[str] = (), *, column_map: dict[str, str] | None = None,
                   dataset_hint: str | None = None, model: str | None = None, blind_model: str | None = None,
                   metric: str | None = None, with_questions: bool = True, worker=None, as_given: bool = False,
                   wanted: Sequence[str] | None = None) -> tuple[list, list, list[dict]]:
    """Every run file of both arms read once: (full-arm results, blind-arm results, files skipped). A
    ``--runs`` file whose model is named as a text-only run joins the blind arm, one named as a baseline is
    left out (:mod:`audit_hub.readers.named_roles`; ``as_given=True``: ``--runs-as-given``)."""
    from .named_roles import apply_named_roles

    full_res, skipped = read_all(runs, arm="full", questions=None, column_map=column_map, dataset_hint=dataset_hint,
                                 model=model, metric=metric, with_questions=with_questions, worker=worker,
                                 wanted=wanted) if runs else ([], [])
    blind_res, skipped_b = read_all(blind, arm="blind", questions=None, column_map=column_map,
                                    dataset_hint=dataset_hint, model=blind_model, metric=metric,
                                    with_questions=with_questions, worker=worker, wanted=wanted) if blind else ([], [])
    full_res, blind_res, left = apply_named_roles(full_res, blind_res, as_given=as_given)
    if runs and not full_res and not blind:
        named = [r.info.get("named_role") and str(r.runs["model"].iloc[0]) for r in blind_res] + [s["model"] for s in left]
        raise InputError(f"every --runs file is named as a text-only run or a baseline ("
                         f"{', '.join(dict.fromkeys(m for m in named if m))}); give image-enabled runs, "
                         "or --runs-as-given to audit them as they are", file=str(runs[0]))
    return full_res, blind_res, skipped + skipped_b + left


def frame_from_results(questions_spec: str | None, full_res: list, blind_res: list, skipped: list[dict], *,
                       column_map: dict[str, str] | None = None, revision: str | None = None,
                       dataset_hint: str | None = None, model_map: dict[str, str] | None = None,
                       split: str | None = None, compute_exact: bool = True, allow_unparsed_options: bool = False,
                       specs: Sequence[str] | None = None, base_res: Sequence = ()):
    """The validated :class:`AuditFrame` of run files already read (:func:`read_run_files`), all of one
    benchmark; ``specs``: what the user named, for messages (default: the files); ``base_res``: the base arm's."""
    from ..clock import stage
    from ..frame.core import AuditFrame
    from .named_roles import named_roles_note, named_roles_record

    sources: list[dict] = []
    base_res = list(base_res)
    if specs is None:
        specs = [r.path for r in full_res + blind_res + base_res]
    with stage("read"):
        if questions_spec is not None:
            questions = load_questions(str(questions_spec), column_map=column_map, revision=revision, split=split,
                                       arrow_options=True)
            sources.extend(questions.attrs.get("sources", []))
            qsrc = str(questions_spec)
            restore_non_mc_answers(full_res + blind_res + base_res, questions)
        else:
            questions = questions_from_results(full_res + blind_res)
            qsrc = "<questions from the run files>"
        unparsed = _check_unparsed_options(questions, qsrc, allow_unparsed_options)
        full_df, full_judges = runs_from_results(full_res, model_map) if full_res else (None, {})
        blind_df, blind_judges = runs_from_results(blind_res, model_map) if blind_res else (None, {})
        base_df, _ = runs_from_results(base_res, model_map) if base_res else (None, {})
        if base_df is not None:
            base_df["arm"] = constant_categorical("base", len(base_df))  # a `benchaudit blind` folder given as --base says arm = blind
        blind_df, base_df, pairing = _pair_with_full(full_df, blind_df, base_df, blind_res, base_res)
        blind_judges = {pairing.get("blind", {}).get("renames", {}).get(k, k): v for k, v in blind_judges.items()}
        runs_source = ", ".join(map(str, specs))
        parts = [(d, res) for d, res in ((full_df, full_res), (blind_df, blind_res), (base_df, base_res))
                 if d is not None]
        if len(parts) > 1:
            parts = [(with_provenance(d, res[0].path), res) for d, res in parts]  # implicit rows only: one file per arm
        elif "source_row" not in parts[0][0].columns:
            runs_source = parts[0][1][0].path  # one file: row i of the table is its data row i + 1
        runs_df = concat_runs([d for d, _ in parts])
        del full_df, blind_df, base_df, parts
        subset_note = None
        if questions.attrs.get("subset_of"):  # a curated / pruned benchmark with the full benchmark's runs
            runs_df, subset_note = _rows_of_subset(runs_df, questions)
        for r in full_res + blind_res + base_res:
            sources.append(_source(r.path, r.kind, r.rows, r.info))
    with stage("validate"):  # check and encode the audit frame
        frame = AuditFrame.from_tables(
            questions, runs_df, questions_source=qsrc, runs_source=runs_source,
            sources=sources, compute_exact=compute_exact,
            meta={"judges": full_judges, "judges_blind": blind_judges, "skipped": list(skipped), "pairing": pairing,
                  "column_map": dict(column_map or {}), "dataset_hint": dataset_hint,
                  "dataset": _dataset_meta(questions_spec, dataset_hint, sources),
                  "named_roles": named_roles_record(blind_res, list(skipped))},
        )
        from .circular import collapse_circular

        frame = collapse_circular(frame)  # MMBench-style option-shifted copies -> one question each
        from ..frame.validate import duplicate_runs

        copies = duplicate_runs(frame)
        if copies:  # a run given twice under two names: the later name is left out, and said
            frame = frame.without_models(r["model"] for r in copies)
            frame.meta["duplicate_runs"] = copies
            frame.meta["input_defects"] = {**(frame.meta.get("input_defects") or {}), "duplicate_runs": len(copies)}
        if unparsed:
            frame.meta["unparsed_options"] = unparsed
        if frame.meta["named_roles"]:
            frame.meta.setdefault("notes", []).append(named_roles_note(frame.meta["named_roles"]) + ".")
        from ..frame.validate import label_collisions, label_collisions_note

        said = reader_notes(full_res + blind_res + base_res) + ([subset_note] if subset_note else [])
        for kind, labels in (("category labels", frame.questions["category"]), ("model names", frame.models)):
            note = label_collisions_note(kind, label_collisions(labels))
            if note:
                said.append(note + ".")
        if said:  # what a reader could not take from a file (a partial-credit score): console and card
            frame.meta["reader_notes"] = said
            frame.meta.setdefault("notes", []).extend(said)
    frame.meta["benchmark"] = frame.meta["dataset"]["name"]
    return frame


def _rows_of_subset(runs: pd.DataFrame, questions: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The run rows of the questions a curated or pruned benchmark kept (``questions.attrs["subset_of"]``: the
    command that made it), and one note saying how many rows of the other questions were set aside."""
    ids = runs["question_id"]
    keep = ids.astype(str).str.strip().isin(set(questions["question_id"].astype(str).str.strip())).to_numpy()
    gone = int((~keep).sum())
    if not gone:
        return runs, None
    if not keep.any():  # not a subset of these runs' benchmark: the error an ordinary questions table gets
        raise InputError(f"none of the runs' question IDs is among the {count(len(questions), 'question')} of the "
                         f"benchmark `benchaudit {questions.attrs['subset_of']}` made; questions and runs must be of "
                         "the same benchmark", column="question_id")
    n_q = int(pd.Series(ids[~keep]).nunique())
    note = (f"the questions are a benchmark `benchaudit {questions.attrs['subset_of']}` made: "
            f"{count(gone, 'run row')} of {count(n_q, 'question')} it left out are not audited.")
    return runs[keep].reset_index(drop=True), note


def reader_notes(results: Sequence) -> list[str]:
    """One line per note a reader left in ``ReadResult.info["notes"]``, naming the files it concerns (three, then
    how many more)."""
    by: dict[str, list[str]] = {}
    for r in results:
        for note in (r.info or {}).get("notes", []) or []:
            by.setdefault(str(note), []).append(os.path.basename(str(r.path)))
    out = []
    for note, files in by.items():
        more = f" and {len(files) - 3:,} more" if len(files) > 3 else ""
        out.append(f"{', '.join(files[:3])}{more}: {note}.")
    return out


@dataclass
class BenchmarkInputs:
    """The run files of one benchmark, read (:func:`split_by_benchmark`); ``name`` is the harness's name for
    it (:attr:`ReadResult.benchmark <audit_hub.readers.cells.ReadResult.benchmark>`; None: the files name none)."""

    name: str | None
    full: list = field(default_factory=list)
    blind: list = field(default_factory=list)


def split_by_benchmark(full_res: list, blind_res: list, *, wanted: Sequence[str] | None = None,
                       dataset: str | None = None, questions_spec: str | None = None,
                       ) -> tuple[list[BenchmarkInputs], list[dict]]:
    """Read run files -> one :class:`BenchmarkInputs` per benchmark to audit (never pooled), and the files
    left out because their benchmark was not selected (``{"path", "reason"}``).

    Selection: ``wanted`` (``--benchmark``, repeatable) when given; else, when the runs hold several
    benchmarks, the one named by ``dataset`` (``--dataset``) or by the questions file's stem, if it is one of
    them; else all. One ``--questions`` file serves one benchmark: several selected with it is an error.
    Blind files are matched by benchmark name; blind files whose benchmark matches none of the full arm's go
    with the full arm's benchmark when exactly one is selected (a ``benchaudit blind`` output names its
    questions file, not always the harness's name), and are an error otherwise."""
    from .grouping import group_by_benchmark, select

    full_g = group_by_benchmark(full_res)
    blind_g = group_by_benchmark(blind_res)
    found = list(full_g) if full_g else list(blind_g)
    named = [f for f in found if f is not None]
    if wanted:
        chosen = select(found, wanted)
    elif len(found) > 1 and dataset and dataset in named:
        chosen = [dataset]
    elif len(found) > 1 and questions_spec and stem_of(str(questions_spec)) in named:
        chosen = [stem_of(str(questions_spec))]
    else:
        chosen = found
    if questions_spec is not None and len(chosen) > 1:
        raise InputError(f"--questions gives the questions of one benchmark, but the runs hold {len(chosen)}: "
                         f"{', '.join(str(c) for c in chosen)}; add --benchmark NAME (or leave out --questions: "
                         "the harness sheets carry the questions)")
    left: list[dict] = []

    def leave(results: list, why: str) -> None:
        left.extend({"path": os.path.abspath(r.path), "reason": why} for r in results)

    groups = [BenchmarkInputs(c, list(full_g.get(c, [])), list(blind_g.get(c, []))) for c in chosen]
    for name, res in (full_g.items() if full_g else blind_g.items()):
        if name not in chosen:
            leave(res, f"benchmark {name!r} not selected (--benchmark)")
    if full_g:
        for name, res in blind_g.items():
            if name in chosen:
                continue
            if name in full_g:
                leave(res, f"blind runs of benchmark {name!r}, not selected (--benchmark)")
            elif len(chosen) == 1:
                groups[0].blind.extend(res)
            else:
                files = ", ".join(os.path.basename(r.path) for r in res[:3])
                what = f"name benchmark {name!r}" if name is not None else "name no benchmark"
                raise InputError(f"the blind files {files} {what}, and the full runs hold several "
                                 f"({', '.join(str(c) for c in chosen)}); pass --benchmark NAME to audit the one "
                                 "they belong to", file=res[0].path)
    return groups, left


def read_benchmarks(questions_spec: str | None, runs: Sequence[str], blind: Sequence[str] = (), *,
                    column_map: dict[str, str] | None = None, dataset: str | None = None,
                    blind_model: str | None = None, benchmark: Sequence[str] | None = None, worker=None,
                    as_given: bool = False, metric: str | None = None) -> tuple[list[BenchmarkInputs], list[dict]]:
    """Every run file read once (``worker`` reads some beside this process) and split by benchmark
    (:func:`split_by_benchmark`): ``(groups, files skipped)``. ``dataset`` is ``--dataset`` (the name hint for
    VLMEvalKit file names, and a selection among several benchmarks); ``metric`` is ``--metric`` (the
    lm-eval / lmms-eval metric that gives ``hit``)."""
    from ..clock import stage

    runs, blind = list(runs or []), list(blind or [])
    if not runs and not blind:
        raise InputError("give at least one --runs (or --blind) file; --questions alone has no runs to audit")
    hint = dataset
    if hint is None and questions_spec is not None and os.path.isfile(str(questions_spec)):
        hint = stem_of(str(questions_spec))
    with stage("read"):
        full_res, blind_res, skipped = read_run_files(runs, blind, column_map=column_map, dataset_hint=hint,
                                                      blind_model=blind_model, metric=metric,
                                                      with_questions=questions_spec is None, worker=worker,
                                                      as_given=as_given, wanted=benchmark)
        groups, left = split_by_benchmark(full_res, blind_res, wanted=benchmark, dataset=dataset,
                                          questions_spec=questions_spec)
    return groups, skipped + left


def frame_from_group(questions_spec: str | None, group: BenchmarkInputs, skipped: Sequence[dict] = (), *,
                     base: Sequence[str] = (), column_map: dict[str, str] | None = None, revision: str | None = None,
                     dataset: str | None = None, allow_unparsed_options: bool = False,
                     specs: Sequence[str] | None = None, worker=None):
    """The validated frame of one benchmark of :func:`read_benchmarks` (``--base`` files read here, for it).
    The dataset name hint: ``dataset`` (``--dataset``), else the questions file's stem, else the harness's
    name for the benchmark."""
    hint = dataset
    if hint is None and questions_spec is not None and os.path.isfile(str(questions_spec)):
        hint = stem_of(str(questions_spec))
    if hint is None and group.name is not None:
        hint = group.name
    base_res, skipped_t = read_base_files(list(base), column_map=column_map, dataset_hint=hint, worker=worker)
    return frame_from_results(questions_spec, group.full, group.blind, list(skipped) + skipped_t,
                              column_map=column_map, revision=revision, dataset_hint=hint,
                              allow_unparsed_options=allow_unparsed_options, specs=specs, base_res=base_res)


def one_benchmark(groups: list[BenchmarkInputs], command: str) -> BenchmarkInputs:
    """The only benchmark of the runs, or one clear error naming them (a command that makes one benchmark at
    a time: ``curate``)."""
    if len(groups) != 1:
        names = ", ".join(str(g.name) for g in groups)
        raise InputError(f"the runs hold {len(groups)} benchmarks ({names}); {command} works on one at a time: add "
                         "--benchmark NAME")
    return groups[0]


def _pair_with_full(full_df, blind_df, base_df, blind_res, base_res):
    """The blind and base runs renamed to the full-arm model each pairs with (:func:`pairing.pair_arms`),
    and the pairing record; without a full arm nothing is renamed."""
    from .pairing import blind_runs_of, pair_arms, rename_models, truncated_blind_runs, unfinished_blind_runs

    if full_df is None or (blind_df is None and base_df is None):
        return blind_df, base_df, {}

    def names(df) -> list[str]:  # in first-appearance order, without a string per row
        col = df["model"]
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes = pd.unique(col.cat.codes.to_numpy())
            return [str(col.cat.categories[c]) for c in codes if c >= 0]
        return [str(m) for m in pd.unique(col)]

    full_models = names(full_df)
    others = {arm: names(df) for arm, df in (("blind", blind_df), ("base", base_df)) if df is not None}
    runs = {"blind": blind_runs_of([r.path for r in blind_res]), "base": blind_runs_of([r.path for r in base_res])}
    pairing = pair_arms(full_models, others, {arm: {n: r["ids"] for n, r in recs.items()} for arm, recs in runs.items()})
    for arm, recs in runs.items():
        if arm in pairing:
            pairing[arm]["truncated"] = truncated_blind_runs(recs, pairing[arm]["renames"])
            pairing[arm]["unfinished"] = unfinished_blind_runs(recs, pairing[arm]["renames"])
    if blind_df is not None:
        blind_df = rename_models(blind_df, pairing["blind"]["renames"])
    if base_df is not None:
        base_df = rename_models(base_df, pairing["base"]["renames"])
    return blind_df, base_df, pairing


def _check_unparsed_options(questions: pd.DataFrame, file: str, allow: bool) -> dict | None:
    """Items whose gold is an option letter but whose options could not be read: an InputError, or with
    ``--allow-unparsed-options`` a count and the IDs for the report (they stay in as non-mc items)."""
    from .embedded_options import items_with_unparsed_options

    rows = items_with_unparsed_options(questions)
    if not rows:
        return None
    ids = questions["question_id"].astype(str).to_numpy(dtype=object)[rows]
    if not allow:
        i = rows[0]
        src = questions["source_file"].iloc[i] if "source_file" in questions.columns else file
        row = int(questions["source_row"].iloc[i]) if "source_row" in questions.columns else i + 1
        raise InputError(
            f"{count(len(rows), 'item')} {'has' if len(rows) == 1 else 'have'} a letter gold but no options that could be read (first: question "
            f"{ids[0]!r}); give the options as A..D columns, an options list, or a recognised embedded form, "
            "or pass --allow-unparsed-options to audit them without options", file=str(src), row=row, column="options")
    return {"n": len(rows), "question_ids": [str(x) for x in ids[:100]]}


_GENERIC_STEMS = {*SPLIT_PREFERENCE, "data", "questions", "question", "benchmark", "eval", "evaluation", "default",
                  "samples", "annotations", "metadata"}


def _named_for_folder(path: str, stem: str) -> str:
    """A questions file with a generic name is named after the nearest folder whose name is not generic too:
    ``mathv/data/test.jsonl`` -> ``mathv (test)`` (the split kept), ``MMStar/questions.csv`` -> ``MMStar``;
    any other stem is the name."""
    if stem.lower() not in _GENERIC_STEMS:
        return stem
    for part in reversed(Path(os.path.abspath(path)).parent.parts[1:]):
        if part.lower() not in _GENERIC_STEMS and not part.startswith("."):
            return f"{part} ({stem})" if stem.lower() in SPLIT_PREFERENCE else part
    return stem


def _dataset_meta(questions_spec: str | None, dataset_hint: str | None, sources: list[dict]) -> dict:
    """What was audited, for the card and manifest: a name, and the Hub repo / revision / resolved
    commit when the questions came from the Hub."""
    name = dataset_hint
    spec = str(questions_spec) if questions_spec else None
    if not name and spec:
        name = Path(spec).stem if os.path.exists(spec) else spec.split("@")[0]
    if name and spec and os.path.isfile(spec) and name == Path(spec).stem:
        name = _named_for_folder(spec, name)
    if not name:  # the benchmark named by the run files: VLMEvalKit {model}_{dataset}, lmms-eval task
        found = sorted({v for src in sources for k in ("dataset", "task")
                        if isinstance((v := src.get(k)), str) and v})
        name = " + ".join(found) if found else None
    out: dict = {"name": name or "benchmark"}
    for src in sources:
        if src.get("repo_id"):
            out.update({"repo_id": src["repo_id"], "revision": src.get("revision"),
                        "resolved_commit": src.get("resolved_commit") or src.get("commit_sha")})
            break
    return out
