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
from ..bounds import trim_heap
from ..clock import stage
from ..detectors.base import DetectorResult
from ..errors import DetectorSkipped
from ..fmt import count
from ..frame.core import AuditFrame
from ..frame.fields import arm_field, primary_field
from ..readers.pairing import truncated_by_arm, truncation_note, unfinished_note
from ..schema import ARMS

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


def run_detectors(frame: AuditFrame, names: tuple[str, ...], *, seed: int = 0,
                  params: dict[str, dict[str, Any]] | None = None) -> tuple[dict[str, DetectorResult], dict[str, str], str]:
    """Only the named detectors, on the primary correctness field only: no exact-match arm, calibration,
    Holm or summary. For callers that read the per-question tables alone (curation's per-fold re-audits).
    Returns (results, skipped reasons, primary field)."""
    field = primary_field(frame)
    arms = arm_field(frame)
    results: dict[str, DetectorResult] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            results[name] = detectors.get(name).load().run(frame, field=_fields(frame, name, field, arms), seed=seed,
                                                           **(params or {}).get(name, {}))
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

    # the null simulator's fit, here, before the detectors start: beside them (tried on a helper thread) it saved
    # 0.4 s at 100k x 20 and nothing at 1M x 50, where both CPUs are busy, and its temporaries overlapping the
    # first detector's moved the peak by up to 0.6 GB from run to run
    with stage("calibration setup"):
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


def _fields(frame: AuditFrame, name: str, primary: str, arms: dict) -> str:
    """The correctness field detector ``name`` reads first: the arms' shared field when it compares them."""
    return arms["field"] if detectors.get(name).compares_arms else primary


def _run_each(frame: AuditFrame, config: AuditConfig, primary: str, step: Callable[[str], None],
              timings: dict[str, float], threads: int = 1, busy: Callable[[], None] | None = None,
              arms: dict | None = None):
    """Every configured detector on its field (the primary one; for detectors that compare the arms, the field
    both arms share, :func:`arm_field`), and judge-dependent ones read first on ``hit`` also on exact match.

    ``threads`` > 1 runs these detector calls on up to that many threads (:mod:`audit_hub.engine.scheduler`:
    the detectors are pure functions of the frame, which fills its shared caches once under a lock;
    the longest first by the registry's ``ns_per_cell``; side by side within a memory budget of about two of the heaviest at once; one thread fewer while ``busy()``,
    the calibration worker, holds a CPU). The results are the same as one after another."""
    arms = arms or arm_field(frame)
    has_exact = bool((frame.runs["hit_exact"].to_numpy() >= 0).any())
    modules = {name: detectors.get(name).load() for name in config.detectors}
    # the detectors run on the frame in its canonical order (questions by ID, models by name): their seeded
    # permutations and bootstraps then draw the same whatever order the rows, files or models came in; each
    # per-question table is put back in this frame's question order
    from ..frame.core import inverse_order

    canon, order = frame.canonical()
    back = None if canon is frame else inverse_order(order)
    first_field = {name: _fields(frame, name, primary, arms) for name in config.detectors}
    calls = [(name, first_field[name]) for name in config.detectors]
    calls += [(name, "hit_exact") for name in config.detectors
              if detectors.get(name).judge_dependent and first_field[name] == "hit" and has_exact]
    lock = threading.Lock()

    def call(c: tuple[str, str]):
        name, fld = c
        t0 = time.perf_counter()
        try:
            res = modules[name].run(canon, field=fld, seed=config.seed, **config.detector_params(name))
            if back is not None:
                res.per_question = res.per_question.iloc[back].reset_index(drop=True)
            return res
        except DetectorSkipped as e:
            return e
        finally:
            if threads > 1:
                trim_heap()
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
            first = (c[0], first_field[c[0]])
            if c != first and isinstance(out[first], DetectorSkipped):
                continue
            if c == first:
                step(c[0])
            with stage(c[0]):
                out[c] = call(c)
    results: dict[str, DetectorResult] = {}
    alt: dict[str, DetectorResult] = {}
    skipped: dict[str, str] = {}
    for name in config.detectors:
        first = out[(name, first_field[name])]
        if isinstance(first, DetectorSkipped):
            skipped[name] = str(first)
            continue
        results[name] = first
        second = out.get((name, "hit_exact")) if first_field[name] == "hit" else None
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


