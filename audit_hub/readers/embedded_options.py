"""Options written into the question text -> (stem, options).

The forms, as VLMEvalKit's prompt builders and the popular benchmarks' question fields write them:

* a header line, the last one in the text wins: ``Options:`` / ``Option:`` (VLMEvalKit's
  ``build_prompt``, MMStar), ``Choices:`` (MathVista), ``Choices are:`` (SFE), ``Answer Choices:``,
  ``The choices are listed below:`` (MME-RealWorld), ``选项:`` / ``选项如下所示:`` (Chinese sets), with
  ``:`` or ``：``;
* item markers ``(A)``, ``（A）``, ``[A]``, ``A.``, ``A．``, ``A:``, ``A：``, ``A)``, ``A）``, ``A、``; items
  one per line (``A. x\\nB. y``), or on one line separated by ``,`` ``;`` ``，`` ``；`` (MMStar's
  ``Options: A: x, B: y``);
* no header: a block of lines that start with ``(A)``/``A.``/``A)`` markers at the end of the question
  (MMStar's bare ``(A) 54\\n(B) 52``), or bracketed items inline (``... (A) 5 (B) 6``).

Letters must run A, B, C, ... in order with one marker style, so a comma or a letter inside an option
text does not split it. Fewer than two items is no options. Text after the last item's line that is
not an item (an instruction such as "Answer with the option's letter") is not part of the option:
the last option ends at the end of its line.
"""

from __future__ import annotations

import re

from ..schema import LETTERS

_HEADER = re.compile(
    r"(?:^|(?<=[\s.?!:：。？]))(?:Answer\s+Choices|Choices(?:\s+are)?|Options?|The\s+choices\s+are\s+listed\s+below"
    r"|选项如下所示|选项)\s*[:：]",
    re.IGNORECASE)
#: marker styles: (name, regex for letter L, brackets?)
_STYLES = (
    ("paren", lambda L: r"\(\s*" + L + r"\s*\)", True),
    ("fullparen", lambda L: r"（\s*" + L + r"\s*）", True),
    ("square", lambda L: r"\[\s*" + L + r"\s*\]", True),
    ("dot", lambda L: L + r"\s?[.．](?!\d)", False),
    ("colon", lambda L: L + r"\s?[:：]", False),
    ("close", lambda L: L + r"\s?[)）]", False),
    ("comma", lambda L: L + r"\s?、", False),
)
_SEP = r"(?:\n|[,;，；]\s*)"


def _items(body: str, *, inline_brackets: bool) -> tuple[list[str], int, int] | None:
    """Parse items A, B, ... from the start of ``body`` -> (options, end of the options, start)."""
    lead = len(body) - len(body.lstrip())
    for _, rx, bracket in _STYLES:
        first = re.compile(r"\s*" + rx("A") + r"\s*").match(body)
        if not first:
            continue
        starts = [(lead, first.end())]
        pos = first.end()
        newline_sep = None
        for k in range(1, len(LETTERS)):
            boundary = _SEP + r"\s*" if not (bracket and inline_brackets) else r"(?:" + _SEP + r"|\s)\s*"
            m = re.compile(boundary + "(" + rx(LETTERS[k]) + r")\s*").search(body, pos)
            if not m:
                break
            gap = body[pos:m.start()]
            if k >= 1 and gap.strip() == "":
                break  # an empty option: not an item list
            sep_is_newline = "\n" in body[m.start():m.start(1)]
            if newline_sep is None:
                newline_sep = sep_is_newline
            starts.append((m.start(), m.end()))
            pos = m.end()
        if len(starts) < 2:
            continue
        opts = []
        for j, (_s0, e0) in enumerate(starts):
            end = starts[j + 1][0] if j + 1 < len(starts) else len(body)
            opts.append(body[e0:end])
        # the last option ends at its line (what follows is an instruction such as "Answer with the letter")
        last = opts[-1]
        tail_at = len(body)
        if "\n" in last.strip("\n"):
            cut = last.strip("\n").find("\n") + (len(last) - len(last.lstrip("\n")))
            tail_at = starts[-1][1] + cut
            opts[-1] = last[:cut]
        cleaned = [o.strip().rstrip(",;，；").strip() for o in opts]
        if any(o == "" for o in cleaned):
            continue
        return cleaned, tail_at, lead
    return None


