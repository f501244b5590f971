"""benchaudit: audit VLM benchmarks from existing evaluation runs.

The library face (:mod:`audit_hub.api`), loaded on first use so that ``import audit_hub`` and
``benchaudit --help`` stay light::

    import audit_hub as ba
    res = ba.audit(questions="bench.tsv", runs=["outputs/"], blind=["blind/"])
    res.findings.head(); res.save("report/"); res.push_to_hub("org/bench-audit")
"""

__version__ = "0.1.0"

_API = ("audit", "tst", "prune", "curate", "blind", "Output", "AuditResult", "TstResult", "PruneResult",
        "CurateResult", "BlindResult")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'audit_hub' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
