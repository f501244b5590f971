"""benchaudit: audit VLM benchmarks from existing evaluation runs.

The library face is :mod:`audit_hub.api`, one function per command (``audit``, ``tst``, ``prune``,
``curate``, ``blind``), loaded on first use so that ``import audit_hub`` and ``benchaudit --help`` stay
light. ``audit`` and ``prune`` are also attributes of the package; ``tst``, ``curate`` and ``blind`` are
its subpackages' names, so those three are called as ``audit_hub.api.tst(...)`` and so on::

    import audit_hub as ba
    res = ba.audit(questions="bench.tsv", runs=["outputs/"], blind=["blind/"])
    res.findings.head(); res.save("report/"); res.push_to_hub("org/bench-audit")
    ba.api.tst("bench.tsv").summary
"""

__version__ = "0.1.0"

_API = ("audit", "prune", "Output", "AuditResult", "TstResult", "PruneResult",
        "CurateResult", "BlindResult")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API or name == "api":
        import importlib

        api = importlib.import_module(f"{__name__}.api")  # sets the attribute: later lookups skip this
        return api if name == "api" else getattr(api, name)
    raise AttributeError(f"module 'audit_hub' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
