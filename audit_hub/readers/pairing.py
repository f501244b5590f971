"""Pairing the text-only arms (``blind``, ``base``) with the full-arm models, by name.

One pure function, :func:`pair_arms`, decides which run of another arm belongs to which full-arm model;
the caller renames the runs (:func:`rename_models`) before the frame is built, so every later stage
pairs by identical names. Called once per benchmark (a work_dir with several benchmarks calls it for
each).

A run of another arm pairs with a full-arm model when, in this order (the first rule that gives a
unique match wins):

1. its model name (``benchaudit blind --model-name``, the harness's model name) equals the full-arm name;
2. the names are equal ignoring case;
3. its model id (``benchaudit blind --model``, from the folder's ``run_config.json``), or the last path
   component of its name or id (``Qwen/Qwen2-VL-7B-Instruct`` -> ``Qwen2-VL-7B-Instruct``), equals a
   full-arm name ignoring case.

A run that matches no full-arm model, or matches a model another run already took, is not paired and
is listed by name in ``unmatched`` (with the reason); nothing is pooled silently.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd


def _tail(name: str) -> str:
    return str(name).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].casefold()


def pair_arms(full_models: Sequence[str], others: Mapping[str, Sequence[str]],
              model_ids: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> dict[str, Any]:
    """Which run of each other arm pairs with which full-arm model.

    ``others``: ``{arm: [model names in that arm]}``; ``model_ids``: ``{arm: {name: [model ids]}}`` (from
    ``run_config.json``). Returns ``{arm: {"renames": {name: full name}, "how": {full name: rule},
    "paired": [full names], "unmatched": [{"model", "reason"}], "without": [full names with no run in
    this arm]}}``."""
    full = [str(m) for m in full_models]
    exact = {m: m for m in full}
    folded: dict[str, list[str]] = {}
    tails: dict[str, list[str]] = {}
    for m in full:
        folded.setdefault(m.casefold(), []).append(m)
        tails.setdefault(_tail(m), []).append(m)
    out: dict[str, Any] = {}
    for arm, names in others.items():
        names = [str(n) for n in names]
        ids = (model_ids or {}).get(arm, {})
        taken: dict[str, str] = {}
        renames: dict[str, str] = {}
        how: dict[str, str] = {}
        unmatched: list[dict] = []
        pending = []
        for n in names:  # exact names first, so a fuzzy match never takes a model an exact one claims
            if n in exact:
                taken[n] = n
                renames[n] = n
                how[n] = "model name"
            else:
                pending.append(n)
        for n in pending:
            cands = folded.get(n.casefold(), [])
            rule = "model name (ignoring case)"
            if len(cands) != 1:
                keys = {_tail(n), *(_tail(i) for i in ids.get(n, ()) if i)}
                cands = sorted({m for k in keys for m in tails.get(k, [])})
                rule = "model id"
            if len(cands) == 1 and cands[0] not in taken:
                taken[cands[0]] = n
                renames[n] = cands[0]
                how[cands[0]] = rule
            elif len(cands) == 1:
                unmatched.append({"model": n, "reason": f"{cands[0]!r} is already paired with {taken[cands[0]]!r}"})
            elif cands:
                unmatched.append({"model": n, "reason": f"matches several full-arm models: {cands}"})
            else:
                unmatched.append({"model": n, "reason": "no full-arm model of this name or model id"})
        paired = [m for m in full if m in taken]
        out[arm] = {"renames": {k: v for k, v in renames.items() if k != v}, "how": how, "paired": paired,
                    "unmatched": unmatched, "without": [m for m in full if m not in taken]}
    return out


def rename_models(df: pd.DataFrame, renames: Mapping[str, str]) -> pd.DataFrame:
    """``df`` with its ``model`` column renamed by ``renames`` (categorical or plain)."""
    if not renames or df is None or "model" not in df.columns:
        return df
    col = df["model"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = [renames.get(str(c), str(c)) for c in col.cat.categories]
        if len(set(cats)) == len(cats):
            df["model"] = col.cat.rename_categories(cats)
            return df
        col = col.astype(str)
    df["model"] = col.astype(object).map(lambda v: renames.get(str(v), v))
    return df


def blind_runs_of(paths: Sequence[str]) -> dict[str, dict]:
    """``{model name: record}`` of the ``benchaudit blind`` output folders among ``paths`` (a run file inside
    such a folder, or the folder itself), from each folder's ``run_config.json`` and ``manifest.json``: ``ids``
    (its ``--model`` ids), ``n_questions`` and ``n_truncated`` (rows whose prompt was cut to the model's context,
    ``--truncate left``) summed over the folders of that name, ``max_length`` (the context it was cut to), and
    ``unfinished`` / ``n_planned``: the folders of that name with no ``manifest.json`` (a run stopped before it
    finished: ``benchaudit blind`` writes the manifest last) and the questions they were started on (their
    ``run_config.json``'s ``question_rows``). Unreadable or foreign files are ignored (a folder that is not a blind
    output has no record)."""
    from .fileio import sidecar_json

    out: dict[str, dict] = {}
    seen: set[str] = set()
    for p in paths:
        p = os.path.abspath(str(p))
        for folder in (p, os.path.dirname(p), os.path.dirname(os.path.dirname(p))):
            cfg = os.path.join(folder, "run_config.json")
            if cfg in seen or not os.path.lexists(cfg):
                continue
            seen.add(cfg)
            config = sidecar_json(cfg) or {}
            fp = config.get("fingerprint") if isinstance(config.get("fingerprint"), dict) else {}
            manifest = os.path.join(folder, "manifest.json")
            params = _json_field(manifest, "params")
            name, model = fp.get("model_name"), fp.get("model")
            mid = model.get("model") if isinstance(model, dict) else model
            if isinstance(name, str) and isinstance(mid, str):
                rec = out.setdefault(name, {"ids": [], "n_questions": 0, "n_truncated": 0, "max_length": None,
                                            "unfinished": 0, "n_planned": 0})
                rec["ids"].append(mid)
                rec["n_questions"] += _count(params.get("n_questions"))
                rec["n_truncated"] += _count(params.get("n_truncated"))
                if _count(fp.get("max_length")):
                    rec["max_length"] = _count(fp.get("max_length"))
                if not os.path.lexists(manifest):  # written last: a run stopped before the end has none
                    planned = config.get("question_rows")
                    rec["unfinished"] += 1
                    rec["n_planned"] += len(planned) if isinstance(planned, dict) else 0
            break
    return out


def _json_field(path: str, key: str) -> dict:
    """The object under ``key`` of a sidecar JSON file (:func:`~audit_hub.readers.fileio.sidecar_json`), or ``{}``."""
    from .fileio import sidecar_json

    v = (sidecar_json(path) or {}).get(key)
    return v if isinstance(v, dict) else {}


def _count(v) -> int:
    """A non-negative integer count from a JSON value, else 0 (a bool or a float is not a count)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def truncated_blind_runs(records: Mapping[str, dict], renames: Mapping[str, str]) -> dict[str, dict]:
    """``{full-arm model name: {"n_truncated", "n_questions", "max_length"}}`` for the blind runs (records of
    :func:`blind_runs_of`, renamed as paired) that answered at least one truncated prompt."""
    return {renames.get(n, n): {k: r[k] for k in ("n_truncated", "n_questions", "max_length")}
            for n, r in records.items() if r["n_truncated"] > 0}


