"""lm-evaluation-harness ``--log_samples`` files (0.4.x). Fixtures written by lm-eval's own code are in
``tests/fixtures/lm_eval/real`` (0.4.2 and 0.4.13).

Layouts:

* 0.4.3 and later: ``<output_path>/<model>/samples_<task>_<date>.jsonl`` (one JSON object a line) beside
  ``results_<date>.json``; each record has ``doc_id``, ``doc``, ``target``, ``arguments``
  (``{"gen_args_0": {"arg_0": context, "arg_1": continuation or generation kwargs, ...}}``), ``resps``,
  ``filtered_resps``, ``filter`` (the filter's name), ``metrics`` (the metric names) and one field per
  metric (``acc``, ``acc_norm``, ``exact_match``, ...);
* before 0.4.3 (e.g. 0.4.2): ``<output_path>/<model args, '=' as '__'>_<task>.jsonl`` -- the model
  arguments' commas stay in the name -- holding one JSON *array*, beside ``results.json``;
  ``arguments`` is a list of ``[context, continuation]``; there is no ``filter`` field: a task with
  several filters logs one block of records per filter, in the order of the task's ``filter_list``.

Mapping:

* one question per ``doc_id`` (its ID: ``doc``'s ``question_id``/``id``/``index``/``qid`` when unique,
  else ``doc_id``); a task logged once per filter is read at its headline filter -- the first in the
  task's ``filter_list`` (from the results file; else the first in the samples file) or the one named by
  ``metric="<metric>,<filter>"`` (lm-eval's own key); the other filters' accuracies are recorded in the
  manifest (``filters``), not audited;
* verdict: the headline metric's field (``metric=`` or the task's first metric whose values are all
  0/1: ``acc`` before ``acc_norm``), recorded as ``lm-eval:<metric>,<filter>``;
* multiple choice (log-likelihood requests, ``resps`` = ``[[loglikelihood, is_greedy]]`` per option):
  the options are the continuations (less the task's ``target_delimiter``), the gold is the target's
  option letter, and the prediction is the letter of the option lm-eval chose: the argmax of the
  logged log-likelihoods for ``acc``, of the log-likelihoods divided by the option's length in
  characters for ``acc_norm`` (lm-eval's rule);
* generate tasks: the prediction is the raw response (``resps``), the gold ``target``; ``doc``'s
  ``question`` (else the context) is the question; an MMMU-style ``options`` list (a Python-literal
  string, read as a literal only) gives the options;
* model: ``pretrained=`` in the results file's ``model_args`` (else its ``model_name``, else the
  folder); benchmark: the task name (from the results file's task names, else the file name); version:
  ``lm_eval_version`` in the results file (0.4.3+), else "0.4.0-0.4.2" for JSON-array samples.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
from typing import Any

import numpy as np

from ..errors import InputError
from ..escape import show_id
from ..schema import LETTERS
from .cells import ReadResult, cell_to_str, stem_of
from .fileio import iter_json_lines, json_head, load_json_document
from .sample_rows import Sample, binary_verdict, result_from_samples

KIND = "lm-eval-samples"
STANDARD = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                      "doc_hash", "prompt_hash", "target_hash", "task_name"})
_DATE = re.compile(r"_\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(\.\d+)?$")
MAX_RESULTS_BYTES = 50_000_000


def is_lm_eval_record(rec: dict) -> bool:
    """lm-eval's sample records: ``doc_id``, ``resps``/``filtered_resps`` and ``arguments`` as lm-eval
    writes it (a list of argument tuples before 0.4.3, ``{"gen_args_0": {"arg_0": ..}}`` after) --
    lmms-eval's records carry other ``arguments`` (six-item lists, an index dict, or none)."""
    if "doc_id" not in rec or not ("resps" in rec or "filtered_resps" in rec):
        return False
    args = rec.get("arguments")
    if isinstance(args, dict):
        return bool(args) and all(isinstance(k, str) and k.startswith("gen_args_") for k in args)
    # before 0.4.3: one (context, continuation) or (context, generation kwargs) pair per request;
    # lmms-eval's lists carry six items (context, kwargs, visual, doc_id, task, split)
    return isinstance(args, list) and bool(args) and all(isinstance(a, list) and len(a) == 2 for a in args)


