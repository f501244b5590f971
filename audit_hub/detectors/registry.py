"""The detector registry: one record per detector, the single owner of its metadata.

Everything outside ``audit_hub/detectors/`` (the audit, calibration, the evaluate adapter, the CLI,
the report) reads detectors through this registry, never by spelling a detector's name. A record
is made by :func:`register`; a missing or malformed field fails at import with a
:class:`RegistryError` that names the detector and the field.

The shape follows cleanlab's issue-manager registry (a required name, a derived score key, a
description) without its mutating look-ups: :func:`get` only reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType, ModuleType
from typing import Any

from ..severity import LEVELS


class RegistryError(TypeError):
    """A detector registration is incomplete or malformed (raised at import time)."""


@dataclass(frozen=True)
class ActionTrigger:
    """A detector's finding that suggests ``action`` for a question: severity at ``min_level`` or above,
    and (when ``column`` is set) the boolean evidence column ``column`` true on that row."""

    action: str
    min_level: str
    column: str | None = None


@dataclass(frozen=True)
class DetectorSpec:
    """Metadata of one detector. Every field without a default is required.

    name: module ``audit_hub.detectors.<name>``; the result columns are ``<name>_score``,
        ``is_<name>_issue``, ``<name>_severity`` and ``<name>_<evidence>``.
    description: one line, what the detector measures.
    requires: one line, what inputs it needs (shown when it is skipped).
    inputs: the evaluate ``compute`` columns it needs; any one of the alternatives must be complete.
    judge_dependent: True when its output depends on the correctness field (re-run on exact match).
    compares_arms: True when it compares the full arm's correctness with the blind arm's; it then reads the
        field both arms share (``frame.fields.arm_field``), not the full arm's primary field.
    evidence: the evidence columns (without the ``<name>_`` prefix) every result carries.
    label: the report's short phrase for a flagged question.
    signal, finding: the card's "Signal" and "Flags" cells.
    audit_params: keys of the audit configuration it receives (e.g. ``n_permutations``).
    calibration_params: keyword overrides on simulated null benchmarks (steps that do not change the
        headline test, switched off to save time).
    findings_params: keyword overrides for a run whose per-question table another module reads (curation's
        stages, :mod:`audit_hub.curate.findings`): summary-level extras off, every per-question flag as the
        audit publishes it. None: ``calibration_params`` (right where those leave the flags unchanged).
    actions: findings that suggest an action (see :mod:`audit_hub.report.tables`).
    role: the part the detector plays for other modules, looked up with :func:`by_role`
        (``"image_gain"``: the headline zero-gain audit; ``"label_conflict"``: the consensus table beside
        it; ``"correctness_profile"`` and ``"option_similarity"``: read by curation's saturation and
        anomaly stages); None for the others.
    headline_statistic: the summary-table statistic the card and figures plot per category.
    judge_dependence: name of a module function ``(frame, result_hit, result_exact) -> dict`` that
        compares the two correctness fields, or None.
    peak_bytes_per_cell: the extra memory one run needs at its peak, in bytes per (question, model, arm)
        cell of the frame (numpy's traced allocations at 1M questions x 50 models x 2 arms); the audit
        runs detectors side by side only while these estimates add up to at most twice the largest
        (:mod:`audit_hub.engine.scheduler`).
    ns_per_cell: the wall time of one run per cell (nanoseconds, one thread, 1M x 50 x 2); the audit
        starts the longest runs first when detectors share threads.
    """

    name: str
    description: str
    requires: str
    inputs: tuple[tuple[str, ...], ...]
    judge_dependent: bool
    evidence: tuple[str, ...]
    label: str
    signal: str
    finding: str
    audit_params: tuple[str, ...] = ()
    compares_arms: bool = False
    calibration_params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    findings_params: Mapping[str, Any] | None = None
    actions: tuple[ActionTrigger, ...] = ()
    role: str | None = None
    headline_statistic: str | None = None
    judge_dependence: str | None = None
    peak_bytes_per_cell: float = 8.0
    ns_per_cell: float = 50.0

    @property
    def module(self) -> str:
        return f"audit_hub.detectors.{self.name}"

    @property
    def findings_overrides(self) -> Mapping[str, Any]:
        """The overrides of a findings run (``findings_params``, else ``calibration_params``)."""
        return self.findings_params if self.findings_params is not None else self.calibration_params

    @property
    def score_column(self) -> str:
        return f"{self.name}_score"

    @property
    def issue_column(self) -> str:
        return f"is_{self.name}_issue"

    @property
    def severity_column(self) -> str:
        return f"{self.name}_severity"

    @property
    def evidence_columns(self) -> tuple[str, ...]:
        return tuple(f"{self.name}_{c}" for c in self.evidence)

    def load(self) -> ModuleType:
        """The detector module (imported on first use, so reading the registry stays cheap)."""
        return importlib.import_module(self.module)


_REQUIRED = tuple(f.name for f in fields(DetectorSpec) if f.default is MISSING and f.default_factory is MISSING)
_KNOWN = tuple(f.name for f in fields(DetectorSpec))
_STR_FIELDS = ("name", "description", "requires", "label", "signal", "finding")
_REGISTRY: dict[str, DetectorSpec] = {}


def _fail(name: Any, msg: str) -> None:
    raise RegistryError(f"detector {name!r}: {msg}")


def _check(spec: DetectorSpec) -> None:
    name = spec.name
    for f in _STR_FIELDS:
        v = getattr(spec, f)
        if not isinstance(v, str) or not v.strip():
            _fail(name, f"field {f!r} must be a non-empty string, got {v!r}")
    if not name.isidentifier():
        _fail(name, "name must be a Python identifier (it names a module)")
    if not isinstance(spec.judge_dependent, bool):
        _fail(name, f"field 'judge_dependent' must be a bool, got {spec.judge_dependent!r}")
    if not spec.inputs or not all(isinstance(a, tuple) and a and all(isinstance(c, str) for c in a)
                                  for a in spec.inputs):
        _fail(name, "field 'inputs' must be a non-empty tuple of non-empty tuples of column names")
    if not isinstance(spec.evidence, tuple) or not all(isinstance(c, str) and c for c in spec.evidence):
        _fail(name, "field 'evidence' must be a tuple of column suffixes")
    for t in spec.actions:
        if not isinstance(t, ActionTrigger) or t.min_level not in LEVELS:
            _fail(name, f"action trigger {t!r} must be an ActionTrigger with a level in {LEVELS}")
        if t.column is not None and t.column not in spec.evidence_columns:
            _fail(name, f"action trigger column {t.column!r} is not one of its evidence columns")
    if spec.headline_statistic is not None and not isinstance(spec.headline_statistic, str):
        _fail(name, "field 'headline_statistic' must be a string or None")


def register(**values: Any) -> DetectorSpec:
    """Register one detector; every required field of :class:`DetectorSpec` must be given."""
    name = values.get("name", "<unnamed>")
    missing = [f for f in _REQUIRED if f not in values]
    if missing:
        _fail(name, f"registration lacks required field(s) {missing}")
    unknown = sorted(set(values) - set(_KNOWN))
    if unknown:
        _fail(name, f"registration has unknown field(s) {unknown}; known: {list(_KNOWN)}")
    for key in ("calibration_params", "findings_params"):
        if values.get(key) is not None:
            values[key] = MappingProxyType(dict(values[key]))
    spec = DetectorSpec(**values)
    _check(spec)
    if spec.name in _REGISTRY:
        _fail(spec.name, "registered twice")
    roles = {s.role for s in _REGISTRY.values() if s.role is not None}
    if spec.role is not None and spec.role in roles:
        _fail(spec.name, f"role {spec.role!r} is already taken")
    _REGISTRY[spec.name] = spec
    return spec


def names() -> tuple[str, ...]:
    """Registered detector names, in registration (= report) order."""
    return tuple(_REGISTRY)


def specs() -> tuple[DetectorSpec, ...]:
    return tuple(_REGISTRY.values())


def get(name: str) -> DetectorSpec:
    """The record of ``name``; ValueError naming the known detectors otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown detector {name!r}; known: {names()}") from None


def by_role(role: str) -> str | None:
    """The name of the detector that plays ``role`` in the card, or None."""
    for s in _REGISTRY.values():
        if s.role == role:
            return s.name
    return None