def split_embedded_options(question: str) -> tuple[str, list[str]]:
    """Options written into the question text -> (stem, options); ``(question, [])`` when none."""
    if not isinstance(question, str) or not question:
        return question, []
    headers = list(_HEADER.finditer(question))
    for h in reversed(headers):
        body = question[h.end():]
        got = _items(body, inline_brackets=True)
        if got:
            opts, tail_at, _ = got
            stem = question[:h.start()].rstrip()
            tail = body[tail_at:].strip()
            return (stem + ("\n" + tail if tail else "")).strip(), opts
    # no header: a block of marked lines (or bracketed inline items) after the stem, the last one wins
    starts = [m.start(1) for m in re.finditer(r"(?:^|\n)[ \t]*((?:\(|（|\[)?\s*A\s*(?:\)|）|\]|[.．:：、]))", question)]
    starts += [m.start(1) for m in re.finditer(r"[ \t]((?:\(|（)\s*A\s*(?:\)|）))\s*\S", question)]
    for s in sorted(set(starts), reverse=True):
        if s == 0 and not question.lstrip().startswith(("(", "（", "[")):
            continue  # "A. ..." at the very start is the question, not an option list
        got = _items(question[s:], inline_brackets=True)
        if got and question[:s].strip():
            opts, tail_at, _ = got
            tail = question[s + tail_at:].strip()
            stem = question[:s].rstrip()
            return (stem + ("\n" + tail if tail else "")).strip(), opts
    return question, []


_OWN_LETTER = re.compile(r"^\s*[(（\[]?\s*([A-Z])\s*(?:[)）\]]|[.．:：、](?!\d))\s*(?=\S)")


def strip_own_letters(options: list[str]) -> list[str]:
    """Options that each start with their own letter marker (Video-MME's ``candidates``: "A. a cat runs.",
    "(B) ...") without it; any other list as it is (one option without its letter keeps them all)."""
    if len(options) < 2:
        return options
    out = []
    for i, o in enumerate(options):
        m = _OWN_LETTER.match(o) if isinstance(o, str) else None
        if m is None or i >= len(LETTERS) or m.group(1) != LETTERS[i]:
            return options
        out.append(o[m.end():])
    return out


__all__ = ["split_embedded_options", "strip_own_letters"]


_LETTER_GOLD = re.compile(r"^\(?\s*[A-Z]\s*\)?$")


def items_with_unparsed_options(questions) -> list[int]:
    """Rows whose gold is an option letter (``B``, ``(B)``) but that have no options: their options
    were neither in option columns nor in a form :func:`split_embedded_options` reads. Rows with an
    explicit non-``mc`` ``answer_type``, and rows without question text (a bare answer key: there is
    nothing to read options from), are not counted."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(questions)
    if n == 0:
        return []
    opts = questions["options"] if "options" in questions.columns else pd.Series([[]] * n)
    if isinstance(opts.dtype, pd.ArrowDtype):
        lengths = pc.fill_null(pc.list_value_length(pa.array(opts.array)), 0).to_numpy(zero_copy_only=False)
    else:
        lengths = np.fromiter((len(v) if isinstance(v, (list, tuple, np.ndarray)) else 0 for v in opts.tolist()),
                              dtype=np.int64, count=n)
    gold = questions["answer"].astype(object).tolist()
    text = questions["question"].astype(object).tolist() if "question" in questions.columns else [None] * n
    types = questions["answer_type"].astype(object).tolist() if "answer_type" in questions.columns else [None] * n
    out = []
    for i in np.flatnonzero(lengths == 0).tolist():
        g, t = gold[i], types[i]
        if not isinstance(text[i], str) or not text[i].strip():
            continue  # an answer key without question text: nothing to parse options from
        if not isinstance(g, str) or not _LETTER_GOLD.match(g.strip()):
            continue
        if isinstance(t, str) and t.strip() and t.strip().lower() != "mc":
            continue
        out.append(i)
    return out


__all__ += ["items_with_unparsed_options"]
