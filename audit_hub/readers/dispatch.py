"""Which reader reads a file: questions files and run files (files, folders, globs) are recognised by
extension and content and handed to the format's reader. No provenance and no merging here (see
:mod:`audit_hub.readers.ingest` and :mod:`audit_hub.readers.merge`)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..errors import InputError
from .cells import PICKLE_EXTENSIONS, TABLE_EXTENSIONS, ReadResult, ext_of
from .fileio import (
    delimited_column_names,
    ensure_nonempty,
    parquet_column_names,
    peek_json_line,
    read_parquet_runs,
    read_table,
    read_text_runs,
    refuse_pickle,
)
from .harness_logs import LOG_EXTENSIONS, read_harness_file
from .input_guard import check_input_path, reading, skip_reason


def _subset_command(folder: str) -> str | None:
    """``curate`` or ``prune`` when ``folder`` is that command's output (its manifest says so), else None. The
    manifest is read as a sidecar (a regular file of bounded size, never through a link: a FIFO named
    manifest.json is not opened)."""
    from .fileio import sidecar_json

    m = sidecar_json(os.path.join(folder, "manifest.json"))
    cmd = m.get("command") if m is not None else None
    return cmd if cmd in ("curate", "prune") else None


@reading(0)
def read_questions(spec: str, *, column_map: dict[str, str] | None = None, revision: str | None = None,
                   split: str | None = None, arrow_options: bool = False,
                   ) -> tuple[pd.DataFrame, str, str, dict | None]:
    """A questions file, folder or Hub id -> (questions in the public format, the file read, its kind,
    the Hub provenance when it came from the Hub). See :func:`audit_hub.readers.ingest.load_questions`."""
    from . import generic, hf, lmms_eval, mathv, vlmevalkit

    spec = str(spec)
    if os.path.lexists(spec):
        check_input_path(spec)
    if os.path.isdir(spec):
        saved = os.path.join(spec, "questions.parquet")
        if os.path.isfile(saved):
            return read_questions(saved, column_map=column_map, arrow_options=arrow_options)
        if hf.is_hub_layout_folder(spec):
            q, info = hf.load_hub_questions(spec, revision=revision, column_map=column_map, split=split)
            made_by = _subset_command(spec)
            if made_by is not None:  # a curated or pruned benchmark: runs of the full one are read for its items
                q.attrs["subset_of"] = made_by
            return q, spec, "hub", info
        raise InputError("the folder holds no questions.parquet and is not a Hugging Face dataset folder "
                         "(data/*.parquet + README.md)", file=spec)
    if not os.path.exists(spec):
        if any(ch in spec for ch in "*?["):
            raise InputError("the questions must be one file, not a glob", file=spec)
        if hf.parse_hub_spec(spec) is not None and not spec.endswith(TABLE_EXTENSIONS):
            q, info = hf.load_hub_questions(spec, revision=revision, column_map=column_map, split=split)
            return q, spec, "hub", info
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
            return mathv.read_questions(spec), spec, "mathv-questions", None
        if lmms_eval.is_lmms_eval_record(rec):
            res = lmms_eval.read_samples(spec)
            if res.questions is None:
                raise InputError("the lmms-eval samples carry no gold answers (target)", file=spec, column="target")
            return res.questions, spec, "lmms-eval-samples", None
    df = read_table(spec, column_map, dictionary=False, arrow_lists=arrow_options)
    if "image" in df.columns:
        df = df.drop(columns=["image"])
    if vlmevalkit.is_vlmevalkit_sheet(df.columns) or "index" in df.columns:
        kind = "vlmevalkit"
        df = df.drop(columns=[c for c in ("prediction", "hit", "log", "extracted", "score", "res") if c in df.columns])
    return generic.normalise_questions(df, spec), spec, f"{kind}-questions", None


def folder_files(folder: str, skipped: list[dict] | None = None) -> list[str]:
    """The files a run folder holds, as every reader and the memory plan walk it: hidden entries skipped, and a
    folder inside it that is an earlier benchaudit report (``audit``, ``tst``, ``prune``, ``curate``: its
    ``manifest.json`` says so) not walked: its ``data/runs`` would be read back as runs beside the files it was
    made from (a model dropped from the runs file still audited, the exact arm taken from the old report). That
    folder is recorded in ``skipped``. ``benchaudit blind`` outputs are runs and are read; a report given itself
    (``--runs report/``) is read."""
    from ..hub.folders import manifest_command

    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        if root != folder and (cmd := manifest_command(Path(root))) not in (None, "blind"):
            dirs[:] = []
            if skipped is not None:
                skipped.append({"path": os.path.abspath(root),
                                "reason": f"an earlier `benchaudit {cmd}` output (not read as runs)"})
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def _expand(specs: Sequence[str], skipped: list[dict] | None = None) -> list[tuple[str, bool]]:
    """Specs -> [(file, explicit)]; ``explicit`` is False for files found inside a folder or a glob; folders
    are walked by :func:`folder_files` (its skips recorded in ``skipped``)."""
    out: list[tuple[str, bool]] = []
    for spec in specs:
        spec = str(spec)
        if os.path.lexists(spec):
            check_input_path(spec)
        if os.path.isdir(spec):
            found = folder_files(spec, skipped)
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


def _scores_only_hint(path: str) -> str | None:
    """What to pass instead when ``path`` is a harness's scores-only results file (no per-question rows)."""
    import json

    try:
        if os.path.getsize(path) > 50_000_000:
            return None
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("results"), dict):
        return None
    if "config_general" in obj:
        return ("a lighteval results file (scores only); pass its details instead: the "
                "details/<model>/<date>/details_*.parquet files, or that folder")
    if "configs" in obj or "n-samples" in obj or "versions" in obj:
        return ("an lm-evaluation-harness / lmms-eval results file (scores only); pass the samples_*.jsonl files "
                "written beside it with --log_samples, or their folder")
    return None


