"""OpenCompass outputs: ``<work_dir>/<time>/predictions/<model>/<dataset>.json`` (an object keyed by
sample index: ``origin_prompt``, ``prediction``, ``gold``) and ``results/<model>/<dataset>.json`` (the
metric, e.g. ``accuracy`` or ``score`` in percent, and ``details``: one entry per sample with its
``correct`` verdict). Fixtures written by OpenCompass's own code are in ``tests/fixtures/opencompass/real``
(0.5.4).

Mapping: the predictions file is the run (one row per sample; question ID the sample index, the
question the prompt, gold ``gold`` (the first, when a list), prediction ``prediction``); the verdict is
``details[i].correct`` of the results file for the same model and dataset (details as a list aligned by
index -- ``example_abbr`` ``<dataset>_<i>`` checked -- or an object keyed by index), recorded as
``opencompass:<metric>``; without a results file with details the run has no verdict (the exact arm
only). Model: the ``<model>`` folder (OpenCompass's model ``abbr``); benchmark: the dataset ``abbr`` (the
file name). A results file is read through its predictions file, never alone; OpenCompass records no
version of itself in these files.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InputError
from ..escape import show_id
from .cells import ReadResult, cell_to_str, stem_of
from .fileio import json_head, load_json_document
from .sample_rows import Sample, binary_verdict, result_from_samples

KIND = "opencompass-predictions"


def is_predictions(path: str) -> bool:
    h = json_head(path)
    return h.startswith(b"{") and b'"origin_prompt"' in h and b'"prediction"' in h


def is_results(path: str) -> bool:
    h = json_head(path)
    parts = os.path.abspath(path).split(os.sep)
    return h.startswith(b"{") and b'"details"' in h and len(parts) >= 3 and parts[-3] == "results"


def _results_path(path: str) -> str:
    parts = os.path.abspath(path).split(os.sep)
    if len(parts) >= 3 and parts[-3] == "predictions":
        return os.sep.join(parts[:-3] + ["results"] + parts[-2:])
    return ""


def _prompt_text(p: Any) -> str | None:
    if isinstance(p, list):  # a chat prompt: [{"role": .., "prompt": ..}, ...]
        return "\n".join(str(m.get("prompt", "")) for m in p if isinstance(m, dict)) or None
    return cell_to_str(p)


def _first(v: Any) -> Any:
    while isinstance(v, list):
        if not v:
            return None
        v = v[0]
    return v


def _verdicts(res_path: str, keys: list[str], dataset: str) -> tuple[dict[str, int | None], str | None]:
    res = load_json_document(res_path)
    if not isinstance(res, dict):
        raise InputError("the OpenCompass results file is not a JSON object", file=res_path)
    metric = next((k for k, v in res.items() if k != "details" and isinstance(v, int | float)), None)
    details = res.get("details")
    out: dict[str, int | None] = {}
    if isinstance(details, list):
        if len(details) != len(keys):
            raise InputError(f"{len(details)} details for {len(keys)} predictions", file=res_path, column="details")
        for i, d in enumerate(details):
            abbr = d.get("example_abbr") if isinstance(d, dict) else None
            if abbr is not None and not str(abbr).endswith(f"_{i}"):
                raise InputError(f"details entry {i + 1} is for {show_id(str(abbr))}, not sample {i}", file=res_path,
                                 row=i + 1, column="details.example_abbr")
            out[str(i)] = _verdict(d, res_path, i + 1)
    elif isinstance(details, dict):
        for k, d in details.items():
            out[str(k)] = _verdict(d, res_path, None)
    else:
        return {}, metric
    return out, metric


def _verdict(d: Any, path: str, row: int | None) -> int | None:
    if not isinstance(d, dict):
        raise InputError("a details entry is not an object", file=path, row=row, column="details")
    v = binary_verdict(_first(d.get("correct")))
    if v == "non-binary":
        raise InputError(f"details 'correct' is {d.get('correct')!r}, not true/false", file=path, row=row,
                         column="details.correct")
    return v


def read_predictions(path: str, *, arm: str = "full", model: str | None = None,
                     metric: str | None = None) -> ReadResult:
    """One OpenCompass predictions file (+ its results file's per-sample verdicts) -> runs and questions."""
    obj = load_json_document(path)
    if not isinstance(obj, dict) or not obj:
        raise InputError("not an OpenCompass predictions file (expected an object of samples)", file=path)
    keys = list(obj)
    dataset = stem_of(path)
    res_path = _results_path(path)
    verdicts, res_metric = (_verdicts(res_path, keys, dataset) if res_path and os.path.isfile(res_path)
                            else ({}, None))
    out = []
    for row, k in enumerate(keys, start=1):
        s = obj[k]
        if not isinstance(s, dict) or "prediction" not in s:
            raise InputError(f"sample {show_id(k)} has no prediction", file=path, row=row, column="prediction")
        fields = {"question": _prompt_text(s.get("origin_prompt")), "answer": cell_to_str(_first(s.get("gold")))}
        out.append(Sample(str(k), cell_to_str(_first(s.get("prediction"))), verdicts.get(str(k)), row, fields))
    model_name = model or os.path.basename(os.path.dirname(os.path.abspath(path))) or "model"
    info = {"task": dataset, "harness": "OpenCompass", "harness_version": "not recorded by OpenCompass",
            "metric": res_metric, "results_file": res_path if verdicts else None}
    return result_from_samples(path, KIND, out, model=model_name, arm=arm,
                               judge=f"opencompass:{res_metric}" if verdicts else None, info=info)
