"""Parallel audit: the detector scheduler's CPU and memory rules, calibration simulations shared between the
worker and the audit process, detectors on threads, thread-safe frame caches and figures drawn in the worker.
Every parallel path must give exactly the numbers and files of the serial one."""

import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim import simulate_frame  # noqa: E402

from audit_hub.engine.scheduler import exclusive, run_calls  # noqa: E402


def _recorder(estimates, hold=0.15):
    """fn for run_calls recording which calls run at once (and the largest such set)."""
    lock = threading.Lock()
    running: set = set()
    seen: list[frozenset] = []

    def fn(i):
        with lock:
            running.add(i)
            seen.append(frozenset(running))
        time.sleep(hold)
        with lock:
            running.discard(i)
        return i * i

    return fn, seen


def test_scheduler_keeps_order_and_the_memory_rule():
    est = [10.0, 4.0, 5.0, 3.0, 6.0]
    assert exclusive(est) == [True, False, False, False, False]  # 10 + 3 > 10; 4 + 3 <= 10
    assert exclusive(est, 20.0) == [False] * 5
    fn, seen = _recorder(est)
    run_calls(list(range(5)), fn, est, threads=3)  # default budget: twice the largest
    assert all(sum(est[i] for i in s) <= 20.0 for s in seen) and max(len(s) for s in seen) >= 2
    fn, seen = _recorder(est)
    out = run_calls(list(range(5)), fn, est, threads=2, budget=10.0)
    assert out == {i: i * i for i in range(5)} and list(out) == [0, 1, 2, 3, 4]
    for s in seen:
        assert sum(est[i] for i in s) <= max(est) or len(s) == 1
        assert 0 not in s or s == {0}  # the largest runs alone
    assert max(len(s) for s in seen) == 2  # the others do pair up (4 + 5, 3 + 6, ...)
    assert seen[0] == {0}  # calls that can pair with nothing go first


