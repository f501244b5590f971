"""``python -m audit_hub.blind ...`` and ``accelerate launch -m audit_hub.blind ...``.

Same options as ``benchaudit blind``; errors print one line and exit 2 like the main CLI.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import typer

    from ..cli import run_app
    from ..commands.blind import register

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    register(app)  # a single command: typer runs it without a sub-command name
    return run_app(app, list(sys.argv[1:] if argv is None else argv), prog_name="python -m audit_hub.blind",
                   interrupted="interrupted; rerun the same command to resume")


if __name__ == "__main__":
    sys.exit(main())
