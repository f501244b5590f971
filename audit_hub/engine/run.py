"""Run every detector over one audit frame and assemble the headline summary.

``run_audit`` is pure (no I/O): frame in, :class:`EngineResult` out. The report package turns the
result into the output folder; the CLI only wires the two together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .. import detectors
from ..clock import stage
from ..detectors.base import DetectorResult
from ..errors import DetectorSkipped
from ..frame.core import AuditFrame

DETECTORS: tuple[str, ...] = detectors.names()


@dataclass
class AuditConfig:
    """Everything that changes the numbers; recorded verbatim in the manifest."""

    seed: int = 0
    n_permutations: int = 999
    alpha: float = 0.05
    calibration_sims: int = 50
    run_calibration: bool = True
    run_tst: bool = False
    tst_params: dict = field(default_factory=dict)
    detectors: tuple[str, ...] = DETECTORS
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def detector_params(self, name: str) -> dict[str, Any]:
        p = dict(self.params.get(name, {}))
        for key in detectors.get(name).audit_params:
            p.setdefault(key, getattr(self, key))
        return p


@dataclass
class EngineResult:
    frame: AuditFrame
    config: AuditConfig
    primary_field: str
    results: dict[str, DetectorResult]
    alt_results: dict[str, DetectorResult]
    skipped: dict[str, str]
    judge_dependence: dict
    calibration: dict
    summary: dict
    timings: dict[str, float]
    tst: Any = None


def _headline_p(summary: dict) -> float | None:
    p = summary.get("p_value")
    if p is None:
        return None
    try:
        p = float(p)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(p) else p


def primary_field(frame: AuditFrame) -> str:
    """The correctness field the detectors read: the judge's verdict when the full arm has one, else exact match."""
    return "hit" if frame.has_judged("full") else "hit_exact"


def run_detectors(frame: AuditFrame, names: tuple[str, ...], *, seed: int = 0,
                  params: dict[str, dict[str, Any]] | None = None) -> tuple[dict[str, DetectorResult], dict[str, str], str]:
    """Only the named detectors, on the primary correctness field only: no exact-match arm, calibration,
    Holm or summary. For callers that read the per-question tables alone (curation's per-fold re-audits).
    Returns (results, skipped reasons, primary field)."""
    field = primary_field(frame)
    results: dict[str, DetectorResult] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            results[name] = detectors.get(name).load().run(frame, field=field, seed=seed, **(params or {}).get(name, {}))
        except DetectorSkipped as e:
            skipped[name] = str(e)
    return results, skipped, field


def _start_calibration(frame: AuditFrame, config: AuditConfig, primary: str, background: bool | None, worker):
    """The calibration of the configured detectors, started now: in a worker process beside the detectors when
    a second CPU is free (``background`` None: decide by that), else simulated when its result is asked for."""
    if not config.run_calibration:
        return None
    from .calibration import Calibration
    from .worker import worker_helps

    return Calibration(frame, list(config.detectors), n_sims=config.calibration_sims, seed=config.seed,
                       field=primary, params={n: config.detector_params(n) for n in config.detectors},
                       background=worker_helps() if background is None else background, worker=worker)


def _finish_calibration(cal, frame: AuditFrame, config: AuditConfig, primary: str,
                        results: dict[str, DetectorResult]) -> dict:
    """The calibration entries of the detectors that ran (the same numbers as calibrating those alone: every
    detector's simulations use the same null frames and seeds whatever else is calibrated)."""
    from .calibration import calibrate

    if cal is None or not results:
        if cal is not None:
            cal.close()
        return {}
    try:
        out = cal.result()
    except Exception:  # a detector the audit skipped failed in the worker: calibrate the ones that ran, here
        out = calibrate(frame, list(results), n_sims=config.calibration_sims, seed=config.seed, field=primary,
                        params={n: config.detector_params(n) for n in results})
    if cal.worker:
        from ..clock import note_parallel

        note_parallel("calibration worker", cal.worker["seconds"])
    return {n: v for n, v in out.items() if n in results}


def run_audit(frame: AuditFrame, config: AuditConfig | None = None,
              progress: Callable[[str], None] | None = None, *,
              background_calibration: bool | None = None, calibration_worker=None, threads: int = 1) -> EngineResult:
    """Run the configured detectors (judge-dependent ones on both correctness arms when both exist).

    ``background_calibration``: simulate the calibration nulls in a worker process while the detectors run
    (None: when a second CPU is available); ``calibration_worker``: a started
    :class:`~audit_hub.engine.worker.WorkerProcess` to use for that; ``threads``: run the detectors on that many
    threads. The numbers are the same either way."""
    config = config or AuditConfig()
    primary = primary_field(frame)
    cal = _start_calibration(frame, config, primary, background_calibration, calibration_worker)
    try:
        return _run_audit(frame, config, progress, primary, cal, threads)
    finally:
        if cal is not None:
            cal.close()


