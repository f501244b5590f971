"""Harness output folders hold many benchmarks: which benchmark each run file belongs to, which run of a
model wins when a harness kept several, and the per-benchmark groups the audit treats one at a time.

The grouping key is :attr:`ReadResult.benchmark <audit_hub.readers.cells.ReadResult.benchmark>`, a field
every reader sets from what the harness wrote (the one place that says where each harness keeps it):

* VLMEvalKit: the ``{dataset}`` of ``{model}_{dataset}[_{judge}_result|_auxmatch|...].xlsx`` (so
  ``MMBench_DEV_EN`` and ``MMBench_DEV_EN_V11`` are two benchmarks);
* lmms-eval: the task of ``[<date>_]samples_<task>[_<date>].jsonl``;
* lm-evaluation-harness, inspect_ai, lighteval, OpenCompass, and the benchmark repositories' own result files
  of MathVista (``MathVista_<split>``) and BLINK (``BLINK_val``, ``BLINK_val_concat`` for its "concatenate
  images" variants) (:mod:`audit_hub.readers.sample_rows`, for every reader built on it): the task its reader
  records (``info["task"]``);
* a ``benchaudit blind`` output folder: the stem of the questions file recorded in its ``run_config.json``;
* generic tables and MATH-V outputs: None (one unnamed benchmark, named by ``--dataset`` or the questions).

Files of different benchmarks are never pooled into one frame: :func:`group_by_benchmark` splits the
read results, and every group is validated, audited and reported on its own.

Several runs of one model (:func:`newest_runs`, decided from the paths alone, before anything is read):

* VLMEvalKit writes each run into ``{work_dir}/{model}/{eval_id}/`` (``eval_id`` is ``T%Y%m%d-%H%M%S``,
  or ``T%Y%m%d_G{commit}`` before 2026) and links the files of every (model, dataset) it evaluated from
  ``{work_dir}/{model}/`` to that run (run.py, "Create the symbolic links for the prediction files").
  For each (model, dataset) the files in the model folder win (they are, or point to, the files of the
  run VLMEvalKit itself last completed; a link and its target are one file, read once); without them,
  the newest run folder that holds files of that dataset (the timestamp in its name; the folder's mtime
  between legacy ids of one day, as VLMEvalKit's own reuse does). Files of the other runs are skipped and
  listed with the run that was used.
* lmms-eval writes ``<date>_samples_<task>.jsonl`` per run into ``{output_path}/{model}/``: per (folder,
  task), the newest date wins and older ones are skipped the same way.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..errors import InputError
from .cells import ReadResult, stem_of

#: VLMEvalKit's run folder names (vlmeval/smp/file.py NEW_EVAL_ID_PATTERN and LEGACY_EVAL_ID_PATTERN)
EVAL_ID = re.compile(r"^T(\d{8})-(\d{6})$|^T(\d{8})_G([0-9a-fA-F]+)$")
#: the run date lmms-eval puts into sample file names (before 0.4: 2024-06-01T10-00-00.123456; 0.4+: 20261201_144437)
LMMS_DATE = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?|\d{8}_\d{6})")
#: the name used for a group whose files name no benchmark
UNNAMED = None


def benchmark_of(result: ReadResult) -> str | None:
    """The grouping key of one read file (see the module docstring)."""
    b = getattr(result, "benchmark", None)
    return b if isinstance(b, str) and b.strip() else None


def _vlmevalkit_unit(path: str, dataset_hint: str | None) -> tuple[str, str, str] | None:
    """(model folder, eval id, dataset) of a file inside ``{model}/{eval_id}/``, or (model folder, "", dataset)
    of a ``{model}_...`` file directly in a model folder that has run folders; None otherwise."""
    from .vlmevalkit import parse_sheet_name

    parent = os.path.dirname(os.path.abspath(path))
    run = os.path.basename(parent)
    if EVAL_ID.match(run):
        model_dir = os.path.dirname(parent)
    else:
        model_dir, run = parent, ""
    model = os.path.basename(model_dir)
    if not model or not os.path.basename(path).startswith(model + "_"):
        return None
    try:
        name = parse_sheet_name(path, dataset_hint=dataset_hint, model=model)
    except InputError:
        return None
    return model_dir, run, name.dataset or stem_of(path)[len(model) + 1:]


def _run_order(model_dir: str, run: str) -> tuple:
    m = EVAL_ID.match(run)
    if m is None:
        return ("",)
    if m.group(1):
        return (m.group(1) + m.group(2), 0.0)
    try:
        mtime = os.path.getmtime(os.path.join(model_dir, run))
    except OSError:
        mtime = 0.0
    return (m.group(3), mtime)


def newest_runs(files: Sequence[tuple[str, bool]], *, dataset_hint: str | None = None,
                ) -> tuple[list[tuple[str, bool]], list[dict]]:
    """The files to read (same order) and the older runs' files skipped (``{"path", "reason"}``); explicit
    files (named on the command line) are always kept. Links and their targets count once."""
    keep = [True] * len(files)
    skipped: list[dict] = []
    real = [os.path.realpath(p) for p, _ in files]
    seen: dict[str, int] = {}
    for i, r in enumerate(real):  # a link and its target (VLMEvalKit's model-folder links): one file
        if r in seen:
            j = seen[r]
            if files[i][1] and not files[j][1]:
                keep[j], seen[r] = False, i
            else:
                keep[i] = False
        else:
            seen[r] = i
    # VLMEvalKit: (model folder, dataset) -> {run: [file indices]}
    units: dict[tuple[str, str], dict[str, list[int]]] = {}
    lmms: dict[tuple[str, str], dict[str, list[int]]] = {}
    from .lmms_eval import model_name_for, task_name

    for i, (p, explicit) in enumerate(files):
        if explicit:
            continue
        u = _vlmevalkit_unit(p, dataset_hint)
        if u is not None:
            units.setdefault((u[0], u[2]), {}).setdefault(u[1], []).append(i)
        elif "samples_" in os.path.basename(p) and p.endswith(".jsonl"):
            m = LMMS_DATE.search(os.path.basename(p))
            if m:
                # keyed by the model the reader will name (its results.json's model_name / pretrained=, else its
                # folder): two output paths holding runs of one model (two versions, two days) are two runs of it
                lmms.setdefault((model_name_for(p), task_name(p)), {}).setdefault(m.group(1), []).append(i)
    for (model_dir, dataset), runs in units.items():
        if len(runs) < 2:
            continue
        if "" in runs:
            chosen, why = "", "the model folder's files (VLMEvalKit's links to the run it last completed) are used"
        else:
            chosen = max(runs, key=lambda r: _run_order(model_dir, r))
            why = f"the newest run {chosen} is used"
        for run, idx in runs.items():
            if run == chosen:
                continue
            for i in idx:
                if keep[i]:
                    keep[i] = False
                    skipped.append({"path": os.path.abspath(files[i][0]),
                                    "reason": f"an older VLMEvalKit run ({run}) of {os.path.basename(model_dir)} on "
                                              f"{dataset}; {why}"})
    for (model, task), runs in lmms.items():
        if len(runs) < 2:
            continue
        chosen = max(runs, key=lambda d: re.sub(r"\D", "", d))
        used = os.path.dirname(os.path.abspath(files[runs[chosen][0]][0]))
        for d, idx in runs.items():
            if d == chosen:
                continue
            for i in idx:
                if keep[i]:
                    keep[i] = False
                    skipped.append({"path": os.path.abspath(files[i][0]),
                                    "reason": f"an older lmms-eval run ({d}) of {model} on task {task}; the run of "
                                              f"{chosen} is used ({used})"})
    return [f for f, k in zip(files, keep) if k], skipped


def group_by_benchmark(results: Sequence[ReadResult]) -> dict[str | None, list[ReadResult]]:
    """Read results by benchmark, in the order the benchmarks first appear."""
    out: dict[str | None, list[ReadResult]] = {}
    for r in results:
        out.setdefault(benchmark_of(r), []).append(r)
    return out


def concerns(rec: dict, name: str | None) -> bool:
    """A skipped-file record (``{"path", "reason"}``) that concerns benchmark ``name`` (its report lists it):
    the older runs and summaries named ``..._{name}...``; every record when the benchmark has no name."""
    if name is None:
        return True
    if "named_role" in rec:  # a run file left out for its model's name (readers.named_roles) knows its benchmark
        return rec.get("benchmark") in (None, name)
    base = os.path.basename(str(rec.get("path", "")))
    return f"_{name}." in base or f"_{name}_" in base or base.startswith(f"{name}.")


def folder_name(name: str | None, taken: set[str]) -> str:
    """A safe, unique folder name for a benchmark's report inside the work_dir output (input-derived: only
    letters, digits, ``._-``; never ``.``/``..`` or hidden; a suffix ``-2``, ``-3`` when names collide)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name or "benchmark")).lstrip(".")[:100] or "benchmark"
    cand, k = base, 2
    while cand.lower() in {t.lower() for t in taken} or cand in ("README.md", "index.json", "manifest.json"):
        cand, k = f"{base}-{k}", k + 1
    taken.add(cand)
    return cand


