"""The library: one function per command, each returning a result to read, save and push.

Every ``benchaudit`` command is a declaration of options plus one call of a function here, so a notebook
gets exactly what the command line gets::

    >>> import audit_hub as ba
    >>> res = ba.audit(calibration_sims=0, figures=False)   # no inputs: the bundled MATH-Vision example
    >>> res.summary["n_questions"]
    3040
    >>> sorted(res.to_dataset())
    ['questions', 'runs', 'summary']
    >>> res.card().startswith("---")                        # the dataset card, YAML header first
    True

``audit``, ``tst``, ``prune``, ``curate`` and ``blind`` return an :class:`Output`: ``.summary`` (the
``summary.json`` dict), ``.questions`` (one row per question, pandas), ``.to_dataset()`` (a
``datasets.DatasetDict`` of the folder's configs), ``.card()`` (the dataset card, Markdown),
``.save(dir)`` (the folder the command writes with ``--out dir``) and ``.push_to_hub(repo_id)``. The
folder is the single representation: ``card()``, ``to_dataset()`` and ``push_to_hub()`` read the saved
folder (written to a temporary place on first use when ``save`` was not called), so what a notebook
sees is byte for byte what the command writes and what the Hub receives.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Output", "AuditResult", "AuditSetResult", "TstResult", "PruneResult", "CurateResult", "BlindResult",
           "audit", "tst", "prune", "curate", "blind"]


def _command(fn):
    """One library call = one command: its start is what the manifests it writes say (``started_at``)."""
    import functools

    @functools.wraps(fn)
    def call(*args, **kwargs):
        from .clock import command_window

        with command_window():
            return fn(*args, **kwargs)

    return call


# ------------------------------------------------------------------------------------------ results
class Output:
    """What every command returns. Subclasses say what they are (``command``), how they are written
    (``_write``) and where their summary and per-question table come from."""

    command: str = ""

    def __init__(self, folder: Path | None = None, command_line: list[str] | None = None) -> None:
        from .clock import command_start

        self._started = command_start()  # the call that computed this output: its manifest's ``started_at``
        self._folder = Path(folder).resolve() if folder is not None else None
        self._tmp: str | None = None
        self.command_line = list(command_line) if command_line else ["benchaudit", self.command, "(library)"]

    # what subclasses provide
    def _write(self, out: Path) -> Path:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    @property
    def summary(self) -> dict:
        raise NotImplementedError

    @property
    def questions(self):
        raise NotImplementedError

    # shared
    @property
    def folder(self) -> Path | None:
        """Where the output was saved (None until :meth:`save`)."""
        return self._folder

    def save(self, out: str | os.PathLike) -> Path:
        """Write the output folder at ``out`` (atomically; an existing folder is replaced only when it is an
        earlier output of the same command) and return its resolved path."""
        from .clock import command_window

        with command_window(self._started):
            self._folder = Path(self._write(Path(out)))
        return self._folder

    def _saved(self) -> Path:
        if self._folder is not None and self._folder.is_dir():
            return self._folder
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix=f"benchaudit-{self.command}-")
            weakref.finalize(self, shutil.rmtree, self._tmp, True)
        target = Path(self._tmp) / "output"
        if not target.is_dir():
            from .clock import command_window

            with command_window(self._started):
                self._write(target)
        return target

    def card(self) -> str:
        """The dataset card (``README.md``) of the output folder."""
        return (self._saved() / "README.md").read_text(encoding="utf-8")

    def to_dataset(self):
        """The folder's configs as a ``datasets.DatasetDict`` (``{config: Dataset}``, each the split its card
        declares, as ``datasets.load_dataset(folder, config, split=...)`` gives it)."""
        import datasets

        from .hub.folders import card_configs

        folder = self._saved()
        return datasets.DatasetDict({name: datasets.load_dataset(str(folder), name, split=split)
                                     for name, split in card_configs(folder).items()})

    def push_to_hub(self, repo_id: str, *, private: bool = False, revision: str | None = None,
                    create_pr: bool = False, token: str | None = None) -> dict:
        """Publish the output folder as the Hub dataset ``repo_id`` in one commit (token from ``token``,
        ``HF_TOKEN`` or the login cache; never printed). Returns what ``benchaudit push`` reports."""
        from .hub.publish import push_report

        return push_report(self._saved(), repo_id, private=private, revision=revision, create_pr=create_pr,
                           token=token)

    def __repr__(self) -> str:
        where = f" at {self._folder}" if self._folder is not None else ""
        return f"<{type(self).__name__}{where}>"


class AuditResult(Output):
    """The audit of one benchmark: the engine's result (``.engine``), its tables and its folder."""

    command = "audit"

    def __init__(self, engine, inputs: list[dict], *, figures: bool = True, folder: Path | None = None,
                 command_line: list[str] | None = None, stage_lines: list[str] | None = None) -> None:
        super().__init__(folder, command_line)
        self.engine = engine
        self.inputs = inputs
        self.figures = figures
        self.stage_lines = list(stage_lines or [])
        self._questions = None

    @property
    def frame(self):
        return self.engine.frame

    @property
    def summary(self) -> dict:
        return self.engine.summary

    @property
    def skipped(self) -> dict[str, str]:
        return self.engine.skipped

    @property
    def questions(self):
        """One row per question: every detector's score, flag, severity and evidence, the overall severity,
        rationale and suggested action (the ``questions`` config)."""
        if self._questions is None:
            from .report.tables import build_questions_table

            self._questions = build_questions_table(self.engine)
        return self._questions

    @property
    def findings(self):
        """The questions with a finding (any flag, or a severity above ``info``), most severe first."""
        from .severity import RANK

        q = self.questions
        rank = q["severity"].map(RANK).fillna(0).astype(int)
        keep = (q["n_flags"] > 0) | (rank > 0)
        return q.loc[keep].assign(_rank=rank[keep]).sort_values(
            ["_rank", "n_flags"], ascending=False, kind="stable").drop(columns="_rank")

    def _write(self, out: Path) -> Path:
        from .report.writer import write_report

        return write_report(self.engine, out, command_line=self.command_line, inputs=self.inputs,
                            figures=self.figures)