def flags_vs_null(frame: AuditFrame, results: dict[str, DetectorResult], calibration: dict) -> dict:
    """Per detector with flags and a calibration: how often it flags here and on the defect-free simulations
    (``flag_rate``), the share of its flags those explain (:func:`audit_hub.severity.null_share_of_flags`)
    and ``capped_at``: the most its flags add to a question's overall severity (:func:`audit_hub.severity.null_cap`;
    None: their own level)."""
    from ..severity import null_cap, null_share_of_flags

    out: dict[str, dict] = {}
    Q = max(frame.n_questions, 1)
    for name, res in results.items():
        cal = calibration.get(name) or {}
        col = f"is_{name}_issue"
        if cal.get("flag_rate") is None or col not in res.per_question:
            continue
        n_flagged = int(res.per_question[col].fillna(False).astype(bool).sum())
        rate = n_flagged / Q
        out[name] = {"n_flagged": n_flagged, "flag_rate": rate, "null_flag_rate": cal["flag_rate"],
                     "null_flag_rate_ci": cal.get("flag_rate_ci"),
                     "worst_regime_flag_rate": cal.get("worst_regime_flag_rate"),
                     "null_share_of_flags": null_share_of_flags(rate, cal["flag_rate"]),
                     "capped_at": null_cap(rate, cal["flag_rate"]), "n_sims": cal.get("n_sims")}
        scope = cal.get("chance_categories_null")
        if scope:
            # the same comparison on the categories the pool answers at chance, against the regime that draws
            # them at chance: there the pooled null (mostly other regimes) understates what chance answers flag
            mask = frame.in_categories(scope["categories"])
            n_in = int(mask.sum())
            k = int(res.per_question[col].fillna(False).astype(bool).to_numpy()[mask].sum())
            r_in = k / max(n_in, 1)
            out[name]["chance_categories"] = {
                "categories": scope["categories"], "n_items": n_in, "n_flagged": k, "flag_rate": r_in,
                "null_flag_rate": scope["flag_rate"], "null_flag_rate_ci": scope["flag_rate_ci"],
                "n_sims": scope["n_sims"], "null_share_of_flags": null_share_of_flags(r_in, scope["flag_rate"]),
                "capped_at": null_cap(r_in, scope["flag_rate"]) if n_in else None}
    return out


def _summary(frame: AuditFrame, config: AuditConfig, primary: str, results: dict[str, DetectorResult],
             alt: dict[str, DetectorResult], skipped: dict[str, str], judge: dict, calibration: dict,
             multiplicity: dict, tst, arms: dict | None = None) -> dict[str, Any]:
    """The audit's ``summary.json``: the pool, each detector's summary (with its exact-match arm and
    calibration), skips, multiplicity, judge dependence, accuracies and the configuration."""
    summary: dict[str, Any] = {
        "benchaudit_version": _version(),
        "n_questions": frame.n_questions,
        "models": {arm: frame.models_in(arm) for arm in ARMS if arm != "base" or frame.has_arm(arm)},
        "pool": frame.meta.get("pool") or pool_summary(frame.models_in("full"), frame.models_in("blind"),
                                                       frame.meta.get("pairing"), frame.meta.get("named_roles")),
        "judges": frame.meta.get("judges", {}),
        "primary_field": primary,
        "arm_comparison": arms or arm_field(frame),
        "seed": config.seed,
        "seeds": {"detectors": config.seed, "calibration": config.seed},
        "n_permutations": config.n_permutations,
        "alpha": config.alpha,
    }
    for name in config.detectors:
        if name in results:
            entry = dict(results[name].summary)
            if detectors.get(name).compares_arms and arms:
                entry["field_why"] = arms.get("why")  # which correctness the arms were compared on, and why
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
    summary["flags_vs_null"] = flags_vs_null(frame, results, calibration)
    summary["accuracy"] = frame.accuracy_table().to_dict(orient="records")
    from .per_model import per_model_table

    summary["per_model"] = per_model_table(frame, arms or arm_field(frame), alpha=config.alpha)
    # how items were counted (CircularEval groups, unread options) and the defects of the input files
    for key in ("circular", "unparsed_options", "input_defects", "empty_runs", "duplicate_runs"):
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
    arms = arm_field(frame)
    results, alt, skipped, modules = _run_each(frame, config, primary, step, timings, threads, busy, arms)

    judge = {}
    for name in results:
        fn_name = detectors.get(name).judge_dependence
        if fn_name is not None and (name in alt or (primary == "hit" and results[name].summary.get("field") == "hit_exact")):
            step("judge dependence")
            t0 = time.perf_counter()
            with stage("judge dependence"):
                if name in alt:
                    judge = getattr(modules[name], fn_name)(frame, results[name], alt[name])
                else:  # compared on exact matching only: the judge-vs-exact disagreement per model and arm
                    judge = getattr(modules[name], fn_name)(frame, None, None)
                    judge["note"] = (f"{name} compared the full and blind arms on exact matching only: not every "
                                     "compared model has judged correctness in both arms (summary.json "
                                     "arm_comparison), so the zero-gain shares could not be compared under the judge; "
                                     "the table shows how often the judge and the parser disagree where both scored. "
                                     "Give blind runs with judged correctness to compare both.")
                    judge["exact_only"] = True
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
    with stage("summary"):  # the per-model table and every detector's entry
        summary = _summary(frame, config, primary, results, alt, skipped, judge, calibration, multiplicity, tst,
                           arms)
    return EngineResult(frame=frame, config=config, primary_field=primary, results=results, alt_results=alt,
                       skipped=skipped, judge_dependence=judge, calibration=calibration, summary=summary,
                       timings=timings, tst=tst)


