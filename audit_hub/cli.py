"""The ``benchaudit`` command line.

This module stays light: it imports typer and the command registrations only. Every command imports
its implementation (pandas, numpy, datasets, torch, ...) inside the function body, so
``benchaudit --help`` and ``benchaudit audit --help`` never import torch, transformers or evaluate.
"""

from __future__ import annotations

import importlib
import sys

import typer

from . import __version__

app = typer.Typer(
    name="benchaudit",
    help="Audit vision-language-model benchmarks from the evaluation runs you already have.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules: each exposes register(app). Missing optional modules are skipped so that a
# partial install still runs; a module that fails for another reason is a bug and raises.
_COMMAND_MODULES = ("audit", "blind", "tst", "publish", "metrics", "curate")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"benchaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Audit vision-language-model benchmarks from the evaluation runs you already have."""


for _name in _COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"audit_hub.commands.{_name}")
    except ModuleNotFoundError as _e:  # pragma: no cover - only during partial checkouts
        if _e.name != f"audit_hub.commands.{_name}":
            raise
        continue
    _mod.register(app)


#: options that take one path each but are often given several (``--runs logs/samples_*.jsonl``: the
#: shell expands the glob into many words)
_MULTI_PATH_OPTIONS = frozenset({"--runs", "-r", "--blind", "-b"})


def expand_multi_path_options(argv: list[str]) -> list[str]:
    """``--runs a b c`` -> ``--runs a --runs b --runs c``: the words after a path option, up to the
    next option, all belong to it (what a shell-expanded glob gives). A lone ``--`` ends the
    rewriting; ``--runs=a`` is left alone."""
    out: list[str] = []
    current: str | None = None
    pending = False  # the option's first value is still to come
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        if word.startswith("-") and word != "-":
            current = word if word in _MULTI_PATH_OPTIONS else None
            pending = current is not None
            out.append(word)
        elif current is not None and not pending:
            out.extend([current, word])
        else:
            pending = False
            out.append(word)
    return out


def run_app(typer_app: typer.Typer, argv: list[str] | None, *, prog_name: str | None = None,
            interrupted: str = "interrupted; no partial output was kept") -> int:
    """Run a typer app the way every benchaudit entry point does: user errors print one line and
    exit 2 (no traceback); an interrupt prints ``interrupted`` and exits 130."""
    from .errors import BenchauditError

    try:
        typer_app(args=argv, prog_name=prog_name, standalone_mode=False)
    except BenchauditError as e:
        typer.echo(f"error: {e}", err=True)
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt:
        typer.echo(interrupted, err=True)
        return 130
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            return 2
        raise
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console entry point: user errors print one line and exit 2; no traceback."""
    return run_app(app, expand_multi_path_options(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
