"""``benchaudit curate``: a smaller benchmark that keeps model rankings on models it never saw.

Top-level imports stay light (typer, pathlib): numpy, pandas and the audit load inside the command.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..bounds import opt


def _thresholds(items: list[str] | None):
    from ..curate.filters import StageThresholds
    from ..errors import InputError

    th = StageThresholds()
    for it in items or []:
        for part in str(it).split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise InputError(f"--threshold must look like NAME=VALUE, got {part!r}")
            k, v = (x.strip() for x in part.split("=", 1))
            if k == "extra" or not hasattr(th, k):
                names = [n for n in th.as_dict()]
                raise InputError(f"--threshold: unknown name {k!r}; known: {', '.join(names)}")
            cur = getattr(th, k)
            try:
                if isinstance(cur, bool):
                    if v.lower() not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError
                    val = v.lower() in ("true", "1", "yes")
                elif isinstance(cur, int):
                    val = int(v)
                elif isinstance(cur, float):
                    val = float(v)
                else:
                    val = v
            except ValueError:
                raise InputError(f"--threshold {k}: {v!r} is not a valid {type(cur).__name__}") from None
            setattr(th, k, val)
    return th


def load_tst_scores(path: str, frame):
    """s(x) - chance per question from a ``benchaudit tst`` report folder or a table with ``question_id`` and
    ``tst_s_minus_chance`` (or ``tst_s`` and ``tst_chance``). Returns a (Q,) float array (NaN = not scored)."""
    import numpy as np
    import pandas as pd

    from ..errors import InputError

    p = Path(path)
    if p.is_dir():
        files = sorted((p / "data").glob("questions-*.parquet"))
        if not files:
            raise InputError("not a `benchaudit tst` report folder (no data/questions-*.parquet)", file=str(p))
        df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    elif p.suffix.lower() == ".parquet":
        df = pd.read_parquet(p)
    elif p.suffix.lower() in (".csv", ".tsv"):
        df = pd.read_csv(p, sep="\t" if p.suffix.lower() == ".tsv" else ",", dtype={"question_id": str})
    else:
        raise InputError("TsT scores must be a report folder, .parquet, .csv or .tsv", file=str(p))
    if "question_id" not in df.columns:
        raise InputError("missing column", file=str(p), column="question_id")
    if "tst_s_minus_chance" in df.columns:
        val = pd.to_numeric(df["tst_s_minus_chance"], errors="coerce")
    elif {"tst_s", "tst_chance"} <= set(df.columns):
        val = pd.to_numeric(df["tst_s"], errors="coerce") - pd.to_numeric(df["tst_chance"], errors="coerce")
    else:
        raise InputError("missing column (need tst_s_minus_chance, or tst_s and tst_chance)", file=str(p),
                         column="tst_s_minus_chance")
    s = pd.Series(val.to_numpy(np.float64), index=df["question_id"].astype(str))
    if s.index.duplicated().any():
        row = int(np.flatnonzero(s.index.duplicated())[0]) + 1
        raise InputError("duplicate question_id", file=str(p), row=row, column="question_id")
    ids = frame.questions["question_id"].astype(str)
    unknown = sorted(set(s.index) - set(ids))
    if unknown:
        row = int(np.flatnonzero(s.index == unknown[0])[0]) + 1
        raise InputError(f"question_id {unknown[0]!r} is not a question of the benchmark ({len(unknown)} unknown)",
                         file=str(p), row=row, column="question_id")
    return s.reindex(ids).to_numpy(np.float64)


def load_model_dates(path: str | None, order: str | None) -> dict | None:
    """Model release dates from a CSV/TSV (``model``, ``date``) or an order ``A,B,C`` (oldest first)."""
    from ..errors import InputError

    if path and order:
        raise InputError("give either --model-dates or --model-order, not both")
    if order:
        names = [m.strip() for m in order.split(",") if m.strip()]
        if len(set(names)) != len(names):
            raise InputError("--model-order names a model twice")
        return {m: f"{i:06d}" for i, m in enumerate(names)}
    if not path:
        return None
    import pandas as pd

    p = Path(path)
    try:
        df = pd.read_csv(p, sep="\t" if p.suffix.lower() == ".tsv" else ",", dtype=str)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read model dates: {e}", file=str(p)) from None
    for c in ("model", "date"):
        if c not in df.columns:
            raise InputError("missing column", file=str(p), column=c)
    dates = pd.to_datetime(df["date"], errors="coerce")
    bad = dates.isna() & df["date"].notna()
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 1
        raise InputError(f"not a date: {df['date'].iloc[row - 1]!r}", file=str(p), row=row, column="date")
    return {str(m): (None if pd.isna(d) else d.strftime("%Y-%m-%d")) for m, d in zip(df["model"], dates)}


def register(app: typer.Typer) -> None:
    @app.command("curate")
    def curate(
        questions: str | None = typer.Option(None, "--questions", "-q",
                                             help="Benchmark questions (file, Hub-layout folder or Hub id)."),
        runs: list[str] | None = typer.Option(None, "--runs", "-r", help="Full-arm run files, folders or globs."),
        blind: list[str] | None = typer.Option(None, "--blind", "-b", help="Blind-arm (text-only) run files."),
        out: Path = typer.Option(Path("curated_benchmark"), "--out", "-o",
                                 help="Output folder (written atomically; replaced if it exists)."),
        target_size: int | None = typer.Option(None, "--target-size", "-n", **opt("--target-size"),
                                               help="Final selection to this many items (ranking-preserving)."),
        max_rank_loss: float | None = typer.Option(
            None, "--max-rank-loss", **opt("--max-rank-loss"), help="Final selection: smallest size whose inner-cross-validated 1 - rho <= X."),
        stages: str = typer.Option("text_ablation,saturation,anomaly", "--stages",
                                   help="Stages in order (comma-separated subset of text_ablation, saturation, anomaly)."),
        threshold: list[str] | None = typer.Option(
            None, "--threshold", "-t", help="Stage threshold NAME=VALUE (repeatable), e.g. blind_min_share=0.8."),
        method: str = typer.Option("point_biserial", "--method", help="Selection score: point_biserial | irt_information."),
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
    ) -> None:
        """Curate a benchmark from the audit's findings and prove it on held-out models; with no inputs,
        curates the bundled MATH-Vision example."""
        import sys

        from rich.console import Console

        from ..curate.output import write_curation
        from ..curate.pipeline import CurateConfig, run_curation
        console = Console(stderr=True)
        frame = _load_frame(console, questions, runs, blind, column_map, revision, dataset, blind_model)
        inputs = list(frame.sources)
        cfg = CurateConfig(stages=tuple(s.strip() for s in stages.split(",") if s.strip()),
                           thresholds=_thresholds(threshold), target_size=target_size, max_rank_loss=max_rank_loss,
                           method=method, floor_share=category_floor, n_folds=folds, n_boot=n_boot,
                           n_random=random_draws, junk_fractions=tuple(junk) if junk else (0.5,),
                           score_budget=score_budget, ibp=ibp, seed=seed, threads=threads)
        cfg.validate(frame.n_questions)
        dates = load_model_dates(model_dates, model_order)
        if dates is None and isinstance(frame.meta.get("model_dates"), dict):
            dates = frame.meta["model_dates"]
        excess = _tst_excess(console, frame, tst_scores, tst, seed, inputs)
        with console.status("curating") as st:
            result = run_curation(frame, cfg, tst_excess=excess, model_dates=dates,
                                  progress=lambda m: st.update(f"curating: {m}"))
        with console.status("writing the curated benchmark"):
            folder = write_curation(result, out, command_line=["benchaudit", *sys.argv[1:]], inputs=inputs,
                                    figures=figures)
        _print(result.summary)
        typer.echo(f"curated benchmark: {folder}")


def _load_frame(console, questions: str | None, runs: list[str] | None, blind: list[str] | None,
                column_map: list[str] | None, revision: str | None, dataset: str | None, blind_model: str | None):
    """The audit frame of the inputs, or of the bundled MATH-Vision example when none is given."""
    from ..errors import InputError

    if questions is None and not runs and not blind:
        from ..readers.example import example_frame

        with console.status("loading the bundled MATH-Vision example"):
            return example_frame()
    if not runs:
        raise InputError("give --runs (full-arm runs of at least 3 models); curation ranks models")
    from ..readers.ingest import build_frame, parse_column_map

    with console.status("reading and validating inputs"):
        return build_frame(questions, list(runs or []), list(blind or []),
                           column_map=parse_column_map(column_map or []), revision=revision,
                           dataset_hint=dataset, blind_model=blind_model)


def _tst_excess(console, frame, tst_scores: str | None, tst: bool, seed: int, inputs: list):
    """TsT s(x) - chance per question for the text-ablation stage: read (recorded in ``inputs``), computed, or None."""
    from ..errors import InputError

    if tst_scores and tst:
        raise InputError("give either --tst-scores or --tst, not both")
    if tst_scores:
        inputs.append({"path": str(tst_scores), "kind": "tst_scores"})
        return load_tst_scores(tst_scores, frame)
    if tst:
        from ..tst.rf import run_tst_rf

        with console.status("TsT-RF (text-only stress test)"):
            return run_tst_rf(frame, seed=seed, null_permutations=0).per_question[
                "tst_s_minus_chance"].to_numpy(float)
    return None


def _print(s: dict) -> None:
    def f3(x):
        return "n/a" if x is None else f"{x:.3f}"

    def ci(p):
        return "" if not p or p[0] is None else f" [{p[0]:.3f}, {p[1]:.3f}]"

    typer.echo(f"kept {s['n_after']:,} of {s['n_before']:,} items ({100 * (s['reduction'] or 0):.0f}% fewer); "
               "removed by stage: " + ", ".join(f"{k} {v:,}" for k, v in s["removed_by_stage"].items()))
    typer.echo(f"in-pool rho {f3(s['spearman_rho'])}{ci(s['spearman_rho_ci'])}; held-out rho "
               f"{f3(s.get('heldout_spearman_rho'))}{ci(s.get('heldout_spearman_rho_ci'))}, tau "
               f"{f3(s.get('heldout_kendall_tau'))}; random subsets {f3(s.get('random_subset_rho_mean'))}"
               f"{ci(s.get('random_subset_rho_interval'))}")
    if s.get("versus_random"):
        typer.echo(f"versus random: {s['versus_random']}")
    ch = s["discrimination_change"]
    typer.echo("discrimination change: " + ", ".join(
        f"{k} {'n/a' if v is None else f'{100 * v:+.0f}%'}" for k, v in ch.items()))
