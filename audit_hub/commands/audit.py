"""``benchaudit audit``: ingest -> frame -> detectors -> report folder."""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit(
        questions: str | None = typer.Option(
            None, "--questions", "-q",
            help="Benchmark questions: a file (csv/tsv/jsonl/json/parquet/xlsx, VLMEvalKit TSV), a local "
                 "Hub-layout folder, or a Hub dataset id ORG/NAME[:CONFIG][@REVISION]. Optional when the "
                 "run files carry the questions (VLMEvalKit sheets do)."),
        runs: list[str] | None = typer.Option(
            None, "--runs", "-r",
            help="Full-arm (image-enabled) run files, folders or globs; repeat the option for several."),
        blind: list[str] | None = typer.Option(
            None, "--blind", "-b", help="Blind-arm (text-only) run files, folders or globs; pair with --runs by model name."),
        out: Path = typer.Option(Path("audit_report"), "--out", "-o",
                                 help="Output folder, written atomically. An existing one is replaced only if it is an earlier `benchaudit audit` output; anything else is refused."),
        column_map: list[str] | None = typer.Option(
            None, "--map", help="Column rename OLD=NEW for other layouts; repeatable."),
        revision: str | None = typer.Option(None, "--revision", help="Hub revision for --questions."),
        dataset: str | None = typer.Option(
            None, "--dataset", help="Dataset name inside VLMEvalKit file names ({model}_{dataset}.xlsx) when it "
                                    "cannot be inferred (default: the questions file's stem)."),
        blind_model: str | None = typer.Option(
            None, "--blind-model", help="Model name to give the blind runs (pairs a single blind file with a "
                                        "full-arm model of that name)."),
        seed: int = typer.Option(0, "--seed", **opt("--seed"), help="Seed for every random draw (recorded in the report)."),
        n_permutations: int = typer.Option(999, "--n-permutations", **opt("--n-permutations"), help="Permutations for the zero-gain null."),
        calibration_sims: int = typer.Option(
            50, "--calibration-sims", **opt("--calibration-sims"), help="Simulated null benchmarks per detector for the calibration check (0 = skip)."),
        stratify: list[str] | None = typer.Option(
            None, "--stratify",
            help="Strata of the zero-gain permutation null (repeatable). Default 'auto': effective option count, "
                 "and the gold answer on yes/no items. 'category' adds the category to auto; 'none' is one "
                 "global shuffle (the paper's unstratified number, always reported next to the headline)."),
        tst: bool = typer.Option(False, "--tst", help="Also run the TsT-RF stress test and add tst_s to the report."),
        figures: bool = typer.Option(True, "--figures/--no-figures", help="Render PNG figures for the card."),
        design_label: str | None = typer.Option(
            None, "--design-label",
            help="COLUMN[:VALUE]: a question column with the benchmark designer's own labels (e.g. HallusionBench "
                 "category:VD); the image-gain detector reports the AUC of the per-item visual gain for VALUE against "
                 "the rest (CI, chance 0.5) and the zero-gain excess per label value."),
        allow_unparsed_options: bool = typer.Option(
            False, "--allow-unparsed-options",
            help="Audit items whose gold is an option letter but whose options cannot be read (counted and "
                 "named in the report) instead of stopping."),
        threads: int = typer.Option(
            1, "--threads", **opt("--threads"),
            help="BLAS/OpenMP threads while auditing (1: fastest on a shared machine; the last digits of "
                 "iteratively fitted figures can differ with the thread count)."),
        parallel: bool = typer.Option(
            True, "--parallel/--no-parallel",
            help="Use the free CPUs: run the detectors on up to 4 threads and simulate the calibration nulls in a "
                 "worker process beside them, when a second CPU is free (the same numbers either way)."),
        verbose: bool = typer.Option(False, "--verbose", "-v",
                                     help="Print the wall time of every stage (also recorded in manifest.json)."),
    ) -> None:
        """Audit a benchmark from saved evaluation runs; with no inputs, audits the bundled MATH-Vision example."""
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..hub.folders import check_output_target

        console = Console(stderr=True)
        check_output_target(out, command="audit", inputs=[questions, *(runs or []), *(blind or [])])
        from ..engine.worker import start_worker

        # the worker process starts first: its interpreter start and imports overlap this one's
        worker = start_worker(parallel and (calibration_sims > 0 or figures))
        try:
            from ..bounds import detector_threads
            from ..clock import StageClock
            from ..engine.run import AuditConfig

            n_threads = detector_threads(parallel)
            detector_names = list(AuditConfig().detectors) if n_threads == 1 else ["detectors"]
            plan = (["read", "validate"] + detector_names + ["judge dependence"]
                    + (["calibration"] if calibration_sims > 0 else []) + (["tst"] if tst else [])
                    + ["report"] + (["figures"] if figures else []) + ["card"])
            with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                          TimeElapsedColumn(), console=console, transient=True) as prog:
                task = prog.add_task("starting", total=len(plan))

                def on_stage(name: str) -> None:
                    done = plan.index(name) if name in plan else None
                    if done is not None:  # a stage re-entered later (the report waits for its runs) keeps the bar
                        done = max(done, int(prog.tasks[0].completed))
                    prog.update(task, description=f"{name:<28}", completed=done)

                clock = StageClock(on_start=on_stage)
                result, folder = _audit_and_write(
                    console, clock, out=out, figures=figures, threads=threads, parallel=parallel, n_threads=n_threads,
                    audit_kwargs=dict(questions=questions, runs=runs, blind=blind, column_map=column_map,
                                      revision=revision, dataset=dataset, blind_model=blind_model, seed=seed,
                                      n_permutations=n_permutations, calibration_sims=calibration_sims,
                                      stratify=stratify, tst=tst, design_label=design_label,
                                      allow_unparsed_options=allow_unparsed_options), worker=worker)
                prog.update(task, completed=len(plan))
        finally:
            if worker is not None:
                worker.close()
        result.timings = dict(clock.timings)
        if verbose:
            console.print("stage timings (wall):")
            for line in clock.lines():
                console.print("  " + line, highlight=False)
        _print_headlines(console, result)
        from ..escape import one_line

        typer.echo(f"report: {one_line(folder)}")


