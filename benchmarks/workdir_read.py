"""A whole VLMEvalKit work_dir audited in one command: every file read once, one report per benchmark.

Builds ``work_dir/{model}/{eval_id}/{model}_{dataset}.xlsx`` (+ ``_exact_matching_result.xlsx``) for B
benchmarks x M models the way VLMEvalKit's run.py lays them out (a run folder ``T%Y%m%d-%H%M%S`` per run,
the model folder's links to the run's files, and an older run folder holding a second run of some
datasets, which the audit must skip), then runs ``benchaudit audit --runs work_dir --out OUT`` as a
subprocess with its defaults (``--extra`` adds options) and reports

* wall time, CPU time and peak RSS of the CLI (``_measure.py``: ``getrusage`` of a fresh wrapper);
* every open of every file under the work_dir, counted in the CLI process and its worker by a Python
  audit hook (``sys.addaudithook`` "open" events: ``open``, ``io.open``, ``os.open``; a link and its
  target are one file), per file: the most and fewest opens, and the same counts for one benchmark's
  files audited alone (``--runs work_dir/*/T*/..._{dataset}*``) -- reading a whole work_dir must open no
  file more often than auditing that file's own benchmark does;
* the files of the older run that were opened (must be none: they are skipped from their paths).

Target (issue 24): 50 benchmarks x 20 models, no file read twice (each data file opened for its data at
most once: the size/readability probe ``os.open(O_RDONLY | O_NONBLOCK)`` and the SHA-256 provenance hash
are counted separately).

    python benchmarks/workdir_read.py                       # 50 x 20, 60 questions each
    python benchmarks/workdir_read.py --benchmarks 10 --models 5 --extra "--no-figures"
    python benchmarks/workdir_read.py --smoke               # 3 x 2 with 12 questions; what CI runs
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _measure import benchaudit_cmd, child_env, measure  # noqa: E402

RUN_NEW, RUN_OLD = "T20260301-120000", "T20260101-090000"

#: installed in the CLI process and its spawned worker through PYTHONPATH: one line per open event of a path
#: under BA_OPEN_ROOT, "<kind>\t<realpath>" (kind: probe = os.open non-blocking read-only, else open)
_SITECUSTOMIZE = r'''
import os, sys
_log = os.environ.get("BA_OPEN_LOG")
if _log:
    _root = os.path.realpath(os.environ["BA_OPEN_ROOT"])
    _fh = open(f"{_log}.{os.getpid()}", "a", buffering=1, encoding="utf-8")
    _KINDS = {"check_input_path": "probe", "check_zip_container": "zipdir", "sha256_file": "hash"}

    def _hook(event, args, _fh=_fh, _root=_root):
        if event != "open" or not args:
            return
        p = args[0]
        if isinstance(p, int) or p is None:
            return
        try:
            p = os.path.realpath(os.fsdecode(p))
        except Exception:
            return
        if not p.startswith(_root + os.sep):
            return
        kind, f = "read", sys._getframe(1)
        while f is not None:
            if f.f_code.co_name in _KINDS:
                kind = _KINDS[f.f_code.co_name]
                break
            f = f.f_back
        _fh.write(f"{kind}\t{p}\n")

    sys.addaudithook(_hook)
'''


def build_workdir(root: Path, n_bench: int, n_models: int, n_q: int, *, seed: int = 0) -> list[str]:
    """The work_dir (xlsx sheets, VLMEvalKit layout); returns the benchmark names."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    names = [f"Bench{b:02d}" for b in range(n_bench)]
    letters = list("ABCD")
    for b, name in enumerate(names):
        gold = rng.choice(letters, size=n_q)
        qs = pd.DataFrame({"index": np.arange(n_q), "question": [f"{name} question {i}?" for i in range(n_q)],
                           **{L: [f"{name} option {L}{i}" for i in range(n_q)] for L in letters},
                           "answer": gold, "category": rng.choice(["x", "y", "z"], size=n_q)})
        for m in range(n_models):
            model = f"Model{m:02d}"
            skill = 0.3 + 0.6 * m / max(n_models - 1, 1)
            right = rng.random(n_q) < skill
            pred = np.where(right, gold, rng.choice(letters, size=n_q))
            sheet = qs.assign(prediction=pred)
            judged = sheet.assign(hit=(pred == gold).astype(int), log="exact")
            runs = [RUN_NEW] + ([RUN_OLD] if b % 5 == 0 else [])  # an older run of every fifth benchmark
            for run in runs:
                d = root / model / run
                d.mkdir(parents=True, exist_ok=True)
                s = sheet if run == RUN_NEW else sheet.assign(prediction=rng.choice(letters, size=n_q))
                s.to_excel(d / f"{model}_{name}.xlsx", index=False)
                if run == RUN_NEW:
                    judged.to_excel(d / f"{model}_{name}_exact_matching_result.xlsx", index=False)
            for f in (root / model / RUN_NEW).glob(f"{model}_{name}*.xlsx"):  # run.py's links
                link = root / model / f.name
                if not link.exists():
                    link.symlink_to(Path(RUN_NEW) / f.name)
    return names


