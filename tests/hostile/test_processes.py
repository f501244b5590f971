"""Cases that need the real CLI in its own process: signals, a file-size limit (disk full), SIGKILL
followed by a rerun, and file permissions."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

from .conftest import REPO, all_bytes, assert_no_secret, write_benchmark

pytestmark = pytest.mark.slow


def _big_benchmark(ws, n=3000):
    return write_benchmark(ws.root / "big", n=n, models=("m1", "m2", "m3", "m4"))


def _handlers_installed(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        return False
    return False


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to see when the CLI is running")
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_gives_exit_code_one_line_and_nothing_written(ws, sig, code):
    q, r = _big_benchmark(ws)
    before = ws.snap()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "audit_hub.cli", "audit", "--questions", str(q), "--runs", str(r),
                          "--out", "report", "--n-permutations", "20000", "--calibration-sims", "20",
                          "--no-figures"], cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t0 = time.time()
    while not _handlers_installed(p.pid) and time.time() - t0 < 120 and p.poll() is None:
        time.sleep(0.05)
    time.sleep(1.0)
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == code, (out, err)
    assert err.strip().splitlines()[-1] == "interrupted, nothing written", err
    assert "Traceback" not in err
    assert not (ws.root / "report").exists()
    assert ws.snap() == before
    assert_no_secret(out, err)


def _limit_file_size(nbytes):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return pre


def test_disk_full_keeps_old_output_and_leaves_no_temp(ws, previous_report):
    shutil.copytree(previous_report, ws.root / "report")
    before = ws.snap()
    res = ws.sub(*ws.audit_args("report"), preexec=_limit_file_size(2000))
    assert res.rc == 2, res
    assert "Traceback" not in res.err and len(res.error_lines) == 1, res
    assert "File too large" in res.error_lines[0] or "No space" in res.error_lines[0], res
    assert ws.snap() == before
    assert_no_secret(res.out, res.err, all_bytes(ws.root))


def test_disk_full_on_a_new_output_leaves_nothing(ws):
    before = ws.snap()
    res = ws.sub(*ws.audit_args("fresh/report"), preexec=_limit_file_size(2000))
    ws.check_refused(res, before, out=None)


def test_sigkill_leaves_only_a_temp_that_the_next_run_removes(ws):
    q, r = _big_benchmark(ws, n=2000)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "audit_hub.cli", "audit", "--questions", str(q), "--runs", str(r),
                          "--out", "report", "--n-permutations", "19", "--calibration-sims", "0", "--no-figures"],
                         cwd=ws.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while time.time() - t0 < 180 and p.poll() is None:
        if any(".ba-tmp-" in n for n in os.listdir(ws.root)):
            p.kill()
            break
        time.sleep(0.01)
    p.wait(30)
    if (ws.root / "report").exists():
        pytest.skip("the run finished before it could be killed")
    assert [n for n in os.listdir(ws.root) if ".ba-tmp-" in n]
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 0, res
    assert not [n for n in os.listdir(ws.root) if ".ba-" in n]


def _as_nobody():
    os.setgid(65534)
    os.setuid(65534)


def _nobody_can_run_python() -> bool:
    if os.geteuid() != 0:
        return False
    try:
        return subprocess.run([sys.executable, "-c", "import audit_hub"], preexec_fn=_as_nobody, timeout=60,
                              capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO))).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# Permission cases need a user that permissions apply to: run as root, the CLI drops to 'nobody'. Where
# 'nobody' cannot run this interpreter (e.g. a venv under /root), tests/hostile/test_inputs.py still
# covers EACCES through a simulated PermissionError.
needs_root_to_drop = pytest.mark.skipif(not _nobody_can_run_python(),
                                        reason="needs root and an interpreter user 'nobody' can run")


@needs_root_to_drop
def test_read_only_parent_is_one_line(ws, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    for p in (tmp_path, ws.root, ws.root / "inputs"):
        os.chmod(p, 0o755)
    for f in (ws.questions, ws.runs):
        os.chmod(f, 0o644)
    before = ws.snap()
    res = ws.sub(*ws.audit_args(str(ro / "report")), preexec=_as_nobody,
                 env={"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    ws.check_refused(res, before, out=None)
    assert "Permission denied" in res.error_lines[0] or "permission" in res.error_lines[0], res
    assert os.listdir(ro) == []


@needs_root_to_drop
def test_unreadable_input_is_one_line(ws, tmp_path):
    for p in (tmp_path, ws.root, ws.root / "inputs"):
        os.chmod(p, 0o777)
    os.chmod(ws.runs, 0o600)
    before = ws.snap()
    res = ws.sub(*ws.audit_args("report"), preexec=_as_nobody,
                 env={"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    ws.check_refused(res, before, out="report")
    assert "permission denied" in res.error_lines[0] and "runs.csv" in res.error_lines[0], res


@needs_root_to_drop
def test_unlistable_runs_folder_is_one_line(ws, tmp_path):
    for p in (tmp_path, ws.root):
        os.chmod(p, 0o777)
    os.chmod(ws.root / "inputs", 0o700)
    before = ws.snap()
    res = ws.sub("audit", "--questions", "inputs/questions.csv", "--runs", "inputs", "--out", "report",
                 preexec=_as_nobody, env={"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    ws.check_refused(res, before, out="report")


def test_usage_error_in_a_real_process(ws):
    before = ws.snap()
    res = ws.sub("audit", "--bogus-option")
    ws.check_refused(res, before, out=None, usage=True)
    assert res.err.splitlines()[0].startswith("Usage: ")
