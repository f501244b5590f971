"""lmms-eval ``--log_samples`` files: ``samples_<task>_<date>.jsonl`` (older) or
``<date>_samples_<task>.jsonl`` (newer, inside ``<output_path>/<model>/``).

Each line: ``doc_id`` (position in the task's split), ``doc`` (the dataset row without images),
``target``, ``arguments``, ``resps`` (raw responses, ``[[text]]``), ``filtered_resps``
(``[text]`` after the task's filters), then one field per metric (a number, or a dict such as
``{"question_id": .., "category": .., "score": ..}``).

Mapping:

* question ID: the first of ``question_id, id, index, qid`` inside ``doc`` whose values are unique in
  the file, else ``doc_id`` (MME's ``question_id`` is an image name shared by two questions, so it
  falls back to ``doc_id``);
* prediction: the raw response (``resps[0][0]``); ``answer`` is left empty so the audit frame
  extracts it with the same parser for every harness;
* hit: the first per-metric field (or ``metric=`` given) whose values are all 0/1/true/false
  (inside a dict: its ``hit``/``score``/``correct``/``acc``/``accuracy``/``exact_match`` key);
  metrics with other values (ANLS, CIDEr, ...) give no ``hit``. The judge name recorded is
  ``lmms-eval:<metric>``;
* model: the ``model`` argument, else ``model_name``/``pretrained=`` from a ``*results*.json`` next to
  the file, else the parent folder name;
* questions: ``doc`` fields (``question``, ``options``/``A``..``Z``/embedded options, ``category``,
  ``L2-category``, ``hint``) with ``target`` as the gold.
"""

from __future__ import annotations

import glob
import json
import os
import re

import numpy as np
import pandas as pd

from ..columns import ARROW_STR
from ..schema import LETTERS, is_null
from .cells import ReadResult, cell_to_str, constant_categorical, stem_of
from .fileio import iter_json_lines
from .generic import normalise_questions

STANDARD_KEYS = frozenset({
    "doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash", "prompt_hash", "target_hash",
    "filter", "metrics", "task", "split", "input_text", "image_paths", "token_counts", "success",
})
DICT_SCORE_KEYS = ("hit", "score", "correct", "acc", "accuracy", "exact_match", "match")
_DATE = re.compile(r"_?\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(\.\d+)?_?")


def is_lmms_eval_record(rec: dict) -> bool:
    return "doc_id" in rec and ("resps" in rec or "filtered_resps" in rec) and "doc" in rec


def task_name(path: str) -> str:
    stem = stem_of(path)
    stem = _DATE.sub("_", stem).strip("_")
    if stem.startswith("samples_"):
        stem = stem[len("samples_"):]
    return stem.strip("_") or stem_of(path)


def model_name_for(path: str) -> str:
    """Model name from a sibling ``*results*.json`` (``model_name`` / ``pretrained=``), else the folder."""
    folder = os.path.dirname(os.path.abspath(path))
    for cand in sorted(glob.glob(os.path.join(folder, "*results*.json"))):
        try:
            if os.path.getsize(cand) > 50_000_000:
                continue
            with open(cand, encoding="utf-8") as fh:
                obj = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict):
            name = obj.get("model_name")
            if isinstance(name, str) and name.strip():
                return name.strip()
            cfg = obj.get("config") or {}
            args = cfg.get("model_args") if isinstance(cfg, dict) else None
            if isinstance(args, str):
                m = re.search(r"pretrained=([^,]+)", args)
                if m:
                    return m.group(1).strip()
    return os.path.basename(folder) or stem_of(path)


def _first_text(v):
    """``[[text]]`` / ``[text]`` / ``text`` -> text (None when absent)."""
    while isinstance(v, (list, tuple)):
        if not v:
            return None
        v = v[0]
    return cell_to_str(v)


def _metric_value(v):
    if isinstance(v, dict):
        for k in DICT_SCORE_KEYS:
            if k in v:
                return v[k]
        return None
    return v


def _binary(values: list) -> bool:
    seen = False
    for v in values:
        if v is None or is_null(v):
            continue
        if isinstance(v, (bool, np.bool_)):
            seen = True
            continue
        if isinstance(v, (int, float, np.integer, np.floating)) and float(v) in (0.0, 1.0):
            seen = True
            continue
        return False
    return seen