def unfinished_blind_runs(records: Mapping[str, dict], renames: Mapping[str, str]) -> dict[str, dict]:
    """``{full-arm model name: {"folders", "n_planned"}}`` for the text-only runs (records of :func:`blind_runs_of`,
    renamed as paired) read from a ``benchaudit blind`` output that was stopped before it finished."""
    return {renames.get(n, n): {"folders": r["unfinished"], "n_planned": r["n_planned"]}
            for n, r in records.items() if r.get("unfinished")}


def unfinished_note(pairing: Mapping | None) -> str | None:
    """One sentence naming the text-only runs read from a stopped ``benchaudit blind`` output (the pairing record's
    ``unfinished``, :func:`unfinished_blind_runs`), and what to do; None when every one had finished."""
    rows = [f"{m} ({arm} arm, started on {r['n_planned']:,} questions)" if r.get("n_planned") else f"{m} ({arm} arm)"
            for arm, rec in (pairing or {}).items() if isinstance(rec, dict)
            for m, r in (rec.get("unfinished") or {}).items()]
    if not rows:
        return None
    return ("text-only runs read from a `benchaudit blind` output that was stopped before it finished (no "
            "manifest.json): " + ", ".join(rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
            + "; only the questions it answered are compared. Run the same `benchaudit blind` command again to "
            "finish it (it resumes)")


def truncated_by_arm(pairing: Mapping | None) -> dict[str, dict]:
    """``{arm: {model: record}}`` of the text-only runs that answered cut prompts, from a :func:`pair_arms`
    record as the reader completes it (``pairing[arm]["truncated"]``, :func:`truncated_blind_runs`)."""
    return {arm: rec["truncated"] for arm, rec in (pairing or {}).items() if isinstance(rec, dict) and rec.get("truncated")}


def truncation_note(truncated: dict) -> str | None:
    """One sentence naming the text-only runs that answered prompts cut to their model's context
    (``benchaudit blind --truncate left``; ``truncated``: ``{arm: {model: {"n_truncated", "n_questions",
    "max_length"}}}``), and what that does to the image gain; None when no prompt was cut."""
    if not truncated:
        return None
    parts = []
    for arm, models in truncated.items():
        rows = [f"{m} {r['n_truncated']:,} of {r['n_questions']:,}" + (f" (context {r['max_length']:,} tokens)"
                                                                       if r.get("max_length") else "")
                for m, r in models.items()]
        parts.append(f"{arm} arm: " + ", ".join(rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else ""))
    return ("text-only prompts were cut to the model's context (`benchaudit blind --truncate left`, the start of the "
            "prompt dropped): " + "; ".join(parts) + ". Those answers saw only the end of the question, so an image "
            "gain on those items may come from the text that was cut, not from the image (per row: the blind "
            "folder's `truncated` column)")