def test_scheduler_gives_a_busy_cpu_back_only_when_free():
    est = [2.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert exclusive([1.0] * 4) == [True] * 4  # equal estimates: side by side would double the peak
    gate = threading.Event()
    fn, seen = _recorder(est, hold=0.1)
    t = threading.Timer(0.25, gate.set)
    t.start()
    run_calls(list(range(6)), fn, est, threads=2, busy=gate.wait, budget=2.0)
    t.join()
    assert max(len(s) for s in seen[:2]) == 1  # one thread while the worker holds the other CPU
    assert max(len(s) for s in seen) == 2      # two once it is free


def test_scheduler_raises_the_first_error_and_starts_nothing_after_it():
    started = []

    def fn(i):
        started.append(i)
        if i == 1:
            raise ValueError("boom 1")
        time.sleep(0.05)
        return i

    with pytest.raises(ValueError, match="boom 1"):
        run_calls(list(range(6)), fn, [1.0] * 6, threads=2)
    assert len(started) < 6
    assert run_calls([3, 1], lambda i: -i, [1.0, 1.0], threads=1) == {3: -3, 1: -1}


def test_simulations_split_between_processes_give_the_same_calibration():
    """Any split of the simulation indices (worker / audit process) merges into the serial result."""
    from audit_hub.engine.calibration import (
        NullSimulator,
        SimClaims,
        _collect,
        _ListClaims,
        _resolve,
        _simulate,
        calibrate,
    )

    f = simulate_frame(300, 5, accuracy_full=[0.4, 0.5, 0.6, 0.7, 0.8], accuracy_blind=0.35, seed=4)
    names = ["visual_dependency", "consensus_error", "fleiss_kappa_agreement"]
    params = {"visual_dependency": {"n_permutations": 99}}
    sim = NullSimulator(f, seed=2)
    runs = _resolve(names)
    whole = _simulate(sim, runs, n_sims=23, seed=2, params=params, progress=None)
    assert sorted(whole) == list(range(23))
    odd = _simulate(sim, runs, n_sims=23, seed=2, params=params, progress=None, claims=_ListClaims(range(1, 23, 2)))
    even = _simulate(sim, runs, n_sims=23, seed=2, params=params, progress=None, claims=_ListClaims(range(0, 23, 2)))
    late = _simulate(sim, runs, n_sims=23, seed=2, params=params, progress=None, claims=_ListClaims([21, 22]))
    assert _collect(odd | even, names) == _collect(whole, names)
    assert late[21] == whole[21] and late[22] == whole[22]  # skipping batches does not shift the draws
    claims = SimClaims(None, 3)
    assert [claims.next() for _ in range(5)] == [0, 1, 2, None, None]
    inline = calibrate(f, names, n_sims=23, seed=2, params=params)
    assert inline["consensus_error"]["n_runs"] == 23


def _calibration_in_a_worker(then=None):
    """The inline calibration of a small simulated pool, and the same one run with a worker that has claimed
    at least 2 simulations, after ``then(worker, calibration)``: (inline, with the worker, the Calibration)."""
    from audit_hub.engine.calibration import Calibration, calibrate
    from audit_hub.engine.worker import WorkerProcess

    f = simulate_frame(300, 5, accuracy_full=[0.4, 0.5, 0.6, 0.7, 0.8], accuracy_blind=0.35, seed=5)
    names = ["visual_dependency", "consensus_error"]
    params = {"visual_dependency": {"n_permutations": 99}}
    inline = calibrate(f, names, n_sims=40, seed=1, params=params)
    with WorkerProcess() as worker:
        cal = Calibration(f, names, n_sims=40, seed=1, params=params, worker=worker)
        t0 = time.time()
        while worker.counter.value < 2 and time.time() - t0 < 60:  # the worker has started claiming
            time.sleep(0.02)
        assert worker.counter.value >= 2
        if then is not None:
            then(worker, cal)
        out = cal.result()
    return inline, out, cal


def test_worker_and_audit_process_share_the_simulations():
    """The worker claims some simulations, the audit process the rest: the same numbers as inline."""
    inline, out, cal = _calibration_in_a_worker()
    assert out == inline
    assert 2 <= cal.worker["n_sims"] <= 40


def _kill_worker(worker) -> None:
    import os
    import signal

    for pid in worker._pids:  # noqa: SLF001 (the process the pool started)
        os.kill(pid, signal.SIGKILL)


def test_a_worker_killed_mid_calibration_neither_hangs_nor_changes_a_number():
    """A worker killed (an OOM kill) while it holds simulations never answers: the audit process notices,
    reruns what it had claimed, and gives the inline numbers (it used to wait forever)."""
    def kill(worker, cal):
        _kill_worker(worker)
        done = threading.Event()
        threading.Thread(target=lambda: (cal.wait_worker(), done.set()), daemon=True).start()
        assert done.wait(30), "wait_worker() hung on a dead worker"

    inline, out, cal = _calibration_in_a_worker(kill)
    assert out == inline
    assert cal.worker == {}  # nothing came back from it


def test_figures_of_a_dead_worker_are_drawn_here(tmp_path):
    """The worker dies after the figures were handed to it: they are drawn here, the files the card names."""
    from audit_hub.engine.run import AuditConfig, run_audit
    from audit_hub.engine.worker import WorkerProcess
    from audit_hub.report import figures
    from audit_hub.report.tables import build_summary_table
    from audit_hub.report.writer import _submit_figures, _wait_figures

    res = run_audit(simulate_frame(300, 4, accuracy_blind=0.35, seed=6),
                    AuditConfig(calibration_sims=0, run_calibration=False, n_permutations=99))
    fi = figures.figure_inputs(res, build_summary_table(res))
    want = figures.planned(fi)
    with WorkerProcess() as worker:
        job = worker.submit(time.sleep, 3600)  # a job that a dead worker never finishes
        _kill_worker(worker)
        _wait_figures(worker, job, fi, tmp_path / "b", want)
        assert _submit_figures(worker, fi, tmp_path / "a") is None  # a dead worker gets no new job
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(Path(v).name for v in want.values())


def test_a_script_without_the_main_guard_runs_in_one_process(tmp_path):
    """A script calling the library at its top level without ``if __name__ == "__main__":`` would be run again
    by the spawned worker, which failed there and was restarted forever while the audit waited. The audit now
    runs in one process, says so in one warning naming the script's line, and writes the same summary."""
    import subprocess

    root = Path(__file__).parent.parent
    q, r = root / "tests/fixtures/real_pools/mathvista/questions.parquet", root / "tests/fixtures/real_pools/mathvista/runs.parquet"
    body = (f"import audit_hub as ba\nr = ba.audit(questions={str(q)!r}, runs=[{str(r)!r}], seed=0, "
            "calibration_sims=10, out={out!r})\nprint('DONE')\n")
    (tmp_path / "bare.py").write_text(body.format(out=str(tmp_path / "bare")))
    (tmp_path / "guarded.py").write_text("if __name__ == '__main__':\n" + "".join(
        "    " + line + "\n" for line in body.format(out=str(tmp_path / "guarded")).splitlines()))
    from audit_hub.bounds import available_cpus

    bare = subprocess.run([sys.executable, str(tmp_path / "bare.py")], capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0 and "DONE" in bare.stdout, bare.stderr[-2000:]
    warned = [ln for ln in bare.stderr.splitlines() if "RuntimeWarning" in ln]
    assert available_cpus() < 2 or len(warned) == 1 and warned[0].startswith(f"{tmp_path / 'bare.py'}:2: RuntimeWarning: benchaudit "
                                                     "runs in one process"), bare.stderr[-2000:]
    guarded = subprocess.run([sys.executable, str(tmp_path / "guarded.py")], capture_output=True, text=True,
                             timeout=300)
    assert guarded.returncode == 0 and "DONE" in guarded.stdout and "RuntimeWarning" not in guarded.stderr
    assert (json.loads((tmp_path / "bare/summary.json").read_text())
            == json.loads((tmp_path / "guarded/summary.json").read_text()))


def test_unguarded_main_reads_the_call_site(tmp_path):
    import subprocess

    script = tmp_path / "s.py"
    script.write_text("from audit_hub.engine.worker import unguarded_main\n"
                      "def f():\n    return unguarded_main()\n"
                      "print('top', f())\n"
                      "if __name__ == '__main__':\n    print('guarded', f())\n"
                      "if '__main__' == __name__:\n    print('flipped', f())\n"
                      "if __name__ == '__main__' and True:\n    print('and', f())\n"
                      "if __name__ == '__main__' or True:\n    print('or', f())\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60).stdout
    assert out.splitlines() == [f"top ({str(script)!r}, 4)", "guarded None", "flipped None", "and None",
                                f"or ({str(script)!r}, 12)"]
    # `python -m package` (how `python -m audit_hub` runs): multiprocessing never runs a package's __main__ again
    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / "__init__.py").write_text("")
    (tmp_path / "pk" / "__main__.py").write_text(script.read_text())
    out = subprocess.run([sys.executable, "-m", "pk"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.stdout.splitlines()[0] == "top None", out.stderr
    # a script read from stdin cannot be run again by a second process at all
    with open(script) as fh:
        out = subprocess.run([sys.executable, "-"], stdin=fh, capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines()[0] == "top ('<stdin>', 0)", out.stderr


def _dump(result) -> str:
    return json.dumps(result.summary, sort_keys=True, default=str)


def test_detectors_on_threads_give_the_serial_audit():
    from audit_hub.engine.run import AuditConfig, run_audit

    f = simulate_frame(500, 6, accuracy_full=[0.3, 0.5, 0.6, 0.7, 0.8, 0.9], accuracy_blind=0.4,
                       judge_flip_rate=0.05, seed=8)
    cfg = AuditConfig(calibration_sims=0, run_calibration=False, n_permutations=199)
    serial = run_audit(f, cfg, threads=1)
    f2 = simulate_frame(500, 6, accuracy_full=[0.3, 0.5, 0.6, 0.7, 0.8, 0.9], accuracy_blind=0.4,
                        judge_flip_rate=0.05, seed=8)
    threaded = run_audit(f2, cfg, threads=3)
    assert _dump(serial) == _dump(threaded)
    assert set(serial.alt_results) == set(threaded.alt_results) and serial.alt_results
    for name, res in serial.results.items():
        assert res.per_question.equals(threaded.results[name].per_question), name


def test_frame_caches_fill_once_under_threads():
    f = simulate_frame(400, 5, seed=3)
    got = []
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        got.append((f.answer_code_vector(), f.correctness("full", "hit"), f.models_in("blind")))

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(got) == 8
    assert all(g[0] is got[0][0] and g[1] is got[0][1] for g in got)  # one array each, shared
    assert all(g[2] == got[0][2] for g in got)


def test_figures_drawn_in_the_worker_are_the_inline_files(tmp_path):
    from audit_hub.engine.run import AuditConfig, run_audit
    from audit_hub.engine.worker import WorkerProcess
    from audit_hub.report import figures
    from audit_hub.report.tables import build_summary_table

    f = simulate_frame(400, 5, accuracy_full=[0.4, 0.5, 0.6, 0.7, 0.8], accuracy_blind=0.35,
                       judge_flip_rate=0.05, seed=6)
    res = run_audit(f, AuditConfig(calibration_sims=0, run_calibration=False, n_permutations=99))
    fi = figures.figure_inputs(res, build_summary_table(res))
    assert set(figures.planned(fi)) == {"full_vs_blind", "null_distribution", "categories", "judge"}
    inline = figures.render_figures(fi, tmp_path / "a")
    assert inline == figures.planned(fi)
    with WorkerProcess() as worker:
        drawn, seconds = worker.submit(figures.render_figures_timed, fi, tmp_path / "b").get()
    assert drawn == inline and seconds > 0
    for name in inline.values():
        png = Path(name).name
        assert (tmp_path / "a" / png).read_bytes() == (tmp_path / "b" / png).read_bytes()
    # no blind arm: only the figures the inputs support are planned, and exactly those are drawn
    r2 = run_audit(simulate_frame(300, 4, accuracy_blind=None, seed=2),
                   AuditConfig(calibration_sims=0, run_calibration=False))
    fi2 = figures.figure_inputs(r2, build_summary_table(r2))
    assert "full_vs_blind" not in fi2.names and "null_distribution" not in fi2.names
    assert figures.render_figures(fi2, tmp_path / "c") == figures.planned(fi2)


def test_parallel_cli_audit_equals_serial(tmp_path):
    """The command with --parallel (threads, worker, shared simulations, figures in the worker) writes the
    same summary, tables, figures and card as --no-parallel on the bundled example."""
    from typer.testing import CliRunner

    from audit_hub.cli import app

    runner = CliRunner()
    a = runner.invoke(app, ["audit", "--out", str(tmp_path / "par"), "--calibration-sims", "6"])
    b = runner.invoke(app, ["audit", "--out", str(tmp_path / "ser"), "--calibration-sims", "6", "--no-parallel"])
    assert a.exit_code == 0 and b.exit_code == 0, (a.output, b.output)
    pa_, se = tmp_path / "par", tmp_path / "ser"
    assert json.loads((pa_ / "summary.json").read_text()) == json.loads((se / "summary.json").read_text())
    files = sorted(p.relative_to(se) for p in se.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert files == sorted(p.relative_to(pa_) for p in pa_.rglob("*") if p.is_file() and p.name != "manifest.json")
    for rel in files:
        assert (pa_ / rel).read_bytes() == (se / rel).read_bytes(), rel
    timings = json.loads((pa_ / "manifest.json").read_text())["timings_s"]
    assert "detectors" in timings or "visual_dependency" in timings
    assert np.isfinite(sum(timings.values()))


def test_label_codes_are_cleaned_in_chunks_without_full_copies():
    """clean_codes (the label model's int16 answer codes) equals the one-shot expression it replaced."""
    from audit_hub.stats.label_model import clean_codes

    rng = np.random.default_rng(1)
    A = rng.integers(-1, 7, size=(1000, 9)).astype(np.int32)
    k = rng.integers(2, 6, size=1000)
    rows = np.sort(rng.choice(1000, 400, replace=False))
    want = np.where((A[rows] >= 0) & (A[rows] < k[rows, None]), A[rows], -1).astype(np.int16)
    got = clean_codes(A, k[rows], rows, chunk=37)
    assert got.dtype == np.int16 and np.array_equal(got, want)
    assert np.array_equal(clean_codes(A, k, chunk=64), np.where((A >= 0) & (A < k[:, None]), A, -1))
