"""The library API (``audit_hub.api``): each function returns what its command writes, read back the same way.

The CLI is one call of these functions, so the folder a notebook saves must be the folder the command
writes, file for file; the results read it back (``card()``, ``to_dataset()``) rather than rebuilding it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import audit_hub
from audit_hub import api
from audit_hub.errors import InputError
from audit_hub.tst.synthetic import make_synthetic

ROOT = Path(__file__).resolve().parents[1]


def _data_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "data").glob("*.parquet"))}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The bundled example audited by the library, without calibration (fast) and saved once."""
    res = audit_hub.audit(calibration_sims=0, figures=False)
    res.save(tmp_path_factory.mktemp("lib") / "report")
    return res


def test_the_package_face_is_lazy_and_complete():
    code = ("import sys, audit_hub; heavy=[m for m in ('pandas','numpy','torch','audit_hub.api') if m in sys.modules];"
            "print(heavy); print(sorted(audit_hub.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]"
    for name in ("audit", "prune", "AuditResult", "CurateResult"):
        assert name in out[1]
    assert audit_hub.audit is api.audit and audit_hub.api is api
    with pytest.raises(AttributeError):
        audit_hub.no_such_thing  # noqa: B018


def test_library_audit_equals_the_command(example, tmp_path):
    """`benchaudit audit --out D` and `audit(...).save(D)` write the same summary, tables and card."""
    cli = tmp_path / "cli"
    r = subprocess.run([sys.executable, "-m", "audit_hub", "audit", "--calibration-sims", "0", "--no-figures",
                        "--out", str(cli)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lib = example.folder
    assert (lib / "summary.json").read_bytes() == (cli / "summary.json").read_bytes()
    assert (lib / "README.md").read_bytes() == (cli / "README.md").read_bytes()
    assert _data_files(lib) == _data_files(cli)
    from audit_hub.hub.folders import dump_json

    assert (lib / "summary.json").read_text(encoding="utf-8") == dump_json(example.summary)


def test_result_tables_and_card(example):
    q = example.questions
    assert len(q) == example.summary["n_questions"] == 3040
    assert {"question_id", "severity", "n_flags", "rationale", "suggested_action"} <= set(q.columns)
    f = example.findings
    assert len(f) == int(((q["n_flags"] > 0) | (q["severity"] != "info")).sum())
    ranks = f["severity"].map({"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}).to_numpy()
    assert (ranks[:-1] >= ranks[1:]).all(), "findings are ordered most severe first"
    assert example.card() == (example.folder / "README.md").read_text(encoding="utf-8")
    ds = example.to_dataset()
    assert sorted(ds) == ["questions", "runs", "summary"]
    assert ds["questions"].num_rows == 3040
    assert list(ds["questions"]["question_id"][:3]) == [str(x) for x in q["question_id"][:3]]


def test_card_without_save_uses_a_temporary_folder():
    res = audit_hub.audit(calibration_sims=0, figures=False, n_permutations=19)
    assert res.folder is None
    card = res.card()
    assert card.startswith("---") and "configs:" in card
    assert res.folder is None  # the temporary copy is not where the user saved anything


def test_ranges_are_checked_at_the_library_boundary():
    with pytest.raises(InputError, match=r"--n-permutations must be in the range 1\.\.10000000, got 0"):
        audit_hub.audit(n_permutations=0)
    with pytest.raises(InputError, match="--seed"):
        audit_hub.audit(seed=-1)
    with pytest.raises(InputError, match="--k"):
        api.tst("q.jsonl", k=1)


def test_tst_and_prune_results(tmp_path):
    qf = tmp_path / "q.jsonl"
    make_synthetic(240, planted=True, seed=3).to_json(qf, orient="records", lines=True)
    calls = []
    t = api.tst(str(qf), k=4, repeats=1, null_permutations=9, on_fold=lambda: calls.append(1))
    assert len(calls) == api.tst_fold_count(4, 1, None, 9) == 13
    assert len(t.questions) == 240 and {"tst_s", "tst_s_minus_chance"} <= set(t.questions.columns)
    assert t.summary["accuracy"] > t.summary["chance"]  # the planted template is learnable from text
    saved = t.save(tmp_path / "t")
    assert json.loads((saved / "summary.json").read_text())["tst"]["accuracy"] == t.summary["accuracy"]
    p = audit_hub.prune(str(qf), budget=20, step=10, k=4, repeats=1, random_seeds=5)
    assert len(p.questions) == 240 - p.summary["n_removed"]
    ds = p.to_dataset()  # every config the folder declares loads (no runs: no `gap` config)
    assert sorted(ds) == sorted(["questions", "removed", "kept", "trace"])
    assert ds["removed"].num_rows == p.summary["n_removed"]


def test_curate_result_on_the_example(tmp_path):
    c = api.curate(target_size=1500, n_boot=50, random_draws=20, folds=3, score_budget=0, junk=[0.0],
                         ibp="off", figures=False)
    assert c.summary["n_after"] == len(c.questions) <= 1500
    folder = c.save(tmp_path / "c")
    assert json.loads((folder / "summary.json").read_text())["curation"]["n_after"] == c.summary["n_after"]
    assert isinstance(c.questions, pd.DataFrame)
    ds = c.to_dataset()  # the curated benchmark is the `default` config, split `test`
    assert ds["default"].num_rows == c.summary["n_after"]


def test_library_misuse_is_one_line_naming_the_argument(tmp_path):
    """Library review: seed=None failed after reading with numpy's TypeError; threads=0 ran; a DataFrame as
    questions printed the frame into a 760-character message, as runs iterated its column names; a library call
    recorded the notebook kernel's argv as the manifest's command line; a work_dir result had no findings."""
    import pandas as pd

    import audit_hub as ba
    from audit_hub.errors import InputError

    blink = "tests/fixtures/real_pools/blink"
    cases = [
        (dict(seed=None), "--seed must be an integer in the range 0..4294967295, got None"),
        (dict(threads=0), "--threads must be in the range 1..1024, got 0"),
        (dict(questions=pd.DataFrame({"a": [1]})), "questions must be a path (str or os.PathLike) or a Hub dataset id, "
                                                 "got DataFrame (save it to a file"),
        (dict(runs=pd.DataFrame({"question_id": [1]})), "runs must be a path (str or os.PathLike) or a list of paths, "
                                                      "got DataFrame"),
        (dict(runs=[pd.DataFrame()]), "each entry of runs must be a path (str or os.PathLike), got DataFrame"),
        (dict(runs={"m": "x.csv"}), "runs must be a path (str or os.PathLike) or a list of paths, got dict"),
    ]
    for kw, msg in cases:
        with pytest.raises(InputError) as e:
            ba.audit(**kw)
        assert str(e.value).splitlines()[0].endswith(msg) or msg in str(e.value), (kw, str(e.value))
        assert len(str(e.value)) < 300 and "\n" not in str(e.value)
    with pytest.raises(InputError, match="--null-jobs must be in the range 0..4096, got -1"):
        ba.api.tst(f"{blink}/questions.parquet", null_jobs=-1)
    with pytest.raises(InputError, match="--seed must be an integer in the range 0..4294967295, got None"):
        ba.api.curate(seed=None)
    res = ba.audit(calibration_sims=0, figures=False, parallel=False)
    m = json.loads((res.save(tmp_path / "r") / "manifest.json").read_text())
    assert m["command_line"] == ["benchaudit", "audit", "(library)"]
    wd = ba.audit(runs="tests/fixtures/vlmevalkit/real/workdir_runs", calibration_sims=0, figures=False,
                  parallel=False)
    f = wd.findings
    assert list(f.columns[:2]) == ["benchmark", "question_id"] and set(f["benchmark"]) <= set(wd.results)
    assert len(f) == sum(len(r.findings) for r in wd.results.values())