def read_samples(path: str, *, arm: str = "full", model: str | None = None, metric: str | None = None) -> ReadResult:
    """One lmms-eval samples file -> runs (and the questions carried in ``doc``)."""
    from ..errors import InputError

    recs: list[dict] = []
    lines: list[int] = []
    for lineno, rec in iter_json_lines(path):
        if not is_lmms_eval_record(rec):
            missing = [k for k in ("doc_id", "doc", "resps") if k not in rec]
            raise InputError(f"line {lineno} is not an lmms-eval sample (missing {missing})", file=path, row=lineno,
                             column=missing[0] if missing else None)
        recs.append(rec)
        lines.append(lineno)
    if not recs:
        raise InputError("the file has no samples", file=path)
    n = len(recs)
    docs = [r.get("doc") if isinstance(r.get("doc"), dict) else {} for r in recs]
    # question ID
    qid = None
    for key in ("question_id", "id", "index", "qid"):
        vals = [cell_to_str(d.get(key)) for d in docs]
        if all(v is not None for v in vals) and len(set(vals)) == n:
            qid = vals
            break
    if qid is None:
        qid = [cell_to_str(r["doc_id"]) for r in recs]
    # hit from a per-metric field
    metric_keys = [k for k in recs[0] if k not in STANDARD_KEYS]
    chosen = None
    hits = None
    order = [metric] if metric else metric_keys
    for k in order:
        if metric and k not in recs[0]:
            raise InputError(f"metric {k!r} not in the samples; fields: {metric_keys}", file=path, column=k)
        vals = [_metric_value(r.get(k)) for r in recs]
        if _binary(vals):
            chosen = k
            hits = [None if v is None or is_null(v) else float(v) for v in vals]
            break
    model_name = model or model_name_for(path)
    runs = pd.DataFrame({
        "question_id": qid,
        "model": constant_categorical(model_name, n),
        "arm": constant_categorical(arm, n),
        "prediction": pd.array([_first_text(r.get("resps")) for r in recs], dtype=ARROW_STR),
        "answer": pd.array([None] * n, dtype=ARROW_STR),
    })
    if hits is not None:
        runs["hit"] = pd.array([None if h is None else int(h) for h in hits], dtype="Int8")
    runs["source_file"] = constant_categorical(path, n)
    runs["source_row"] = np.asarray(lines, dtype=np.int64)
    # questions from doc + target
    qrows = []
    for r, d, q in zip(recs, docs, qid):
        row = {k: v for k, v in d.items() if not isinstance(v, (bytes, bytearray))}
        for k in ("question_id", "id", "index", "qid", "doc_id"):
            row.pop(k, None)
        row["question_id"] = q
        tgt = r.get("target")
        gold = tgt[0] if isinstance(tgt, list) and tgt else tgt
        if is_null(gold) if not isinstance(gold, (list, dict)) else True:
            gold = d.get("answer")
        opts = row.get("options")
        if isinstance(gold, (int, np.integer)) and not isinstance(gold, bool) and isinstance(opts, list) \
                and 0 <= int(gold) < len(opts) and "answer" not in d:
            gold = LETTERS[int(gold)]
        row["answer"] = cell_to_str(gold)
        if isinstance(row.get("hint"), str) and row["hint"].strip().lower() in ("nan", "none", ""):
            row["hint"] = None  # lmms-eval writes pandas' NaN hints as the string "nan"
        if "question" not in row:
            for alt in ("prompt", "query", "text", "input"):
                if isinstance(d.get(alt), str):
                    row["question"] = d[alt]
                    break
        qrows.append(row)
    qdf = pd.DataFrame.from_records(qrows)
    qdf["source_row"] = np.asarray(lines, dtype=np.int64)
    questions = None
    if qdf["answer"].notna().any():
        questions = normalise_questions(qdf, path)
    judges = {model_name: f"lmms-eval:{chosen}"} if chosen else {}
    return ReadResult(path=path, kind="lmms-eval-samples", runs=runs, questions=questions, judges=judges, rows=n,
                      info={"model": model_name, "task": task_name(path), "metric": chosen,
                            "metric_fields": metric_keys})
