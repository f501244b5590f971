"""Round three of the hostile corpus, outside blind runs: numeric options of every command, Hub-layout
question folders whose card names data files outside the folder, and a SIGKILLed audit's worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import REPO, write_benchmark

# ---------------------------------------------------------------------------------- numeric options
BLIND = ["blind", "-m", "m", "-q", "x.csv", "-o", "o"]
RANGE_CASES = {
    "curate_n_boot_negative": (["curate", "--n-boot", "-5"], "--n-boot"),  # the reported case
    "curate_random_draws_zero": (["curate", "--random-draws", "0"], "--random-draws"),
    "curate_score_budget_negative": (["curate", "--score-budget", "-1"], "--score-budget"),
    "curate_folds_one": (["curate", "--folds", "1"], "--folds"),
    "curate_category_floor_above_one": (["curate", "--category-floor", "1.5"], "--category-floor"),
    "curate_category_floor_nan": (["curate", "--category-floor", "nan"], "--category-floor"),
    "curate_junk_negative": (["curate", "--junk", "-0.1"], "--junk"),
    "curate_target_size_zero": (["curate", "--target-size", "0"], "--target-size"),
    "curate_max_rank_loss_two": (["curate", "--max-rank-loss", "2"], "--max-rank-loss"),
    "curate_seed_negative": (["curate", "--seed", "-1"], "--seed"),
    "curate_threads_zero": (["curate", "--threads", "0"], "--threads"),
    "blind_concurrency_zero": ([*BLIND, "--concurrency", "0"], "--concurrency"),
    "blind_request_timeout_zero": ([*BLIND, "--request-timeout", "0"], "--request-timeout"),
    "blind_request_timeout_nan": ([*BLIND, "--request-timeout", "nan"], "--request-timeout"),
    "blind_max_retries_negative": ([*BLIND, "--max-retries", "-1"], "--max-retries"),
    "blind_top_logprobs_21": ([*BLIND, "--top-logprobs", "21"], "--top-logprobs"),
    "tst_null_permutations_negative": (["tst", "-q", "x.csv", "--null-permutations", "-1"], "--null-permutations"),
    "tst_null_jobs_negative": (["tst", "-q", "x.csv", "--null-jobs", "-1"], "--null-jobs"),
    "audit_threads_zero": (["audit", "-q", "x.csv", "--threads", "0"], "--threads"),
}


@pytest.mark.parametrize("label", sorted(RANGE_CASES))
def test_numeric_option_out_of_range_round_three(ws, label):
    args, opt = RANGE_CASES[label]
    before = ws.snap()
    res = ws.cli(*args)
    ws.check_refused(res, before, out=None, usage=True)
    line = res.error_lines[0]
    assert opt in line and "allowed range" in line, line


def test_every_numeric_option_of_every_command_has_a_range():
    """Structural: each int or float option of each command is in bounds.RANGES (and so range-checked by
    typer with the range named in the one error line)."""
    import typer

    from audit_hub.bounds import RANGES
    from audit_hub.cli import app

    missing, seen = [], 0

    def walk(cmd, path):
        nonlocal seen
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])
        for p in getattr(cmd, "params", []):
            ann = repr(getattr(getattr(p, "type_descriptor", None), "annotation", ""))
            if "int" in ann or "float" in ann:
                seen += 1
                if not any(o in RANGES for o in p.opts):
                    missing.append(" ".join([*path, *p.opts]))

    walk(typer.main.get_command(app), [])
    assert seen >= 40 and not missing, missing


@pytest.mark.parametrize("value", [float("nan"), "3", True, -1])
def test_library_configs_check_the_same_ranges(value):
    """CurateConfig (the library path, no CLI) refuses a bad n_boot with the CLI's line."""
    from audit_hub.curate.pipeline import CurateConfig
    from audit_hub.errors import InputError

    with pytest.raises(InputError, match="--n-boot must be"):
        CurateConfig(n_boot=value).validate(100)


# ---------------------------------------------------------------------------------- Hub-layout folders
def _hub_case(ws, data_files_yaml: str, *, link: bool = False):
    """A questions folder with a README card; the data the card names lives in ../outside (or is linked)."""
    outside = ws.root / "outside"
    outside.mkdir()
    q, r = write_benchmark(ws.root / "tmpbench")
    secret = q.read_text().replace("What is item", "SECRET-OUTSIDE item")
    (outside / "secret.csv").write_text(secret)
    folder = ws.root / "qs"
    folder.mkdir()
    if link:
        (folder / "data").mkdir()
        os.symlink(outside / "secret.csv", folder / "data" / "test.csv")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n" + data_files_yaml + "---\n# q\n")
    return folder, r


HUB_CARDS = {
    "relative_parent_glob": "  data_files:\n  - split: test\n    path: ../outside/*.csv\n",
    "relative_parent_file_string": "  data_files: ../outside/secret.csv\n",
    "relative_parent_list": "  data_files:\n  - ../outside/secret.csv\n",
    "absolute_path": "  data_files:\n  - split: test\n    path: {outside}/secret.csv\n",
    "two_splits_one_outside": "  data_files:\n  - split: train\n    path: ../outside/secret.csv\n"
                              "  - split: test\n    path: ../outside/*.csv\n",
    "split_mapping": "  data_files:\n    test: ../outside/secret.csv\n",
    "nested_parent_of_missing_folder": "  data_files:\n  - split: test\n    path: sub/../../outside/secret.csv\n",
}


