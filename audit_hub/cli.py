"""The ``benchaudit`` command line.

This module stays light: it imports typer and the command registrations only. Every command imports
its implementation (pandas, numpy, datasets, torch, ...) inside the function body, so
``benchaudit --help`` and ``benchaudit audit --help`` never import torch, transformers or evaluate.
"""

from __future__ import annotations

import contextlib
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
    # help text is printed as written: no Rich markup (it ate `.[vision]` and `[@REVISION]`), wrapped to
    # the terminal width at word boundaries by click
    rich_markup_mode=None,
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


#: metavars that say what an option's value is, by option name (the rest by type: :func:`_type_metavar`)
METAVARS = {
    "--questions": "FILE|DIR|ORG/NAME", "--runs": "PATH", "--blind": "PATH", "--base": "PATH", "--out": "DIR", "--map": "OLD=NEW",
    "--revision": "REV", "--budgets": "GROUP=N", "--floors": "CATEGORY=N", "--model": "FOLDER|ORG/NAME",
    "--llm": "FOLDER", "--design-label": "COLUMN[:VALUE]", "--dataset": "NAME", "--blind-model": "NAME",
    "--model-name": "NAME", "--name": "NAME", "--namespace": "ORG", "--repo-id": "ORG/NAME",
    "--push-to-hub": "ORG/NAME", "--stratify": "COLUMN", "--group-column": "COLUMN",
    "--prompt-template": "TEXT|FILE", "--mode": "logprob|generate", "--dtype": "auto|bfloat16|float16|float32",
    "--truncate": "error|left", "--prompt-style": "STYLE", "--image-mode": "none|blank", "--device-map": "auto",
    "--max-memory": "DEVICE=SIZE,...", "--backend": "transformers|openai", "--base-url": "URL",
    "--api-key-env": "VARIABLE", "--calibration": "isotonic|power|none", "--featuriser": "NAME",
    "--allocation": "global|per_format|per_category", "--tst-scores": "PATH", "--message": "MESSAGE",
    "--stages": "STAGE,...", "--method": "NAME", "--model-dates": "FILE",
    "--model-order": "MODEL,...", "--ibp": "auto|on|off", "--benchmark": "NAME",
}


def _annotation(param):
    """The value type of an option (``list[int] | None`` -> int): typer's descriptor, else click's type."""
    import typing

    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    for _ in range(3):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if not args:
            break
        ann = args[0]
    return ann


def _type_metavar(param) -> str:
    from pathlib import Path

    ann = _annotation(param)
    if ann is not None:
        return ("INT" if ann is int else "NUMBER" if ann is float else "PATH" if ann is Path else "TEXT")
    name = getattr(getattr(param, "type", None), "name", "") or ""
    return "INT" if "integer" in name else "NUMBER" if "float" in name else "PATH" if name == "path" else "TEXT"


def _is_flag(param) -> bool:
    return bool(getattr(param, "is_flag", False)) or _annotation(param) is bool


def set_metavars(command) -> None:
    """Give every option that takes a value a metavar that says what the value is (:data:`METAVARS`, a
    NAME=VALUE form named in the help text, else the type); flags get none (no ``<bool>``)."""
    import re

    for param in getattr(command, "params", []):
        if not getattr(param, "opts", None) or getattr(param, "param_type_name", "option") != "option":
            continue
        if _is_flag(param):
            param.metavar = None
            continue
        if getattr(param, "metavar", None):
            continue
        long = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        kv = re.search(r"\b([A-Z][A-Z_]*=[A-Z][A-Z_]*)\b", getattr(param, "help", None) or "")
        by_type = _type_metavar(param)
        param.metavar = METAVARS.get(long) or (kv.group(1) if kv and by_type == "TEXT" else by_type)
    for sub in (getattr(command, "commands", None) or {}).values():
        if not getattr(sub, "short_help", None) and getattr(sub, "help", None):
            # the command list shows the whole first sentence (click cut it at 45 characters with "...")
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        set_metavars(sub)


def build_command(typer_app: typer.Typer):
    """The click command of ``typer_app`` with :func:`set_metavars` applied (what :func:`run_app` runs)."""
    cmd = typer.main.get_command(typer_app)
    set_metavars(cmd)
    return cmd