def _opens(log_prefix: Path) -> dict[str, Counter]:
    """{kind: Counter(path)} with kinds probe (readability check), zipdir (the xlsx guard reading the zip
    directory), hash (the SHA-256 of the provenance), read (everything else: the data read)."""
    out: dict[str, Counter] = {k: Counter() for k in ("probe", "zipdir", "hash", "read")}
    for f in log_prefix.parent.glob(log_prefix.name + ".*"):
        for line in f.read_text(encoding="utf-8").splitlines():
            kind, _, path = line.partition("\t")
            out.setdefault(kind, Counter())[path] += 1
    return out


def run_cli(args: list[str], work: Path, tmp: Path, tag: str, timeout: float) -> tuple[dict, dict[str, Counter]]:
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    env = child_env(str(ROOT))
    env["PYTHONPATH"] = str(site) + os.pathsep + env["PYTHONPATH"]
    env["BA_OPEN_LOG"] = str(tmp / f"opens-{tag}")
    env["BA_OPEN_ROOT"] = str(work)
    env.setdefault("MPLBACKEND", "Agg")
    res = measure([*benchaudit_cmd(), "audit", *args], env=env, timeout=timeout)
    return res, _opens(tmp / f"opens-{tag}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", type=int, default=50)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--extra", default="", help="extra options for `benchaudit audit` (quoted)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--smoke", action="store_true", help="3 benchmarks x 2 models x 12 questions, no figures")
    a = ap.parse_args()
    if a.smoke:
        a.benchmarks, a.models, a.questions = 3, 2, 12
        a.extra = a.extra or "--no-figures --calibration-sims 2 --n-permutations 49"
    extra = shlex.split(a.extra)
    with tempfile.TemporaryDirectory(prefix="ba-workdir-") as t:
        tmp = Path(t)
        work = tmp / "work_dir"
        names = build_workdir(work, a.benchmarks, a.models, a.questions)
        files = sorted(p for p in work.rglob("*.xlsx") if not p.is_symlink())
        old = {str(p.resolve()) for p in files if p.parent.name == RUN_OLD}
        res, opens = run_cli(["--runs", str(work), "--out", str(tmp / "out"), *extra], work, tmp, "all", a.timeout)
        if res["rc"] != 0:
            print(f"FAIL: benchaudit audit exited {res['rc']}: {res.get('stderr_tail', '')[-1500:]}")
            return 1
        # one benchmark alone: the per-file baseline
        one = names[0]
        res1, opens1 = run_cli(["--runs", str(work / "*" / RUN_NEW / f"*_{one}*.xlsx"), "--out", str(tmp / "out1"),
                                *extra], work, tmp, "one", a.timeout)
        index = json.loads((tmp / "out" / "index.json").read_text(encoding="utf-8"))
        data_files = [str(p.resolve()) for p in files if str(p.resolve()) not in old]
        kinds = ("read", "zipdir", "hash", "probe")
        total = Counter()
        for k in kinds:
            total.update(opens[k])
        base_files = [p for p in data_files if f"_{one}" in os.path.basename(p)]
        worse = [p for p in base_files if any(opens[k].get(p, 0) > opens1[k].get(p, 0) for k in kinds)]
        old_opened = sorted(p for p in old if total.get(p, 0))
        print(f"work_dir: {a.benchmarks} benchmarks x {a.models} models x {a.questions} questions, "
              f"{len(files)} sheets ({len(old)} in an older run folder), links in every model folder")
        print(f"benchaudit audit --runs work_dir {' '.join(extra)}: wall {res['wall_s']:.1f} s, "
              f"cpu {res['cpu_s']:.1f} s, peak RSS {res['peak_rss_gb']:.2f} GB, load {res['load_before']}")
        print(f"reports: {len(index.get('benchmarks', []))} (expected {a.benchmarks})")
        for k in kinds:
            per = [opens[k].get(p, 0) for p in data_files]
            per1 = [opens1[k].get(p, 0) for p in base_files]
            print(f"opens per data file, {k:<6}: whole work_dir min {min(per)} max {max(per)}; "
                  f"{one} alone max {max(per1) if per1 else 0}")
        ok_reports = len(index.get("benchmarks", [])) == a.benchmarks
        ok_read = max(opens["read"].get(p, 0) for p in data_files) == 1 and min(
            opens["read"].get(p, 0) for p in data_files) == 1
        ok_once = ok_read and not worse
        print(f"{'PASS' if ok_read else 'FAIL'}: every data file read exactly once (the readability probe, the xlsx "
              "zip-directory guard and the provenance hash are counted apart)")
        print(f"{'PASS' if not worse else 'FAIL'}: no file opened more often than when its benchmark is audited alone"
              + (f" (worse: {worse[:3]})" if worse else ""))
        print(f"{'PASS' if not old_opened else 'FAIL'}: the older run's {len(old)} files never opened"
              + (f" (opened: {old_opened[:3]})" if old_opened else ""))
        print(f"{'PASS' if ok_reports else 'FAIL'}: one report per benchmark")
        return 0 if (ok_once and not old_opened and ok_reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
