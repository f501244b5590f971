"""The work_dir output: one complete report per benchmark (``OUT/<benchmark>/``, each a valid ``benchaudit
audit`` output of its own) and an index over them (``OUT/README.md``, a card; ``OUT/index.json``, one row per
benchmark: items, models, headline figures, the report's path; ``OUT/manifest.json``).

:func:`index_row` and :func:`index_card` build the content; :func:`write_report_set` is the one function that
writes the folder, through the output layer (:func:`audit_hub.hub.output.output_folder`: the manifest schema,
``kind: index``, pushable with ``benchaudit push``). Every input-derived string in the card (benchmark, model and file names, reasons) goes through
:mod:`audit_hub.escape`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

INDEX_JSON = "index.json"
INDEX_VERSION = 1


def _primary_accuracy(summary: dict) -> list[dict]:
    field = summary.get("primary_field") or "hit"
    key = "accuracy_judged" if field == "hit" else "accuracy_exact"
    out = []
    for rec in summary.get("accuracy") or []:
        out.append({"model": rec.get("model"), "arm": rec.get("arm"), "n_items": rec.get("n_items"),
                    "accuracy": rec.get(key), "accuracy_judged": rec.get("accuracy_judged"),
                    "accuracy_exact": rec.get("accuracy_exact"), "unparseable_share": rec.get("unparseable_share")})
    return out


def index_row(name: str, folder: str, result: Any, headlines: list[str]) -> dict:
    """One benchmark's row of ``index.json`` (``headlines``: the CLI's headline lines for this report)."""
    from ..engine.run import run_warnings

    s = result.summary
    frame = result.frame
    acc = _primary_accuracy(s)
    full = [a["accuracy"] for a in acc if a["arm"] == "full" and a["accuracy"] is not None]
    return {
        "benchmark": name,
        "path": folder,
        "n_questions": int(frame.n_questions),
        "models": {"full": frame.models_in("full"), "blind": frame.models_in("blind")},
        "primary_field": result.primary_field,
        "accuracy": acc,
        "mean_accuracy_full": (sum(full) / len(full)) if full else None,
        "headlines": list(headlines),
        "skipped": dict(result.skipped or {}),
        "input_defects": dict(s.get("input_defects") or {}),
        "warnings": run_warnings(s),  # the runs left out as failed or mostly unreadable, in the console's words
        "sources": [str(r.get("path")) for r in (frame.sources or []) if r.get("path")],
    }


def index_card(rows: list[dict], *, skipped_files: list[dict] | None = None) -> str:
    """The index README: a table of the benchmarks with links to their reports, then each one's headlines."""
    from ..escape import md_inline
    from ..fmt import count, pct

    lines = ["# benchaudit: audit of a harness output folder", "",
             f"{count(len(rows), 'benchmark')}, each audited on its own (files of different benchmarks are never "
             "pooled); every folder below is a complete report that can be read and pushed alone.", "",
             "| Benchmark | Items | Models (full / blind) | Primary field | Mean accuracy (full arm) | Report |",
             "| --- | ---: | ---: | --- | ---: | --- |"]
    for r in rows:
        m = r["models"]
        mean = pct(r["mean_accuracy_full"]) if r["mean_accuracy_full"] is not None else "n/a"
        lines.append(f"| {md_inline(r['benchmark'])} | {r['n_questions']:,} | {len(m['full'])} / {len(m['blind'])} | "
                     f"{md_inline(r['primary_field'])} | {mean} | [{md_inline(r['path'])}/]({r['path']}/README.md) |")
    for r in rows:
        lines += ["", f"## {md_inline(r['benchmark'])}", ""]
        for a in r["accuracy"]:
            if a["accuracy"] is not None:
                lines.append(f"- {md_inline(a['model'])} ({md_inline(a['arm'])}): "
                             f"{pct(a['accuracy'])} of {int(a['n_items'] or 0):,} items")
        for h in r["headlines"]:
            lines.append(f"- {md_inline(h, 400)}")
        for w in r.get("warnings") or []:
            lines.append(f"- warning: {md_inline(w, 1500)}")
        for k, v in (r.get("input_defects") or {}).items():
            if k != "empty_runs":  # the warning above names them
                lines.append(f"- input defect: {md_inline(k)}: {int(v):,}")
    if skipped_files:
        lines += ["", "## Files not read", ""]
        shown = skipped_files[:200]
        names = [Path(str(s.get("path"))).name for s in shown]
        for s, name in zip(shown, names):
            if names.count(name) > 1:  # the same file name in several folders: name the folders too
                name = "/".join(Path(str(s.get("path"))).parts[-3:])
            lines.append(f"- {md_inline(name)}: {md_inline(s.get('reason'), 300)}")
        if len(skipped_files) > 200:
            lines.append(f"- ... and {len(skipped_files) - 200:,} more (index.json)")
    return "\n".join(lines) + "\n"


def write_report_set(out, *, command_line: list[str], inputs: list, write_each: Callable[[Path], list[dict]],
                     skipped_files: list[dict] | None = None) -> Path:
    """Write the work_dir output atomically: ``write_each(tmp)`` writes each benchmark's report into
    ``tmp/<folder>/`` (with :func:`audit_hub.report.writer.write_report`) and returns their index rows; then the
    index files and the manifest. ``out`` is replaced only if it is an earlier ``benchaudit audit`` output.
    ``inputs``: the input records of the reports (``path`` and the ``sha256`` already computed while reading:
    no input is hashed twice)."""
    from ..hub.output import index_card_text, output_folder
    from ..hub.shards import written_configs

    started = time.time()
    paths = [r.get("path") if isinstance(r, dict) else r for r in inputs or []]
    with output_folder(out, command="audit", inputs=[p for p in paths if p]) as f:
        rows = write_each(f.root)
        f.json(INDEX_JSON, {"index_version": INDEX_VERSION, "tool": "benchaudit", "kind": "audit-index",
                            "benchmarks": rows, "skipped_files": list(skipped_files or [])})
        # the card's YAML declares every benchmark's configs (hub.output.index_card_text, the one index header):
        # a pushed index loads with datasets.load_dataset(repo, "<benchmark>-<config>")
        subs = {r["path"]: (f.root / r["path"], written_configs(f.root / r["path"])) for r in rows}
        f.text("README.md", index_card_text(subs, title="benchaudit: audit of a harness output folder",
                                            header={"tags": ["benchaudit", "benchmark-audit-index"]},
                                            body=index_card(rows, skipped_files=skipped_files)))
        f.manifest(command_line=command_line, inputs=list(inputs or []), started_at=started,
                   fields={"kind": "index", "reports": [{"benchmark": r["benchmark"], "path": r["path"]}
                                                         for r in rows]})
    return Path(out).resolve()


__all__ = ["INDEX_JSON", "index_card", "index_row", "write_report_set"]