PROG = "benchaudit"
_INTERRUPTED = "interrupted, nothing written"
# Exceptions a malformed input can raise deep inside a parser (pandas, pyarrow, json): reported as one
# line with exit 2, like an InputError. Anything else is a bug: one line, exit 1, traceback only with
# BENCHAUDIT_DEBUG=1.
_DATA_ERRORS = (ValueError, UnicodeError, RecursionError, OverflowError, LookupError, TypeError, EOFError)

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




def _click_exception_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """ClickException/UsageError of the click copy typer vendors (typer >= 0.2x) and of click itself."""
    base: list[type] = []
    usage: list[type] = []
    for mod in ("typer._click.exceptions", "click.exceptions"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        base.append(m.ClickException)
        usage.append(m.UsageError)
    return tuple(base), tuple(usage)


def _fallback_context(typer_app: typer.Typer, argv: list[str] | None, prog_name: str | None):
    """A context for the usage line when the error carries none (e.g. an option missing its value)."""
    try:
        group = typer.main.get_command(typer_app)
        ctx = group.make_context(prog_name or PROG, [], resilient_parsing=True)
        args = list(sys.argv[1:] if argv is None else argv)
        while args and hasattr(group, "commands") and args[0] in group.commands:
            group = group.commands[args.pop(0)]
            ctx = group.make_context(group.name, [], parent=ctx, resilient_parsing=True)
        return ctx
    except Exception:  # noqa: BLE001 - the usage line is a courtesy
        return None


def _usage_error(e, typer_app: typer.Typer, argv: list[str] | None = None, prog_name: str | None = None) -> int:
    from .bounds import RANGES
    from .escape import one_line

    ctx = getattr(e, "ctx", None) or _fallback_context(typer_app, argv, prog_name)
    if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help(), err=True)
        return 2
    hint = ""
    if ctx is not None:
        typer.echo(ctx.get_usage(), err=True)
        hint = f" (see '{ctx.command_path} --help')"
    try:
        msg = e.format_message()
    except Exception:  # noqa: BLE001
        msg = str(e)
    param = getattr(e, "param", None)
    for name in getattr(param, "opts", None) or ():
        if name in RANGES:
            lo, hi = RANGES[name]
            msg += f"; allowed range {lo}..{hi}" if hi is not None else f"; allowed range >= {lo}"
            break
    typer.echo(f"error: {one_line(msg)}{hint}", err=True)
    return 2


def _install_signal_handlers():
    """SIGINT/SIGTERM raise :class:`Interrupted` (once: a second signal during cleanup is ignored)."""
    import signal
    import threading

    from .errors import Interrupted, note_signal

    if threading.current_thread() is not threading.main_thread():
        return None
    note_signal(None)

    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        note_signal(signum)  # checked again before the output is swapped in, should the exception be lost
        raise Interrupted(signum)

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, handler)
    return old


def _quiet_libraries():
    """Silence third-party warnings and progress bars for one run; returns the entered warnings
    context, restored on return so that main() leaves no global filter behind."""
    import os
    import warnings

    warn_ctx = warnings.catch_warnings()
    warn_ctx.__enter__()
    if not os.environ.get("BENCHAUDIT_DEBUG") and not sys.warnoptions and not os.environ.get("PYTHONWARNINGS"):
        # third-party library warnings (openpyxl styles, pandas/transformers deprecations) are not messages
        # for the user: an error stays one line. BENCHAUDIT_DEBUG=1 or -W/PYTHONWARNINGS shows them.
        warnings.simplefilter("ignore")
    if not sys.stderr.isatty():  # no carriage-return progress bars from datasets/hub in logs and pipes
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    return warn_ctx


def _os_error_line(e: OSError) -> str:
    """One line for an OS error: the reason and the file (non-ASCII names escaped)."""
    from .escape import one_line

    where = f" ({one_line(ascii(str(e.filename)) if not str(e.filename).isascii() else e.filename)})" \
        if getattr(e, "filename", None) else ""
    return f"error: {one_line(e.strerror or e)}{where}"