def _run_each(frame: AuditFrame, config: AuditConfig, primary: str, step: Callable[[str], None],
              timings: dict[str, float], threads: int = 1, busy: Callable[[], None] | None = None):
    """Every configured detector on the primary field, and judge-dependent ones also on exact match.

    ``threads`` > 1 runs these detector calls on up to that many threads (:mod:`audit_hub.engine.scheduler`:
    the detectors are pure functions of the frame, which fills its shared caches once under a lock;
    the longest first by the registry's ``ns_per_cell``; side by side within a memory budget of about two of the heaviest at once; one thread fewer while ``busy()``,
    the calibration worker, holds a CPU). The results are the same as one after another."""
    has_exact = bool((frame.runs["hit_exact"].to_numpy() >= 0).any())
    modules = {name: detectors.get(name).load() for name in config.detectors}
    calls = [(name, primary) for name in config.detectors]
    calls += [(name, "hit_exact") for name in config.detectors
              if detectors.get(name).judge_dependent and primary == "hit" and has_exact]
    lock = threading.Lock()

    def call(c: tuple[str, str]):
        name, fld = c
        t0 = time.perf_counter()
        try:
            return modules[name].run(frame, field=fld, seed=config.seed, **config.detector_params(name))
        except DetectorSkipped as e:
            return e
        finally:
            with lock:
                timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0

    if threads > 1 and len(calls) > 1:
        from ..clock import note_parallel
        from .scheduler import run_calls

        cells = frame.n_questions * (len(frame.models_in("full")) + len(frame.models_in("blind")))
        calls.sort(key=lambda c: -detectors.get(c[0]).ns_per_cell)  # the longest first (stable)
        estimates = [detectors.get(n).peak_bytes_per_cell * cells for n, _ in calls]
        step("detectors")
        with stage("detectors"):
            out = run_calls(calls, call, estimates, threads=threads, busy=busy, name="benchaudit-detector")
        for name in config.detectors:
            note_parallel(name, timings[name])
    else:
        out = {}
        for c in calls:
            if c[1] != primary and isinstance(out[(c[0], primary)], DetectorSkipped):
                continue
            if c[1] == primary:
                step(c[0])
            with stage(c[0]):
                out[c] = call(c)
    results: dict[str, DetectorResult] = {}
    alt: dict[str, DetectorResult] = {}
    skipped: dict[str, str] = {}
    for name in config.detectors:
        first = out[(name, primary)]
        if isinstance(first, DetectorSkipped):
            skipped[name] = str(first)
            continue
        results[name] = first
        second = out.get((name, "hit_exact"))
        if isinstance(second, DetectorSkipped):
            skipped[name] = str(second)
        elif second is not None:
            alt[name] = second
    return results, alt, skipped, modules


def _multiplicity(results: dict[str, DetectorResult]) -> dict:
    """Holm across the detectors' headline tests."""
    from ..stats.core import holm

    names = [n for n in results if _headline_p(results[n].summary) is not None]
    adj = holm([_headline_p(results[n].summary) for n in names]) if names else []
    multiplicity = {"method": "holm", "tests": {n: {"p_value": _headline_p(results[n].summary),
                                                    "p_holm": float(a)} for n, a in zip(names, adj)}}

    return multiplicity


def _summary(frame: AuditFrame, config: AuditConfig, primary: str, results: dict[str, DetectorResult],
             alt: dict[str, DetectorResult], skipped: dict[str, str], judge: dict, calibration: dict,
             multiplicity: dict, tst) -> dict[str, Any]:
    """The audit's ``summary.json``: the pool, each detector's summary (with its exact-match arm and
    calibration), skips, multiplicity, judge dependence, accuracies and the configuration."""
    summary: dict[str, Any] = {
        "benchaudit_version": _version(),
        "n_questions": frame.n_questions,
        "models": {"full": frame.models_in("full"), "blind": frame.models_in("blind")},
        "pool": frame.meta.get("pool") or pool_summary(frame.models_in("full"), frame.models_in("blind")),
        "judges": frame.meta.get("judges", {}),
        "primary_field": primary,
        "seed": config.seed,
        "seeds": {"detectors": config.seed, "calibration": config.seed},
        "n_permutations": config.n_permutations,
        "alpha": config.alpha,
    }
    for name in config.detectors:
        if name in results:
            entry = dict(results[name].summary)
            if name in alt:
                entry["exact_match_arm"] = alt[name].summary
            if name in calibration:
                entry["calibration"] = calibration[name]
            summary[name] = entry
        else:
            summary[name] = {"skipped": True, "reason": skipped.get(name, "not run")}
    summary["skipped"] = skipped
    summary["multiplicity"] = multiplicity
    summary["judge_dependence"] = judge
    summary["calibration"] = calibration
    summary["accuracy"] = frame.accuracy_table().to_dict(orient="records")
    # how items were counted (CircularEval groups, unread options) and the defects of the input files
    for key in ("circular", "unparsed_options", "input_defects"):
        if frame.meta.get(key):
            summary[key] = frame.meta[key]
    if tst is not None:
        summary["tst"] = tst.summary
    summary["config"] = {k: v for k, v in asdict(config).items() if k != "params"} | {"params": config.params}
    return summary