def is_lm_eval_json_array(path: str) -> bool:
    """A 0.4.0-0.4.2 samples file: a JSON array whose first object starts with lm-eval's fields."""
    head = json_head(path)
    return head.startswith(b"[") and b'"doc_id"' in head[:200] and b'"arguments"' in head


def _results_for(path: str) -> dict | None:
    """The results file lm-eval wrote beside the samples: ``results_<same date>.json`` (0.4.3+), else the
    only ``results*.json`` there (``results.json`` before 0.4.3)."""
    folder = os.path.dirname(os.path.abspath(path))
    m = re.search(r"_(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)$", stem_of(path))
    cands = [os.path.join(folder, f"results_{m.group(1)}.json")] if m else []
    if not cands or not os.path.isfile(cands[0]):
        found = sorted(glob.glob(os.path.join(folder, "results*.json")))
        cands = found if len(found) == 1 else []
    for cand in cands:
        try:
            if os.path.getsize(cand) > MAX_RESULTS_BYTES:
                continue
            with open(cand, encoding="utf-8") as fh:
                obj = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("results"), dict):
            obj["_path"] = cand
            return obj
    return None


def _model_from(results: dict | None, path: str) -> str:
    if results:
        args = (results.get("config") or {}).get("model_args")
        if isinstance(args, dict) and isinstance(args.get("pretrained"), str):
            return args["pretrained"]
        if isinstance(args, str):
            m = re.search(r"pretrained=([^,]+)", args)
            if m:
                return m.group(1).strip()
        name = results.get("model_name")
        if isinstance(name, str) and name.strip():
            return name.strip()
    return os.path.basename(os.path.dirname(os.path.abspath(path))) or "model"


def _task_from(results: dict | None, path: str) -> str:
    stem = stem_of(path)
    known = sorted((results or {}).get("results", {}), key=len, reverse=True)
    if stem.startswith("samples_"):
        return _DATE.sub("", stem[len("samples_"):]) or stem
    for t in known:  # before 0.4.3: <model args>_<task>
        if stem.endswith("_" + t) or stem == t:
            return t
    return stem.rsplit("_", 1)[-1] if "__" in stem else stem


def _records(path: str) -> tuple[list[dict], list[int]]:
    if path.lower().endswith(".jsonl") and not is_lm_eval_json_array(path):
        recs, rows = [], []
        for lineno, rec in iter_json_lines(path):
            recs.append(rec)
            rows.append(lineno)
        return recs, rows
    obj = load_json_document(path)
    if not isinstance(obj, list):
        raise InputError("not an lm-eval samples file (expected a JSON array of samples)", file=path)
    for i, r in enumerate(obj, start=1):
        if not isinstance(r, dict):
            raise InputError(f"item {i} of the JSON array is not an object", file=path, row=i)
    return obj, list(range(1, len(obj) + 1))


def _num(key: str) -> int:
    tail = key.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _args(rec: dict) -> list[list]:
    """``arguments`` -> one list of arguments per request (both layouts)."""
    a = rec.get("arguments")
    if isinstance(a, dict):
        return [[v[k] for k in sorted(v, key=_num)] if isinstance(v, dict) else [v]
                for _, v in sorted(a.items(), key=lambda kv: _num(kv[0]))]
    return [x if isinstance(x, list) else [x] for x in (a or [])]


def _loglikelihoods(rec: dict) -> list[float] | None:
    """``[[ll, is_greedy]]`` per option (``resps``) -> the log-likelihoods; None for generate records."""
    resps = rec.get("resps")
    if not isinstance(resps, list) or not resps:
        return None
    out = []
    for r in resps:
        v = r[0] if isinstance(r, list) and len(r) == 1 and isinstance(r[0], list) else r
        if not (isinstance(v, list) and len(v) == 2 and str(v[1]) in ("True", "False")):
            return None
        ll = v[0]
        if isinstance(ll, str):  # 0.4.3+ logs the pair as text: ["-4.68", "True"]
            try:
                ll = float(ll)
            except ValueError:
                return None
        if not isinstance(ll, int | float) or isinstance(ll, bool) or ll != ll:
            return None
        out.append(float(ll))
    return out


def _first_text(v: Any) -> str | None:
    while isinstance(v, list):
        if not v:
            return None
        v = v[0]
    return cell_to_str(v)