def run_app(typer_app: typer.Typer, argv: list[str] | None, *, prog_name: str | None = None,
            interrupted: str = _INTERRUPTED) -> int:
    """Run a typer app the way every benchaudit entry point does. Every failure is one line on stderr
    with no traceback: exit 2 for bad input and usage errors, 130/143 for SIGINT/SIGTERM (``interrupted``),
    1 for a bug. Everything printed passes through :mod:`audit_hub.scrub`."""
    import os
    import signal

    from .errors import BenchauditError, Interrupted, note_signal
    from .escape import one_line
    from .scrub import ScrubbingStream

    warn_ctx = _quiet_libraries()
    out_stream, err_stream = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, ScrubbingStream):
        sys.stdout = ScrubbingStream(sys.stdout)
    if not isinstance(sys.stderr, ScrubbingStream):
        sys.stderr = ScrubbingStream(sys.stderr)
    old_handlers = _install_signal_handlers()
    code = 0
    try:
        try:
            rv = build_command(typer_app)(args=argv, prog_name=prog_name, standalone_mode=False)
            if isinstance(rv, int) and rv == 130:  # typer turned a KeyboardInterrupt into Exit(130)
                typer.echo(interrupted, err=True)
            code = rv if isinstance(rv, int) else 0
        except Interrupted as e:
            code = e.exit_code
            typer.echo(interrupted, err=True)
        except KeyboardInterrupt:
            code = 130
            typer.echo(interrupted, err=True)
        except BenchauditError as e:
            typer.echo(f"error: {one_line(e)}", err=True)
            code = e.exit_code
        except (typer.Exit, SystemExit) as e:
            c = getattr(e, "exit_code", getattr(e, "code", 0))
            code = c if isinstance(c, int) else (0 if c is None else 1)
        except typer.Abort:
            typer.echo("aborted", err=True)
            code = 130
        except MemoryError:
            typer.echo("error: out of memory; use a smaller input or smaller settings (e.g. --n-permutations)",
                       err=True)
            code = 2
        except OSError as e:
            typer.echo(_os_error_line(e), err=True)
            code = 2
        except Exception as e:
            click_errors, usage_errors = _click_exception_types()
            if isinstance(e, click_errors):
                if isinstance(e, usage_errors):
                    code = _usage_error(e, typer_app, argv, prog_name)
                else:
                    typer.echo(f"error: {one_line(e.format_message())}", err=True)
                    code = e.exit_code
            elif os.environ.get("BENCHAUDIT_DEBUG"):
                raise
            elif isinstance(e, _DATA_ERRORS):
                typer.echo(f"error: cannot process the input ({type(e).__name__}: {one_line(e, 400)})", err=True)
                code = 2
            else:
                typer.echo(f"internal error ({type(e).__name__}: {one_line(e, 400)}); please report it "
                           "(BENCHAUDIT_DEBUG=1 shows the traceback)", err=True)
                code = 1
    except Interrupted as e:  # a signal while reporting another error
        code = e.exit_code
    finally:
        if old_handlers:
            for s, h in old_handlers.items():
                signal.signal(s, h)
            note_signal(None)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdout, sys.stderr = out_stream, err_stream
        warn_ctx.__exit__(None, None, None)
    return code


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``benchaudit``); see :func:`run_app`. Several words after ``--runs``/``--blind``
    (a shell-expanded glob) all belong to that option (:func:`expand_multi_path_options`)."""
    from .clock import command_window

    args = expand_multi_path_options(list(sys.argv[1:] if argv is None else argv))
    with command_window(argv=args):  # every manifest the command writes says it started here, and this line
        return run_app(app, args, prog_name=PROG)


def console() -> None:
    """The ``benchaudit`` program (and ``python -m audit_hub``): :func:`main`, then the process ends without
    tearing the interpreter down. Once ``main`` has returned, every output is written and closed (the report
    folder is moved into place inside it), so the 0.3-0.5 s the interpreter spends freeing the audit's
    arrays and modules only delays the shell prompt. The streams are flushed and the ``atexit`` handlers
    (multiprocessing's, the resource tracker's) run first; with another non-daemon thread still alive the
    exit is the ordinary one, which waits for it. Code that calls :func:`main` itself keeps its process."""
    _end_process(main())


def _end_process(code: int) -> None:
    import atexit
    import os
    import threading

    main_thread = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main_thread for t in threading.enumerate()):
        sys.exit(code)
    run_exit = getattr(atexit, "_run_exitfuncs", None)
    if run_exit is None:  # not CPython: the ordinary exit
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    run_exit()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":  # pragma: no cover
    console()