@reading(0)
def _read_run_file(path: str, explicit: bool, **kwargs) -> ReadResult | str:
    """One file -> ReadResult, or a string saying why a file found in a folder was skipped (an empty file, one with
    column names and no row, ...); a file named on the command line is read or refused."""
    from .fileio import NO_DATA_ROWS

    try:
        return _read_one(path, explicit, **kwargs)
    except InputError as e:
        if not explicit and e.detail == NO_DATA_ROWS:
            return NO_DATA_ROWS
        raise


def _read_one(path: str, explicit: bool, *, arm: str, questions: pd.DataFrame | None,
              column_map: dict[str, str] | None, dataset_hint: str | None, model: str | None,
              metric: str | None, with_questions: bool = True) -> ReadResult | str:
    from . import blink, generic, lmms_eval, mathv, mathvista, vlmevalkit

    if explicit:
        check_input_path(path, allow_dir=False)
    elif (why := skip_reason(path)) is not None:
        return why
    ext = ext_of(path)
    if ext in PICKLE_EXTENSIONS:
        if explicit:
            refuse_pickle(path)
        return "pickle cache (never unpickled; export it to .xlsx/.tsv/.parquet to use it)"
    if ext == ".json" and os.path.getsize(path) > 0:  # benchmark repositories' own result files
        if (why := blink.combined_file(path)) is not None:
            if explicit:
                raise InputError(f"{why}; pass the eval/saved_outputs files (a model's folder, or the whole folder)",
                                 file=path)
            return why
        if blink.is_output_file(path):
            return blink.read_outputs(path, arm=arm, model=model)
        if mathvista.is_scores_file(path):
            if explicit:
                raise InputError("this is MathVista's scores summary; pass the output_*.json beside it", file=path)
            return "MathVista scores file (a summary of an output file)"
        if mathvista.is_output_file(path):
            if mathvista.is_template(path) and not explicit:
                return "MathVista's leaderboard submission template (an example, not a model's run; name it to read it)"
            return mathvista.read_outputs(path, arm=arm, model=model)
    if ext in TABLE_EXTENSIONS + LOG_EXTENSIONS and os.path.getsize(path) > 0:
        harness = read_harness_file(path, arm=arm, model=model, metric=metric)  # lm-eval, inspect_ai, ...
        if isinstance(harness, str) and explicit:
            raise InputError(f"{harness}; pass that file (or the folder) instead", file=path)
        if harness is not None:
            return harness
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
    if ext in (".parquet", ".jsonl", ".csv", ".tsv"):  # a long run table: codes per string column, rows implicit
        cmap = column_map or {}
        if ext == ".parquet":
            names = parquet_column_names(path)
        elif ext == ".jsonl":
            names = list(peek_json_line(path) or ())
        else:
            names = delimited_column_names(path, "\t" if ext == ".tsv" else ",")
        cols = [cmap.get(c, c) for c in names]
        if not ("model" not in cols and vlmevalkit.is_vlmevalkit_sheet(cols)) and generic.is_generic_run_table(cols):
            # JSON lines / CSV: pyarrow's streaming readers; None sends the file down the exact Python path
            # below (any parse error, blank lines, ...), which names the line of a bad input
            df = read_parquet_runs(path, column_map) if ext == ".parquet" else read_text_runs(path, column_map)
            if df is not None:
                return generic.generic_runs(df, path, arm=arm, model=model, with_questions=with_questions,
                                            implicit_rows=True)

    def keep(cols: list[str]) -> list[str] | None:
        """Without questions, a VLMEvalKit sheet needs only its ID, prediction and judge columns."""
        if with_questions or "model" in cols or not vlmevalkit.is_vlmevalkit_sheet(cols):
            return None
        return [c for c in cols if c in vlmevalkit.RUN_COLUMNS]

    hint = _scores_only_hint(path) if ext == ".json" else None
    if hint is not None:  # a harness's scores-only results file: what to pass instead
        if explicit:
            raise InputError(f"not a run file: {hint}", file=path)
        return hint.split(";")[0] + "; its scores are not per question (the per-question files beside it are read)"
    try:
        df = read_table(path, column_map, keep=keep)
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


