"""Ranges of the numeric options and the memory check made before any large allocation: the memory the
machine has (MemAvailable, the cgroup limit: :func:`machine_memory`) and the ``--max-memory`` size syntax
(:func:`parse_size`); the audit's memory plan built on them is :mod:`audit_hub.engine.memory`.

Each range is defined once here and used by the command definitions (typer ``min``/``max``, so a value
out of range is a usage error naming the option and the allowed range, exit 2) and by the library
entry points that can be called without the CLI.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from .errors import InputError

MiB = 1 << 20
GiB = 1 << 30

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


# ------------------------------------------------------------------------------------------ memory
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, option: str = "--max-memory") -> int:
    """Bytes of a size such as ``6G``, ``500M``, ``1.5GiB``, ``2048MB`` or ``123456`` (binary units: K = 1024,
    M = 1024 K, G = 1024 M, T = 1024 G; a bare number is bytes). An unreadable or zero size is one-line
    :class:`InputError`."""
    m = _SIZE.match(str(text))
    if not m:
        raise InputError(f"{option}: cannot read {text!r} as a size; give a number with a unit, such as 6G, "
                         "500M or 1.5G (K, M, G, T: powers of 1024)")
    value = float(m.group(1)) * _UNIT[m.group(2).lower()]
    if value < 1:
        raise InputError(f"{option}: {text!r} is no memory at all; give a size such as 6G or 500M")
    return int(value)


def fmt_bytes(n: float) -> str:
    """``5.3 GB`` style (GiB, as the --max-memory units), one decimal; MB below 1 GiB."""
    return f"{n / GiB:.1f} GB" if n >= GiB else f"{n / MiB:.0f} MB"


def meminfo_available(text: str) -> int | None:
    """MemAvailable of a /proc/meminfo text, in bytes (None when absent)."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            try:
                return int(parts[1]) * (1024 if len(parts) < 3 or parts[2].lower() == "kb" else 1)
            except (IndexError, ValueError):
                return None
    return None


def cgroup_limit(text: str) -> int | None:
    """A cgroup memory limit file's bytes: v2 ``memory.max`` (``max``: none) or v1 ``memory.limit_in_bytes``
    (a value near 2**63, the kernel's 'unlimited', counts as none)."""
    s = text.strip()
    if not s or s == "max":
        return None
    try:
        v = int(s)
    except ValueError:
        return None
    return None if v <= 0 or v >= 1 << 60 else v


def cgroup_limit_files(proc_self_cgroup: str, root: str = "/sys/fs/cgroup") -> list[str]:
    """Candidate limit files for this process, from /proc/self/cgroup: its own cgroup's ``memory.max``
    (v2, ``0::/path``) or ``memory.limit_in_bytes`` (v1, ``N:memory:/path``) and each ancestor's, then the
    root's (in a container the cgroup namespace shows the container's group as ``/``)."""
    out: list[str] = []
    for line in proc_self_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = os.path.join(root, "memory"), "memory.limit_in_bytes"
        else:
            continue
        p = path.strip("/")
        while True:
            out.append(os.path.join(base, p, name) if p else os.path.join(base, name))
            if not p:
                break
            p = os.path.dirname(p)
    for extra in (os.path.join(root, "memory.max"), os.path.join(root, "memory", "memory.limit_in_bytes")):
        if extra not in out:
            out.append(extra)
    return out


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def machine_memory(read: Callable[[str], str | None] = read_text) -> tuple[int | None, str]:
    """(bytes, where from): the smaller of MemAvailable and the tightest cgroup limit over this process's
    cgroup and its ancestors; (None, 'unknown') where neither can be read."""
    found: list[tuple[int, str]] = []
    mi = read("/proc/meminfo")
    avail = meminfo_available(mi) if mi else None
    if avail is not None:
        found.append((avail, "MemAvailable (/proc/meminfo)"))
    cg = read("/proc/self/cgroup") or ""
    for path in cgroup_limit_files(cg):
        text = read(path)
        lim = cgroup_limit(text) if text is not None else None
        if lim is not None:
            found.append((lim, f"the cgroup limit ({path})"))
    if not found:
        return None, "unknown"
    return min(found)


def available_memory() -> int:
    """Bytes this process may still allocate: the smaller of MemAvailable, the cgroup limit
    (:func:`machine_memory`) and the address-space limit."""
    avail = machine_memory()[0]
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


def trim_heap() -> None:
    """Arrow's unused pool memory and glibc's free heap of every arena back to the system (``malloc_trim``;
    nothing where libc is not glibc). The audit calls it after each detector call on threads, so one
    thread's freed temporaries do not stay resident while another thread's arena grows (no output changes)."""
    import ctypes

    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - releasing is best effort
        pass
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def release_memory(frame=None) -> None:
    """Give memory no later stage needs back to the system (no output changes): ``frame``'s dense (Q, M)
    matrices (:meth:`~audit_hub.frame.core.AuditFrame.drop_dense`), then Python's garbage and
    :func:`trim_heap`. At 1M x 50 the process holds ~5.5 GiB after the detectors; the report calls this
    before its writes, which set the peak."""
    import gc

    if frame is not None:
        frame.drop_dense()
    gc.collect()
    trim_heap()