def _audit_and_write(console, clock, *, out, figures: bool, threads: int, parallel: bool, audit_kwargs: dict,
                     n_threads: int = 1, worker=None):
    """Read, audit and write the report under the stage clock; returns (result, report folder).

    BLAS / OpenMP threads (default one): the audit's matrix products are many and modest; spare threads
    spin-waiting on them cost more than they save (2-5x on the label model and the kappa bootstrap on a
    shared 2-core machine). Arrow's own reader/writer threads are unaffected. The runs config is written
    on a second thread while the detectors run; the calibration worker's interpreter starts and imports
    while the inputs are read, and its simulations start once that write is done; this process runs the
    simulations the worker has not claimed once its detectors are done, and the worker draws the figures
    while this process writes the tables and the card."""
    import sys

    from threadpoolctl import threadpool_limits

    from ..clock import recording, stage
    from ..report.writer import EarlyRuns, write_report

    q, runs, blind = audit_kwargs["questions"], audit_kwargs["runs"], audit_kwargs["blind"]
    early: list[EarlyRuns] = []

    def on_frame(frame) -> None:
        if worker is not None:
            worker.warm()
        early.append(EarlyRuns(frame, out, inputs=[q, *(runs or []), *(blind or []),
                                                   *(r.get("path") for r in frame.sources or [])]))
        if worker is not None:
            worker.after = early[-1].wait

    try:
        with recording(clock), threadpool_limits(limits=threads):
            result, inputs = _audit(console, stage=stage, on_frame=on_frame, parallel=parallel, worker=worker,
                                    detector_threads=n_threads,
                                    **audit_kwargs)
            folder = write_report(result, out, command_line=["benchaudit", *sys.argv[1:]], inputs=inputs,
                                  figures=figures, early_runs=early[0] if early else None, worker=worker)
    finally:
        for e in early:
            e.discard()
        if worker is not None:
            worker.close()
    return result, folder


