"""Input files read by the audit process and its worker together (audit_hub.readers.parallel), the question
table a VLMEvalKit sheet repeats reused across sheets, and the card rendered in the worker. Every path must
give the results, the errors and the files of one process reading everything in order."""

import glob
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_hub.errors import InputError
from audit_hub.readers import parallel
from audit_hub.readers.cells import same_cells
from audit_hub.readers.dispatch import read_all

ROOT = Path(__file__).resolve().parents[1]
VLM = ROOT / "tests" / "fixtures" / "vlmevalkit" / "real"
KW = dict(arm="full", questions=None, column_map=None, dataset_hint="MMStar", model=None, metric=None)


def _sheets(tmp_path: Path, n: int = 6) -> Path:
    """``n`` copies of VLMEvalKit's own MMStar prediction sheets (real files), one per model name."""
    src = sorted(glob.glob(str(VLM / "outputs" / "*" / "*" / "*_MMStar.xlsx")))
    assert len(src) == 3
    folder = tmp_path / "sheets"
    folder.mkdir()
    for i in range(n):
        shutil.copy(src[i % 3], folder / f"model{i:02d}_MMStar.xlsx")
    return folder


def _same_results(a, b):
    assert [r.path for r in a] == [r.path for r in b]
    for x, y in zip(a, b):
        assert x.kind == y.kind and x.rows == y.rows and x.info == y.info and x.judges == y.judges
        pd.testing.assert_frame_equal(x.runs, y.runs)
        if x.questions is None:
            assert y.questions is None
        else:
            pd.testing.assert_frame_equal(x.questions, y.questions)


def test_folder_read_with_the_worker_equals_one_process(tmp_path):
    from audit_hub.clock import StageClock, recording
    from audit_hub.engine.worker import WorkerProcess

    folder = _sheets(tmp_path, 12)
    (folder / "notes.txt").write_text("not a table")  # a skipped file among them
    serial, skipped = read_all([str(folder)], **KW)
    clock = StageClock()
    with WorkerProcess() as pool, recording(clock):
        pool.call(int)  # the worker is up and idle: it claims files as soon as the round starts
        shared, skipped2 = read_all([str(folder)], **KW, worker=pool)
        shared_again, _ = read_all([str(folder)], **KW, worker=pool)  # a second round on the same worker
    assert "read worker (parallel)" in clock.timings  # the worker did read some of them
    _same_results(serial, shared)
    _same_results(serial, shared_again)
    assert skipped == skipped2 and len(skipped) == 1
    assert [r.info["model"] for r in shared] == [f"model{i:02d}" for i in range(12)]


class _FakeHandle:
    """A reading round whose worker took the round indices ``takes`` (this process never gets them) and
    returns ``results`` for them ({} when it died before returning)."""

    def __init__(self, n, takes, results):
        from multiprocessing import Array

        arr = Array("q", 2)
        arr[0] = 1
        self.inner, self.takes, self.results = parallel.ReadClaims(arr, 1, n), set(takes), results
        self.claims = self

    def next(self):
        while (k := self.inner.next()) is not None:
            if k not in self.takes:
                return k
        return None

    def close(self):
        return self.inner.close()

    def collect(self):
        return self.results


class _FakePool:
    def __init__(self, takes, results=None):
        self.takes, self.results, self.warmed = takes, results or {}, 0

    def warm(self):
        self.warmed += 1


@pytest.fixture
def fake_rounds(monkeypatch):
    """read_files with a fake worker (see _FakeHandle) and every .xlsx name shareable."""
    monkeypatch.setattr(parallel, "_start", lambda pool, files, read, kwargs:
                        _FakeHandle(len(files), pool.takes, pool.results))
    monkeypatch.setattr(parallel, "shareable", lambda p: p.endswith(".xlsx"))


def _reader(log, fail=()):
    def read(path, explicit, **kw):
        log.append(path)
        if path in fail:
            raise InputError("bad", file=path)
        return f"read {path}"
    return read