def _run_audit(frame: AuditFrame, config: AuditConfig, progress: Callable[[str], None] | None, primary: str,
               cal, threads: int = 1) -> EngineResult:
    step = progress or (lambda _msg: None)
    timings: dict[str, float] = {}
    busy = cal.wait_worker if cal is not None and cal.in_worker else None
    results, alt, skipped, modules = _run_each(frame, config, primary, step, timings, threads, busy)

    judge = {}
    for name in results:
        fn_name = detectors.get(name).judge_dependence
        if fn_name is not None and name in alt:
            step("judge dependence")
            t0 = time.perf_counter()
            with stage("judge dependence"):
                judge = getattr(modules[name], fn_name)(frame, results[name], alt[name])
            timings["judge dependence"] = time.perf_counter() - t0

    calibration: dict = {}
    if cal is not None and results:
        step("calibration")
        t0 = time.perf_counter()
        with stage("calibration"):
            calibration = _finish_calibration(cal, frame, config, primary, results)
        timings["calibration"] = time.perf_counter() - t0

    tst = None
    if config.run_tst:
        step("tst")
        t0 = time.perf_counter()
        from ..tst import run_tst_rf

        with stage("tst"):
            tst = run_tst_rf(frame, seed=config.seed, **config.tst_params)
        timings["tst"] = time.perf_counter() - t0

    multiplicity = _multiplicity(results)
    summary = _summary(frame, config, primary, results, alt, skipped, judge, calibration, multiplicity, tst)
    return EngineResult(frame=frame, config=config, primary_field=primary, results=results, alt_results=alt,
                       skipped=skipped, judge_dependence=judge, calibration=calibration, summary=summary,
                       timings=timings, tst=tst)


def pool_summary(full_models: Sequence[str], blind_models: Sequence[str]) -> dict:
    """Which models pair by name across arms; a note when the blind pool is a different set."""
    full, blind = list(full_models), list(blind_models)
    paired = [m for m in full if m in set(blind)]
    # the zero-gain audit pairs models by name; only with no model in both arms does it fall back to
    # comparing the two pools' mean accuracies (pool level)
    pool_level = bool(blind) and bool(full) and not paired
    note = None
    if pool_level:
        note = (f"no model appears in both arms (full: {len(full)}, blind: {len(blind)}); full-vs-blind "
                "comparisons are made at pool level (pool means), not per model")
    elif blind and set(blind) != set(full):
        unpaired = [m for m in full + blind if m not in set(paired)]
        note = (f"the blind pool ({len(blind)} model(s)) differs from the full pool ({len(full)} model(s)); "
                f"{detectors.by_role('image_gain')} pairs the {len(paired)} model(s) present in both arms and leaves out "
                f"{unpaired[:5]}" + (" ..." if len(unpaired) > 5 else ""))
    return {"full_models": full, "blind_models": blind, "paired": paired, "pool_level": pool_level, "note": note}


def _version() -> str:
    from .. import __version__

    return __version__


def headline_lines(result) -> list[str]:
    """The headline lines of one audit, as the CLI prints them and the work_dir index lists them (one per
    detector that ran, one per skipped detector)."""
    s = result.summary
    lines = []
    for spec in detectors.specs():
        line = getattr(spec.load(), "console_line", None)
        sm = s.get(spec.name, {})
        if line is not None and not sm.get("skipped"):
            lines.append(line(sm))
    for name, reason in result.skipped.items():
        lines.append(f"skipped {name}: {reason}")
    return lines


def exclusion_warning(result) -> str | None:
    """One line naming every detector that left items out, with the counts (see summary.json ``excluded``)."""
    parts = []
    for name, r in result.results.items():
        exc = (r.summary or {}).get("excluded") or {}
        if exc:
            parts.append(f"{name} {sum(int(v) for v in exc.values()):,} "
                         f"({'; '.join(f'{k}: {int(v):,}' for k, v in exc.items())})")
    if not parts:
        return None
    return "items excluded from some statistics: " + ", ".join(parts) + " (details: summary.json 'excluded', card)"
