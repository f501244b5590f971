"""What ``curate`` reads besides the runs: the frame (or the bundled example), stage thresholds, TsT scores
and model release dates; each malformed value is one InputError naming the file, row and column."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def stage_thresholds(items: list[str] | dict | None):
    from ..curate.filters import StageThresholds
    from ..errors import InputError

    th = StageThresholds()
    if isinstance(items, dict):
        items = [f"{k}={v}" for k, v in items.items()]
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


def curation_frame(questions: str | None, runs: list[str], blind: list[str], *, column_map: dict[str, str],
                   revision: str | None, dataset: str | None, blind_model: str | None, as_given: bool = False,
                   benchmark: list[str] | None = None):
    """The audit frame of the inputs, or of the bundled MATH-Vision example when none is given (``as_given``:
    ``--runs-as-given``, see :mod:`audit_hub.readers.named_roles`). Runs of several benchmarks (a harness
    folder) are read once and split as the audit splits them; curation takes one (``benchmark``:
    ``--benchmark``), never a pool of several."""
    from ..errors import InputError

    if questions is None and not runs and not blind:
        from ..readers.example import example_frame

        return example_frame()
    if not runs:
        raise InputError("give --runs (full-arm runs of at least 3 models); curation ranks models")
    from ..readers.grouping import concerns
    from ..readers.ingest import frame_from_group, one_benchmark, read_benchmarks

    groups, skipped = read_benchmarks(questions, list(runs), list(blind), column_map=column_map, dataset=dataset,
                                      blind_model=blind_model, benchmark=benchmark, as_given=as_given)
    group = one_benchmark(groups, "curate")
    return frame_from_group(questions, group, [s for s in skipped if concerns(s, group.name)], column_map=column_map,
                            revision=revision, dataset=dataset, specs=[*runs, *blind])


def tst_excess(frame, tst_scores: str | None, tst: bool, seed: int, inputs: list,
               progress: Callable[[str], None] | None = None):
    """TsT s(x) - chance per question for the text-ablation stage: read (recorded in ``inputs``), computed, or None."""
    from ..errors import InputError

    if tst_scores and tst:
        raise InputError("give either --tst-scores or --tst, not both")
    if tst_scores:
        inputs.append({"path": str(tst_scores), "kind": "tst_scores"})
        return load_tst_scores(tst_scores, frame)
    if tst:
        from ..tst.rf import run_tst_rf

        if progress is not None:
            progress("TsT-RF (text-only stress test)")
        return run_tst_rf(frame, seed=seed, null_permutations=0).per_question["tst_s_minus_chance"].to_numpy(float)
    return None
