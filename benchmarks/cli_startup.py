"""Time `benchaudit --help` and `benchaudit audit --help` and list heavy modules they import.

Target (issue: core): under 1.5 s each on the 2-core reference machine, and none of torch,
transformers, evaluate imported. Run: .venv/bin/python benchmarks/cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

HEAVY = ("torch", "transformers", "evaluate", "datasets", "sklearn", "matplotlib", "accelerate", "peft")
PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['benchaudit', *sys.argv[1:]]\n"
    "from audit_hub.cli import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    "heavy = sorted(m for m in {heavy!r} if m in sys.modules)\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
)


def measure(args: list[str], repeats: int = 5) -> tuple[float, str]:
    times, heavy = [], ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        heavy = [ln for ln in p.stderr.splitlines() if ln.startswith("HEAVY=")][-1][6:]
    return statistics.median(times), heavy


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="one run per command instead of 5 (CI)")
    repeats = 1 if ap.parse_args().smoke else 5
    for args in (["--help"], ["audit", "--help"]):
        t, heavy = measure(args, repeats)
        print(f"benchaudit {' '.join(args):<14} median {t:.3f} s over {repeats} runs; heavy modules imported: "
              f"{heavy or 'none'}  (target < 1.5 s, none of torch/transformers/evaluate)")


if __name__ == "__main__":
    main()
