"""``benchaudit metrics install|list``: the evaluate modules of the six detectors, for offline use."""

from __future__ import annotations

from pathlib import Path

import typer

from ..metrics import NAMESPACE


def _version() -> str:
    from .. import __version__

    return __version__


def register(app: typer.Typer) -> None:
    """Add the ``metrics`` sub-app (``install``, ``list``) to the benchaudit CLI."""
    metrics_app = typer.Typer(
        name="metrics",
        help="The evaluate modules of the six detectors (evaluate.load('benchaudit/<name>')).",
        no_args_is_help=True,
        rich_markup_mode=None,
    )

    @metrics_app.command("install")
    def install(
        names: list[str] | None = typer.Argument(
            None, help="Metrics to install (default: all six)."),
        namespace: str = typer.Option(
            NAMESPACE, "--namespace", help="Load id prefix: evaluate.load('<namespace>/<name>')."),
        cache_dir: Path | None = typer.Option(
            None, "--cache-dir",
            help="evaluate's module cache (default: $HF_MODULES_CACHE, else $HF_HOME/modules, "
                 "else ~/.cache/huggingface/modules)."),
        source: Path | None = typer.Option(
            None, "--source", help="Folder with <name>/<name>.py (default: the repository's metrics/ or "
                                   "the copy shipped in the package)."),
    ) -> None:
        """Place the metric modules in evaluate's module cache so that evaluate.load('benchaudit/<name>')
        works offline (HF_EVALUATE_OFFLINE=1)."""
        from ..fmt import count
        from ..metrics.install import install as do_install

        done = do_install(namespace=namespace, names=list(names or []), cache_dir=cache_dir, source=source)
        for m in done:
            stale = f" (removed {m.removed_stale} older version(s))" if m.removed_stale else ""
            typer.echo(f"installed {m.load_id} (benchaudit {_version()}, sha256 {m.hash[:16]}): {m.path}{stale}")
        typer.echo(f"{count(len(done), 'metric module')} installed; load offline with HF_EVALUATE_OFFLINE=1 "
                   f"evaluate.load('{namespace}/<name>') (online loads run the Hub's current code: pin a revision)")

    @metrics_app.command("list")
    def list_(
        namespace: str = typer.Option(NAMESPACE, "--namespace", help="Load id prefix."),
        cache_dir: Path | None = typer.Option(None, "--cache-dir", help="evaluate's module cache."),
    ) -> None:
        """List the metric modules, their sources and whether the cached copy is current."""
        from ..metrics.install import installed

        for row in installed(namespace=namespace, cache_dir=cache_dir):
            if row["installed_hash"] is None:
                state = "not installed"
            elif row["up_to_date"]:
                state = "installed"
            else:
                state = "installed (outdated; rerun `benchaudit metrics install`)"
            pin = (f"  benchaudit {row.get('installed_version') or '?'}, sha256 {row['installed_hash'][:16]}"
                   if row["installed_hash"] else "")
            typer.echo(f"{row['load_id']:<40} {state:<12}{pin}  source: {row['source']}")

    app.add_typer(metrics_app, name="metrics")