class AuditSetResult(Output):
    """The audits of a harness output folder holding several benchmarks: ``.results`` (benchmark name ->
    :class:`AuditResult`, each audited on its own), ``.summary`` (the index: one row per benchmark with items,
    models, headline figures and the report's path, and the files not read); its folder holds one complete
    report per benchmark (``<folder>/<benchmark>/``) and the index (``README.md``, ``index.json``)."""

    command = "audit"

    def __init__(self, results: dict[str, AuditResult], folders: dict[str, str], skipped_files: list[dict], *,
                 command_line: list[str] | None = None) -> None:
        super().__init__(None, command_line)
        self.results = dict(results)
        self.folders = dict(folders)
        self.skipped_files = list(skipped_files)
        self.stage_lines: list[str] = []

    def _rows(self) -> list[dict]:
        from .engine.run import headline_lines
        from .report.index import index_row

        return [index_row(name, self.folders[name], r.engine, headline_lines(r.engine))
                for name, r in self.results.items()]

    @property
    def summary(self) -> dict:
        return {"benchmarks": self._rows(), "skipped_files": self.skipped_files}

    @property
    def questions(self):
        """Every benchmark's per-question table, stacked, with a ``benchmark`` column first."""
        import pandas as pd

        return pd.concat([r.questions.assign(benchmark=name)[["benchmark", *r.questions.columns]]
                          for name, r in self.results.items()], ignore_index=True)

    @property
    def findings(self):
        """Every benchmark's findings (:attr:`AuditResult.findings`), stacked, with a ``benchmark`` column first."""
        import pandas as pd

        return pd.concat([r.findings.assign(benchmark=name)[["benchmark", *r.findings.columns]]
                          for name, r in self.results.items()], ignore_index=True)

    def _write(self, out: Path) -> Path:
        from .report.index import write_report_set

        def write_each(tmp: Path) -> list[dict]:
            for name, r in self.results.items():
                r._write(tmp / self.folders[name])
            return self._rows()

        folder = write_report_set(out, command_line=self.command_line,
                                  inputs=[x for r in self.results.values() for x in r.inputs if x.get("path")],
                                  write_each=write_each, skipped_files=self.skipped_files)
        for name, r in self.results.items():
            r._folder = Path(folder) / self.folders[name]
        return folder


class TstResult(Output):
    """A TsT-RF run (and TsT-LLM when asked): ``.engine`` is :class:`audit_hub.tst.rf.TstResult`."""

    command = "tst"

    def __init__(self, frame, engine, llm=None, *, folder: Path | None = None,
                 command_line: list[str] | None = None) -> None:
        super().__init__(folder, command_line)
        self.frame, self.engine, self.llm = frame, engine, llm

    @property
    def summary(self) -> dict:
        return self.engine.summary

    @property
    def questions(self):
        from .tst.output import tst_questions_table

        return tst_questions_table(self.frame, self.engine)

    def lines(self) -> list[str]:
        """The lines ``benchaudit tst`` prints."""
        from .tst.output import llm_line, summary_lines

        out = summary_lines(self.engine.summary)
        if self.llm is not None:
            out.append(llm_line(self.llm.summary))
        return out

    def _write(self, out: Path) -> Path:
        from .tst.output import write_tst_report

        return write_tst_report(self.frame, self.engine, out, command_line=self.command_line, llm=self.llm)