def select(found: Sequence[str | None], wanted: Sequence[str] | None, *, option: str = "--benchmark") -> list:
    """The benchmarks to audit: all found, or those named by ``wanted`` (each must be found; the error lists
    what the runs hold)."""
    if not wanted:
        return list(found)
    names = {str(f): f for f in found if f is not None}
    out = []
    for w in wanted:
        if w not in names:
            held = ", ".join(sorted(names)) or "none named"
            raise InputError(f"{option} {w!r}: the runs hold no benchmark of that name (found: {held})")
        if names[w] not in out:
            out.append(names[w])
    return out


__all__ = ["EVAL_ID", "benchmark_of", "blind_output_benchmark", "concerns", "folder_name", "group_by_benchmark", "newest_runs", "select"]


def blind_output_benchmark(path: str) -> str | None:
    """The benchmark of a ``benchaudit blind`` output file (``<out>/data/blind-*.parquet``): the stem of the
    questions file its ``run_config.json`` records (None when the file is not one, or records none)."""
    from .fileio import sidecar_json

    p = os.path.abspath(path)
    if not (os.path.basename(p).startswith("blind-") and os.path.basename(os.path.dirname(p)) == "data"):
        return None
    data = sidecar_json(os.path.join(os.path.dirname(os.path.dirname(p)), "run_config.json"))
    q = data.get("questions") if data else None
    if not isinstance(q, str) or not q.strip():
        return None
    q = q.strip().rstrip("/")
    if os.path.sep in q or os.path.exists(q) or q.endswith((".tsv", ".csv", ".jsonl", ".json", ".parquet", ".xlsx")):
        return stem_of(q) or None
    return q.split("@")[0].split(":")[0].rsplit("/", 1)[-1] or None  # a Hub id org/name[:config][@rev]