#: files benchaudit writes beside runs (a ``benchaudit blind`` folder), never a run themselves
_OWN_SIDECARS = frozenset({"manifest.json", "run_config.json", "summary.json", "index.json"})


def files_not_read_note(skipped: Sequence[dict] | None, limit: int = 4) -> str | None:
    """One line for the console: how many files found in the runs folders were not read, by reason (the commonest
    first, one file named each), and where the full list is (``manifest.json`` ``files_not_read``)."""
    # not said: a run left out as a named baseline (readers.named_roles has its own note), files that are not tables
    # (.md, .png, ...) and the sidecars benchaudit writes beside runs (a blind folder's manifest and run config)
    rows = [r for r in (skipped or []) if isinstance(r, dict) and r.get("path") and not r.get("named_role")
            and not str(r.get("reason", "")).startswith("not a table file")
            and os.path.basename(str(r["path"])) not in _OWN_SIDECARS]
    if not rows:
        return None
    by: dict[str, list[str]] = {}
    for r in rows:  # one group per kind of reason: the names quoted in it (a benchmark, a model) aside
        kind = re.sub(r"'[^']*'", "...", str(r.get("reason", "")).split("; its name names")[0])
        by.setdefault(kind, []).append(os.path.basename(str(r["path"])))
    parts = [f"{len(v):,} {'file' if len(v) == 1 else 'files'}: {k} (e.g. {v[0]})"
             for k, v in sorted(by.items(), key=lambda kv: -len(kv[1]))[:limit]]
    more = f"; and {len(by) - limit:,} other reasons" if len(by) > limit else ""
    return (f"{len(rows):,} {'file' if len(rows) == 1 else 'files'} in the runs folders not read "
            f"(manifest.json files_not_read): " + "; ".join(parts) + more)


def _read_selected(path: str, explicit: bool, *, wanted: Sequence[str], **kwargs) -> ReadResult | str:
    """:func:`_read_run_file` for ``--benchmark``: a file found in a folder that cannot be read, and whose name
    names none of the ``wanted`` benchmarks, is skipped with why (another benchmark's file must not stop this
    one's audit); a named file, or one whose name names a wanted benchmark, raises as always."""
    try:
        return _read_run_file(path, explicit, **kwargs)
    except InputError as e:
        name = os.path.basename(path).casefold()
        if explicit or any(str(w).casefold() in name for w in wanted):
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"not read ({first}); its name names none of the benchmarks selected with --benchmark"


def read_all(specs: Sequence[str], *, arm: str, questions: pd.DataFrame | None, column_map, dataset_hint,
             model, metric, with_questions: bool = True, worker=None,
             wanted: Sequence[str] | None = None) -> tuple[list[ReadResult], list[dict]]:
    """Every run file of ``specs`` read, in order, and the files skipped (with why). ``worker``: a started
    :class:`~audit_hub.engine.worker.WorkerProcess` whose process reads some of the files too
    (:mod:`audit_hub.readers.parallel`); the results are the same. ``wanted``: ``--benchmark``'s names
    (:func:`_read_selected`)."""
    from .grouping import newest_runs
    from .parallel import read_files

    results: list[ReadResult] = []
    outputs: list[dict] = []
    files, skipped = newest_runs(_expand(specs, outputs), dataset_hint=dataset_hint)  # older runs: skipped
    skipped = outputs + skipped
    kwargs = dict(arm=arm, questions=questions, column_map=column_map, dataset_hint=dataset_hint, model=model,
                  metric=metric, with_questions=with_questions)
    read = _read_run_file
    if wanted:
        read, kwargs = _read_selected, {**kwargs, "wanted": list(wanted)}
    for (path, _), r in zip(files, read_files(files, read, kwargs, worker)):
        if isinstance(r, str):
            skipped.append({"path": os.path.abspath(path), "reason": r})
        else:
            if r.benchmark is None and r.kind == "generic":
                from .grouping import blind_output_benchmark

                r.benchmark = blind_output_benchmark(path)
            results.append(r)
    if not results:
        where = ", ".join(map(str, specs))
        reasons = "; ".join(f"{os.path.basename(s['path'])}: {s['reason']}" for s in skipped[:5])
        raise InputError(f"no run files recognised in {where}" + (f" (skipped {reasons})" if reasons else ""))
    return results, skipped


def materialise_hub_specs(specs: Sequence[str]) -> tuple[list[str], dict[str, dict]]:
    """Replace Hub dataset ids (``org/name[@revision]``) among run specs by local snapshot folders.

    A spec that exists on disk, or looks like a glob, is left alone. The snapshot is fetched with
    ``huggingface_hub.snapshot_download`` (the usual cache and token; offline mode honoured) and
    its resolved commit is recorded for the manifest."""
    from . import hf

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
