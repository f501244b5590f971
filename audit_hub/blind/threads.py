"""How many CPU threads the blind runner's forward passes use (``--threads``), when it runs on CPU.

torch runs a forward pass on as many OpenMP threads as the machine has cores. That is fastest on an idle
machine for a model whose matrix products are large enough to split, and slowest when another process keeps
one of the cores busy: every parallel region then waits for a thread the OS has descheduled. Measured on 2
cores (``benchmarks/blind.py``, section 2: the CLI, a random Llama of hidden size 512, 600 questions): 14.9 s
on 2 threads and 21.9 s on 1 when the machine was idle, and 38.4 s on 2 against 22.3 s on 1 with one busy
process beside it (15.3 s and 22.3 s with ``auto``); the tiny test model is fastest on 1 thread either way.
No fixed count is right for both, so ``--threads auto`` (the default) measures.

:class:`ThreadChooser` is that measurement, with no torch in it: it hands out a thread count per batch and
is told each batch's seconds and its work (padded tokens). It probes every candidate count on consecutive
batches (longest-first order makes neighbouring batches alike; the cost is seconds per token), twice, in
alternating order so that a drift in batch length favours none; it then runs the cheapest count for
:data:`REPROBE_EVERY` batches and probes again, so a load that comes or goes during a run is followed. The
first batch of a kind (logprob or generate) is a warm-up and is not timed. The counts it used, the last
choice and the probes' costs go to the output's ``manifest.json`` (``params.cpu_threads``).
"""

from __future__ import annotations

import os

from ..errors import InputError

PROBE_ROUNDS = 2  # batches per candidate in each probe
REPROBE_EVERY = 48  # batches at the chosen count between probes


def candidate_counts(default: int) -> list[int]:
    """1, 2, 4, ... up to torch's default thread count, and that count itself."""
    out, n = [], 1
    while n < default:
        out.append(n)
        n *= 2
    out.append(max(1, default))
    return out


def parse_threads(value: str | int | None) -> int | str:
    """``--threads``: ``auto`` or a count of at least 1 (one line naming the option otherwise)."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return "auto"
    from ..bounds import check_range

    try:
        n = int(str(value).strip())
    except ValueError:
        raise InputError(f"--threads must be 'auto' or a whole number, got {str(value)!r}") from None
    check_range("--threads", n)
    return n


class ThreadChooser:
    """Chooses the thread count of each batch from measured seconds per token (see the module docstring)."""

    def __init__(self, candidates: list[int], probe_rounds: int = PROBE_ROUNDS, reprobe_every: int = REPROBE_EVERY):
        self.candidates = list(candidates)
        self.probe_rounds, self.reprobe_every = probe_rounds, reprobe_every
        self.used: dict[int, int] = {}
        self.probes: list[dict] = []
        self.chosen: int | None = None
        self._plan: list[int] = []
        self._costs: dict[int, list[float]] = {}
        self._left = 0
        self._warm = False
        if len(self.candidates) == 1:
            self.chosen = self.candidates[0]

    def new_kind(self) -> None:
        """Batches of another kind follow (generation after scoring): costs are not comparable, probe anew."""
        self._plan, self._costs, self._left, self._warm = [], {}, 0, False

    def next_count(self) -> int:
        """The thread count of the next batch."""
        if not self._warm or len(self.candidates) == 1:
            return self.chosen or self.candidates[-1]
        if not self._plan and self._left <= 0:
            order = []
            for r in range(self.probe_rounds):
                order += self.candidates if r % 2 == 0 else self.candidates[::-1]
            self._plan, self._costs = order, {c: [] for c in self.candidates}
        return self._plan[0] if self._plan else self.chosen

    def record(self, count: int, seconds: float, work: float) -> None:
        """The batch just run on ``count`` threads took ``seconds`` for ``work`` tokens."""
        self.used[count] = self.used.get(count, 0) + 1
        if not self._warm:
            self._warm = True
            return
        if self._plan:
            self._plan.pop(0)
            self._costs[count].append(seconds / max(work, 1.0))
            if not self._plan:
                mean = {c: sum(v) / len(v) for c, v in self._costs.items() if v}
                self.chosen = min(mean, key=lambda c: (mean[c], c))
                self.probes.append({c: round(mean[c] * 1e6, 3) for c in mean})  # microseconds per token
                self._left = self.reprobe_every
        else:
            self._left -= 1

    def summary(self) -> dict:
        return {"mode": "auto", "candidates": self.candidates, "chosen": self.chosen,
                "batches_per_count": {str(k): v for k, v in sorted(self.used.items())},
                "probe_us_per_token": [{str(k): v for k, v in p.items()} for p in self.probes]}


def env_threads() -> int | None:
    """``OMP_NUM_THREADS`` when the user set it to a count (``auto`` then keeps it: the user chose)."""
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n >= 1 else None
