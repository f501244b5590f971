"""``python -m audit_hub.blind ...`` and ``accelerate launch -m audit_hub.blind ...``.

Same options as ``benchaudit blind``; errors print one line and exit 2 like the main CLI.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import typer

    from ..commands.blind import register
    from ..errors import BenchauditError

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)  # a single command: typer runs it without a sub-command name
    try:
        app(args=list(sys.argv[1:] if argv is None else argv), prog_name="python -m audit_hub.blind",
            standalone_mode=False)
    except BenchauditError as e:
        typer.echo(f"error: {e}", err=True)
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    except KeyboardInterrupt:
        typer.echo("interrupted; rerun the same command to resume", err=True)
        return 130
    except Exception as e:
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