def _audit(console, questions, runs, blind, column_map, revision, dataset, blind_model, seed, n_permutations,
           calibration_sims, stratify, tst, stage, *, design_label=None, allow_unparsed_options=False,
           on_frame=None, parallel=True, worker=None, detector_threads=1):
    """Inputs -> frame -> :func:`audit_hub.engine.run.run_audit`; returns the result and the input records.
    ``on_frame(frame)`` is called once the frame is built and checked, before the detectors run."""
    from ..engine.run import AuditConfig, run_audit
    from ..errors import InputError

    if questions is None and not runs and not blind:
        from ..readers.example import example_frame

        with stage("read"):
            frame = example_frame()
    else:
        if not runs and not blind:
            raise InputError("give at least one --runs (or --blind) file; --questions alone has no runs to audit")
        from ..readers.ingest import build_frame, parse_column_map

        cmap = parse_column_map(column_map or [])
        frame = build_frame(questions, list(runs or []), list(blind or []), column_map=cmap,
                            revision=revision, dataset_hint=dataset, blind_model=blind_model,
                            allow_unparsed_options=allow_unparsed_options, pool=worker)
    inputs = frame.sources
    pool = frame.meta.get("pool") or {}
    if pool.get("note"):
        from ..escape import console_text

        console.print(f"[yellow]note:[/yellow] {console_text(pool['note'])}")
    from ..bounds import audit_memory_estimate, require_memory

    n_cat = int(frame.questions["category"].nunique()) if "category" in frame.questions else 1
    require_memory(audit_memory_estimate(frame.n_questions, n_cat, n_permutations, calibration_sims),
                   f"--n-permutations {n_permutations}")
    from .. import detectors
    from ..detectors.strata import cli_stratify

    params = {detectors.by_role("image_gain"): {"stratify": cli_stratify(stratify)}}
    if design_label:
        from ..detectors.design_label import parse_design_label

        col = parse_design_label(design_label)[0]
        if col not in frame.questions.columns:
            raise InputError(f"--design-label: no question column {col!r}; question columns: "
                             f"{[c for c in frame.questions.columns if c != 'options']}")
        params[detectors.by_role("image_gain")]["design_label"] = design_label
    config = AuditConfig(seed=seed, n_permutations=n_permutations, calibration_sims=calibration_sims,
                         run_calibration=calibration_sims > 0, run_tst=tst, params=params)
    if on_frame is not None:
        on_frame(frame)
    return run_audit(frame, config, background_calibration=None if parallel else False,
                     calibration_worker=worker, threads=detector_threads), inputs


def _print_headlines(console, result) -> None:
    from .. import detectors

    s = result.summary
    lines = []
    for spec in detectors.specs():
        line = getattr(spec.load(), "console_line", None)
        sm = s.get(spec.name, {})
        if line is not None and not sm.get("skipped"):
            lines.append(line(sm))
    for name, reason in result.skipped.items():
        lines.append(f"skipped {name}: {reason}")
    from ..escape import console_text

    for line in lines:
        console.print(console_text(line))
    warning = exclusion_warning(result)
    if warning:
        console.print(f"[yellow]warning:[/yellow] {console_text(warning)}", soft_wrap=True)


def exclusion_warning(result) -> str | None:
    """One line naming every detector that left items out, with the counts (see summary.json ``excluded``)."""
    parts = []
    for name, r in result.results.items():
        exc = (r.summary or {}).get("excluded") or {}
        if exc:
            parts.append(f"{name} {sum(int(v) for v in exc.values()):,} "
                         f"({'; '.join(f'{k}: {int(v):,}' for k, v in exc.items())})")
    if not parts:
        return None
    return "items excluded from some statistics: " + ", ".join(parts) + " (details: summary.json 'excluded', card)"