def _options_literal(v: Any) -> list[str] | None:
    if isinstance(v, list):
        return [cell_to_str(x) or "" for x in v]
    if isinstance(v, str) and v.strip().startswith("[") and len(v) < 100_000:
        try:
            got = ast.literal_eval(v.strip())  # a literal only: nothing is evaluated
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        if isinstance(got, list) and all(isinstance(x, str | int | float) for x in got):
            return [cell_to_str(x) or "" for x in got]
    return None


def _blocks(recs: list[dict], rows: list[int], path: str, filters: list[str]) -> dict[str, list[int]]:
    """Record indexes per filter: by the ``filter`` field, else by block (the k-th record of a doc_id
    belongs to the task's k-th filter)."""
    out: dict[str, list[int]] = {}
    if all("filter" in r for r in recs):
        for i, r in enumerate(recs):
            out.setdefault(str(r["filter"]), []).append(i)
    else:
        seen: dict[Any, int] = {}
        for i, r in enumerate(recs):
            k = seen.get(cell_to_str(r.get("doc_id")), 0)
            seen[cell_to_str(r.get("doc_id"))] = k + 1
            name = filters[k] if k < len(filters) else ("none" if k == 0 else f"filter_{k + 1}")
            out.setdefault(name, []).append(i)
    for name, idx in out.items():
        ids = [cell_to_str(recs[i].get("doc_id")) for i in idx]
        if len(set(ids)) != len(ids):
            dup = next(x for x in ids if ids.count(x) > 1)
            i = next(i for i in idx if cell_to_str(recs[i].get("doc_id")) == dup)
            raise InputError(f"doc_id {show_id(dup)} appears twice for filter {show_id(name)}", file=path,
                             row=rows[i], column="doc_id")
    return out


