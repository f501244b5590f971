"""``benchaudit tst`` (Test-set Stress-Test) and ``benchaudit prune`` (Iterative Bias Pruning).

Top-level imports stay light (typer, pathlib, typing): scikit-learn and torch load inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt


def _frame(questions: str, runs: list[str] | None, blind: list[str] | None, column_map: list[str] | None,
           revision: str | None):
    """Questions (+ optional runs) -> AuditFrame."""
    from ..frame.core import AuditFrame
    from ..readers.ingest import build_frame, load_questions, parse_column_map

    cmap = parse_column_map(column_map or [])
    if runs or blind:
        return build_frame(questions, list(runs or []), list(blind or []), column_map=cmap, revision=revision)
    q = load_questions(questions, column_map=cmap, revision=revision)
    return AuditFrame.from_tables(q, None, questions_source=str(questions), sources=q.attrs.get("sources", []))


def _parse_kv(items: list[str] | None, what: str) -> dict[str, int] | None:
    from ..errors import InputError

    if not items:
        return None
    out: dict[str, int] = {}
    for it in items:
        for part in str(it).split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise InputError(f"{what} must look like NAME=N, got {part!r}")
            k, v = part.rsplit("=", 1)
            try:
                out[k.strip()] = int(v)
            except ValueError:
                raise InputError(f"{what} {k.strip()!r}: {v!r} is not an integer") from None
    return out


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
        import sys

        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..escape import one_line
        from ..hub.folders import check_output_target
        from ..tst.output import write_tst_report
        from ..tst.rf import run_tst_rf

        console = Console(stderr=True)
        check_output_target(out, command="tst", inputs=[questions, llm])
        with console.status("reading questions"):
            frame = _frame(questions, None, None, column_map, revision)
        total = k * repeats * (2 if group_column else 1) + max(null_permutations, 0)
        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                      transient=True) as prog:
            task = prog.add_task("TsT-RF folds", total=total)
            res = run_tst_rf(frame, k=k, repeats=repeats, seed=seed, group_column=group_column,
                             n_estimators=n_estimators, n_jobs=n_jobs, null_permutations=null_permutations,
                             null_jobs=null_jobs or None, calibrate=calibration,
                             featurisers=tuple(feature) if feature else ("generic",),
                             progress=lambda: prog.advance(task))
        llm_res = None
        if llm:
            from ..tst.llm import LlmConfig, run_tst_llm

            llm_res = run_tst_llm(frame, LlmConfig(model=llm, k=k, seed=seed,
                                                   max_steps=llm_steps or None), group_column=group_column)
        folder = write_tst_report(frame, res, out, command_line=["benchaudit", *sys.argv[1:]], llm=llm_res)
        from ..tst.output import summary_lines

        for line in summary_lines(res.summary):
            typer.echo(line)
        typer.echo(f"-> {one_line(folder)}")

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
                                               help="Stop a group when its largest s(x)-chance is below this."),
        floor: int = typer.Option(0, "--floor", **opt("--floor"), help="Minimum questions kept per category."),
        floors: list[str] | None = typer.Option(None, "--floors", help="Per-category floors CATEGORY=N (repeatable)."),
        random_seeds: int = typer.Option(200, "--random-seeds", **opt("--random-seeds"), help="Seeds of the random-removal baseline."),
        k: int = typer.Option(5, "--k", **opt("--k")), repeats: int = typer.Option(3, "--repeats", **opt("--repeats")),
        seed: int = typer.Option(0, "--seed", **opt("--seed")),
        group_column: str | None = typer.Option(None, "--group-column"),
        n_estimators: int = typer.Option(30, "--n-estimators", **opt("--n-estimators")),
        n_jobs: int = typer.Option(1, "--n-jobs", **opt("--n-jobs")),
        column_map: list[str] | None = typer.Option(None, "--map", help="Column rename OLD=NEW; repeatable."),
        revision: str | None = typer.Option(None, "--revision"),
    ) -> None:
        """Iterative Bias Pruning: remove the questions TsT-RF finds most learnable, re-diagnose, repeat."""
        import sys

        from rich.console import Console

        from ..escape import one_line
        from ..hub.folders import check_output_target
        from ..tst.output import write_prune_report
        from ..tst.prune import iterative_bias_pruning

        console = Console(stderr=True)
        check_output_target(out, command="prune", inputs=[questions, *(runs or []), *(blind or [])])
        with console.status("reading inputs"):
            frame = _frame(questions, runs, blind, column_map, revision)
        fl = _parse_kv(floors, "--floors")
        floors_arg = {c: fl.get(c, floor) for c in frame.category_codes("category")[1]} if fl else floor
        if fl:
            unknown = sorted(set(fl) - set(floors_arg))
            if unknown:
                from ..errors import InputError
                raise InputError(f"--floors names unknown categories {unknown}")
        with console.status("pruning") as st:
            res = iterative_bias_pruning(
                frame, budget=budget, budgets=_parse_kv(budgets, "--budgets"), frac=frac, step=step,
                threshold=threshold, floors=floors_arg, allocation=allocation, random_seeds=random_seeds, seed=seed,
                tst_kwargs={"k": k, "repeats": repeats, "group_column": group_column,
                            "n_estimators": n_estimators, "n_jobs": n_jobs},
                progress=lambda msg: st.update(f"pruning: {msg}"))
        folder = write_prune_report(frame, res, out, command_line=["benchaudit", *sys.argv[1:]], source=questions)
        typer.echo(f"removed {len(res.removed)} of {frame.n_questions} questions "
                   f"(stop: {res.stop_reasons}) -> {one_line(folder)}")
