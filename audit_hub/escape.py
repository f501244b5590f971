"""Escaping of input-derived strings for where they land: Markdown/HTML card text, table cells, YAML,
the console, and one-line error messages. The one owner of escaping: every card (audit, blind, tst, prune,
curate, the work_dir index) uses :func:`md_inline` for text and table cells, :func:`md_code` for code
spans and :func:`plain_text` (through :func:`audit_hub.hub.card.yaml_text`) for YAML header values.

Model names, judge names, benchmark names, categories, question IDs and texts come from third-party
files. None of them may become HTML, a link, an image, a table break, a YAML key, rich markup or a
terminal control sequence. Every writer calls these helpers rather than formatting such strings itself.
"""

from __future__ import annotations

import re
from typing import Any

from .scrub import scrub

_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
# Markdown punctuation that makes markup anywhere in a line: code, emphasis, links/images (no '[' or ']'
# survives, so '(' and '!' cannot form one), table cells, strikethrough; and what does so at the start.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_MD_LEAD = re.compile(r"^([#+=>-])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# what GitHub-flavoured Markdown links without any markup (its autolink extension)
_AUTOLINK_SCHEME = re.compile(r"://")
_AUTOLINK_WWW = re.compile(r"(?i)\b(www)\.")
_AUTOLINK_AT = re.compile(r"@(?=\w)")


def plain_text(s: Any, limit: int | None = 200) -> str:
    """One line of text: credentials scrubbed, control/bidi characters and newlines removed, truncated."""
    t = scrub("" if s is None else str(s))
    t = _CTRL.sub(" ", t)
    t = " ".join(t.split())
    if limit is not None and len(t) > limit:
        t = t[: limit - 1].rstrip() + "…"
    return t


def md_inline(s: Any, limit: int | None = 120) -> str:
    """Input-derived text placed in a Markdown/HTML body or a table cell: renders as the literal text.

    HTML special characters become entities, Markdown punctuation is backslash-escaped (no links,
    images, emphasis, headings or table breaks), newlines collapse to spaces. GitHub-flavoured Markdown also
    links bare addresses (``http://``, ``www.``, ``name@host``): the colon of ``://`` and the dot after ``www``
    are escaped, and a zero-width space follows an ``@`` before a word (an entity, so the text reads the same).
    """
    t = _MD_LEAD.sub(r"\\\1", _MD_SPECIAL.sub(r"\\\1", plain_text(s, limit)))
    t = _AUTOLINK_WWW.sub(r"\1\\.", _AUTOLINK_SCHEME.sub(r"\\://", t))
    t = "".join(_HTML.get(ch, ch) for ch in t)
    return _AUTOLINK_AT.sub("@&#8203;", t)


def md_code(s: Any, limit: int | None = 120, *, cell: bool = False) -> str:
    """Input-derived text shown as a Markdown code span (an ID, a file name, a model name): literal text.

    Inside a code span nothing is markup (no HTML, links or emphasis) and backslashes do not escape, so
    the span is fenced with one backtick more than the longest run of backticks in the text (padded with
    a space where the text starts or ends with one): no backtick in the text can close it. ``cell``: the
    span sits in a table cell, where a pipe ends the cell even inside a code span, so it is escaped."""
    t = plain_text(s, limit)
    if cell:
        t = t.replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", t)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if t.startswith("`") or t.endswith("`") or not t.strip() else ""
    return f"{fence}{pad}{t}{pad}{fence}"


def safe_link(url: Any) -> str | None:
    """``url`` when it is an https Hugging Face address made of safe characters, else None (shown as text)."""
    u = str(url or "")
    if re.fullmatch(r"https://huggingface\.co/(datasets/)?[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*"
                    r"(/[A-Za-z0-9._/-]*)?", u):
        return u
    return None


def console_text(s: Any) -> str:
    """Text for the rich console: markup escaped, control characters removed, credentials scrubbed."""
    from rich.markup import escape

    t = scrub("" if s is None else str(s))
    t = _CTRL.sub(lambda m: ascii(m.group(0))[1:-1], t)
    return escape(t)


def console_line(s: Any) -> str:
    """:func:`console_text` of a one-line message (a note or warning that names models, files or categories): a
    newline or tab inside it is shown escaped (``\\n``), so an input-derived name cannot print a line of its own
    ("report: all clean")."""
    t = "" if s is None else str(s)
    return console_text(re.sub(r"[\n\t]", lambda m: ascii(m.group(0))[1:-1], t))


def show_id(s: Any) -> str:
    """An identifier quoted for a message: ``repr`` when plain printable ASCII, else ``ascii()`` so that
    look-alike (Cyrillic 'а' vs Latin 'a'), invisible and control characters are visible."""
    t = str(s)
    if t.isascii() and t.isprintable():
        return repr(t)
    return ascii(t)


_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_NP_REPR = re.compile(r"\bnp\.(?:float|int|uint|bool|str|complex)[a-z_0-9]*\(([^()]*)\)")


def one_line(msg: Any, limit: int = 2000) -> str:
    """A user-facing message as exactly one safe line.

    Credentials scrubbed; numpy reprs (``np.float64(inf)``) shown as plain values; quoted identifiers
    holding non-ASCII or control characters shown ``ascii()``-escaped; remaining control characters
    escaped; newlines joined with ' | '; truncated to ``limit`` characters.
    """
    t = scrub("" if msg is None else str(msg))
    t = _NP_REPR.sub(lambda m: m.group(1).strip("'\""), t)

    def esc(m: re.Match) -> str:
        q = m.group(0)
        inner = q[1:-1]
        if inner.isascii() and not _CTRL.search(inner):
            return q
        return q[0] + ascii(inner)[1:-1] + q[0]

    t = _QUOTED.sub(esc, t)
    parts = [p.strip() for p in t.replace("\r", "\n").split("\n") if p.strip()]
    t = " | ".join(parts)
    t = _CTRL.sub(lambda m: ascii(m.group(0))[1:-1], t)
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    return t


__all__ = ["plain_text", "md_inline", "md_code", "safe_link", "console_text", "show_id", "one_line"]
