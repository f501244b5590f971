"""Run independent calls on a few threads without raising the peak memory of running them in turn.

The audit's detectors are pure functions of one frame whose numpy work releases the GIL, so on a machine
with a free CPU two of them can run at once. Two limits decide what runs together:

* CPUs: at most ``threads`` calls at once, one fewer while ``busy()`` has not returned (another process,
  the calibration worker, uses that CPU; more runnable threads than CPUs cost more than they save).
* memory: each call has an estimate of the extra memory it needs at its peak (the registry's
  ``peak_bytes_per_cell`` times the frame's cells). A call starts beside others only while the estimates
  of all running calls stay within ``budget`` (default: twice the largest single estimate, i.e. about
  two of the heaviest at once, whatever the number of CPUs; measured at 1M x 50 on 2 CPUs, the audit's
  peak RSS then rises by ~0.3 GB over running them in turn, because its peak is set later, when the
  results are written). Calls that fit beside no other go first, while the calibration worker holds
  the second CPU anyway; the rest follow in the given order.

Results are returned in the calls' order and do not depend on the schedule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any


def exclusive(estimates: Sequence[float], budget: float | None = None) -> list[bool]:
    """For each call: it cannot run beside any other call within the memory ``budget`` (default: the
    largest single estimate)."""
    top = max(estimates, default=0.0) if budget is None else budget
    out = []
    for i, e in enumerate(estimates):
        others = [x for j, x in enumerate(estimates) if j != i]
        out.append(not others or e + min(others) > top)
    return out


def run_calls(keys: Sequence[Hashable], fn: Callable[[Hashable], Any], estimates: Sequence[float], *,
              threads: int, busy: Callable[[], None] | None = None, name: str = "benchaudit-worker",
              budget: float | None = None) -> dict[Hashable, Any]:
    """``{key: fn(key)}`` for every key, run on up to ``threads`` threads under the CPU and memory limits
    of this module (``threads`` 1: in order on this thread; ``budget``: the memory the running calls'
    estimates may add up to, default twice the largest). An exception from ``fn`` is raised here after
    the running calls finish; calls not yet started are not started."""
    if threads <= 1 or len(keys) <= 1:
        return {k: fn(k) for k in keys}
    top = 2 * max(estimates, default=0.0) if budget is None else budget
    excl = exclusive(estimates, top)
    pending = [i for i in range(len(keys)) if excl[i]] + [i for i in range(len(keys)) if not excl[i]]
    cond = threading.Condition()
    state = {"slots": threads - (1 if busy is not None else 0), "running": [], "error": None}
    out: dict[Hashable, Any] = {}

    def admissible(i: int) -> bool:
        run = state["running"]
        if len(run) >= state["slots"]:
            return False
        return not run or sum(estimates[j] for j in run) + estimates[i] <= top

    def worker() -> None:
        while True:
            with cond:
                while True:
                    if not pending or state["error"] is not None:
                        return
                    pick = next((i for i in pending if admissible(i)), None)
                    if pick is not None:
                        pending.remove(pick)
                        state["running"].append(pick)
                        break
                    cond.wait()
            try:
                value = fn(keys[pick])
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                with cond:
                    state["error"] = state["error"] or e
            else:
                out[keys[pick]] = value
            finally:
                with cond:
                    state["running"].remove(pick)
                    cond.notify_all()

    if busy is not None:
        def free_slot() -> None:
            try:
                busy()
            finally:
                with cond:
                    state["slots"] += 1
                    cond.notify_all()

        threading.Thread(target=free_slot, name=f"{name}-cpu-slot", daemon=True).start()
    pool = [threading.Thread(target=worker, name=f"{name}_{t}", daemon=True) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if state["error"] is not None:
        raise state["error"]
    return {k: out[k] for k in keys}
