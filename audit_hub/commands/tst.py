"""``benchaudit tst`` (Test-set Stress-Test) and ``benchaudit prune`` (Iterative Bias Pruning).

Top-level imports stay light (typer, pathlib, typing): scikit-learn and torch load inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt


def register(app: typer.Typer) -> None:
    @app.command("tst")
    def tst(
        questions: str = typer.Option(..., "--questions", "-q",
                                      help="Benchmark questions: a file, a Hub-layout folder or a Hub dataset id."),
        out: Path = typer.Option(Path("tst_report"), "--out", "-o", help="Output folder, written atomically; replaces only an earlier output of this command."),
        k: int = typer.Option(5, "--k", **opt("--k"), help="Number of folds."),
        repeats: int = typer.Option(3, "--repeats", **opt("--repeats"), help="Repeats with fold seeds seed, seed+1, ..."),
        seed: int = typer.Option(0, "--seed", **opt("--seed"), help="Base seed (recorded in summary.json)."),
        group_column: str | None = typer.Option(
            None, "--group-column", help="Question column kept within one fold (image or scene), e.g. group_id."),
        n_estimators: int = typer.Option(30, "--n-estimators", **opt("--n-estimators"), help="Trees per random forest."),
        n_jobs: int = typer.Option(1, "--n-jobs", **opt("--n-jobs"), help="Parallel jobs for fitting the forests (-1 = all cores)."),
        null_permutations: int = typer.Option(
            99, "--null-permutations", **opt("--null-permutations"),
            help="Label permutations of the null (p-value); 99 resolves p <= 0.01; 0 skips the null."),
        null_jobs: int = typer.Option(0, "--null-jobs", **opt("--null-jobs"), help="Threads for the null (0 = cores, at most 4)."),
        calibration: str = typer.Option("isotonic", "--calibration", help="s(x) calibration: isotonic | power | none."),
        feature: list[str] | None = typer.Option(None, "--featuriser",
                                                 help="Registered featuriser(s) to use (default: generic)."),
        llm: str | None = typer.Option(None, "--llm", help="Also run TsT-LLM with this local causal LM folder."),
        llm_steps: int = typer.Option(0, "--llm-max-steps", **opt("--llm-max-steps"), help="TsT-LLM: max optimiser steps per fold (0 = 1 epoch)."),
        column_map: list[str] | None = typer.Option(None, "--map", help="Column rename OLD=NEW; repeatable."),
        revision: str | None = typer.Option(None, "--revision", help="Hub revision for --questions."),
    ) -> None:
        """TsT-RF: k-fold random forest on the test set's own text (no images) -> s(x) per question."""
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..api import tst as run
        from ..api import tst_fold_count
        from ..escape import one_line

        console = Console(stderr=True)
        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                      transient=True) as prog:
            task = prog.add_task("reading questions", total=tst_fold_count(k, repeats, group_column, null_permutations))
            result = run(questions, out=out, k=k, repeats=repeats, seed=seed, group_column=group_column,
                         n_estimators=n_estimators, n_jobs=n_jobs, null_permutations=null_permutations,
                         null_jobs=null_jobs, calibration=calibration, featurisers=feature, llm=llm,
                         llm_max_steps=llm_steps, column_map=column_map, revision=revision,
                         on_read=lambda: prog.update(task, description="TsT-RF folds"),
                         on_fold=lambda: prog.advance(task))
        for line in result.lines():
            typer.echo(line)
        typer.echo(f"-> {one_line(result.folder)}")

    @app.command("prune")
    def prune(
        questions: str = typer.Option(..., "--questions", "-q", help="Benchmark questions (file, folder or Hub id)."),
        out: Path = typer.Option(Path("prune_report"), "--out", "-o", help="Output folder, written atomically; replaces only an earlier output of this command."),
        runs: list[str] | None = typer.Option(None, "--runs", "-r", help="Full-arm runs (for the vision-blind gap)."),
        blind: list[str] | None = typer.Option(None, "--blind", "-b", help="Blind-arm runs (for the gap)."),
        budget: int | None = typer.Option(None, "--budget", "-B", **opt("--budget"), help="Total questions to remove."),
        budgets: list[str] | None = typer.Option(None, "--budgets", help="Per-group budgets GROUP=N (repeatable)."),
        frac: float | None = typer.Option(None, "--frac", **opt("--frac"), help="Remove this fraction of every group."),
        allocation: str = typer.Option("global", "--allocation",
                                       help="global | per_format (choice/numeric) | per_category."),
        step: int = typer.Option(50, "--step", **opt("--step"), help="Questions removed per iteration (b)."),
        threshold: float | None = typer.Option(None, "--threshold", **opt("--threshold"),
                                               help="Stop pruning a group when its largest s(x) - chance is below this number (prune's one "
                                                    "threshold; curate names its several as NAME=VALUE)."),
        floor: int = typer.Option(0, "--floor", **opt("--floor"), help="Minimum questions kept per category."),
        floors: list[str] | None = typer.Option(None, "--floors", help="Per-category floors CATEGORY=N (repeatable)."),
        random_seeds: int = typer.Option(200, "--random-seeds", **opt("--random-seeds"), help="Seeds of the random-removal baseline."),
        k: int = typer.Option(5, "--k", **opt("--k"), help="TsT-RF folds per diagnosis (k-fold cross-validation)."),
        repeats: int = typer.Option(3, "--repeats", **opt("--repeats"),
                                    help="TsT-RF repeats of the k folds per diagnosis (different fold splits)."),
        seed: int = typer.Option(0, "--seed", **opt("--seed"),
                                 help="Seed for the folds, the forests and the random-removal baseline (recorded)."),
        group_column: str | None = typer.Option(None, "--group-column",
                                                help="Question column whose groups stay in one fold (e.g. a shared image)."),
        n_estimators: int = typer.Option(30, "--n-estimators", **opt("--n-estimators"),
                                         help="Trees per random forest."),
        n_jobs: int = typer.Option(1, "--n-jobs", **opt("--n-jobs"),
                                   help="Parallel jobs for fitting the forests (-1 = all cores)."),
        column_map: list[str] | None = typer.Option(None, "--map", help="Column rename OLD=NEW; repeatable."),
        revision: str | None = typer.Option(None, "--revision", help="Hub revision for --questions."),
    ) -> None:
        """Iterative Bias Pruning: remove the questions TsT-RF finds most learnable, re-diagnose, repeat."""
        from rich.console import Console

        from ..api import prune as run
        from ..escape import one_line

        console = Console(stderr=True)
        with console.status("reading inputs") as st:
            result = run(questions, out=out, runs=runs, blind=blind, budget=budget, budgets=budgets, frac=frac,
                         allocation=allocation, step=step, threshold=threshold, floor=floor, floors=floors,
                         random_seeds=random_seeds, k=k, repeats=repeats, seed=seed, group_column=group_column,
                         n_estimators=n_estimators, n_jobs=n_jobs, column_map=column_map, revision=revision,
                         progress=lambda msg: st.update(f"pruning: {msg}"))
        res = result.engine
        from ..fmt import plain

        typer.echo(f"removed {len(res.removed)} of {result.frame.n_questions} questions "
                   f"(stop: {plain(res.stop_reasons)}) -> {one_line(result.folder)}")