def test_files_the_worker_claimed_but_never_returned_are_read_here(fake_rounds):
    files = [(f"f{i}.xlsx", False) for i in range(5)]
    log: list[str] = []
    out = parallel.read_files(files, _reader(log), {}, _FakePool(takes=[1, 3]))  # the worker died
    assert out == [f"read f{i}.xlsx" for i in range(5)]
    assert sorted(log) == [f"f{i}.xlsx" for i in range(5)] and len(log) == 5


def test_the_worker_results_are_put_in_file_order(fake_rounds):
    files = [(f"f{i}.xlsx", False) for i in range(5)]
    log: list[str] = []
    results = {1: ("ok", "worker f1"), 3: ("ok", "worker f3")}
    out = parallel.read_files(files, _reader(log), {}, _FakePool([1, 3], results))
    assert out == ["read f0.xlsx", "worker f1", "read f2.xlsx", "worker f3", "read f4.xlsx"]
    assert log == ["f0.xlsx", "f2.xlsx", "f4.xlsx"]


def test_the_first_failing_file_in_order_is_reported_whoever_read_it(fake_rounds):
    files = [(f"f{i}.xlsx", False) for i in range(6)]
    # the worker read f1 (fine) and failed on f2; this process fails on f4: f2 is reported
    results = {1: ("ok", "read f1.xlsx"), 2: ("error", InputError("worker saw it", file="f2.xlsx"))}
    with pytest.raises(InputError, match="f2.xlsx: worker saw it"):
        parallel.read_files(files, _reader([], fail={"f4.xlsx"}), {}, _FakePool([1, 2], results))
    # this process fails on f0 first: f0 is reported, whatever the worker found later
    with pytest.raises(InputError, match="f0.xlsx: bad"):
        parallel.read_files(files, _reader([], fail={"f0.xlsx"}), {}, _FakePool([1, 2], results))
    # one process reading in order: the same verdicts
    for fail, first in (({"f2.xlsx", "f4.xlsx"}, "f2.xlsx"), ({"f0.xlsx", "f2.xlsx"}, "f0.xlsx")):
        with pytest.raises(InputError, match=first):
            parallel.read_files(files, _reader([], fail=fail), {}, None)


def test_a_file_not_shared_fails_before_a_shared_one(fake_rounds):
    files = [("a.csv", True), ("b.xlsx", False), ("c.xlsx", False), ("d.xlsx", False)]
    log: list[str] = []
    with pytest.raises(InputError, match="a.csv"):
        parallel.read_files(files, _reader(log, fail={"a.csv", "c.xlsx"}), {}, _FakePool([]))
    assert log == ["b.xlsx", "c.xlsx", "a.csv"]  # d.xlsx, after the first failure, is not read


def test_what_the_worker_sends_back_for_an_exception():
    import pickle

    e = parallel._portable(InputError("bad cell", file="/x/m_MMStar.xlsx", row=3, column="answer"))
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == "file /x/m_MMStar.xlsx, row 3, column 'answer': bad cell"
    assert (back.file, back.row, back.column) == ("/x/m_MMStar.xlsx", 3, "answer")
    assert repr(parallel._portable(KeyError("k"))) == "RuntimeError(\"KeyError: 'k'\")"
    assert type(parallel._portable(MemoryError("big"))) is MemoryError


