"""The audit's memory plan: its peak estimated before the heavy read, and the choices that keep it bounded.

Before any input table is read, :func:`plan_audit` sizes the inputs from what is cheap to know
(:func:`size_inputs`: a Parquet file's footer row count; a text file's size on disk over its bytes per
row in the first MiB; an .xlsx file's size on disk) and estimates, from per-stage coefficients measured
on the product (:data:`COEFFICIENTS`; ``benchmarks/cli_scale.py --fit-memory`` measures and fits them,
docs/scale.md records the fit), the peak resident memory of

* the audit's own process, detectors one at a time (``main_serial``): interpreter and imports, plus the
  bytes per run row (by file kind: the reader's buffers, the frame it builds, the detectors' tables,
  the report), plus the bytes per question (the questions table, per-question tables, the report's
  questions table), plus the peak of the heaviest detector;
* the same with the detectors side by side (``main_parallel``): the scheduler
  (:mod:`audit_hub.engine.scheduler`) runs up to about two of the heaviest at once, so one more
  heaviest-detector peak;
* the worker process (``worker``), which receives the frame and simulates the calibration nulls and draws
  the figures beside the audit.

The plan then decides, against the limit (``--max-memory``, else :func:`default_limit`: MemAvailable or the
cgroup limit, whichever is smaller, minus a margin), what runs at once, in this order of preference:
worker and parallel detectors; worker and serial detectors; parallel detectors and no worker (the
calibration then runs in this process after the detectors); everything in turn. When even the last does
not fit, the audit is refused before anything is read (:class:`~audit_hub.errors.InputError`: one line
naming the estimate, the limit and what to do; exit 2; nothing written). So the peak depends on the
plan, not on how threads and the worker happen to overlap. The plan (inputs, estimate, limit and its
source, choices) is recorded in manifest.json (``memory_plan``) and printed with ``--verbose``.

The inputs this cannot size before reading (a Hub dataset id, a harness log format it does not know)
count as unknown: the plan then says so and decides from the inputs it could size.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

# the limit's sources (MemAvailable, cgroup files) and the size syntax live with the other bounds
from ..bounds import MiB, fmt_bytes, machine_memory, read_text
from ..errors import InputError
from ..fmt import count

#: Peak-RSS model fitted on ``benchmarks/cli_scale.py --fit-memory`` (docs/scale.md "Memory plan": the
#: sizes, the measured peaks and the fit). Bytes: ``base_*`` once per process; ``*_per_row`` per run row of
#: the inputs of that kind (one row = one (question, model, arm) cell); ``worker_per_cell`` per cell of the
#: frame the worker receives. ``margin`` multiplies every estimate (the fit's largest under-estimate on the
#: measured sizes, rounded up).
COEFFICIENTS: dict[str, float] = {
    "base_main": 420 * MiB,
    "base_worker": 290 * MiB,
    "parquet_per_row": 15.0,
    "text_per_row": 19.0,
    "per_question": 2200.0,
    "xlsx_per_byte": 40.0,
    "worker_per_cell": 1.0,
    "margin": 1.15,
}
#: questions counted when no questions file gives their number (at most the run rows)
QUESTIONS_IF_UNKNOWN = 1_000_000
#: detectors' own peak beyond the frame, bytes per cell, when the registry gives none
DEFAULT_DETECTOR_BYTES_PER_CELL = 8.0
#: a text file's rows are counted in its first SAMPLE_BYTES
SAMPLE_BYTES = MiB
TEXT_EXTENSIONS = (".jsonl", ".json", ".csv", ".tsv", ".txt")
RUN_EXTENSIONS = (".parquet", ".pq", ".xlsx", *TEXT_EXTENSIONS)


def margin_bytes(total: int) -> int:
    """What the default limit leaves to the rest of the machine: 10%, at least 256 MiB."""
    return max(256 * MiB, total // 10)


def default_limit(read: Callable[[str], str | None] = read_text) -> tuple[int | None, str]:
    """The limit the plan holds to without ``--max-memory``: :func:`machine_memory` minus :func:`margin_bytes`."""
    total, source = machine_memory(read)
    if total is None:
        return None, source
    return max(0, total - margin_bytes(total)), f"{source} minus a {fmt_bytes(margin_bytes(total))} margin"


# ------------------------------------------------------------------------------------------ inputs
@dataclass
class InputSize:
    """One input file, sized without reading its tables. ``rows``: exact (Parquet footer) or estimated
    (text: size over the bytes per row of its first MiB); ``kind``: parquet, text, xlsx or unknown."""

    path: str
    kind: str
    bytes: int
    rows: int | None
    exact: bool

    def to_dict(self) -> dict:
        return asdict(self)


def text_rows(path: str, size: int) -> int:
    """Rows of a text table estimated from its first :data:`SAMPLE_BYTES`: newlines there, scaled to the size
    (a file without a newline in the sample counts as one row per 100 bytes)."""
    with open(path, "rb") as fh:
        sample = fh.read(SAMPLE_BYTES)
    if len(sample) >= size:  # read whole: exact (a last line without its newline counts)
        return sample.count(b"\n") + (1 if sample and not sample.endswith(b"\n") else 0)
    lines = sample.count(b"\n")
    per_row = (sample.rfind(b"\n") + 1) / lines if lines else 100.0  # whole lines only
    return int(math.ceil(size / per_row))


def _files_of(spec: str) -> list[str] | None:
    """The files an input spec names (a file, a folder's run files, a glob); None when it names none here
    (a Hub dataset id)."""
    if os.path.isfile(spec):
        return [spec]
    if os.path.isdir(spec):  # as the readers walk a folder (readers.dispatch.folder_files), regular files only
        from ..readers.dispatch import folder_files

        return sorted(p for p in folder_files(spec) if os.path.basename(p).lower().endswith(RUN_EXTENSIONS)
                      and os.path.isfile(p))  # a FIFO or a dangling link is skipped by the reader, not sized
    if any(ch in spec for ch in "*?["):
        return sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
    return None


def size_file(path: str) -> InputSize:
    try:
        size = os.path.getsize(path)
    except OSError:  # gone or unreadable: the reader names the problem in its own words
        return InputSize(path, "unknown", 0, None, False)
    low = path.lower()
    if low.endswith((".parquet", ".pq")):
        try:
            import pyarrow.parquet as pq

            return InputSize(path, "parquet", size, int(pq.read_metadata(path).num_rows), True)
        except Exception:  # noqa: BLE001 - not a readable footer: the reader names the problem
            return InputSize(path, "unknown", size, None, False)
    if low.endswith(TEXT_EXTENSIONS):
        try:
            return InputSize(path, "text", size, text_rows(path, size), False)
        except OSError:  # not readable (a FIFO named directly, no permission): the reader says so
            return InputSize(path, "unknown", size, None, False)
    if low.endswith(".xlsx"):
        return InputSize(path, "xlsx", size, None, False)
    return InputSize(path, "unknown", size, None, False)


def size_inputs(specs: Iterable[str | None]) -> tuple[list[InputSize], list[str]]:
    """(the run files sized, the specs that name no file here)."""
    sized: list[InputSize] = []
    unknown: list[str] = []
    seen: set[str] = set()
    for spec in specs:
        if spec is None:
            continue
        files = _files_of(str(spec))
        if files is None:
            unknown.append(str(spec))
            continue
        for f in files:
            key = os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                sized.append(size_file(f))
    return sized, unknown


# ------------------------------------------------------------------------------------------ the plan
@dataclass
class MemoryPlan:
    """What the audit will hold at its peak, and what it runs at once to stay within ``limit``."""

    limit: int | None
    limit_source: str
    run_rows: int
    questions_rows: int
    inputs: list[dict]
    unknown_inputs: list[str]
    main_serial: int
    main_parallel: int
    worker: int
    use_worker: bool
    detector_threads: int
    estimate: int = 0
    fits: bool = True
    why: str = ""
    coefficients: dict = field(default_factory=lambda: dict(COEFFICIENTS))

    def record(self) -> dict:
        """The manifest's ``memory_plan``."""
        return {
            "estimate_bytes": int(self.estimate),
            "limit_bytes": None if self.limit is None else int(self.limit),
            "limit_source": self.limit_source,
            "run_rows": int(self.run_rows),
            "questions_rows": self.questions_rows,
            "stages_bytes": {"main_serial": int(self.main_serial), "main_parallel": int(self.main_parallel),
                             "worker": int(self.worker)},
            "choices": {"calibration_worker": self.use_worker, "detector_threads": self.detector_threads},
            "why": self.why,
            "inputs": self.inputs,
            "unknown_inputs": self.unknown_inputs,
            "coefficients": self.coefficients,
        }

    def line(self) -> str:
        """The --verbose line."""
        lim = "no limit known" if self.limit is None else f"limit {fmt_bytes(self.limit)} ({self.limit_source})"
        return (f"memory plan: estimate {fmt_bytes(self.estimate)} for {self.run_rows:,} run rows, {lim}; "
                f"calibration worker {'on' if self.use_worker else 'off'}, detectors on "
                f"{count(self.detector_threads, 'thread')}: {self.why}")


def heaviest_detector_bytes_per_cell(names: Sequence[str] | None = None) -> float:
    """The largest ``peak_bytes_per_cell`` of the registry's detectors (``names``: those only)."""
    from .. import detectors

    names = list(names) if names is not None else list(detectors.names())
    vals = [float(getattr(detectors.get(n), "peak_bytes_per_cell", DEFAULT_DETECTOR_BYTES_PER_CELL)) for n in names]
    return max(vals, default=DEFAULT_DETECTOR_BYTES_PER_CELL)


def estimate(inputs: Sequence[InputSize], questions: int | None = None, *, detector_bytes_per_cell: float,
             coefficients: dict[str, float] | None = None) -> tuple[int, int, int, int, int]:
    """(run rows, questions counted, main_serial, main_parallel, worker) bytes for these run files and
    ``questions`` questions (None: unknown, counted as the run rows up to :data:`QUESTIONS_IF_UNKNOWN`)."""
    c = dict(COEFFICIENTS if coefficients is None else coefficients)
    rows = 0
    read = 0.0
    for s in inputs:
        if s.kind == "xlsx" or (s.rows is None):
            r = int(s.bytes * c["xlsx_per_byte"] / max(c["text_per_row"], 1.0))  # rows that memory would be
            read += s.bytes * c["xlsx_per_byte"]
        else:
            r = int(s.rows)
            read += r * c["parquet_per_row" if s.kind == "parquet" else "text_per_row"]
        rows += r
    q = int(questions) if questions is not None else min(rows, QUESTIONS_IF_UNKNOWN)
    det = detector_bytes_per_cell * rows
    m = c["margin"]
    fixed = c["base_main"] + read + c["per_question"] * q
    main_serial = int(m * (fixed + det))
    main_parallel = int(m * (fixed + 2 * det))
    worker = int(m * (c["base_worker"] + c["worker_per_cell"] * rows))
    return rows, q, main_serial, main_parallel, worker


def choose(limit: int | None, main_serial: int, main_parallel: int, worker: int, *, worker_wanted: bool,
           threads_wanted: int) -> tuple[bool, int, int, bool, str]:
    """(use the worker, detector threads, the estimate of that choice, fits, why). Preference: worker and
    parallel detectors, worker and serial detectors, parallel detectors alone, everything in turn."""
    options = []
    if worker_wanted and threads_wanted > 1:
        options.append((True, threads_wanted, main_parallel + worker))
    if worker_wanted:
        options.append((True, 1, main_serial + worker))
    if threads_wanted > 1:
        options.append((False, threads_wanted, main_parallel))
    options.append((False, 1, main_serial))
    if limit is None:
        w, t, e = options[0]
        return w, t, e, True, "no memory limit known: the defaults"
    for i, (w, t, e) in enumerate(options):
        if e <= limit:
            why = "everything fits" if i == 0 else (
                f"{_schedule(*options[0][:2])} would need {fmt_bytes(options[0][2])}: serialised to fit")
            return w, t, e, True, why
    w, t, e = options[-1]
    return w, t, e, False, "even one stage at a time exceeds the limit"


def _schedule(worker: bool, threads: int) -> str:
    return f"calibration worker {'on' if worker else 'off'}, {count(threads, 'detector thread')}"


def plan_audit(questions: str | None, runs: Sequence[str], blind: Sequence[str], base: Sequence[str] = (), *,
               max_memory: int | None = None, worker_wanted: bool = True, threads_wanted: int = 1,
               detectors: Sequence[str] | None = None, read: Callable[[str], str | None] = read_text) -> MemoryPlan:
    """The plan of one audit (see the module text). Raises nothing: :func:`require_fit` refuses."""
    sized, unknown = size_inputs([*runs, *blind, *base])
    q_rows = None
    if questions is not None and os.path.isfile(str(questions)):
        qs = size_file(str(questions))
        q_rows = qs.rows
    rows, q_used, serial, parallel, worker = estimate(sized, q_rows,
                                                      detector_bytes_per_cell=heaviest_detector_bytes_per_cell(detectors))
    if max_memory is not None:
        limit, source = int(max_memory), "--max-memory"
    else:
        limit, source = default_limit(read)
    use_worker, threads, est, fits, why = choose(limit, serial, parallel, worker, worker_wanted=worker_wanted,
                                                 threads_wanted=threads_wanted)
    if unknown:
        why += f"; {len(unknown)} input(s) not sized before reading ({', '.join(unknown[:3])})"
    if q_rows is None:
        why += f"; questions not sized before reading: counted as {q_used:,}"
    return MemoryPlan(limit=limit, limit_source=source, run_rows=rows, questions_rows=q_used,
                      inputs=[s.to_dict() for s in sized], unknown_inputs=unknown, main_serial=serial,
                      main_parallel=parallel, worker=worker, use_worker=use_worker, detector_threads=threads,
                      estimate=est, fits=fits, why=why)


def require_fit(plan: MemoryPlan) -> None:
    """Refuse, in one line, an audit whose plan cannot fit its limit."""
    if plan.fits or plan.limit is None:
        return
    files = len(plan.inputs)
    raise InputError(
        f"the audit needs about {fmt_bytes(plan.estimate)} of memory (estimated before reading, from "
        f"{plan.run_rows:,} run rows in {files} file(s), one stage at a time) but the limit is "
        f"{fmt_bytes(plan.limit)} ({plan.limit_source}); give a larger --max-memory if the machine has it, "
        "or audit fewer runs at once (fewer run files, --benchmark NAME)")


# ------------------------------------------------------------------------------------------ measured
def process_peak(pid: int | str = "self", read: Callable[[str], str | None] = read_text) -> int | None:
    """A live process's peak resident memory (VmHWM of /proc/PID/status), bytes; None where unreadable."""
    text = read(f"/proc/{pid}/status")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None