class PruneResult(Output):
    """Iterative Bias Pruning: ``.engine`` is :class:`audit_hub.tst.prune.PruneResult`."""

    command = "prune"

    def __init__(self, frame, engine, source: str, *, folder: Path | None = None,
                 command_line: list[str] | None = None) -> None:
        super().__init__(folder, command_line)
        self.frame, self.engine, self.source = frame, engine, source

    @property
    def summary(self) -> dict:
        from .tst.prune import as_dict

        return as_dict(self.engine)

    @property
    def questions(self):
        """The questions kept (the benchmark written to ``pruned_benchmark/``)."""
        return self.frame.questions_table()[self.engine.keep_mask].reset_index(drop=True)

    def _write(self, out: Path) -> Path:
        from .tst.output import write_prune_report

        return write_prune_report(self.frame, self.engine, out, command_line=self.command_line, source=self.source)


class CurateResult(Output):
    """A curated benchmark with its held-out proof: ``.engine`` is :class:`audit_hub.curate.pipeline.CurationResult`."""

    command = "curate"

    def __init__(self, engine, inputs: list[dict], *, figures: bool = True, folder: Path | None = None,
                 command_line: list[str] | None = None) -> None:
        super().__init__(folder, command_line)
        self.engine, self.inputs, self.figures = engine, inputs, figures

    @property
    def summary(self) -> dict:
        return self.engine.summary

    @property
    def questions(self):
        """The curated questions (the ``curated`` config)."""
        from .curate.output import curated_table

        return curated_table(self.engine)

    def _write(self, out: Path) -> Path:
        from .curate.output import write_curation

        return write_curation(self.engine, out, command_line=self.command_line, inputs=self.inputs,
                              figures=self.figures)


class BlindResult(Output):
    """A blind (text-only) run: written where it was asked (it is resumable there); ``save`` copies it."""

    command = "blind"

    def __init__(self, folder: Path, engine=None, command_line: list[str] | None = None) -> None:
        super().__init__(folder, command_line)
        self.engine = engine

    @property
    def summary(self) -> dict:
        """What the run reports (counts, accuracy, timings; :class:`audit_hub.blind.common.BlindResult`)."""
        return dict(getattr(self.engine, "summary", None) or {})

    @property
    def questions(self):
        """The blind predictions, one row per question (the ``blind`` config)."""
        import pandas as pd

        files = sorted((self._folder / "data").glob("blind-*.parquet"))
        return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True) if files else pd.DataFrame()

    def _write(self, out: Path) -> Path:
        from .hub.output import copy_output

        if self._folder is not None and Path(out).resolve() == self._folder:
            return self._folder
        return copy_output(self._folder, out, command="blind")


# ---------------------------------------------------------------------------------------- inputs
def _command_line(command: str) -> list[str]:
    from .clock import command_line

    return command_line(command)


def _type_error(name: str, value, want: str):
    from .errors import InputError

    return InputError(f"{name} must be {want}, got {type(value).__name__}"
                      + (" (save it to a file, e.g. df.to_parquet('runs.parquet'), and pass the path)"
                         if type(value).__name__ in ("DataFrame", "Series", "Dataset", "DatasetDict") else ""))


def _paths(x: str | os.PathLike | Sequence[str | os.PathLike] | None, name: str = "runs") -> list[str]:
    """A path or a list of paths (str or os.PathLike) -> their texts; anything else one line naming ``name``."""
    if x is None:
        return []
    if isinstance(x, (str, os.PathLike)):
        return [os.fspath(x)]
    if isinstance(x, (Mapping, bytes)) or not isinstance(x, (list, tuple)):
        raise _type_error(name, x, "a path (str or os.PathLike) or a list of paths")
    bad = next((p for p in x if not isinstance(p, (str, os.PathLike))), None)
    if bad is not None:
        raise _type_error(f"each entry of {name}", bad, "a path (str or os.PathLike)")
    return [os.fspath(p) for p in x]


def _path(x, name: str = "questions") -> str | None:
    """One path (str or os.PathLike) or None; anything else one line naming ``name``."""
    if x is None:
        return None
    if not isinstance(x, (str, os.PathLike)):
        raise _type_error(name, x, "a path (str or os.PathLike) or a Hub dataset id")
    return os.fspath(x)