def test_claims_are_handed_out_once_and_a_closed_round_gives_nothing():
    from multiprocessing import Array

    arr = Array("q", 2)
    arr[0] = 7
    claims = parallel.ReadClaims(arr, 7, 500)
    got: list[list[int]] = [[], [], [], []]

    def take(j):
        while (k := claims.next()) is not None:
            got[j].append(k)

    threads = [threading.Thread(target=take, args=(j,)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(sum(got, [])) == list(range(500))
    assert all(g == sorted(g) for g in got)
    assert claims.close() == 500 and int(arr[0]) == 8
    late = parallel.ReadClaims(arr, 7, 500)  # a job of the closed round that starts late
    assert late.next() is None
    arr[1] = 0
    assert parallel.ReadClaims(arr, 8, 3).next() == 0


def test_only_xlsx_files_are_shared(tmp_path):
    small = tmp_path / "a.xlsx"
    small.write_bytes(b"x")
    assert parallel.shareable(str(small))
    assert not parallel.shareable(str(tmp_path / "a.parquet"))
    assert not parallel.shareable(str(tmp_path / "missing.xlsx"))
    log: list[str] = []
    pool = _FakePool([0])
    out = parallel.read_files([(str(small), True), ("b.parquet", True)], _reader(log), {}, pool)
    assert out == [f"read {small}", "read b.parquet"] and pool.warmed == 1  # one shareable file: not shared


def test_same_cells_is_strict():
    a = pd.DataFrame({"x": np.array([1, "a", np.nan, 0.0], dtype=object), "n": [1, 2, 3, 4]})
    assert same_cells(a, a.copy())

    def changed(row, value):
        b = a.copy()
        b.iloc[row, 0] = value
        return b

    assert not same_cells(a, changed(0, 1.0))  # 1 and 1.0 read as "1" and "1.0"
    assert not same_cells(a, changed(0, True))
    assert not same_cells(a, changed(1, "b"))
    assert not same_cells(a, changed(3, -0.0))  # 0.0 == -0.0, but they print differently
    assert not same_cells(a, changed(2, None))  # None and NaN are different cells
    assert same_cells(a, changed(2, float("nan")))  # NaN equals NaN
    assert not same_cells(a, a[["n", "x"]])
    assert not same_cells(a, a.astype({"n": "float64"}))
    b = a.copy()
    b.attrs["arrow_list_columns"] = ("x",)
    assert not same_cells(a, b)


def test_a_repeated_question_table_gives_what_normalising_it_gives(tmp_path):
    from audit_hub.readers import vlmevalkit
    from audit_hub.readers.fileio import read_table
    from audit_hub.readers.generic import normalise_questions

    folder = _sheets(tmp_path, 3)
    paths = sorted(str(p) for p in folder.glob("*.xlsx"))
    vlmevalkit._LAST_QUESTIONS = None
    for p in paths:
        df = read_table(p, None)
        got = vlmevalkit.read_sheet(df, p, dataset_hint="MMStar").questions
        qdf = df.drop(columns=["prediction"] + [c for c in ("hit", "log", "extracted", "score", "res")
                                                if c in df.columns])
        pd.testing.assert_frame_equal(got, normalise_questions(qdf, p))
        assert set(got["source_file"]) == {p}
    # a sheet whose question cells differ in one place is normalised again
    df = read_table(paths[0], None)
    df.loc[0, "question"] = "a different question"
    got = vlmevalkit.read_sheet(df, paths[0], dataset_hint="MMStar").questions
    assert got["question"].iloc[0] == "a different question"


@pytest.mark.slow
def test_cli_audit_of_a_sheet_folder_is_the_same_read_in_one_or_two_processes(tmp_path):
    folder = _sheets(tmp_path, 6)
    outs = {}
    for flag in ("--parallel", "--no-parallel"):
        out = tmp_path / f"r{flag}"
        subprocess.run([sys.executable, "-m", "audit_hub", "audit", "--runs", str(folder), "--dataset", "MMStar",
                        "--out", str(out), "--calibration-sims", "4", flag], check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        outs[flag] = out
    a, b = outs["--parallel"], outs["--no-parallel"]
    sa, sb = json.loads((a / "summary.json").read_text()), json.loads((b / "summary.json").read_text())
    assert sa == sb
    for p in sorted(a.glob("data/*.parquet")):
        assert p.read_bytes() == (b / "data" / p.name).read_bytes(), p.name
    assert (a / "README.md").read_text() == (b / "README.md").read_text()