def read_samples(path: str, *, arm: str = "full", model: str | None = None, metric: str | None = None) -> ReadResult:
    """One lm-eval samples file -> runs (the headline filter's verdicts) and its questions."""
    recs, rows = _records(path)
    if not recs:
        raise InputError("the file has no samples", file=path)
    for r, row in zip(recs, rows):
        if not is_lm_eval_record(r):
            missing = [k for k in ("doc_id", "arguments", "resps") if k not in r]
            raise InputError(f"row {row} is not an lm-eval sample (missing or unexpected {missing or ['arguments']})",
                             file=path, row=row, column=(missing or ["arguments"])[0])
    results = _results_for(path)
    task = _task_from(results, path)
    cfg = ((results or {}).get("configs") or {}).get(task) or {}
    filters = [f.get("name") for f in cfg.get("filter_list") or [] if isinstance(f, dict) and f.get("name")]
    blocks = _blocks(recs, rows, path, filters)
    want_metric, want_filter = (metric.split(",", 1) + [None])[:2] if metric else (None, None)
    order = [f for f in filters if f in blocks] + [f for f in blocks if f not in filters]
    if want_filter is not None and want_filter not in blocks:
        raise InputError(f"filter {show_id(want_filter)} not in the samples; filters: {order}", file=path,
                         column="filter")
    headline = want_filter or order[0]
    idx = blocks[headline]
    sel = [recs[i] for i in idx]
    sel_rows = [rows[i] for i in idx]
    listed = [m.get("metric") for m in cfg.get("metric_list") or [] if isinstance(m, dict)]
    present = list(dict.fromkeys(k for r in sel for k in (r.get("metrics") or [k for k in r if k not in STANDARD])))
    cands = [m for m in listed if m in present] + [m for m in present if m not in listed]
    if want_metric:
        if want_metric not in present:
            raise InputError(f"metric {show_id(want_metric)} not in the samples; metrics: {present}", file=path,
                             column=want_metric)
        cands = [want_metric]
    chosen = None
    for m in cands:
        vals = [binary_verdict(r.get(m)) for r in sel]
        if all(v != "non-binary" for v in vals) and any(v is not None for v in vals):
            chosen = m
            break
    # question IDs: a unique doc field, else doc_id
    docs = [r.get("doc") if isinstance(r.get("doc"), dict) else {} for r in sel]
    qids = None
    for key in ("question_id", "id", "index", "qid"):
        vals = [cell_to_str(d.get(key)) for d in docs]
        if all(v is not None for v in vals) and len(set(vals)) == len(vals):
            qids = vals
            break
    if qids is None:
        qids = [cell_to_str(r["doc_id"]) for r in sel]
    delim = cfg.get("target_delimiter", " ")
    delim = delim if isinstance(delim, str) else " "
    out: list[Sample] = []
    n_mc = 0
    for r, d, q, row in zip(sel, docs, qids, sel_rows):
        args = _args(r)
        lls = _loglikelihoods(r)
        fields: dict[str, Any] = {}
        context = cell_to_str(args[0][0]) if args and args[0] else None
        fields["question"] = cell_to_str(d.get("question")) or context
        for key in ("category", "subject", "subfield", "l2_category"):
            if isinstance(d.get(key), str | int):
                fields["category" if key in ("subject", "category") else "l2_category"] = str(d[key])
        target = r.get("target")
        if lls is not None and all(len(a) >= 2 for a in args):
            n_mc += 1
            opts = [cell_to_str(a[1]) or "" for a in args]
            opts = [o[len(delim):] if delim and o.startswith(delim) else o for o in opts]
            if len(lls) != len(opts):
                raise InputError(f"{len(lls)} log-likelihoods for {len(opts)} options", file=path, row=row,
                                 column="resps")
            scores = np.asarray(lls)
            if chosen == "acc_norm":
                scores = scores / np.maximum(np.array([float(len(o)) for o in opts]), 1e-12)
            pick = int(np.argmax(scores))
            if isinstance(target, list) and len(target) == 1:
                target = target[0]
            if isinstance(target, int | np.integer) and not isinstance(target, bool) and 0 <= int(target) < len(opts):
                gold = LETTERS[int(target)]
            elif isinstance(target, str) and target in opts:
                gold = LETTERS[opts.index(target)]
            elif isinstance(target, str) and target.strip().isdigit() and int(target) < len(opts):
                gold = LETTERS[int(target)]
            else:
                raise InputError(f"the multiple-choice target {show_id(str(target))} is not an option index or "
                                 "option text", file=path, row=row, column="target")
            fields.update(options=opts, answer=gold)
            prediction = LETTERS[pick]
        else:
            opts = _options_literal(d.get("options"))
            if opts and len(opts) >= 2:
                fields["options"] = opts
            fields["answer"] = _first_text(target) if isinstance(target, list) else cell_to_str(target)
            prediction = _first_text(r.get("resps")) if "resps" in r else _first_text(r.get("filtered_resps"))
        media = [a for a in args[0][2:] if isinstance(a, dict) and a.get("visual")] if args and args[0] else []
        if media:
            fields["n_images"] = len(media[0]["visual"]) if isinstance(media[0]["visual"], list) else 1
        hit = binary_verdict(r.get(chosen)) if chosen else None
        out.append(Sample(q, prediction, hit if hit != "non-binary" else None, row, fields))
    # the other filters, recorded for the manifest
    filter_acc = {}
    for name in order:
        vals = [binary_verdict(recs[i].get(chosen)) for i in blocks[name]] if chosen else []
        vals = [v for v in vals if isinstance(v, int)]
        filter_acc[name] = {"n": len(blocks[name]), "accuracy": float(np.mean(vals)) if vals else None}
    version = (results or {}).get("lm_eval_version")
    if version is None:
        version = "0.4.0-0.4.2" if not all("filter" in r for r in recs) else "0.4.x"
    model_name = model or _model_from(results, path)
    info = {"task": task, "harness": "lm-evaluation-harness", "harness_version": version,
            "metric": f"{chosen},{headline}" if chosen else None, "filter": headline,
            "filters": filter_acc if len(order) > 1 else None,
            "scoring": "log-likelihood (argmax" + (" / option length)" if chosen == "acc_norm" else ")")
            if n_mc else "generate", "results_file": (results or {}).get("_path")}
    return result_from_samples(path, KIND, out, model=model_name, arm=arm,
                               judge=f"lm-eval:{chosen},{headline}" if chosen else None, info=info)


def harness_accuracy(path: str, metric_key: str) -> float | None:
    """The value lm-eval reported for ``metric_key`` (``"acc,none"``) of the file's task (None if absent)."""
    results = _results_for(path)
    if not results:
        return None
    task = _task_from(results, path)
    v = results["results"].get(task, {}).get(metric_key)
    return None if v is None else float(v)