def _column_map(cmap: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """``{"old": "new"}`` as given, or parsed from ``["old=new", ...]`` (the CLI's ``--map``; one ``"old=new"``
    string is one mapping)."""
    if isinstance(cmap, str):
        cmap = [cmap]
    if isinstance(cmap, Mapping):
        return {str(k): str(v) for k, v in cmap.items()}
    from .readers.ingest import parse_column_map

    return parse_column_map(list(cmap or []))


#: options whose value may not be None in the library (None is no number; elsewhere it means "the default")
_NOT_NONE = frozenset({"seed", "threads", "n_permutations", "calibration_sims", "k", "repeats", "null_jobs",
                       "null_permutations"})


def _check_ranges(**values) -> None:
    """The CLI's ranges (``bounds.RANGES``) at the library boundary: one InputError naming the option."""
    from .bounds import check_range, range_text
    from .errors import InputError

    for name, value in values.items():
        option = "--" + name.replace("_", "-")
        if value is None and name in _NOT_NONE:
            raise InputError(f"{option} must be an integer in the range {range_text(option)}, got None")
        check_range(option, value)


def _question_frame(questions: str, runs: list[str], blind: list[str], column_map, revision: str | None):
    """Questions (+ optional runs) -> AuditFrame (``tst`` and ``prune``)."""
    from .frame.core import AuditFrame
    from .readers.ingest import build_frame, load_questions

    cmap = _column_map(column_map)
    if runs or blind:
        return build_frame(questions, runs, blind, column_map=cmap, revision=revision)
    q = load_questions(questions, column_map=cmap, revision=revision)
    return AuditFrame.from_tables(q, None, questions_source=str(questions), sources=q.attrs.get("sources", []))


# ---------------------------------------------------------------------------------------- audit
@_command
def audit(questions: str | None = None, runs: str | Sequence[str] | None = None,
          blind: str | Sequence[str] | None = None, *, base: str | Sequence[str] | None = None,
          out: str | os.PathLike | None = None,
          column_map: Mapping[str, str] | Sequence[str] | None = None, revision: str | None = None,
          dataset: str | None = None, blind_model: str | None = None, seed: int = 0, n_permutations: int = 999,
          metric: str | None = None, calibration_sims: int = 50, stratify: Sequence[str] | None = None, tst: bool = False,
          figures: bool = True, design_label: str | None = None, allow_unparsed_options: bool = False,
          threads: int = 1, parallel: bool = True, on_stage: Callable[[str], None] | None = None,
          on_progress: Callable[[str, int, int, float], None] | None = None,
          command_line: list[str] | None = None, benchmark: Sequence[str] | None = None,
          on_benchmark: Callable[[str], None] | None = None,
          max_memory: int | str | None = None, runs_as_given: bool = False) -> AuditResult | AuditSetResult:
    """Audit a benchmark from saved evaluation runs (``benchaudit audit``); no inputs: the bundled example.

    Run files of several benchmarks (a VLMEvalKit work_dir, an lmms-eval run folder) are read once and each
    benchmark is audited on its own: the result is then an :class:`AuditSetResult` (one :class:`AuditResult`
    per benchmark; its folder holds one report per benchmark and an index). ``benchmark``: the names to audit
    (``--benchmark``); ``on_benchmark(name)`` is called as each one starts.

    ``out``: also write the report folder there (the command always does): the runs config is then written
    while the detectors run and the figures are drawn in the worker process. ``on_stage(name)`` is called
    as each stage starts (read, validate, each detector, calibration, report, figures, card), and
    ``on_progress(stage, done, total, seconds_left)`` within a long stage (the calibration simulations).
    ``max_memory``: bytes or a size such as ``"6G"`` (``--max-memory``; default: what the machine has, minus a
    margin): the memory plan (:mod:`audit_hub.engine.memory`) decides from the inputs' sizes, before reading
    them, whether the calibration worker and parallel detectors fit, and refuses (InputError) an audit that
    cannot. ``runs_as_given``: read every ``runs`` file as an image-enabled run, even one whose model is named
    as a text-only run or a baseline (:mod:`audit_hub.readers.named_roles`). Every other argument is the
    command's option of the same name.
    """

    from threadpoolctl import threadpool_limits

    from .clock import StageClock, recording
    from .engine.worker import start_worker

    _check_ranges(seed=seed, n_permutations=n_permutations, calibration_sims=calibration_sims, threads=threads)
    questions = _path(questions)
    runs_l, blind_l, base_l = _paths(runs), _paths(blind, "blind"), _paths(base, "base")
    given = [questions, *runs_l, *blind_l, *base_l]
    if out is not None:
        from .hub.folders import check_output_target

        check_output_target(out, command="audit", inputs=given)
    from .bounds import detector_threads, parse_size
    from .engine.memory import plan_audit, require_fit
    from .engine.worker import worker_helps

    if isinstance(max_memory, str):
        max_memory = parse_size(max_memory)
    wants_worker = parallel and (calibration_sims > 0 or (figures and out is not None)) and worker_helps()
    # the worker process starts first: its interpreter start and imports overlap this one's, the memory
    # plan's included (made from the inputs' footers and sizes, before anything is read or written), which
    # stops it again where it does not fit
    worker = start_worker(wants_worker)
    try:
        plan = plan_audit(questions, runs_l, blind_l, base_l, max_memory=max_memory, worker_wanted=wants_worker,
                          threads_wanted=detector_threads(parallel))
        require_fit(plan)
    except BaseException:
        if worker is not None:
            worker.close()
        raise
    if worker is not None and not plan.use_worker:
        worker.close()
        worker = None
    command_line = command_line or _command_line("audit")
    clock = StageClock(on_start=on_stage, on_progress=on_progress)
    early: list = []
    try:
        with recording(clock), threadpool_limits(limits=threads):
            groups, skipped = [None], []
            if questions is not None or runs_l or blind_l:  # the run files, read once and split by benchmark
                from .readers.ingest import read_benchmarks

                groups, skipped = read_benchmarks(questions, runs_l, blind_l, column_map=_column_map(column_map),
                                                  dataset=dataset, blind_model=blind_model, benchmark=benchmark,
                                                  metric=metric,
                                                  worker=worker, as_given=runs_as_given)
            if len(groups) > 1 and base_l:
                from .errors import InputError

                raise InputError(f"--base is read for one benchmark at a time, but the runs hold {len(groups)}: "
                                 f"{', '.join(str(g.name) for g in groups)}; add --benchmark NAME")
            if len(groups) > 1:  # several benchmarks: each audited on its own, one report each + an index
                if worker is not None:  # it read the files; the audits run without it
                    worker.close()
                    worker = None
                result = _audit_set(groups, skipped, questions=questions, given=given, column_map=column_map,
                                    revision=revision, dataset=dataset,
                                    allow_unparsed_options=allow_unparsed_options,
                                    config=dict(seed=seed, n_permutations=n_permutations,
                                                calibration_sims=calibration_sims, stratify=stratify, tst=tst,
                                                design_label=design_label),
                                    figures=figures, parallel=parallel, command_line=command_line,
                                    on_benchmark=on_benchmark, threads=plan.detector_threads,
                                    use_worker=plan.use_worker)
                if out is not None:
                    result.save(out)
                result.stage_lines = clock.lines()
                result.memory_line = plan.line()
                return result
            frame = _audit_frame(questions, runs_l, blind_l, base_l, column_map=column_map, revision=revision,
                                 dataset=dataset, blind_model=blind_model, metric=metric,
                                 allow_unparsed_options=allow_unparsed_options, worker=worker,
                                 group=groups[0], skipped=skipped)
            config = _audit_config(frame, seed=seed, n_permutations=n_permutations,
                                   calibration_sims=calibration_sims, stratify=stratify, tst=tst,
                                   design_label=design_label)
            if worker is not None:
                worker.warm()
                if not config.run_calibration:  # no simulations to go first: the figures' imports now
                    worker.warm_report()
            if out is not None:
                from .report.writer import EarlyRuns

                # registered as soon as its staging folder exists (signals held off till then): a Ctrl-C at any
                # instant leaves it to the discard below
                EarlyRuns(frame, out, inputs=[*given, *(r.get("path") for r in frame.sources or [])],
                          register=early.append)
                if worker is not None:
                    worker.after = early[-1].wait
            from .engine.run import run_audit

            # the calibration beside the detectors only where the plan has room for the worker
            engine = run_audit(frame, config, background_calibration=None if parallel and plan.use_worker else False,
                               calibration_worker=worker, threads=plan.detector_threads)
            engine.memory_plan = plan
            engine.memory_pids = sorted(getattr(worker, "_pids", ()) or ())
            result = AuditResult(engine, frame.sources, figures=figures, command_line=command_line)
            if out is not None:
                from .report.writer import write_report

                result._folder = write_report(engine, out, command_line=command_line, inputs=frame.sources,
                                              figures=figures, early_runs=early[0] if early else None,
                                              worker=worker)
    finally:
        for e in early:
            e.discard()
        if worker is not None:
            worker.close()
    engine.timings = dict(clock.timings)
    result.stage_lines = clock.lines()
    result.memory_line = plan.line()
    return result


def _audit_frame(questions: str | None, runs: list[str], blind: list[str], base: list[str], *, column_map, revision,
                 dataset, blind_model, allow_unparsed_options: bool, worker, group=None, skipped=(),
                 metric: str | None = None):
    from .clock import stage
    from .errors import InputError

    if group is not None:  # one benchmark's run files, already read (readers.ingest.read_benchmarks)
        from .readers.ingest import frame_from_group

        return frame_from_group(questions, group, skipped, base=base, column_map=_column_map(column_map),
                                revision=revision, dataset=dataset, allow_unparsed_options=allow_unparsed_options,
                                specs=[*runs, *blind, *base], worker=worker)

    if questions is None and not runs and not blind:
        from .readers.example import example_frame

        with stage("read"):
            return example_frame()
    if not runs and not blind:
        raise InputError("give at least one --runs (or --blind) file; --questions alone has no runs to audit")
    from .readers.ingest import build_frame

    return build_frame(questions, runs, blind, base=base, column_map=_column_map(column_map), revision=revision,
                       dataset_hint=dataset, blind_model=blind_model, metric=metric,
                       allow_unparsed_options=allow_unparsed_options, worker=worker)


def _audit_set(groups, skipped: list[dict], *, questions, given, column_map, revision, dataset,
               allow_unparsed_options: bool, config: dict, figures: bool, parallel: bool, command_line,
               on_benchmark=None, threads: int | None = None, use_worker: bool = True) -> AuditSetResult:
    """Each benchmark's frame, validated and audited on its own (never pooled), in turn."""
    from .bounds import detector_threads
    from .engine.run import run_audit
    from .readers.grouping import concerns, folder_name

    results: dict[str, AuditResult] = {}
    folders: dict[str, str] = {}
    taken: set[str] = set()
    runs_given = [g for g in given[1:] if g]
    for g in groups:
        name = str(g.name if g.name is not None else (dataset or "benchmark"))
        if on_benchmark is not None:
            on_benchmark(name)
        frame = _audit_frame(questions, runs_given, [], [], column_map=column_map, revision=revision,
                             dataset=dataset if g.name is None else g.name, blind_model=None,
                             allow_unparsed_options=allow_unparsed_options, worker=None, group=g,
                             skipped=[s for s in skipped if concerns(s, g.name)])
        g.full, g.blind = [], []  # this benchmark's tables live on in its frame only
        engine = run_audit(frame, _audit_config(frame, **config),
                           background_calibration=None if parallel and use_worker else False,
                           calibration_worker=None, threads=detector_threads(parallel) if threads is None else threads)
        results[name] = AuditResult(engine, frame.sources, figures=figures, command_line=command_line)
        folders[name] = folder_name(name, taken)
    return AuditSetResult(results, folders, skipped, command_line=command_line)


def _audit_config(frame, *, seed: int, n_permutations: int, calibration_sims: int, stratify, tst: bool,
                  design_label: str | None):
    """The engine's configuration for this frame, checked against it (memory, design-label column)."""
    from . import detectors
    from .bounds import audit_memory_estimate, require_memory
    from .detectors.strata import cli_stratify
    from .engine.run import AuditConfig
    from .errors import InputError

    n_cat = int(frame.questions["category"].nunique()) if "category" in frame.questions else 1
    require_memory(audit_memory_estimate(frame.n_questions, n_cat, n_permutations, calibration_sims),
                   f"--n-permutations {n_permutations}")
    gain = detectors.by_role("image_gain")
    params: dict[str, dict[str, Any]] = {gain: {"stratify": cli_stratify(list(stratify) if stratify else None)}}
    if design_label:
        from .detectors.design_label import parse_design_label

        col = parse_design_label(design_label)[0]
        if col not in frame.questions.columns:
            raise InputError(f"--design-label: no question column {col!r}; question columns: "
                             f"{[c for c in frame.questions.columns if c != 'options']}")
        params[gain]["design_label"] = design_label
    return AuditConfig(seed=seed, n_permutations=n_permutations, calibration_sims=calibration_sims,
                       run_calibration=calibration_sims > 0, run_tst=tst, params=params)


# ---------------------------------------------------------------------------------------- tst, prune
@_command
def tst(questions: str, *, out: str | os.PathLike | None = None, k: int = 5, repeats: int = 3, seed: int = 0,
        group_column: str | None = None, n_estimators: int = 30, n_jobs: int = 1, null_permutations: int = 99,
        null_jobs: int = 0, calibration: str = "isotonic", featurisers: Sequence[str] | None = None,
        llm: str | None = None, llm_max_steps: int = 0, column_map=None, revision: str | None = None,
        on_read: Callable[[], None] | None = None, on_fold: Callable[[], None] | None = None,
        command_line: list[str] | None = None) -> TstResult:
    """TsT-RF (and TsT-LLM with ``llm``) on the test set's own text (``benchaudit tst``)."""

    from .tst.rf import check_calibration, run_tst_rf

    _check_ranges(k=k, repeats=repeats, seed=seed, n_estimators=n_estimators, n_jobs=n_jobs,
                  llm_max_steps=llm_max_steps, null_permutations=null_permutations, null_jobs=null_jobs)
    questions = _path(questions)
    check_calibration(calibration)  # before the questions are read
    if llm:
        from .errors import require_modules

        require_modules("TsT-LLM (--llm)", ("torch", "transformers", "accelerate", "peft"))
    if out is not None:
        from .hub.folders import check_output_target

        check_output_target(out, command="tst", inputs=[questions, llm])
    frame = _question_frame(questions, [], [], column_map, revision)
    if on_read is not None:
        on_read()
    res = run_tst_rf(frame, k=k, repeats=repeats, seed=seed, group_column=group_column, n_estimators=n_estimators,
                     n_jobs=n_jobs, null_permutations=null_permutations, null_jobs=null_jobs or None,
                     calibrate=calibration, featurisers=tuple(featurisers) if featurisers else ("generic",),
                     progress=on_fold)
    llm_res = None
    if llm:
        from .tst.llm import LlmConfig, run_tst_llm

        llm_res = run_tst_llm(frame, LlmConfig(model=llm, k=k, seed=seed, max_steps=llm_max_steps or None),
                              group_column=group_column)
    result = TstResult(frame, res, llm_res, command_line=command_line or _command_line("tst"))
    if out is not None:
        result.save(out)
    return result


def tst_fold_count(k: int, repeats: int, group_column: str | None, null_permutations: int) -> int:
    """How many times ``tst``'s ``on_fold`` is called (the progress bar's total)."""
    return k * repeats * (2 if group_column else 1) + max(null_permutations, 0)


def _parse_counts(items: Sequence[str] | Mapping[str, int] | None, what: str) -> dict[str, int] | None:
    """``["A=3", "B=5"]`` (or a dict) -> ``{"A": 3, "B": 5}``; malformed items raise InputError."""
    from .errors import InputError

    if not items:
        return None
    if isinstance(items, Mapping):
        return {str(k): int(v) for k, v in items.items()}
    out: dict[str, int] = {}
    for it in items:
        for part in str(it).split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise InputError(f"{what} must look like NAME=N, got {part!r}")
            key, v = part.rsplit("=", 1)
            try:
                out[key.strip()] = int(v)
            except ValueError:
                raise InputError(f"{what} {key.strip()!r}: {v!r} is not an integer") from None
    return out


@_command
def prune(questions: str, *, out: str | os.PathLike | None = None, runs=None, blind=None, budget: int | None = None,
          budgets=None, frac: float | None = None, allocation: str = "global", step: int = 50,
          threshold: float | None = None, floor: int = 0, floors=None, random_seeds: int = 200, k: int = 5,
          repeats: int = 3, seed: int = 0, group_column: str | None = None, n_estimators: int = 30, n_jobs: int = 1,
          column_map=None, revision: str | None = None, progress: Callable[[str], None] | None = None,
          command_line: list[str] | None = None) -> PruneResult:
    """Iterative Bias Pruning (``benchaudit prune``)."""

    from .errors import InputError
    from .tst.prune import iterative_bias_pruning

    _check_ranges(budget=budget, frac=frac, step=step, threshold=threshold, floor=floor, random_seeds=random_seeds,
                  k=k, repeats=repeats, seed=seed, n_estimators=n_estimators, n_jobs=n_jobs)
    questions = _path(questions)
    runs_l, blind_l = _paths(runs), _paths(blind, "blind")
    if out is not None:
        from .hub.folders import check_output_target

        check_output_target(out, command="prune", inputs=[questions, *runs_l, *blind_l])
    frame = _question_frame(questions, runs_l, blind_l, column_map, revision)
    fl = _parse_counts(floors, "--floors")
    floors_arg = {c: fl.get(c, floor) for c in frame.category_codes("category")[1]} if fl else floor
    if fl:
        unknown = sorted(set(fl) - set(floors_arg))
        if unknown:
            raise InputError(f"--floors names unknown categories {unknown}")
    res = iterative_bias_pruning(
        frame, budget=budget, budgets=_parse_counts(budgets, "--budgets"), frac=frac, step=step, threshold=threshold,
        floors=floors_arg, allocation=allocation, random_seeds=random_seeds, seed=seed,
        tst_kwargs={"k": k, "repeats": repeats, "group_column": group_column, "n_estimators": n_estimators,
                    "n_jobs": n_jobs},
        progress=progress)
    result = PruneResult(frame, res, str(questions), command_line=command_line or _command_line("prune"))
    if out is not None:
        result.save(out)
    return result


# ---------------------------------------------------------------------------------------- curate
@_command
def curate(questions: str | None = None, runs=None, blind=None, *, out: str | os.PathLike | None = None,
           target_size: int | None = None, max_rank_loss: float | None = None,
           stages: Sequence[str] | str = ("text_ablation", "saturation", "anomaly"), thresholds=None,
           method: str = "auto", category_floor: float = 0.5, folds: int = 3,
           model_dates: str | None = None, model_order: str | None = None, tst_scores: str | None = None,
           tst: bool = False, junk: Sequence[float] | None = None, score_budget: int = 100, n_boot: int = 1000,
           random_draws: int = 200, ibp: str = "auto", seed: int = 0, threads: int = 1, column_map=None,
           revision: str | None = None, dataset: str | None = None, blind_model: str | None = None,
           figures: bool = True, progress: Callable[[str], None] | None = None,
           command_line: list[str] | None = None, runs_as_given: bool = False,
           benchmark: Sequence[str] | None = None, parallel: bool = True) -> CurateResult:
    """A smaller benchmark that keeps model rankings on models it never saw (``benchaudit curate``);
    no inputs: the bundled example. ``thresholds``: ``["NAME=VALUE", ...]`` or a dict. ``parallel``: a large
    pool's junk-injection stage runs in a worker process beside the held-out splits when a second CPU is free
    (:data:`audit_hub.curate.pipeline.WORKER_MIN_CELLS`; the same numbers either way)."""

    from .curate.inputs import curation_frame, load_model_dates, stage_thresholds, tst_excess
    from .curate.pipeline import CurateConfig, run_curation

    _check_ranges(seed=seed, threads=threads)
    questions = _path(questions)
    runs_l, blind_l = _paths(runs), _paths(blind, "blind")
    if out is not None:
        from .hub.folders import check_output_target

        check_output_target(out, command="curate", inputs=[questions, *runs_l, *blind_l, tst_scores])
    frame = curation_frame(questions, runs_l, blind_l, column_map=_column_map(column_map), revision=revision,
                           dataset=dataset, blind_model=blind_model, as_given=runs_as_given,
                           benchmark=list(benchmark) if benchmark else None)
    inputs = list(frame.sources)
    stage_names = [s.strip() for s in stages.split(",")] if isinstance(stages, str) else list(stages)
    cfg = CurateConfig(stages=tuple(s for s in stage_names if s), thresholds=stage_thresholds(thresholds),
                       target_size=target_size, max_rank_loss=max_rank_loss, method=method,
                       floor_share=category_floor, n_folds=folds, n_boot=n_boot, n_random=random_draws,
                       junk_fractions=tuple(junk) if junk else (0.5,), score_budget=score_budget, ibp=ibp,
                       seed=seed, threads=threads)
    cfg.validate(frame.n_questions)
    dates = load_model_dates(model_dates, model_order)
    if dates is None and isinstance(frame.meta.get("model_dates"), dict):
        dates = frame.meta["model_dates"]
    excess = tst_excess(frame, tst_scores, tst, seed, inputs, progress=progress)
    engine = run_curation(frame, cfg, tst_excess=excess, model_dates=dates, progress=progress, parallel=parallel)
    result = CurateResult(engine, inputs, figures=figures, command_line=command_line or _command_line("curate"))
    if out is not None:
        result.save(out)
    return result


# ---------------------------------------------------------------------------------------- blind
@_command
def blind(model: str, questions: str, out: str | os.PathLike, **options) -> BlindResult:
    """Text-only (blind) predictions of ``model`` on ``questions`` into ``out`` (``benchaudit blind``;
    resumable: the same call after a crash skips what is written). ``options``: the fields of
    :class:`audit_hub.blind.runner.BlindConfig` (the command's options, ``--model-name`` as ``model_name``)."""

    from .blind.runner import BlindConfig, run_blind

    if options.get("column_map") is not None:
        options["column_map"] = _column_map(options["column_map"])
    engine = run_blind(BlindConfig(model=model, questions=questions, out=os.fspath(out), **options))
    return BlindResult(Path(out), engine, command_line=_command_line("blind"))
