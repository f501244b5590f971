"""lmms-eval ``--log_samples`` files: ``samples_<task>_<date>.jsonl`` (older) or
``<date>_samples_<task>.jsonl`` (newer, inside ``<output_path>/<model>/``).

Two record layouts (both written by lmms-eval's own logging code; fixtures in
``tests/fixtures/lmms_eval/real``):

* before 0.4 (e.g. 0.3.5): ``doc_id`` (position in the task's split), ``doc`` (the dataset row without
  images), ``target``, ``arguments``, ``resps`` (raw responses, ``[[text]]``), ``filtered_resps``
  (``[text]`` after the task's filters), then one field per metric;
* 0.4 and later (e.g. 0.7.3): no ``doc``, ``arguments`` (nor ``resps`` when equal to the filtered
  one); ``input`` (the prompt), ``filtered_resps`` (the answer text), ``target``, ``doc_hash``,
  ``token_counts``, then one field per metric.

A metric field is a number or a dict such as ``{"question_id": .., "score": ..}`` (POPE's
``pope_accuracy``, MMStar's ``<category>`` and ``average``) or MathVista's ``{"true_false": ..,
"question_type": .., "answer_type": .., "choices": ..}`` (``gpt_eval_score`` / ``llm_as_judge_eval``).

Mapping:

* question ID: the first of ``question_id, id, index, qid`` inside ``doc`` (or, without ``doc``, in the
  metric dicts) whose values are unique in the file, else ``doc_id`` (MME's ``question_id`` is an
  image name shared by two questions, so it falls back to ``doc_id``);
* prediction: the raw response (``resps``), else the filtered one (``filtered_resps``); ``answer`` is
  left empty so the audit frame extracts it with the same parser for every harness;
* hit: the first per-metric field present in every record (or ``metric=`` given) whose values are all
  0/1/true/false (inside a dict: its ``hit``/``score``/``correct``/``acc``/``accuracy``/
  ``exact_match``/``true_false`` key); a per-category field (MMStar writes ``<category>`` in some
  records and ``average`` in all) is passed over for the one every record has. Metrics with other
  values (ANLS, CIDEr, ...) give no ``hit``. The judge name recorded is ``lmms-eval:<metric>``;
* answer types: lmms-eval's ``question_type``/``answer_type`` (MathVista: ``multi_choice`` with
  ``choices`` -> ``mc``, gold letter from the gold text; ``integer``/``float`` -> ``numeric``;
  ``text``/``list`` free-form -> ``free``), from ``doc`` or the metric dict;
* model: the ``model`` argument, else ``model_name``/``pretrained=`` from a ``*results*.json`` next to
  the file, else the parent folder name;
* questions: ``doc`` fields (``question``, ``options``/``A``..``Z``/embedded options, ``category``,
  ``L2-category``, ``hint``) with ``target`` as the gold; without ``doc``, the prompt (``input``,
  whose embedded options are parsed) and the metric dict's fields.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re

import numpy as np
import pandas as pd

from ..columns import arrow_strings
from ..schema import LETTERS, is_null
from .cells import ReadResult, cell_to_str, constant_categorical, stem_of
from .fileio import iter_json_lines
from .generic import normalise_questions

STANDARD_KEYS = frozenset({
    "doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash", "prompt_hash", "target_hash",
    "filter", "metrics", "task", "split", "input_text", "image_paths", "token_counts", "success", "input",
    "input_media",
})
DICT_SCORE_KEYS = ("hit", "score", "correct", "acc", "accuracy", "exact_match", "match", "true_false")
#: lmms-eval answer types -> the audit's (``multi_choice`` questions are ``mc`` whatever their answer type)
ANSWER_TYPE_MAP = {"integer": "numeric", "float": "numeric", "number": "numeric", "numeric": "numeric",
                   "text": "free", "list": "free", "free_form": "free", "multi_choice": "mc",
                   "multiple_choice": "mc", "yes_no": "yesno", "yesno": "yesno"}
_META_DICT_KEYS = ("question_type", "answer_type", "choices", "category", "l2_category", "precision", "unit")
#: the run date in sample file names: 2024-06-01T10-00-00.123456 (before 0.4), 20261201_144437 (0.4+)
_DATE = re.compile(r"_?(?:\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(\.\d+)?|\d{8}_\d{6})_?")


def is_lmms_eval_record(rec: dict) -> bool:
    """Either layout: ``doc_id`` with ``resps``/``filtered_resps``, and ``doc`` (before 0.4) or
    ``doc_hash``/``input``/``target`` (0.4 and later)."""
    return "doc_id" in rec and ("resps" in rec or "filtered_resps" in rec) and (
        "doc" in rec or "doc_hash" in rec or "input" in rec or "target" in rec)


def task_name(path: str) -> str:
    stem = stem_of(path)
    stem = _DATE.sub("_", stem).strip("_")
    if stem.startswith("samples_"):
        stem = stem[len("samples_"):]
    return stem.strip("_") or stem_of(path)


def _results_stamp(path: str) -> tuple:
    """The sibling ``*results*.json`` files of a samples file, with their sizes and modification times (the key of
    the per-folder cache)."""
    folder = os.path.dirname(os.path.abspath(path))
    stamp = []
    for cand in sorted(glob.glob(os.path.join(folder, "*results*.json"))):
        try:
            st = os.stat(cand)
        except OSError:
            continue
        stamp.append((cand, st.st_size, st.st_mtime_ns))
    return tuple(stamp)


def model_name_for(path: str) -> str:
    """Model name from a sibling ``*results*.json`` (``model_name`` / ``pretrained=``), else the folder. A run
    folder holds one samples file per task beside the same results files: each is read once per folder
    (cached on the files' names, sizes and modification times)."""
    folder = os.path.dirname(os.path.abspath(path))
    return _results_info(_results_stamp(path))["model"] or os.path.basename(folder) or stem_of(path)


def version_for(path: str) -> str:
    """lmms-eval's version from a sibling ``*results*.json`` (``lmms_eval_version``, written since 0.4; a git
    install without metadata writes ``unknown@unknown``), else a sentence saying it is not recorded."""
    v = _results_info(_results_stamp(path))["version"]
    return v if v else "not recorded in lmms-eval's output files"


@functools.lru_cache(maxsize=256)
def _results_info(stamp: tuple) -> dict:
    out = {"model": None, "version": None}
    for cand, size, _mtime in stamp:
        try:
            if size > 50_000_000:
                continue
            with open(cand, encoding="utf-8") as fh:
                obj = json.load(fh)
        except (OSError, ValueError):
            continue
        if not isinstance(obj, dict):
            continue
        v = obj.get("lmms_eval_version")
        if out["version"] is None and isinstance(v, str) and v.strip() and v.strip() != "unknown@unknown":
            out["version"] = v.strip()
        if out["model"] is None:
            name = obj.get("model_name")
            if isinstance(name, str) and name.strip():
                out["model"] = name.strip()
                continue
            cfg = obj.get("config") or {}
            args = cfg.get("model_args") if isinstance(cfg, dict) else None
            if isinstance(args, str):
                m = re.search(r"pretrained=([^,]+)", args)
                if m:
                    out["model"] = m.group(1).strip()
    return out


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
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v in (0, 1):  # (no float(): 10**400)
            seen = True
            continue
        if isinstance(v, (float, np.floating)) and float(v) in (0.0, 1.0):
            seen = True
            continue
        return False
    return seen


def _metric_dict_fields(rec: dict, metric_keys: list[str]) -> dict:
    """Item fields found inside the record's metric dicts (``question_id``, ``question_type``, ...)."""
    out: dict = {}
    for k in metric_keys:
        v = rec.get(k)
        if isinstance(v, dict):
            for key in ("question_id",) + _META_DICT_KEYS:
                if key in v and key not in out and v[key] is not None:
                    out[key] = v[key]
    return out


def _map_answer_type(row: dict, path: str, rec: dict) -> None:
    """lmms-eval's ``question_type``/``answer_type`` -> the audit's ``answer_type`` (and options / a gold
    letter for ``multi_choice``), in place."""
    from ..errors import InputError

    raw_qtype = row.pop("question_type", None)
    qtype = str(raw_qtype or "").strip().lower()
    if qtype and qtype not in ("multi_choice", "multiple_choice", "free_form") and is_null(row.get("category")):
        row["category"] = cell_to_str(raw_qtype)  # OCRBench's "Regular Text Recognition": a category, not a type
    atype = row.get("answer_type")
    atype = str(atype).strip().lower() if atype is not None and not is_null(atype) else ""
    choices = row.pop("choices", None)
    if qtype in ("multi_choice", "multiple_choice") and isinstance(choices, list) and len(choices) >= 2:
        opts = [cell_to_str(c) or "" for c in choices]
        row["options"] = opts
        gold = cell_to_str(row.get("answer"))
        if gold is not None and gold in opts:
            row["answer"] = LETTERS[opts.index(gold)]
        row["answer_type"] = "mc"
        return
    if atype:
        mapped = ANSWER_TYPE_MAP.get(atype)
        if mapped is None and atype not in ("mc", "numeric", "free"):
            raise InputError(f"unknown lmms-eval answer_type {atype!r}; known: {sorted(ANSWER_TYPE_MAP)}",
                             file=path, row=None, column="answer_type")
        row["answer_type"] = mapped or atype
        if row["answer_type"] == "mc" and not row.get("options"):
            row["answer_type"] = None  # let the frame infer it from the options it finds


def _question_row(r: dict, d: dict, q: str, m: dict, path: str) -> dict:
    """One question from a sample: its ``doc`` (or, for 0.4+ records without one, the metric dicts'
    fields ``m``), the gold from ``target`` (an option index becomes its letter), the prompt as the
    question when the doc has none, the answer type mapped."""
    row = {k: v for k, v in d.items() if not isinstance(v, (bytes, bytearray))}
    for k, v in m.items():
        row.setdefault(k, v)
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
        else:
            if isinstance(r.get("input"), str):
                row["question"] = r["input"]  # 0.4+: the prompt (embedded options are parsed from it)
    _map_answer_type(row, path, r)
    return row


def _one_of_each(recs: list[dict], partial: list[str]) -> tuple[str | None, list | None]:
    """A verdict split over several metric fields, each record carrying exactly one of them (MME: perception
    categories score ``mme_perception_score``, cognition ones ``mme_cognition_score``): (the fields joined by
    ``|``, the 0/1 values) when every value is binary, else (None, None)."""
    if len(partial) < 2 or any(sum(k in r for k in partial) != 1 for r in recs):
        return None, None
    vals = [_metric_value(next(r[k] for k in partial if k in r)) for r in recs]
    if not _binary(vals):
        return None, None
    return "|".join(partial), [None if v is None or is_null(v) else float(v) for v in vals]


def read_samples(path: str, *, arm: str = "full", model: str | None = None, metric: str | None = None) -> ReadResult:
    """One lmms-eval samples file -> runs (and the questions carried in ``doc``)."""
    from ..errors import InputError

    recs: list[dict] = []
    lines: list[int] = []
    for lineno, rec in iter_json_lines(path):
        if not is_lmms_eval_record(rec):
            missing = [k for k in ("doc_id", "filtered_resps", "target") if k not in rec]
            raise InputError(f"line {lineno} is not an lmms-eval sample (missing {missing})", file=path, row=lineno,
                             column=missing[0] if missing else None)
        recs.append(rec)
        lines.append(lineno)
    if not recs:
        raise InputError("the file has no samples", file=path)
    n = len(recs)
    docs = [r.get("doc") if isinstance(r.get("doc"), dict) else {} for r in recs]
    metric_keys = list(dict.fromkeys(k for r in recs for k in r if k not in STANDARD_KEYS))
    in_all = [k for k in metric_keys if all(k in r for r in recs)]
    # what the metric dicts say about each item (0.4+ records have no doc)
    meta = [_metric_dict_fields(r, metric_keys) for r in recs]
    # question ID
    qid = None
    for key in ("question_id", "id", "index", "qid"):
        vals = [cell_to_str(d.get(key, m.get(key))) for d, m in zip(docs, meta)]
        if all(v is not None for v in vals) and len(set(vals)) == n:
            qid = vals
            break
    if qid is None:
        qid = [cell_to_str(r["doc_id"]) for r in recs]
    # hit from a per-metric field present in every record
    chosen = None
    hits = None
    order = [metric] if metric else in_all
    for k in order:
        if metric and k not in recs[0]:
            raise InputError(f"metric {k!r} not in the samples; fields: {metric_keys}", file=path, column=k)
        vals = [_metric_value(r.get(k)) for r in recs]
        if _binary(vals):
            chosen = k
            hits = [None if v is None or is_null(v) else float(v) for v in vals]
            break
    if chosen is None and not metric:
        chosen, hits = _one_of_each(recs, [k for k in metric_keys if k not in in_all])
    model_name = model or model_name_for(path)
    runs = pd.DataFrame({
        "question_id": qid,
        "model": constant_categorical(model_name, n),
        "arm": constant_categorical(arm, n),
        "prediction": arrow_strings([_first_text(r["resps"]) if "resps" in r else _first_text(r.get("filtered_resps"))
                                     for r in recs]),
        "answer": arrow_strings([None] * n),
    })
    if hits is not None:
        runs["hit"] = pd.array([None if h is None else int(h) for h in hits], dtype="Int8")
    runs["source_file"] = constant_categorical(path, n)
    runs["source_row"] = np.asarray(lines, dtype=np.int64)
    # questions from doc + target
    qrows = [_question_row(r, d, q, m, path) for r, d, q, m in zip(recs, docs, qid, meta)]
    qdf = pd.DataFrame.from_records(qrows)
    qdf["source_row"] = np.asarray(lines, dtype=np.int64)
    questions = None
    if qdf["answer"].notna().any():
        questions = normalise_questions(qdf, path)
    judges = {model_name: f"lmms-eval:{chosen}"} if chosen else {}
    return ReadResult(path=path, kind="lmms-eval-samples", runs=runs, questions=questions, judges=judges, rows=n,
                      info={"model": model_name, "task": task_name(path), "metric": chosen,
                            "metric_fields": metric_keys, "harness": "lmms-eval",
                            "harness_version": version_for(path)}, benchmark=task_name(path))
