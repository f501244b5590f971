"""--out safety: only a previous output of the same command is ever replaced; everything else is refused
with one line and left untouched; replacement is crash-safe; stale temporaries are cleaned."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .conftest import all_bytes, assert_no_secret, command_args


# Targets that must never be replaced, as (label, setup(ws) -> out argument).
def _home(ws):
    return str(Path(os.environ["HOME"]))


def _link(ws, name, target):
    os.symlink(target, ws.root / name)
    return name


FORBIDDEN = {
    "cwd_dot": lambda ws: ".",
    "cwd_absolute": lambda ws: str(ws.root),
    "cwd_trailing_slash": lambda ws: "./",
    "root": lambda ws: "/",
    "home_tilde": lambda ws: "~",
    "home_absolute": _home,
    "parent_of_cwd": lambda ws: "..",
    "inputs_folder": lambda ws: "inputs",
    "inputs_folder_dotted": lambda ws: "inputs/../inputs",
    "questions_file": lambda ws: "inputs/questions.csv",
    "runs_file": lambda ws: "inputs/runs.csv",
    "symlink_to_inputs": lambda ws: _link(ws, "link_in", "inputs"),
    "symlink_to_cwd": lambda ws: _link(ws, "link_cwd", "."),
    "symlink_to_home": lambda ws: _link(ws, "link_home", os.environ["HOME"]),
    "symlink_to_questions": lambda ws: _link(ws, "link_q", "inputs/questions.csv"),
    "symlink_chain_to_inputs": lambda ws: _link(ws, "l2", _link(ws, "l1", "inputs")),
    "existing_regular_file": lambda ws: (ws.root / "notes.txt").write_text("keep me\n") and "notes.txt",
    "existing_fifo": lambda ws: os.mkfifo(ws.root / "pipe") or "pipe",
    "nonempty_foreign_folder": lambda ws: ((ws.root / "mine").mkdir(), (ws.root / "mine" / "a.txt").write_text("x"))
    and "mine",
    "folder_with_foreign_manifest": lambda ws: ((ws.root / "other").mkdir(),
                                                (ws.root / "other" / "manifest.json").write_text('{"tool": "x"}'))
    and "other",
    "folder_with_broken_manifest": lambda ws: ((ws.root / "broken").mkdir(),
                                               (ws.root / "broken" / "manifest.json").write_text('{"tool": '))
    and "broken",
    "under_a_regular_file": lambda ws: "inputs/questions.csv/report",
    "name_too_long": lambda ws: "r" * 300,
    "component_too_long_deep": lambda ws: "deep/" + "x" * 256 + "/out",
}


@pytest.mark.parametrize("label", sorted(FORBIDDEN))
def test_audit_refuses_unsafe_out(ws, label):
    out = FORBIDDEN[label](ws)
    before = ws.snap()
    res = ws.cli(*ws.audit_args(out))
    ws.check_refused(res, before, out=None)
    assert "--out" in res.error_lines[0]


@pytest.mark.parametrize("command", ["tst", "prune"])
@pytest.mark.parametrize("label", ["cwd_dot", "inputs_folder", "questions_file", "symlink_to_inputs",
                                   "existing_regular_file", "nonempty_foreign_folder", "home_tilde"])
def test_tst_and_prune_refuse_unsafe_out(ws, command, label):
    out = FORBIDDEN[label](ws)
    before = ws.snap()
    res = ws.cli(*command_args(ws, command, out))
    ws.check_refused(res, before, out=None)


def test_audit_output_of_another_command_is_not_replaced(ws, previous_report):
    shutil.copytree(previous_report, ws.root / "report")
    m = json.loads((ws.root / "report" / "manifest.json").read_text())
    m["output_of"] = "tst"
    (ws.root / "report" / "manifest.json").write_text(json.dumps(m))
    before = ws.snap()
    res = ws.cli(*ws.audit_args("report"))
    ws.check_refused(res, before, out=None)
    assert "benchaudit audit" in res.error_lines[0]


def test_previous_audit_output_is_replaced(ws, previous_report):
    shutil.copytree(previous_report, ws.root / "report")
    (ws.root / "report" / "stale-extra.txt").write_text("old")
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 0, res
    assert not (ws.root / "report" / "stale-extra.txt").exists()
    assert json.loads((ws.root / "report" / "manifest.json").read_text())["output_of"] == "audit"
    assert not [p for p in ws.root.iterdir() if ".ba-" in p.name]
    assert_no_secret(res.out, res.err, all_bytes(ws.root))


def test_empty_existing_folder_is_used(ws):
    (ws.root / "empty").mkdir()
    res = ws.cli(*ws.audit_args("empty"))
    assert res.rc == 0, res
    assert (ws.root / "empty" / "manifest.json").is_file()


def test_symlink_to_previous_output_replaces_the_target(ws, previous_report):
    shutil.copytree(previous_report, ws.root / "real_report")
    os.symlink("real_report", ws.root / "rep_link")
    res = ws.cli(*ws.audit_args("rep_link"))
    assert res.rc == 0, res
    assert os.path.islink(ws.root / "rep_link")
    assert (ws.root / "real_report" / "manifest.json").is_file()


def test_stale_temporaries_of_killed_runs_are_removed(ws):
    dead_pid = 2**22 + 12345  # above pid_max defaults: never a live process
    from audit_hub.hub.folders import _name_hash

    h = _name_hash("report")
    stale = ws.root / f".report.ba-tmp-{h}-{dead_pid}-abc123"
    stale.mkdir()
    (stale / "partial.parquet").write_bytes(b"PAR1")
    foreign = ws.root / ".report.tmp-keepme"  # not ours: never touched
    foreign.mkdir()
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 0, res
    assert not stale.exists() and foreign.exists()


def test_retired_old_output_is_restored_after_a_kill_between_renames(ws, previous_report):
    """The fallback swap (no renameat2) is two renames; a kill between them leaves the old output
    retired and no DIR: the next run, even a failing one, puts it back first."""
    from audit_hub.hub.folders import _name_hash

    dead_pid = 2**22 + 4242
    retired = ws.root / f".report.ba-old-{_name_hash('report')}-{dead_pid}"
    shutil.copytree(previous_report, retired)
    from audit_hub.hub.folders import cleanup_stale

    done = cleanup_stale(ws.root / "report")
    assert done and (ws.root / "report" / "manifest.json").is_file() and not retired.exists()


def test_failure_while_writing_keeps_the_old_output(ws, previous_report, monkeypatch):
    shutil.copytree(previous_report, ws.root / "report")
    before = ws.snap()
    import audit_hub.report.card as card

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(card, "render_card", boom)
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 2 and len(res.error_lines) == 1 and "No space left" in res.error_lines[0], res
    assert ws.snap() == before


def test_fallback_swap_without_renameat2(ws, previous_report, monkeypatch):
    import audit_hub.hub.folders as io

    shutil.copytree(previous_report, ws.root / "report")
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 0, res
    assert not [p for p in ws.root.iterdir() if ".ba-" in p.name]


def test_interrupt_inside_the_writer_leaves_old_output_and_no_temp(ws, previous_report, monkeypatch):
    from audit_hub.errors import Interrupted

    shutil.copytree(previous_report, ws.root / "report")
    before = ws.snap()
    import audit_hub.report.card as card

    def interrupted(*a, **k):
        raise Interrupted(15)

    monkeypatch.setattr(card, "render_card", interrupted)
    res = ws.cli(*ws.audit_args("report"))
    assert res.rc == 143 and res.err.strip().splitlines()[-1] == "interrupted, nothing written", res
    assert ws.snap() == before


@pytest.mark.parametrize("fresh", [False, True])
def test_signal_whose_exception_is_swallowed_still_writes_nothing(ws, previous_report, monkeypatch, fresh):
    """A real SIGTERM to the CLI's own process, whose Interrupted is raised where code swallows it (as a
    finaliser or ``__del__`` does: "Exception ignored", and the run carries on): the run stops at its next stage
    or progress report, or at the latest the output is not swapped in; exit 143, the one line, the old output (or
    none) left as it was. A later run in the same process is not refused."""
    import signal
    import time

    import audit_hub.report.card as card

    if not fresh:
        shutil.copytree(previous_report, ws.root / "report")
    before = ws.snap()
    real = card.render_card
    seen = []

    def swallowing(*a, **k):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2.0)  # the handler runs here and raises Interrupted
        except BaseException as e:  # noqa: BLE001 - what a finaliser does with it
            seen.append(type(e).__name__)
        return real(*a, **k)

    monkeypatch.setattr(card, "render_card", swallowing)
    res = ws.cli(*ws.audit_args("report"))
    assert seen == ["Interrupted"]
    assert res.rc == 143 and res.err.strip().splitlines()[-1] == "interrupted, nothing written", res
    assert ws.snap() == before
    assert not [p for p in ws.root.iterdir() if ".ba-" in p.name]
    monkeypatch.setattr(card, "render_card", real)
    again = ws.cli(*ws.audit_args("report"))
    assert again.rc == 0, again
    assert (ws.root / "report" / "summary.json").exists()


def test_a_swallowed_signal_stops_the_run_at_its_next_stage(ws, monkeypatch):
    """SIGTERM whose Interrupted is swallowed while the questions are read (as an import's weakref callback does:
    "Exception ignored", seen in CI when the signal landed during an import): the run does not compute on to the
    end (it did: a 20,000-permutation audit ran for minutes after Ctrl-C). It stops as the next stage starts:
    no detector runs, no card is rendered, exit 143 with the one line, nothing written."""
    import signal
    import time

    import audit_hub.readers.ingest as ingest
    import audit_hub.report.card as card
    from audit_hub.engine import run as engine_run

    before = ws.snap()
    real_load = ingest.load_questions
    seen, later = [], []

    def swallowing(*a, **k):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2.0)  # the handler runs here and raises Interrupted
        except BaseException as e:  # noqa: BLE001 - what a weakref callback does with it
            seen.append(type(e).__name__)
        return real_load(*a, **k)

    def must_not_run(name, real):
        def wrapped(*a, **k):
            later.append(name)
            return real(*a, **k)
        return wrapped

    monkeypatch.setattr(ingest, "load_questions", swallowing)
    monkeypatch.setattr(card, "render_card", must_not_run("card", card.render_card))
    monkeypatch.setattr(engine_run, "run_audit", must_not_run("detectors", engine_run.run_audit))
    t0 = time.perf_counter()
    res = ws.cli(*ws.audit_args("report"))
    assert seen == ["Interrupted"]
    assert res.rc == 143 and res.err.strip().splitlines()[-1] == "interrupted, nothing written", res
    assert later == [] and time.perf_counter() - t0 < 30
    assert ws.snap() == before
    assert not (ws.root / "report").exists()


@pytest.mark.parametrize("path", ["new", "exchange", "retired_sibling"])
def test_signal_during_the_swap_undoes_it(ws, previous_report, monkeypatch, path):
    """A real SIGTERM sent while the swap holds signals off (it stays pending): the swap is undone before the
    signal is let through, so exit 143 and "nothing written" are true: no output where there was none, the old
    output byte for byte where there was one (swapped by renameat2 EXCHANGE, or by the retired-sibling
    fallback), no temporary folder."""
    import signal

    import audit_hub.hub.folders as io

    if path != "new":
        shutil.copytree(previous_report, ws.root / "report")
    before = ws.snap()
    real_noreplace, real_exchange = io._rename_noreplace, io._exchange
    calls = []

    def kill_then(fn):
        def wrapped(*a, **k):
            if not calls:
                os.kill(os.getpid(), signal.SIGTERM)  # held off: pending until the swap lets it through
            calls.append(fn.__name__)
            return fn(*a, **k)
        return wrapped

    if path == "new":
        monkeypatch.setattr(io, "_rename_noreplace", kill_then(real_noreplace))
    elif path == "exchange":
        monkeypatch.setattr(io, "_exchange", kill_then(real_exchange))
    else:
        monkeypatch.setattr(io, "_exchange", kill_then(lambda a, b: False))
    res = ws.cli(*ws.audit_args("report"))
    assert calls, ("the swap was not reached", res)
    assert res.rc == 143 and res.err.strip().splitlines()[-1] == "interrupted, nothing written", res
    assert ws.snap() == before
    assert not [p for p in ws.root.iterdir() if ".ba-" in p.name]


def test_signal_during_the_swap_with_a_handler_that_does_not_raise(tmp_path, monkeypatch):
    """Library use under a SIGTERM handler that only records (not the CLI's): the swap is undone all the same and
    ``atomic_dir`` raises Interrupted, leaving nothing at the target and no temporary folder."""
    import signal

    import audit_hub.hub.folders as io
    from audit_hub.errors import Interrupted

    got = []
    old = signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    real_noreplace = io._rename_noreplace

    def kill_then(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)
        return real_noreplace(*a, **k)

    monkeypatch.setattr(io, "_rename_noreplace", kill_then)
    try:
        with pytest.raises(Interrupted) as e, io.atomic_dir(tmp_path / "out", command="audit") as tmp:
            (tmp / "manifest.json").write_text("{}")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert e.value.exit_code == 143 and got == [signal.SIGTERM]  # its handler ran, after the undo
    assert list(tmp_path.iterdir()) == []


def test_new_parent_folders_are_removed_when_the_run_fails(ws, monkeypatch):
    import audit_hub.report.card as card

    monkeypatch.setattr(card, "render_card", lambda *a, **k: (_ for _ in ()).throw(OSError(30, "Read-only file system")))
    before = ws.snap()
    res = ws.cli(*ws.audit_args("new/deeper/report"))
    ws.check_refused(res, before, out=None)
    assert not (ws.root / "new").exists()


def test_tst_replaces_its_own_output_and_audit_refuses_it(ws):
    args = command_args(ws, "tst", "tst_out")
    first = ws.cli(*args)
    assert first.rc == 0, first
    assert json.loads((ws.root / "tst_out" / "manifest.json").read_text())["output_of"] == "tst"
    again = ws.cli(*args)
    assert again.rc == 0, again
    before = ws.snap()
    res = ws.cli(*ws.audit_args("tst_out"))
    ws.check_refused(res, before, out=None)
    assert "`benchaudit audit`" in res.error_lines[0]


def test_a_250_character_folder_name_works(ws):
    """Temporary names stay short whatever DIR's length (the old `.NAME.tmp-XXXX` passed 255 bytes)."""
    name = "r" * 250
    res = ws.cli(*ws.audit_args(name))
    assert res.rc == 0, res
    assert (ws.root / name / "manifest.json").is_file()
    assert not [p for p in os.listdir(ws.root) if ".ba-" in p]
