"""``benchaudit audit``: ingest -> frame -> detectors -> report folder."""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt
from . import RUNS_AS_GIVEN_HELP


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
            None, "--blind", "-b",
            help="Blind-arm run files, folders or globs (the same models with the image removed, e.g. "
                 "`benchaudit blind` output); paired with the --runs models by model name, else model id."),
        base: list[str] | None = typer.Option(
            None, "--base",
            help="Base-arm run files, folders or globs: each model's language backbone alone, text only (e.g. "
                 "`benchaudit blind --model BACKBONE --model-name FULL-ARM-NAME`); adds MMStar's multimodal gain "
                 "and leakage per model to the card."),
        out: Path = typer.Option(Path("audit_report"), "--out", "-o",
                                 help="Output folder, written atomically. An existing one is replaced only if it is an earlier `benchaudit audit` output; anything else is refused."),
        column_map: list[str] | None = typer.Option(
            None, "--map", help="Column rename OLD=NEW for other layouts; repeatable."),
        revision: str | None = typer.Option(None, "--revision", help="Hub revision for --questions."),
        dataset: str | None = typer.Option(
            None, "--dataset", help="Dataset name inside VLMEvalKit file names ({model}_{dataset}.xlsx) when it "
                                    "cannot be inferred (default: the questions file's stem)."),
        metric: str | None = typer.Option(
            None, "--metric", metavar="METRIC[,FILTER]",
            help="The lm-evaluation-harness / lmms-eval metric that gives the judged correctness (hit), e.g. "
                 "'acc_norm' or 'exact_match,flexible-extract' (default: the task's first 0/1 metric at its "
                 "first filter)."),
        benchmark: list[str] | None = typer.Option(
            None, "--benchmark",
            help="Audit only this benchmark of a harness output folder (a VLMEvalKit work_dir, an lmms-eval run "
                 "folder hold several); repeatable. Without it every benchmark found is audited on its own: "
                 "--out then holds one report per benchmark and an index (README.md, index.json)."),
        blind_model: str | None = typer.Option(
            None, "--blind-model", help="Model name to give the blind runs (pairs a single blind file with a "
                                        "full-arm model of that name)."),
        runs_as_given: bool = typer.Option(False, "--runs-as-given", help=RUNS_AS_GIVEN_HELP),
        seed: int = typer.Option(0, "--seed", **opt("--seed"), help="Seed for every random draw (recorded in the report)."),
        n_permutations: int = typer.Option(999, "--n-permutations", **opt("--n-permutations"), help="Permutations for the zero-gain null."),
        calibration_sims: int = typer.Option(
            50, "--calibration-sims", **opt("--calibration-sims"), help="Simulated null benchmarks per detector for the calibration check (0 = skip). 50 decides a "
                 "detector far out of calibration; calling a p-value test within calibration takes about 300-400 "
                 "(the card says 'not decided' until then)."),
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
        max_memory: str | None = typer.Option(
            None, "--max-memory", metavar="SIZE",
            help="Memory the audit may use, e.g. 6G or 500M (K/M/G/T: powers of 1024). Default: MemAvailable or "
                 "the cgroup limit, whichever is smaller, minus a margin. The audit's peak is estimated from the "
                 "input files' sizes before reading them; the calibration worker and parallel detectors run only "
                 "where they fit, and an audit that cannot fit is refused (exit 2, nothing written)."),
        verbose: bool = typer.Option(False, "--verbose", "-v",
                                     help="Print the wall time of every stage and the memory plan (also recorded "
                                          "in manifest.json)."),
    ) -> None:
        """Audit a benchmark from saved evaluation runs; with no inputs, audits the bundled MATH-Vision example."""
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..api import audit as run
        from ..bounds import detector_threads
        from ..engine.run import AuditConfig
        from ..escape import console_line, console_text, one_line
        from ..fmt import count
        from ..readers.dispatch import files_not_read_note
        from ..readers.named_roles import named_roles_note

        console = Console(stderr=True)
        detector_names = list(AuditConfig().detectors) if detector_threads(parallel) == 1 else ["detectors"]
        plan = (["read", "validate"] + (["calibration setup"] if calibration_sims > 0 else []) + detector_names
                + ["judge dependence"] + (["calibration"] if calibration_sims > 0 else []) + (["tst"] if tst else [])
                + ["summary", "report"] + (["figures"] if figures else []) + ["card"])  # the order the stages start
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("stage {task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=True) as prog:
            task = prog.add_task("starting", total=len(plan))

            def on_stage(name: str) -> None:
                done = plan.index(name) if name in plan else None
                label = name
                if done is not None:  # a stage re-entered later (the report waits for its runs) keeps the bar
                    if done < int(prog.tasks[0].completed):
                        label = f"{name} (finishing)"
                    done = max(done, int(prog.tasks[0].completed))
                prog.update(task, description=f"{label:<28}", completed=done)

            def on_progress(name: str, done: int, total: int, left: float) -> None:
                eta = f", about {left:.0f} s left" if left == left and left < 1e5 else ""
                prog.update(task, description=f"{name} {done}/{total}{eta}"[:60].ljust(28))

            result = run(questions, runs, blind, base=base, out=out, column_map=column_map, revision=revision, dataset=dataset, metric=metric,
                         blind_model=blind_model, seed=seed, n_permutations=n_permutations,
                         calibration_sims=calibration_sims, stratify=stratify, tst=tst, figures=figures,
                         design_label=design_label, allow_unparsed_options=allow_unparsed_options, threads=threads,
                         parallel=parallel, on_stage=on_stage, on_progress=on_progress, benchmark=benchmark,
                         max_memory=max_memory, runs_as_given=runs_as_given,
                         on_benchmark=lambda name: prog.update(task, completed=0, description=f"{name[:28]:<28}"))
            prog.update(task, completed=len(plan))
        if hasattr(result, "results"):  # several benchmarks: one report each and the index
            if verbose:
                _print_stages(console, result)
            for name, r in result.results.items():
                console.print(f"[bold]{console_text(name)}[/bold]: {r.frame.n_questions:,} questions, "
                              f"{count(len(r.frame.models), 'model')} -> {console_text(result.folders[name])}/")
                for note in (named_roles_note(r.frame.meta.get("named_roles")),
                             *(r.frame.meta.get("reader_notes") or ()),
                             (r.summary.get("pool") or {}).get("truncation_note"),
                             (r.summary.get("pool") or {}).get("unfinished_note")):
                    if note:
                        console.print(f"[yellow]note:[/yellow] {console_line(note)}")
                _print_headlines(console, r.engine)
            typer.echo(f"reports: {one_line(result.folder)} (index: README.md, index.json; one folder per benchmark)")
            return
        pool = result.summary.get("pool") or {}
        for note in (named_roles_note(result.frame.meta.get("named_roles")),
                     *(result.frame.meta.get("reader_notes") or ()),
                     files_not_read_note(result.frame.meta.get("skipped")), pool.get("note"),
                     pool.get("truncation_note"), pool.get("unfinished_note")):
            if note:
                console.print(f"[yellow]note:[/yellow] {console_line(note)}")
        if verbose:
            _print_stages(console, result)
        _print_headlines(console, result.engine)
        typer.echo(f"report: {one_line(result.folder)}")


def _print_stages(console, result) -> None:
    from ..escape import console_text

    console.print("stage timings (wall):")
    for line in result.stage_lines:
        console.print("  " + line, highlight=False)
    if getattr(result, "memory_line", None):
        console.print(console_text(result.memory_line), highlight=False, soft_wrap=True)


def _print_headlines(console, result) -> None:
    from ..engine.run import exclusion_warning, headline_lines, run_warnings
    from ..escape import console_line
    from ..fmt import count

    for w in run_warnings(result.summary):
        console.print(f"[yellow]warning:[/yellow] {console_line(w)}", soft_wrap=True)
    for line in headline_lines(result):
        console.print(console_line(line))
    gd = ((result.summary or {}).get("circular") or {}).get("gold_disagreement") or {}
    if gd.get("n_groups"):
        ids = ", ".join(str(g.get("group_id")) for g in gd.get("groups", [])[:5])
        line = (f"input defect: {count(gd['n_groups'], 'CircularEval group')} whose copies disagree on the gold option "
                f"(group {ids}); details: summary.json circular.gold_disagreement")
        console.print(f"[yellow]warning:[/yellow] {console_line(line)}", soft_wrap=True)

    warning = exclusion_warning(result)
    if warning:
        # wrapped at word boundaries to the terminal width (rich), like every other line
        console.print(f"[yellow]warning:[/yellow] {console_line(warning)}")
