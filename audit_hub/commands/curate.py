"""``benchaudit curate``: a smaller benchmark that keeps model rankings on models it never saw.

Top-level imports stay light (typer, pathlib): numpy, pandas and the audit load inside the command.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt
from . import RUNS_AS_GIVEN_HELP


def register(app: typer.Typer) -> None:
    @app.command("curate")
    def curate(
        questions: str | None = typer.Option(None, "--questions", "-q",
                                             help="Benchmark questions (file, Hub-layout folder or Hub id)."),
        runs: list[str] | None = typer.Option(None, "--runs", "-r", help="Full-arm run files, folders or globs."),
        blind: list[str] | None = typer.Option(None, "--blind", "-b", help="Blind-arm (text-only) run files."),
        out: Path = typer.Option(Path("curated_benchmark"), "--out", "-o",
                                 help="Output folder, written atomically. An existing one is replaced only if it is an earlier "
                                      "`benchaudit curate` output; anything else is refused."),
        target_size: int | None = typer.Option(None, "--target-size", "-n", **opt("--target-size"),
                                               help="Final selection to this many items (ranking-preserving)."),
        max_rank_loss: float | None = typer.Option(
            None, "--max-rank-loss", **opt("--max-rank-loss"), help="Final selection: smallest size whose inner-cross-validated 1 - rho <= X."),
        stages: str = typer.Option("text_ablation,saturation,anomaly", "--stages",
                                   help="Stages in order (comma-separated subset of text_ablation, saturation, anomaly)."),
        threshold: list[str] | None = typer.Option(
            None, "--threshold", "-t", help="Stage threshold NAME=VALUE (repeatable), e.g. blind_min_share=0.8 (curate has many "
                 "thresholds, so each is named; `prune --threshold` is the one stopping value of pruning)."),
        method: str = typer.Option("auto", "--method", help="Selection: auto (chosen by inner cross-validation) | "
                                   "point_biserial | irt_information | kmeans_anchors | stratified_balanced | stratified_difficulty | "
                                   "stratified_discriminating | random_best | random."),
        category_floor: float = typer.Option(0.5, "--category-floor", **opt("--category-floor"),
                                             help="Each category keeps at least this share of its proportional share."),
        folds: int = typer.Option(3, "--folds", **opt("--folds"), help="Folds over models for the held-out evaluation."),
        model_dates: str | None = typer.Option(None, "--model-dates",
                                               help="CSV/TSV with model,date: adds a newest-models-held-out split."),
        model_order: str | None = typer.Option(None, "--model-order",
                                               help="Models oldest first, comma-separated (instead of --model-dates)."),
        tst_scores: str | None = typer.Option(None, "--tst-scores",
                                              help="TsT s(x) for the text-ablation stage: a `benchaudit tst` folder or table."),
        tst: bool = typer.Option(False, "--tst", help="Run TsT-RF here and use its s(x) in the text-ablation stage."),
        junk: list[float] | None = typer.Option(None, "--junk", **opt("--junk"), help="Junk-injection fractions (default 0.5; 0 = off)."),
        score_budget: int = typer.Option(100, "--score-budget", **opt("--score-budget"), help="Anchor items for IRT score estimation (0 = off)."),
        n_boot: int = typer.Option(1000, "--n-boot", **opt("--n-boot"), help="Bootstrap replicates over items for rho / tau intervals."),
        random_draws: int = typer.Option(200, "--random-draws", **opt("--random-draws"), help="Random stratified subsets per fold (>= 200 advised)."),
        ibp: str = typer.Option("auto", "--ibp", help="Iterative Bias Pruning baseline: auto (pools <= 10,000 items) | on | off."),
        seed: int = typer.Option(0, "--seed", **opt("--seed"), help="Seed for every random draw (recorded)."),
        threads: int = typer.Option(1, "--threads", **opt("--threads"), help="BLAS/OpenMP threads while curating (1: fastest on a shared machine)."),
        column_map: list[str] | None = typer.Option(None, "--map", help="Column rename OLD=NEW; repeatable."),
        revision: str | None = typer.Option(None, "--revision", help="Hub revision for --questions."),
        dataset: str | None = typer.Option(None, "--dataset", help="Dataset name inside VLMEvalKit file names."),
        blind_model: str | None = typer.Option(None, "--blind-model", help="Model name for a single blind file."),
        figures: bool = typer.Option(True, "--figures/--no-figures", help="Render the PNG figures."),
        parallel: bool = typer.Option(
            True, "--parallel/--no-parallel",
            help="On a pool of 30,000 (item, model) cells or more, re-curate the pool with junk in a worker process "
                 "beside the held-out splits, when a second CPU is free (the same numbers either way)."),
        runs_as_given: bool = typer.Option(False, "--runs-as-given", help=RUNS_AS_GIVEN_HELP),
        benchmark: list[str] | None = typer.Option(
            None, "--benchmark", help="Curate this benchmark of a harness output folder that holds several (a "
                                      "VLMEvalKit work_dir, BLINK's saved_outputs); curation takes one at a time."),
    ) -> None:
        """Curate a benchmark from the audit's findings and prove it on held-out models; with no inputs,
        curates the bundled MATH-Vision example."""
        from rich.console import Console

        from ..api import curate as run
        from ..escape import console_line
        from ..frame.validate import empty_runs_note
        from ..readers.named_roles import named_roles_note

        console = Console(stderr=True)
        with console.status("reading and validating inputs") as st:
            result = run(questions, runs, blind, out=out, target_size=target_size, max_rank_loss=max_rank_loss,
                         stages=stages, thresholds=threshold, method=method, category_floor=category_floor,
                         folds=folds, model_dates=model_dates, model_order=model_order, tst_scores=tst_scores,
                         tst=tst, junk=junk, score_budget=score_budget, n_boot=n_boot, random_draws=random_draws,
                         ibp=ibp, seed=seed, threads=threads, column_map=column_map, revision=revision,
                         dataset=dataset, blind_model=blind_model, figures=figures, runs_as_given=runs_as_given, benchmark=benchmark,
                         parallel=parallel,
                         progress=lambda m: st.update(f"curating: {m}"))
        _print(result.summary)
        named = named_roles_note(result.summary.get("named_roles"))
        if named:
            console.print(f"[yellow]note:[/yellow] {console_line(named)}")
        gone = empty_runs_note(result.summary.get("empty_runs"))
        if gone:
            console.print(f"[yellow]warning:[/yellow] {console_line(gone)}", soft_wrap=True)
        typer.echo(f"curated benchmark: {result.folder}")


def _print(s: dict) -> None:
    def f3(x):
        return "n/a" if x is None else f"{x:.3f}"

    def ci(p):
        return "" if not p or p[0] is None else f" [{p[0]:.3f}, {p[1]:.3f}]"

    from ..curate.output import stage_counts_text

    typer.echo(f"kept {s['n_after']:,} of {s['n_before']:,} items ({100 * (s['reduction'] or 0):.0f}% fewer); "
               f"removed by stage: {stage_counts_text(s)}")
    if s.get("heldout_spearman_rho") is not None:
        typer.echo(f"in-pool rho {f3(s['spearman_rho'])}{ci(s['spearman_rho_ci'])}; held-out rho "
                   f"{f3(s.get('heldout_spearman_rho'))}{ci(s.get('heldout_spearman_rho_ci'))}, tau "
                   f"{f3(s.get('heldout_kendall_tau'))}; random subsets {f3(s.get('random_subset_rho_mean'))}"
                   f"{ci(s.get('random_subset_rho_interval'))}")
    else:  # leave-one-model-out: no fold-level rank correlation is a figure (the verdict line has the figures)
        typer.echo(f"in-pool rho {f3(s['spearman_rho'])}{ci(s['spearman_rho_ci'])}; held out: leave-one-model-out")
    if s.get("in_pool_interval_note"):
        typer.echo(f"note: {s['in_pool_interval_note']}")
    if s.get("versus_random"):
        typer.echo(f"versus random: {s['versus_random']}")
    ch = s.get("selection_choice") or {}
    if ch.get("statement"):
        typer.echo(f"selection: {ch['statement']}")
    from ..curate.output import left_out_note

    gone = left_out_note(s)
    if gone:
        typer.echo(gone)
    why = (s.get("heldout_design") or {}).get("why")
    if why and (s.get("heldout_design") or {}).get("mode") != "folds":
        typer.echo(f"held-out design: {why}")
    se = s.get("score_estimation") or {}
    if se.get("versus_random"):
        typer.echo(f"score estimation: {se['versus_random']}")
    ch = s["discrimination_change"]
    typer.echo("discrimination change: " + ", ".join(
        f"{k} {'n/a' if v is None else f'{100 * v:+.0f}%'}" for k, v in ch.items()))
