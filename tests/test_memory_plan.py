"""The audit's memory plan (issue 30, audit_hub.engine.memory): sizes, the limit's sources, a hand-computed
plan, the choices it makes, the early refusal, and that its estimate bounds the peak a child measures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit_hub import bounds
from audit_hub.bounds import GiB, MiB
from audit_hub.engine import memory
from audit_hub.engine.memory import InputSize
from audit_hub.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------ sizes
@pytest.mark.parametrize("text,expected", [
    ("6G", 6 * GiB), ("500M", 500 * MiB), ("1.5G", 3 * GiB // 2), ("2048MB", 2 * GiB), ("2GiB", 2 * GiB),
    ("64k", 64 * 1024), ("1T", 1 << 40), ("123456", 123456), (" 6 g ", 6 * GiB),
])
def test_parse_size(text, expected):
    assert bounds.parse_size(text) == expected


@pytest.mark.parametrize("text", ["six", "6X", "", "-1G", "0", "1e9"])
def test_parse_size_refuses_in_one_line(text):
    with pytest.raises(InputError) as e:
        bounds.parse_size(text)
    assert "--max-memory" in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------ the limit
MEMINFO = """MemTotal:       24576000 kB
MemFree:         1000000 kB
MemAvailable:   20000000 kB
Buffers:          123456 kB
"""


def test_meminfo_available():
    assert bounds.meminfo_available(MEMINFO) == 20_000_000 * 1024
    assert bounds.meminfo_available("MemTotal: 100 kB\n") is None


@pytest.mark.parametrize("text,expected", [
    ("max\n", None), ("2147483648\n", 2 * GiB), ("9223372036854771712\n", None),  # v1 'unlimited'
    ("", None), ("garbage", None), ("0\n", None),
])
def test_cgroup_limit(text, expected):
    assert bounds.cgroup_limit(text) == expected


def test_cgroup_limit_files_v2_and_v1():
    v2 = bounds.cgroup_limit_files("0::/user.slice/job-7\n", root="/cg")
    assert v2[:3] == ["/cg/user.slice/job-7/memory.max", "/cg/user.slice/memory.max", "/cg/memory.max"]
    v1 = bounds.cgroup_limit_files("5:cpu,cpuacct:/docker/ab\n4:memory:/docker/ab\n", root="/cg")
    assert v1[:3] == ["/cg/memory/docker/ab/memory.limit_in_bytes", "/cg/memory/docker/memory.limit_in_bytes",
                      "/cg/memory/memory.limit_in_bytes"]
    assert "/cg/memory.max" in v1  # the v2 root is tried too


def _reader(files: dict[str, str]):
    return lambda path: files.get(path)


def test_machine_memory_takes_the_smaller_and_the_margin():
    files = {"/proc/meminfo": MEMINFO, "/proc/self/cgroup": "0::/job\n",
             "/sys/fs/cgroup/job/memory.max": "2147483648\n", "/sys/fs/cgroup/memory.max": "max\n"}
    total, source = bounds.machine_memory(_reader(files))
    assert total == 2 * GiB and "/sys/fs/cgroup/job/memory.max" in source
    # margin: 10%, at least 256 MiB -> 2 GiB - 256 MiB (10% would be 204.8 MiB)
    assert memory.default_limit(_reader(files))[0] == 2 * GiB - 256 * MiB
    # no cgroup limit: MemAvailable, minus 10% of it (more than 256 MiB)
    files["/sys/fs/cgroup/job/memory.max"] = "max\n"
    avail = 20_000_000 * 1024
    assert bounds.machine_memory(_reader(files)) == (avail, "MemAvailable (/proc/meminfo)")
    assert memory.default_limit(_reader(files))[0] == avail - avail // 10
    assert memory.default_limit(_reader({})) == (None, "unknown")


def test_process_peak_reads_vmhwm():
    status = "Name:\tpython\nVmPeak:\t 900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 100000 kB\n"
    assert memory.process_peak(42, read=_reader({"/proc/42/status": status})) == 123456 * 1024
    assert memory.process_peak(42, read=_reader({})) is None
    assert memory.process_peak("self") > 10 * MiB  # this process, live


# ------------------------------------------------------------------------------------------ inputs
def test_text_rows_exact_when_read_whole_and_scaled_when_sampled(tmp_path):
    small = tmp_path / "a.jsonl"
    small.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3}')  # the last line has no newline
    assert memory.text_rows(str(small), small.stat().st_size) == 3
    big = tmp_path / "b.csv"
    line = b"x" * 99 + b"\n"  # 100 bytes a row
    big.write_bytes(line * 30_000)  # 3 MB: sampled (first MiB)
    assert memory.text_rows(str(big), big.stat().st_size) == 30_000


def test_size_inputs_files_folders_globs_and_hub_ids(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": list(range(1234))}), tmp_path / "r1.parquet")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r2.jsonl").write_text('{"a":1}\n' * 10)
    (tmp_path / "sub" / "notes.md").write_text("not a run file")
    sized, unknown = memory.size_inputs([str(tmp_path / "r1.parquet"), str(tmp_path / "sub"),
                                         str(tmp_path / "*.parquet"), "org/dataset", None])
    assert [(Path(s.path).name, s.kind, s.rows, s.exact) for s in sized] == [
        ("r1.parquet", "parquet", 1234, True), ("r2.jsonl", "text", 10, False)]  # the glob's file once
    assert unknown == ["org/dataset"]


# ------------------------------------------------------------------------------------------ the plan
COEF = {"base_main": 1000.0, "base_worker": 500.0, "parquet_per_row": 10.0, "text_per_row": 100.0,
        "per_question": 20.0, "xlsx_per_byte": 4.0, "worker_per_cell": 2.0, "margin": 1.5}


def test_estimate_hand_computed():
    inputs = [InputSize("r.parquet", "parquet", 0, 1000, True), InputSize("b.jsonl", "text", 0, 200, False)]
    rows, q, serial, parallel, worker = memory.estimate(inputs, 100, detector_bytes_per_cell=3.0, coefficients=COEF)
    assert (rows, q) == (1200, 100)
    # read: 1000 x 10 + 200 x 100 = 30000; questions 100 x 20 = 2000; heaviest detector 3 B x 1200 cells = 3600
    assert serial == int(1.5 * (1000 + 30000 + 2000 + 3600)) == 54900
    assert parallel == int(1.5 * (1000 + 30000 + 2000 + 2 * 3600)) == 60300
    assert worker == int(1.5 * (500 + 2 * 1200)) == 4350
    # questions unknown: counted as the run rows (at most QUESTIONS_IF_UNKNOWN)
    assert memory.estimate(inputs, None, detector_bytes_per_cell=3.0, coefficients=COEF)[1] == 1200


@pytest.mark.parametrize("limit,expected", [
    (None, (True, 2, 57300 + 4350, True)),
    (10**9, (True, 2, 57300 + 4350, True)),             # everything fits
    (57300 + 4350, (True, 2, 57300 + 4350, True)),      # exactly
    (57300 + 4350 - 1, (True, 1, 51900 + 4350, True)),  # the worker stays, the detectors go one at a time
    (51900 + 4350 - 1, (False, 1, 51900, True)),        # everything in turn (parallel alone needs 57300)
    (51900 - 1, (False, 1, 51900, False)),              # refused
])
def test_choose_prefers_parallel_and_serialises_to_fit(limit, expected):
    w, t, e, fits, why = memory.choose(limit, 51900, 57300, 4350, worker_wanted=True, threads_wanted=2)
    assert (w, t, e, fits) == expected
    if limit is not None and e == 57300 + 4350:
        assert why == "everything fits"
    elif limit is not None and fits:
        assert why.endswith("serialised to fit")


def test_choose_drops_a_large_worker_before_the_threads():
    # serial 100, parallel 120, worker 50: worker+parallel 170, worker+serial 150, parallel alone 120
    assert memory.choose(130, 100, 120, 50, worker_wanted=True, threads_wanted=2)[:4] == (False, 2, 120, True)


def test_choose_without_worker_or_threads():
    assert memory.choose(10**9, 10, 20, 5, worker_wanted=False, threads_wanted=1)[:4] == (False, 1, 10, True)


def test_plan_audit_on_files_and_its_record(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question_id": [f"q{i}" for i in range(50)]}), tmp_path / "q.parquet")
    pq.write_table(pa.table({"question_id": [f"q{i % 50}" for i in range(400)]}), tmp_path / "runs.parquet")
    monkeypatch.setattr(memory, "COEFFICIENTS", dict(COEF))
    monkeypatch.setattr(memory, "heaviest_detector_bytes_per_cell", lambda names=None: 3.0)
    plan = memory.plan_audit(str(tmp_path / "q.parquet"), [str(tmp_path / "runs.parquet")], [], max_memory=10**9,
                             worker_wanted=True, threads_wanted=2)
    # rows 400, questions 50: serial 1.5 x (1000 + 4000 + 1000 + 1200) = 10800,
    # parallel 1.5 x (1000 + 4000 + 1000 + 2400) = 12600, worker 1.5 x (500 + 800) = 1950
    assert (plan.run_rows, plan.questions_rows, plan.main_serial, plan.main_parallel, plan.worker) == (
        400, 50, 10800, 12600, 1950)
    assert (plan.use_worker, plan.detector_threads, plan.estimate, plan.fits) == (True, 2, 14550, True)
    rec = plan.record()
    assert rec["choices"] == {"calibration_worker": True, "detector_threads": 2}
    assert rec["limit_source"] == "--max-memory" and rec["estimate_bytes"] == 14550
    json.dumps(rec)
    with pytest.raises(InputError) as e:
        # no questions file: 400 questions counted, serial 1.5 x (1000 + 4000 + 8000 + 1200) = 21300
        memory.require_fit(memory.plan_audit(None, [str(tmp_path / "runs.parquet")], [], max_memory=21299))
    msg = str(e.value)
    assert "\n" not in msg and "400 run rows" in msg and "--max-memory" in msg and "21299" not in msg
    memory.require_fit(memory.plan_audit(None, [str(tmp_path / "runs.parquet")], [], max_memory=21300))


# ------------------------------------------------------------------------------------------ the command
def _data(tmp_path: Path) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from detectors import make_data
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    make_data(tmp_path, 2000, 3)
    return tmp_path / "questions.parquet", tmp_path / "runs.parquet"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def test_refused_early_with_a_tiny_max_memory(tmp_path):
    q, r = _data(tmp_path)
    out = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "audit_hub", "audit", "--questions", str(q), "--runs", str(r),
                        "--out", str(out), "--max-memory", "50M"], capture_output=True, text=True, env=_env(),
                       timeout=300)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "12,000 run rows" in lines[0] and "50 MB (--max-memory)" in lines[0] and "larger --max-memory" in lines[0]
    assert not out.exists() or not any(out.iterdir())
    bad = subprocess.run([sys.executable, "-m", "audit_hub", "audit", "--questions", str(q), "--runs", str(r),
                          "--out", str(out), "--max-memory", "lots"], capture_output=True, text=True, env=_env(),
                         timeout=300)
    assert bad.returncode == 2 and len([ln for ln in bad.stderr.splitlines() if ln.strip()]) == 1, bad.stderr
    assert not out.exists() or not any(out.iterdir())


def test_plan_bounds_the_measured_peak_and_serialises_when_tight(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from _measure import measure
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    q, r = _data(tmp_path)
    base = [sys.executable, "-m", "audit_hub", "audit", "--questions", str(q), "--runs", str(r),
            "--calibration-sims", "2", "--no-figures", "--verbose"]
    out = tmp_path / "default"
    m = measure([*base, "--out", str(out)], env=_env(), timeout=600)
    assert m["rc"] == 0, m["stderr_tail"]
    plan = json.loads((out / "manifest.json").read_text())["memory_plan"]
    assert "memory plan: estimate" in m["stderr_tail"]
    peak = m["peak_rss_gb"] * GiB  # the largest single process of the audit (getrusage of the children)
    stages = plan["stages_bytes"]
    assert plan["estimate_bytes"] >= peak and max(stages["main_parallel"], stages["worker"]) >= peak
    measured = plan["measured_peak_bytes"]
    assert stages["main_parallel"] >= measured["main"] > 50 * MiB
    if plan["choices"]["calibration_worker"]:
        assert stages["worker"] >= measured["worker"] > 50 * MiB
        assert plan["estimate_bytes"] >= measured["main"] + measured["worker"]
    # a limit just under the preferred schedule's: the plan serialises (and still fits), recorded
    if plan["choices"]["calibration_worker"] and plan["choices"]["detector_threads"] > 1:
        tight = stages["main_serial"] + stages["worker"]
        out2 = tmp_path / "tight"
        p = subprocess.run([*base, "--out", str(out2), "--max-memory", str(tight)], capture_output=True,
                           text=True, env=_env(), timeout=600)
        assert p.returncode == 0, p.stderr
        plan2 = json.loads((out2 / "manifest.json").read_text())["memory_plan"]
        assert plan2["choices"] == {"calibration_worker": True, "detector_threads": 1}
        assert plan2["estimate_bytes"] == tight and "serialised to fit" in plan2["why"]
        # no room for the worker: the calibration runs in this process, after the detectors
        out3 = tmp_path / "no_worker"
        p = subprocess.run([*base, "--out", str(out3), "--max-memory", str(stages["main_parallel"])],
                           capture_output=True, text=True, env=_env(), timeout=600)
        assert p.returncode == 0, p.stderr
        plan3 = json.loads((out3 / "manifest.json").read_text())["memory_plan"]
        assert plan3["choices"] == {"calibration_worker": False, "detector_threads": 2}
        assert plan3["measured_peak_bytes"]["worker"] is None
        s1, s2, s3 = (json.loads((o / "summary.json").read_text()) for o in (out, out2, out3))
        assert s1["accuracy"] == s2["accuracy"] == s3["accuracy"]  # the schedule changes no number
        assert s1["calibration"] == s2["calibration"] == s3["calibration"]


def test_sizing_skips_what_the_readers_skip(tmp_path):
    """A FIFO, a dangling link and hidden files inside a runs folder are not sized (the readers skip them;
    sizing one must neither block on the FIFO nor fail on the link)."""
    import os

    from audit_hub.engine.memory import size_inputs

    (tmp_path / "runs.csv").write_text("question_id,model,prediction\nq1,m,A\nq2,m,B\n")
    os.mkfifo(tmp_path / "zz_pipe.csv")
    os.symlink("missing.csv", tmp_path / "zz_dangling.csv")
    (tmp_path / ".hidden.csv").write_text("question_id,model,prediction\nq1,m,A\n")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "old.csv").write_text("question_id,model,prediction\nq1,m,A\n")
    sized, unknown = size_inputs([str(tmp_path)])
    assert [os.path.basename(s.path) for s in sized] == ["runs.csv"]
    assert sized[0].rows == 3 and unknown == []  # the lines (header included: an estimate)
