"""Run files whose model name says they are not an image-enabled model: a text-only run or a baseline.

Benchmark repositories keep such runs beside the models' own: MATH-Vision's ``outputs/`` folder holds
``GPT4-CoT (Text Only)`` and ``Random-Chance`` next to Gemini-Pro and the LLaVAs, and MathVista's results
hold "Random chance" and "Frequent guess". Read as given with ``--runs``, a text-only run counts as an
image-enabled model that fails with the image, and a baseline counts as a model of the pool (it sets the
consensus, the rankings that ``curate`` keeps, the agreement statistics). So, by default, a ``--runs``
file of one model whose name says

* it ran without the image (``text only``, ``text-only``, ``blind``, ``no image``, ``w/o image``,
  ``without image``, ``language only``) is read as a **blind-arm** run (paired by name like any blind run;
  with no image-enabled run of the same name the comparison is at pool level, as the card says);
* it is a **baseline**, not a model (the whole name is ``random``, ``chance``, ``random chance``,
  ``random guess``, ``frequent guess``, ``most frequent``, ``majority`` and the like, or a name ending in
  ``random baseline``/``random guessing``), is left out, listed with the files skipped.

What was moved or left out is recorded (``frame.meta['named_roles']``), printed as a note and written on
the card. ``--runs-as-given`` (``as_given=True``) reads every ``--runs`` file as an image-enabled run.
Files that hold several models, or that name each row's arm themselves (an ``arm`` column), are always
taken as they say: the rule only replaces the arm that the ``--runs`` option implied for one model.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pandas as pd

from .cells import is_arrow_dictionary

TEXT_ONLY = "text-only"
BASELINE = "baseline"

_SEP = r"[\s_\-/.]*"
_B, _E = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"  # word edges where "_" separates words too
_TEXT_ONLY = re.compile(
    rf"{_B}(text{_SEP}only|blind|language{_SEP}only|no{_SEP}images?|w{_SEP}o{_SEP}images?|without{_SEP}images?){_E}",
    re.IGNORECASE)
_BASELINE = re.compile(
    rf"^[\s(\[]*((uniform{_SEP})?random|chance|frequent|most{_SEP}frequent|majority)"
    rf"({_SEP}(chance|guess(ing)?|baseline|choice|answer|option|class|vote))?"
    r"(\s*[(\[][^()\[\]]*[)\]])?[\s)\]]*$"  # a qualifier in brackets: "Random (text only)"
    rf"|{_B}random{_SEP}(baseline|guess(ing)?)\s*[)\]]?\s*$",
    re.IGNORECASE)


def named_role(model: str) -> str | None:
    """:data:`TEXT_ONLY`, :data:`BASELINE` or None: what the model's name says the run is (baseline first:
    "Random (text only)" is a baseline)."""
    name = str(model).strip()
    if _BASELINE.search(name):
        return BASELINE
    if _TEXT_ONLY.search(name):
        return TEXT_ONLY
    return None


def _single_model(r) -> str | None:
    """The one model a read file holds, or None (several models, none, or a plain-string column too long to
    check cheaply: harness readers give one model a one-category column)."""
    runs = getattr(r, "runs", None)
    if runs is None or "model" not in runs.columns or len(runs) == 0:
        return None
    col = runs["model"]
    small = len(col) <= 1_000_000
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = col.cat.categories
        if len(cats) != 1 and small:
            cats = col.cat.remove_unused_categories().cat.categories
        return str(cats[0]) if len(cats) == 1 else None
    if is_arrow_dictionary(col):
        names: set[str] = set()
        for chunk in col.array._pa_array.chunks:  # noqa: SLF001 (the dictionary pages, not the rows)
            if len(chunk.dictionary) > 1:
                return None
            names.update(str(d) for d in chunk.dictionary.to_pylist())
        return names.pop() if len(names) == 1 else None
    if not small:
        return None
    first = col.iloc[0]
    return str(first) if (col == first).all() else None


def apply_named_roles(full_res: list, blind_res: list, *, as_given: bool = False) -> tuple[list, list, list[dict]]:
    """The ``--runs`` results with text-only runs moved to the blind arm and baselines taken out:
    ``(full, blind, left out)``; each left-out record is ``{"path", "reason", "model", "named_role", "benchmark"}`` (the
    files-skipped format), each moved result gets ``info["named_role"]``."""
    if as_given:
        return full_res, blind_res, []
    from .cells import constant_categorical

    full, blind, left = [], list(blind_res), []
    for r in full_res:
        model = _single_model(r) if not r.info.get("arm_from_file") else None
        # a reader that knows the run is text-only (MathVista's ChatGPT, Claude and GPT-4 runs) says so in info
        role = (TEXT_ONLY if r.info.get("text_only_run") else named_role(model)) if model is not None else None
        if role == BASELINE:
            left.append({"path": os.path.abspath(r.path), "model": model, "named_role": BASELINE,
                         "benchmark": r.benchmark,
                         "reason": f"model {model!r} is named as a baseline, not a model: left out of the pool "
                                   "(--runs-as-given keeps it)"})
        elif role == TEXT_ONLY:
            r.runs["arm"] = constant_categorical("blind", len(r.runs))
            r.info["named_role"] = TEXT_ONLY
            blind.append(r)
        else:
            full.append(r)
    return full, blind, left


def named_roles_record(blind_res: list, skipped: list[dict]) -> dict[str, Any]:
    """``frame.meta['named_roles']``: the models read as blind-arm runs and the baselines left out, by name
    (each once: a harness can write several files of one model)."""
    moved = list(dict.fromkeys(str(_single_model(r)) for r in blind_res if r.info.get("named_role") == TEXT_ONLY))
    left = list(dict.fromkeys(s["model"] for s in skipped if s.get("named_role") == BASELINE))
    known = {str(_single_model(r)): str(r.info["text_only_run"]) for r in blind_res
             if r.info.get("named_role") == TEXT_ONLY and r.info.get("text_only_run")}
    out = {"text_only_as_blind": moved, "baselines_left_out": left} if moved or left else {}
    if known:
        out["known_text_only"] = known
    return out


def named_roles_note(record: dict | None) -> str | None:
    """One sentence for the CLI note and the card, or None when nothing was moved or left out."""
    if not record:
        return None
    parts = []
    known = set(record.get("known_text_only") or [])
    named = [m for m in record.get("text_only_as_blind") or [] if m not in known]
    if named:
        parts.append("named as text-only runs, read as blind-arm runs: " + ", ".join(named))
    if known:
        why = "; ".join(dict.fromkeys(record["known_text_only"].values()))
        parts.append(f"known as text-only runs ({why}), read as blind-arm runs: " + ", ".join(record["known_text_only"]))
    if record.get("baselines_left_out"):
        parts.append("named as baselines, left out of the pool: " + ", ".join(record["baselines_left_out"]))
    return "run files given with --runs: " + "; ".join(parts) + " (--runs-as-given reads them as image-enabled runs)"
