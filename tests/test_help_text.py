"""Every command's --help shows its source strings as written (issue 27).

Rendered through the real entry point (:func:`audit_hub.cli.main`), so what is checked is what a user
sees: each option's help text appears verbatim (no Rich markup eats ``.[vision]`` or ``[@REVISION]``),
every option is documented, every value-taking option has a metavar that says what the value is (no
``<bool>``/``<str>``, none on flags), and each command's own description appears."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from audit_hub.cli import app, build_command, main

GENERIC = {"TEXT", "<str>", "<bool>", "<int>", "<float>", "<path>", "<list[str]>"}


def _commands():
    root = build_command(app)
    out = [((), root)]
    stack = [((), root)]
    while stack:
        path, cmd = stack.pop()
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            out.append(((*path, name), sub))
            stack.append(((*path, name), sub))
    return out


def _render(path: tuple[str, ...]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf), pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "120")
        code = main([*path, "--help"])
    assert code == 0, buf.getvalue()
    return buf.getvalue()


def _flat(s: str) -> str:
    return " ".join(s.split())


COMMANDS = _commands()


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) or "benchaudit" for p, _ in COMMANDS])
def test_help_shows_the_source_strings(path, cmd):
    text = _render(path)
    flat = _flat(text)
    # click wraps at spaces and may break after a hyphen ("multiple- choice"): undo both
    flat_joined = re.sub(r"- ", "-", flat)
    doc = _flat((cmd.help or "").split("\n\n")[0])
    assert doc and (doc in flat or doc in flat_joined), (path, doc)
    for p in cmd.params:
        opts = getattr(p, "opts", None)
        if getattr(p, "param_type_name", "") != "option" or not opts:
            continue
        assert p.help, f"{' '.join(path)} {opts[0]} has no help text"
        h = _flat(p.help)
        assert h in flat or re.sub(r"- ", "-", h) in flat_joined, (path, opts, h)
        long = next((o for o in opts if o.startswith("--")), opts[0])
        line = next(ln for ln in text.splitlines() if re.match(r"\s+(-\w, )?" + re.escape(long) + r"(\s|$|/|,)", ln))
        if getattr(p, "is_flag", False) or p.metavar is None:
            assert not re.search(r"<\w+>", line), line  # no "<bool>" on a flag
        else:
            assert p.metavar not in GENERIC and p.metavar in line, (opts, p.metavar, line)


def test_markup_like_text_survives():
    """The two strings the issue saw eaten by Rich markup."""
    assert ".[vision]" in _flat(_render(("blind",)))
    assert "[@REVISION]" in _flat(_render(("audit",)))


def test_prune_documents_every_option():
    text = _render(("prune",))
    for opt in ("--k", "--repeats", "--seed", "--group-column", "--n-estimators", "--n-jobs", "--revision"):
        line = next(ln for ln in text.splitlines() if re.search(r"(^|\s)" + re.escape(opt) + r"\s", ln))
        assert len(line.split(None, 2)) == 3, line  # option, metavar and its help on the line


def test_command_lists_show_each_description_uncut():
    for path, cmd in COMMANDS:
        subs = getattr(cmd, "commands", None) or {}
        if not subs:
            continue
        flat = re.sub(r"- ", "-", _flat(_render(path)))
        for sub in subs.values():
            first = _flat(sub.help.split("\n\n")[0])
            assert first in flat or re.sub(r"- ", "-", first) in flat, (path, sub.name, first)
        assert "..." not in flat.split("Commands:", 1)[1], path  # click's cut at 45 characters