def pool_summary(full_models: Sequence[str], blind_models: Sequence[str], pairing: dict | None = None,
                 named_roles: dict | None = None) -> dict:
    """Which models pair by name across arms; a note naming every blind run that pairs with no full-arm
    model (``pairing``: :func:`audit_hub.readers.pairing.pair_arms`'s record, how each pair was made); the
    ``--runs`` files read by their model's name as text-only runs or left out as baselines (``named_roles``:
    :func:`audit_hub.readers.named_roles.named_roles_record`; its sentence is the card's and the CLI's own note)."""

    full, blind = list(full_models), list(blind_models)
    paired = [m for m in full if m in set(blind)]
    pb = (pairing or {}).get("blind") or {}
    unmatched = [u["model"] for u in pb.get("unmatched", [])] or [m for m in blind if m not in set(full)]
    # the zero-gain audit pairs models by name; only with no model in both arms does it fall back to
    # comparing the two pools' mean accuracies (pool level)
    pool_level = bool(blind) and bool(full) and not paired
    note = None

    def names(xs):
        return ", ".join(xs[:8]) + (f" and {len(xs) - 8} more" if len(xs) > 8 else "")

    if pool_level:
        note = (f"no blind run pairs with a full-arm model (blind: {names(unmatched or blind)}; full: {names(full)}); "
                "full-vs-blind comparisons are made at pool level (pool means), not per model. Give each blind "
                "run the full-arm model's name (`benchaudit blind --model-name`) to compare per model")
    elif blind and set(blind) != set(full):
        without = [m for m in full if m not in set(paired)]
        note = (f"{detectors.by_role('image_gain')} pairs the {count(len(paired), 'model')} present in both arms"
                + (f"; blind runs paired with no full-arm model, left out: {names(unmatched)}" if unmatched else "")
                + (f"; full-arm models without a blind run: {names(without)}" if without else ""))
    truncated = truncated_by_arm(pairing)
    return {"full_models": full, "blind_models": blind, "paired": paired, "pool_level": pool_level,
            "unmatched_blind": unmatched, "pairing": pairing or {}, "named_roles": dict(named_roles or {}),
            "note": note, "truncated_prompts": truncated, "truncation_note": truncation_note(truncated),
            "unfinished_note": unfinished_note(pairing)}


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
    arms = s.get("arm_comparison") or {}
    if result.frame.has_arm("blind") and arms.get("field") and result.frame.has_arm("full"):
        fields = "judged correctness (hit) and exact matching" if arms.get("judged_too") else (
            "exact matching (hit_exact)" if arms["field"] == "hit_exact" else "judged correctness (hit)")
        lines.append(f"full vs blind compared on {fields}: {arms.get('why', '')}")
    return lines


def run_warnings(summary: dict | None) -> list[str]:
    """The warnings on the runs themselves, in one wording for the console and the work_dir index: the runs left
    out as failed (:func:`audit_hub.frame.validate.empty_runs_note`) and those the parser mostly could not read
    (:func:`audit_hub.engine.per_model.unreadable_note`)."""
    from ..frame.validate import duplicate_runs_note, empty_runs_note
    from .per_model import unreadable_note

    s = summary or {}
    return [x for x in (empty_runs_note(s.get("empty_runs")), duplicate_runs_note(s.get("duplicate_runs")),
                        unreadable_note((s.get("per_model") or {}).get("unreadable"))) if x]


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
