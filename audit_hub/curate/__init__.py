"""``benchaudit curate``: a smaller benchmark that keeps model rankings on models it never saw.

``run_curation(frame, CurateConfig(...))`` (pure) and ``write_curation(result, out, ...)`` (the folder).
Importing this package imports nothing heavy; the modules load on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CurateConfig", "CurationResult", "StageThresholds", "run_curation", "write_curation", "simulate_pool",
           "inject_junk"]


def __getattr__(name: str) -> Any:
    if name in ("CurateConfig", "CurationResult", "run_curation"):
        from . import pipeline
        return getattr(pipeline, name)
    if name == "StageThresholds":
        from .filters import StageThresholds
        return StageThresholds
    if name == "write_curation":
        from .output import write_curation
        return write_curation
    if name == "simulate_pool":
        from .simulate import simulate_pool
        return simulate_pool
    if name == "inject_junk":
        from .junk import inject_junk
        return inject_junk
    raise AttributeError(name)
