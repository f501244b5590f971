"""Ranges of the numeric options and the memory check made before any large allocation.

Each range is defined once here and used by the command definitions (typer ``min``/``max``, so a value
out of range is a usage error naming the option and the allowed range, exit 2) and by the library
entry points that can be called without the CLI.
"""

from __future__ import annotations

import os

from .errors import InputError

SEED_MAX = 2**32 - 1
RANGES: dict[str, tuple[int | float | None, int | float | None]] = {
    "--seed": (0, SEED_MAX),
    "--n-permutations": (1, 10_000_000),
    "--calibration-sims": (0, 100_000),
    "--k": (2, 1_000),
    "--repeats": (1, 1_000),
    "--n-estimators": (1, 100_000),
    "--n-jobs": (-1, 4_096),
    "--llm-max-steps": (0, 10_000_000),
    "--budget": (0, 100_000_000),
    "--step": (1, 100_000_000),
    "--floor": (0, 100_000_000),
    "--random-seeds": (0, 1_000_000),
    "--frac": (0.0, 1.0),
    "--threshold": (-1.0, 1.0),
    "--batch-size": (1, 65_536),
    "--max-new-tokens": (1, 1_048_576),
    "--max-length": (1, 100_000_000),
    "--limit": (1, None),
    "--threads": (1, 1_024),
    "--null-permutations": (0, 100_000),
    "--null-jobs": (0, 4_096),
    # blind --backend openai
    "--concurrency": (1, 4_096),
    "--request-timeout": (0.001, 86_400.0),
    "--max-retries": (0, 100),
    "--top-logprobs": (0, 20),
    # curate
    "--target-size": (1, None),
    "--max-rank-loss": (0.0, 1.0),
    "--category-floor": (0.0, 1.0),
    "--folds": (2, 1_000),
    "--score-budget": (0, 100_000_000),
    "--n-boot": (1, 1_000_000),
    "--random-draws": (1, 1_000_000),
    "--junk": (0.0, 1.0),
}


#: arguments of the library entry points and evaluate modules that no CLI option carries (the evaluate
#: modules check their arguments with these, the CLI's rule and message; ``metrics.adapter``)
ARGUMENT_RANGES: dict[str, tuple[int | float | None, int | float | None]] = {
    "seed": RANGES["--seed"],
    "n_permutations": RANGES["--n-permutations"],
    "n_boot": RANGES["--n-boot"],
    "alpha": (0.0, 1.0),
    "n_mc": (1, 10_000_000),
    "min_answered": (1, 1_000_000),
    "blind_agree_share": (0.0, 1.0),
    "recall_sims": (0, 100_000),
    "label_iters": (1, 1_000),
    "lev_threshold": (0.0, 1.0),
    "lev_min_chars": (0, 1_000_000),
    "token_set_threshold": (0.0, 100.0),
    "token_min": (0, 1_000_000),
    "short_max_chars": (0, 1_000_000),
    "workers": (-1, 4_096),
    "max_units": (1, 100_000_000),
    "max_boot_codes": (1, 1_000_000),
    "chunk": (1, 100_000_000),
}
#: ranges open at both ends (a significance level of 0 or 1 means nothing)
OPEN_RANGES = frozenset({"alpha"})


def range_text(name: str, ranges: dict | None = None) -> str:
    """``1..1000``, ``>= 1`` or, for an open range, ``(0.0, 1.0) exclusive``."""
    lo, hi = (ranges or RANGES)[name]
    if name in OPEN_RANGES:
        return f"({lo}, {hi}) exclusive"
    return f"{lo}..{hi}" if hi is not None else f">= {lo}"


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def detector_threads(parallel: bool) -> int:
    """Threads the audit runs its detectors on: up to 4 of the available CPUs with ``--parallel``, else 1."""
    return max(1, min(4, available_cpus())) if parallel else 1


def opt(name: str) -> dict:
    """``min``/``max`` keyword arguments for ``typer.Option`` of the option ``name``, and for a float range a
    callback refusing NaN (which click's range comparison lets through) as a usage error."""
    lo, hi = RANGES[name]
    kw: dict = {}
    if lo is not None:
        kw["min"] = lo
    if hi is not None:
        kw["max"] = hi
    if isinstance(lo, float) or isinstance(hi, float):
        def no_nan(value):
            vals = value if isinstance(value, (list, tuple)) else [value]
            if any(isinstance(v, float) and v != v for v in vals):
                import typer

                raise typer.BadParameter(f"{name} must be a number, got nan")
            return value

        kw["callback"] = no_nan
    return kw


def check_range(name: str, value, ranges: dict | None = None) -> None:
    """Raise a one-line :class:`InputError` naming ``name`` and its range when ``value`` is outside it."""
    import numbers

    lo, hi = (ranges or RANGES)[name]
    if value is None:
        return
    rng = range_text(name, ranges)
    integral = isinstance(lo, int) and (hi is None or isinstance(hi, int))
    if isinstance(value, bool) or not isinstance(value, numbers.Integral if integral else numbers.Real):
        kind = "an integer" if integral else "a number"
        raise InputError(f"{name} must be {kind} in the range {rng}, got {value!r}")
    if name in OPEN_RANGES:
        outside = not (lo < value < hi)
    else:
        outside = (lo is not None and value < lo) or (hi is not None and value > hi)
    if value != value or outside:
        raise InputError(f"{name} must be in the range {rng}, got {value}")


def available_memory() -> int:
    """Bytes this process may still allocate: the smaller of MemAvailable and the address-space limit."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = 1 << 40
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            try:
                with open("/proc/self/statm", encoding="ascii") as fh:
                    used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError):
                used = 0
            avail = min(avail, max(0, soft - used))
    except (ImportError, ValueError, OSError):
        pass
    return int(avail)


def require_memory(estimate: int, what: str) -> None:
    """Refuse (one line, exit 2) work whose estimated peak memory exceeds what is available."""
    avail = available_memory()
    if estimate > avail:
        raise InputError(f"{what} needs about {estimate / 2**30:.1f} GiB of memory but only "
                         f"{avail / 2**30:.1f} GiB is available; use a smaller value")


def audit_memory_estimate(n_questions: int, n_categories: int, n_permutations: int, calibration_sims: int) -> int:
    """Peak bytes of the permutation nulls: ~10 int64 arrays of (groups x permutations) per null, where
    groups = categories + the overall pool (+1 slack), plus the per-question tables."""
    groups = max(1, n_categories) + 2
    per_null = 10 * 8 * groups * max(1, n_permutations)
    return int(per_null + 64 * max(1, n_questions) * 8)
