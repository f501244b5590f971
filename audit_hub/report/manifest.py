"""The audit's fields of ``manifest.json`` (the schema, common fields and file hashes: :mod:`audit_hub.hub.manifest`).

The dataset revision (and the resolved commit of Hub inputs), the number of questions, the models of
each arm, the primary correctness field, seeds, the configuration, each detector's thresholds and
parameters, and the detectors that were skipped.
"""

from __future__ import annotations

from typing import Any


def _config_dict(config: Any) -> dict:
    from dataclasses import asdict, is_dataclass

    if is_dataclass(config):
        return asdict(config)
    return dict(config or {})


def manifest_fields(result: Any, inputs: list[dict]) -> dict:
    """The audit's own manifest fields, in the manifest's order (``dataset`` and ``hub_inputs`` precede
    the ``inputs`` list; the rest follow it)."""
    from ..hub.manifest import describe_inputs

    frame = result.frame
    meta = frame.meta
    ds = dict(meta.get("dataset") or {})
    ins = describe_inputs(inputs)
    hub_inputs = [{k: r.get(k) for k in ("path", "repo_id", "revision", "resolved_commit", "kind")}
                  for r in ins if r.get("repo_id") or r.get("resolved_commit")]
    cfg = _config_dict(result.config)
    thresholds = {name: dict(res.params) for name, res in result.results.items() if getattr(res, "params", None)}
    return {
        "dataset": {**ds, "revision": ds.get("revision") or ds.get("commit") or ds.get("resolved_commit")},
        "hub_inputs": hub_inputs,
        "n_questions": frame.n_questions,
        "models": {"full": frame.models_in("full"), "blind": frame.models_in("blind")},
        "primary_field": result.primary_field,
        "seeds": {"seed": cfg.get("seed"), **(result.summary.get("seeds") or {})},
        "config": cfg,
        "thresholds": thresholds,
        "skipped": dict(result.skipped or {}),
        # files found in the run folders and not read as runs, each with why (not a table, an older run of a
        # model, an earlier benchaudit output inside the folder)
        "files_not_read": [{"path": str(r.get("path")), "reason": str(r.get("reason"))}
                           for r in meta.get("skipped") or [] if isinstance(r, dict)],
        **_memory_plan(result),
    }


def _memory_plan(result: Any) -> dict:
    """``memory_plan``: the plan the audit ran under (engine.memory) and the peaks measured so far (this
    process and the worker, VmHWM), where the API made one."""
    plan = getattr(result, "memory_plan", None)
    if plan is None:
        return {}
    from ..engine.memory import process_peak

    rec = plan.record()
    rec["measured_peak_bytes"] = {"main": process_peak("self"),
                                  "worker": max((process_peak(p) or 0 for p in getattr(result, "memory_pids", ())),
                                                default=None)}
    return {"memory_plan": rec}