@pytest.mark.parametrize("label", sorted(HUB_CARDS))
def test_a_card_naming_data_files_outside_its_folder_is_refused(ws, label):
    folder, runs = _hub_case(ws, HUB_CARDS[label].format(outside=ws.root / "outside"))
    before = ws.snap()
    res = ws.cli("audit", "--questions", str(folder), "--runs", str(runs), "--out", "report",
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    ws.check_refused(res, before)
    line = res.error_lines[0]
    assert "outside the folder" in line and "configs.data_files" in line, line
    assert "SECRET-OUTSIDE" not in res.err + res.out


def test_card_data_patterns_reads_every_form():
    import tempfile
    from pathlib import Path

    from audit_hub.readers.hf import card_data_patterns

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "README.md").write_text(
            "---\nconfigs:\n- config_name: a\n  data_files: x.csv\n- config_name: b\n  data_files:\n"
            "  - split: test\n    path: [y1.csv, y2.csv]\n- config_name: c\n  data_files:\n    train: z.csv\n"
            "- config_name: d\n  data_dir: sub\n  data_files: [w.csv]\n---\n")
        assert card_data_patterns(d) == ["x.csv", "y1.csv", "y2.csv", "z.csv", "w.csv", "sub"]


def test_a_data_file_symlinked_from_outside_is_refused(ws):
    folder, runs = _hub_case(ws, "  data_files:\n  - split: test\n    path: data/*.csv\n", link=True)
    before = ws.snap()
    res = ws.cli("audit", "--questions", str(folder), "--runs", str(runs), "--out", "report",
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    ws.check_refused(res, before)
    assert "outside the folder" in res.error_lines[0], res


def test_tst_reads_hub_folders_through_the_same_check(ws):
    folder, _ = _hub_case(ws, HUB_CARDS["relative_parent_glob"])
    before = ws.snap()
    res = ws.cli("tst", "--questions", str(folder), "--out", "tstout")
    ws.check_refused(res, before, out="tstout")
    assert "outside the folder" in res.error_lines[0], res


def test_a_card_whose_data_files_are_inside_still_loads(ws):
    """Control: the same card pointing inside the folder audits normally."""
    folder, runs = _hub_case(ws, "  data_files:\n  - split: test\n    path: data/*.csv\n")
    (folder / "data").mkdir()
    q, _ = write_benchmark(ws.root / "inside")
    (folder / "data" / "test.csv").write_text(q.read_text())
    res = ws.cli("audit", "--questions", str(folder), "--runs", str(runs), "--out", "report",
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    assert res.rc == 0, res


def test_check_data_files_inside_for_a_hub_repository():
    """For a Hub id the resolved files must lie in that repository (another repo or a URL is refused)."""
    from audit_hub.errors import InputError
    from audit_hub.readers.hf import check_data_files_inside

    ok = {"test": ["hf://datasets/org/bench@abc123/data/test-00000.parquet"]}
    check_data_files_inside(ok, "org/bench", local=False, repo="org/bench")
    for bad in ("hf://datasets/org/other@abc/data/x.parquet", "https://evil.example/x.csv", "/etc/passwd"):
        with pytest.raises(InputError, match="outside the repository"):
            check_data_files_inside({"test": [bad]}, "org/bench", local=False, repo="org/bench")


# ---------------------------------------------------------------------------------- a killed audit's worker
def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc to find the worker")
def test_sigkill_of_the_audit_leaves_a_quiet_worker_and_no_semaphore_warning(ws):
    """SIGKILL the audit while its worker runs: stderr (shared by the worker and the resource tracker) gets
    no BrokenPipeError traceback and no 'leaked semaphore objects' warning; the worker is gone at once; the
    next run removes the killed run's temporary folder."""
    from audit_hub.bounds import available_cpus

    if available_cpus() < 2:
        pytest.skip("the worker starts only with a second CPU")
    q, r = write_benchmark(ws.root / "big", n=3000, models=("m1", "m2", "m3", "m4"))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "audit_hub.cli", "audit", "--questions", str(q), "--runs", str(r),
                          "--out", "report", "--n-permutations", "19", "--calibration-sims", "400"],
                         cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    workers: list[int] = []
    while time.time() - t0 < 120 and p.poll() is None:
        workers = [c for c in _children(p.pid) if b"spawn_main" in open(f"/proc/{c}/cmdline", "rb").read()]
        if workers and time.time() - t0 > 4:
            break
        time.sleep(0.05)
    if p.poll() is not None or not workers:
        p.kill()
        p.communicate()
        pytest.skip("the run ended before its worker could be caught")
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=60)  # returns once every holder of stderr (worker, tracker) is gone
    assert "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]
    assert "leaked semaphore" not in err and "resource_tracker" not in err, err[-2000:]
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 0, res
    assert not [n for n in os.listdir(ws.root) if ".ba-" in n]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(ln.startswith("State:") and "Z" in ln for ln in fh)
    except OSError:
        return False


def test_the_worker_exits_when_its_parent_is_already_gone():
    """_die_with_parent with a parent pid that is not the real parent (the parent died before the worker
    armed its signal): the worker exits 0 at once, printing nothing."""
    code = ("import os\nfrom audit_hub.engine.worker import _die_with_parent\n"
            "_die_with_parent(os.getppid() + 987654)\nprint('still here')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p
