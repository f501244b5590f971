"""``benchaudit audit`` on a harness output folder (a VLMEvalKit work_dir, an lmms-eval run folder): the run files
are read once, split by benchmark (:func:`audit_hub.readers.ingest.split_by_benchmark`), and each benchmark is
audited and reported on its own; with several, ``--out`` gets one report per benchmark and an index
(:mod:`audit_hub.report.index`). With one benchmark the output is the single report it always was."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def read_groups(audit_kwargs: dict, benchmarks: list[str] | None, *, worker=None):
    """Every run file read once (the worker reads some beside this process), split by benchmark:
    ``(groups, skipped files)``. Runs under the caller's stage clock."""
    from ..clock import stage
    from ..errors import InputError
    from ..readers.cells import stem_of
    from ..readers.ingest import parse_column_map, read_run_files, split_by_benchmark

    k = audit_kwargs
    runs, blind, questions = list(k["runs"] or []), list(k["blind"] or []), k["questions"]
    if not runs and not blind:
        raise InputError("give at least one --runs (or --blind) file; --questions alone has no runs to audit")
    hint = k["dataset"]
    if hint is None and questions is not None and os.path.isfile(str(questions)):
        hint = stem_of(str(questions))
    with stage("read"):
        full_res, blind_res, skipped = read_run_files(
            runs, blind, column_map=parse_column_map(k["column_map"] or []), dataset_hint=hint,
            blind_model=k["blind_model"], with_questions=questions is None, pool=worker)
        groups, left = split_by_benchmark(full_res, blind_res, wanted=benchmarks, dataset=k["dataset"],
                                          questions_spec=questions)
    return groups, skipped + left


def _belongs(rec: dict, name: str | None) -> bool:
    """A skipped-file record that concerns benchmark ``name`` (its reports list it): the older runs and
    summaries named ``..._{name}...``; every record when the benchmark has no name."""
    if name is None:
        return True
    base = os.path.basename(str(rec.get("path", "")))
    return f"_{name}." in base or f"_{name}_" in base or base.startswith(f"{name}.")


def audit_work_dir(console, clock, *, out, groups, skipped, figures: bool, threads: int, parallel: bool,
                   n_threads: int, audit_kwargs: dict, restart, audit_one, headline_lines, print_lines,
                   ) -> tuple[Path, list[dict]]:
    """Audit each benchmark into ``OUT/<benchmark>/`` and write the index; returns (OUT, index rows).
    ``restart(name)``: resets the progress bar for the next benchmark; ``audit_one``, ``headline_lines``,
    ``print_lines``: the single-benchmark audit of :mod:`audit_hub.commands.audit` and its CLI lines."""
    from ..escape import console_text
    from ..readers.grouping import folder_name
    from ..report.index import write_report_set

    k = audit_kwargs
    inputs = [k["questions"], *(k["runs"] or []), *(k["blind"] or [])]
    rows: list[dict] = []

    def write_each(tmp: Path) -> list[dict]:
        from ..report.index import index_row

        taken: set[str] = set()
        for i, g in enumerate(groups):
            name = g.name if g.name is not None else (k["dataset"] or "benchmark")
            sub = folder_name(name, taken)
            restart(f"{i + 1}/{len(groups)} {name}")
            result, _ = audit_one(  # the same audit, one benchmark at a time
                console, clock, out=tmp / sub, figures=figures, threads=threads, parallel=parallel,
                n_threads=n_threads, audit_kwargs=k, worker=None, group=g,
                skipped=[s for s in skipped if _belongs(s, g.name)])
            g.full, g.blind = [], []  # this benchmark's tables are no longer needed
            lines = headline_lines(result)
            console.print(f"[bold]{console_text(name)}[/bold]: {result.frame.n_questions:,} questions, "
                          f"{len(result.frame.models)} model(s) -> {console_text(sub)}/")
            print_lines(console, result, lines)
            rows.append(index_row(str(name), sub, result, lines))
        return rows

    folder = write_report_set(out, command_line=["benchaudit", *sys.argv[1:]], inputs=inputs,
                              write_each=write_each, skipped_files=skipped)
    return folder, rows
