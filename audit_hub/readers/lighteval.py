"""lighteval ``--save-details`` files: ``details/<model>/<date>/details_<task>|<few-shot>_<date>.parquet``
beside ``results/<model>/results_<date>.json``. Fixtures written by lighteval's own code are in
``tests/fixtures/lighteval/real`` (0.13.0).

Schema (0.10 and later): one row per document with three struct columns: ``doc`` (``query``,
``choices``, ``gold_index``, ``id``, ``task_name``, ``images``, ...), ``metric`` (metric name -> value, e.g.
``{"acc": 1}``, ``{"em": 0}``) and ``model_response`` (``text``, ``logprobs``,
``argmax_logits_eq_gold``, ...). Older releases wrote flat columns (``example``/``full_prompt``,
``predictions``, ``gold``, ``choices``, ``gold_index``, ``metrics``); those are read the same way
(``metrics`` a struct or its JSON text, read as data only).

Mapping: question ID ``doc.id``; benchmark the task name (``task_name`` less its ``suite|`` and
``|few-shot`` parts); options ``doc.choices`` when the task scores options by log-likelihood (their
leading space dropped), the gold the letter of ``gold_index``, the prediction the letter of the option
with the highest logged log-likelihood; generative tasks: the prediction ``model_response.text[0]``,
the gold ``choices[gold_index]``; the question ``original_query`` (else ``query``, the prompt); the
verdict the first metric whose values are all 0/1 (or ``metric=``), recorded as ``lighteval:<metric>``;
the model from the results file's ``config_general.model_name`` (else the ``details/<model>/`` folder).
lighteval records no version of itself in these files (``lighteval_sha`` is ``?`` for a pip install).
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

import numpy as np

from ..errors import InputError
from ..escape import show_id
from ..schema import LETTERS
from .cells import ReadResult, cell_to_str
from .sample_rows import Sample, binary_verdict, result_from_samples

KIND = "lighteval-details"
NEW_COLUMNS = frozenset({"doc", "metric", "model_response"})
OLD_COLUMNS = frozenset({"metrics", "predictions", "gold"})
_DATE = re.compile(r"_(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)$")


def is_lighteval_details(columns: list[str]) -> bool:
    cols = set(columns)
    return NEW_COLUMNS <= cols or OLD_COLUMNS <= cols


def task_of(name: str) -> str:
    """``suite|task|few-shot`` or ``task|few-shot`` -> ``task``."""
    parts = str(name).split("|")
    if len(parts) >= 3:
        return parts[1]
    return parts[0]


def _results_for(path: str) -> dict | None:
    """``<out>/results/<model>/results_<date>.json`` for ``<out>/details/<model>/<date>/details_*.parquet``."""
    date_dir = os.path.dirname(os.path.abspath(path))
    model_dir = os.path.dirname(date_dir)
    out = os.path.dirname(os.path.dirname(model_dir))
    date = os.path.basename(date_dir)
    cands = glob.glob(os.path.join(glob.escape(out), "results", glob.escape(os.path.basename(model_dir)),
                                   f"results_{glob.escape(date)}.json"))
    for c in cands:
        try:
            if os.path.getsize(c) > 50_000_000:
                continue
            with open(c, encoding="utf-8") as fh:
                obj = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict):
            obj["_path"] = c
            return obj
    return None


def _list(v: Any) -> list:
    if v is None:
        return []
    if isinstance(v, np.ndarray):
        return v.tolist()
    return list(v) if isinstance(v, list | tuple) else [v]


def _rows(path: str) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # noqa: BLE001 - one clear line whatever pyarrow raises
        raise InputError(f"cannot read the Parquet file ({type(e).__name__}: {str(e).splitlines()[0][:160]})",
                         file=path) from None
    drop = [c for c in ("images",) if c in table.column_names]
    return table.drop(drop).to_pylist() if drop else table.to_pylist()


def _metrics(v: Any, path: str, row: int) -> dict:
    if isinstance(v, str):
        from .input_guard import json_loads

        v = json_loads(v, path, row=row, where=f"row {row}, metrics: ")
    if not isinstance(v, dict):
        raise InputError(f"row {row}: the metrics cell is not a mapping of metric -> value", file=path, row=row,
                         column="metrics")
    return v


def read_details(path: str, *, arm: str = "full", model: str | None = None, metric: str | None = None) -> ReadResult:
    """One lighteval details file -> runs and its questions."""
    rows = _rows(path)
    if not rows:
        raise InputError("the details file has no rows", file=path)
    new = "doc" in rows[0]
    mcol = "metric" if new else "metrics"
    recs = []
    for i, r in enumerate(rows, start=1):
        doc = r.get("doc") if new else r
        resp = r.get("model_response") if new else {"text": _list(r.get("predictions")), "logprobs": []}
        if not isinstance(doc, dict) or not isinstance(resp, dict):
            raise InputError(f"row {i}: doc/model_response is not a struct", file=path, row=i, column="doc")
        recs.append((doc, resp, _metrics(r.get(mcol), path, i)))
    names = list(dict.fromkeys(k for _, _, m in recs for k in m))
    cands = [metric] if metric else names
    if metric and metric not in names:
        raise InputError(f"metric {show_id(metric)} not in the details; metrics: {names}", file=path, column=mcol)
    chosen = None
    for m in cands:
        vals = [binary_verdict(x.get(m)) for _, _, x in recs]
        if all(v != "non-binary" for v in vals) and any(v is not None for v in vals):
            chosen = m
            break
    out: list[Sample] = []
    task_names = set()
    for i, (doc, resp, met) in enumerate(recs, start=1):
        qid = cell_to_str(doc.get("id"))
        if qid is None:
            raise InputError(f"row {i} has no doc id", file=path, row=i, column="doc.id")
        task_names.add(cell_to_str(doc.get("task_name")) or "")
        choices = [cell_to_str(c) or "" for c in _list(doc.get("choices"))]
        gold_index = _list(doc.get("gold_index"))
        gold_i = int(gold_index[0]) if gold_index and cell_to_str(gold_index[0]) is not None else None
        logprobs = [float(x) for x in _list(resp.get("logprobs")) if x is not None]
        fields: dict[str, Any] = {"question": cell_to_str(doc.get("original_query")) or cell_to_str(
            doc.get("query") or doc.get("full_prompt") or doc.get("example"))}
        if len(choices) >= 2 and len(logprobs) == len(choices):  # options scored by log-likelihood
            if gold_i is None or not 0 <= gold_i < len(choices):
                raise InputError(f"row {i}: gold_index {gold_i} is not an option index", file=path, row=i,
                                 column="doc.gold_index")
            fields["options"] = [c[1:] if c.startswith(" ") else c for c in choices]
            fields["answer"] = LETTERS[gold_i]
            prediction = LETTERS[int(np.argmax(logprobs))]
        else:
            gold = choices[gold_i] if gold_i is not None and 0 <= gold_i < len(choices) else None
            if gold is None and not new:
                gold = cell_to_str(_list(doc.get("gold"))[0]) if _list(doc.get("gold")) else None
            fields["answer"] = gold
            texts = _list(resp.get("text"))
            prediction = cell_to_str(texts[0]) if texts else None
        if _list(doc.get("images")):
            fields["n_images"] = len(_list(doc.get("images")))
        hit = binary_verdict(met.get(chosen)) if chosen else None
        out.append(Sample(qid, prediction, hit if hit != "non-binary" else None, i, fields))
    task_names.discard("")
    if len(task_names) > 1:
        raise InputError(f"the details file mixes tasks {sorted(task_names)}", file=path, column="doc.task_name")
    full_task = next(iter(task_names)) if task_names else os.path.basename(path)
    results = _results_for(path)
    model_name = model or ((results or {}).get("config_general") or {}).get("model_name") or \
        os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path)))) or "model"
    sha = ((results or {}).get("config_general") or {}).get("lighteval_sha")
    info = {"task": task_of(full_task), "lighteval_task": full_task, "harness": "lighteval",
            "harness_version": "not recorded by lighteval", "lighteval_sha": sha if sha not in (None, "?") else None, "metric": chosen,
            "results_file": (results or {}).get("_path")}
    return result_from_samples(path, KIND, out, model=str(model_name), arm=arm,
                               judge=f"lighteval:{chosen}" if chosen else None, info=info)


def harness_accuracy(path: str, metric: str) -> float | None:
    results = _results_for(path)
    if not results:
        return None
    rows = _rows(path)
    doc = rows[0].get("doc") or {}
    v = (results.get("results") or {}).get(doc.get("task_name"), {}).get(metric)
    return None if v is None else float(v)
