"""`benchaudit push` accepts every output the tool writes -- audit, work_dir index of reports, tst, prune,
curate, blind -- each validated against its own manifest, received by the Hub (tests/hub_server.py) byte
for byte, and loadable back with ``datasets.load_dataset``. Refusals name the command that wrote the folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_publish import assert_same_folder, hub  # noqa: E402,F401 (the fixture)
from test_report import make_fake_result  # noqa: E402


@pytest.fixture(autouse=True)
def _online(monkeypatch):
    """The local Hub server is reachable whatever an earlier test left in huggingface_hub's constants
    (it reads HF_HUB_OFFLINE once, at import)."""
    import huggingface_hub.constants as hc

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)


def _audit(root: Path) -> tuple[Path, str, int]:
    from audit_hub.report import write_report

    out = root / "audit"
    write_report(make_fake_result(), out, command_line=["benchaudit", "audit"], inputs=[], figures=False)
    return out, "questions", 6


def _index(root: Path) -> tuple[Path, str, int]:
    from audit_hub.hub.output import write_report_set
    from audit_hub.report.writer import fill_report

    out = root / "index"
    res = make_fake_result()
    fill = lambda f: fill_report(res, f, command_line=["benchaudit", "audit"], inputs=[], figures=False)  # noqa: E731
    write_report_set(out, {"MMBench_DEV_EN": fill, "POPE": fill}, command_line=["benchaudit", "audit"],
                     index_rows=[{"name": "MMBench_DEV_EN", "items": 6}, {"name": "POPE", "items": 6}])
    return out, "POPE-runs", 36


def _tst(root: Path) -> tuple[Path, str, int]:
    from audit_hub.frame.core import AuditFrame
    from audit_hub.tst.output import write_tst_report
    from audit_hub.tst.rf import run_tst_rf
    from audit_hub.tst.synthetic import make_synthetic

    f = AuditFrame.from_tables(make_synthetic(90, planted=True, numeric_share=0.2, seed=4))
    res = run_tst_rf(f, k=3, repeats=1, null_permutations=9, n_estimators=5, null_trees=5, importances=False)
    return write_tst_report(f, res, root / "tst", command_line=["benchaudit", "tst"]), "questions", 90


def _prune(root: Path) -> tuple[Path, str, int]:
    from audit_hub.frame.core import AuditFrame
    from audit_hub.tst.output import write_prune_report
    from audit_hub.tst.prune import iterative_bias_pruning
    from audit_hub.tst.synthetic import make_synthetic

    f = AuditFrame.from_tables(make_synthetic(120, planted=True, seed=16))
    res = iterative_bias_pruning(f, budget=10, step=10, tst_kwargs={"k": 3, "repeats": 1, "n_estimators": 5},
                                 random_seeds=2, random_tst_seeds=0)
    return write_prune_report(f, res, root / "prune", command_line=["benchaudit", "prune"]), "removed", 10


def _curate(root: Path) -> tuple[Path, str, int]:
    from audit_hub.curate.output import write_curation
    from audit_hub.curate.pipeline import CurateConfig, run_curation
    from audit_hub.curate.simulate import simulate_pool

    frame = simulate_pool(300, 6, seed=5)
    res = run_curation(frame, CurateConfig(target_size=100, junk_fractions=(), n_boot=50, n_random=50, pair_boot=20,
                                           score_budget=0, ibp="off"))
    out = write_curation(res, root / "curate", command_line=["benchaudit", "curate"], inputs=[], figures=False)
    return out, "default", res.summary["n_after"]


def _blind(root: Path) -> tuple[Path, str, int]:
    """A blind folder written by the blind writer's own steps (shards, merge, run config, card, manifest)."""
    from audit_hub.blind import shards as sh

    out = root / "blind"
    sh.open_output(out, [])
    sh.write_run_config(out, {"fingerprint": {"model": "m"}, "seed": 0})
    w = sh.ShardWriter(out, 0)
    w.add([{"question_id": f"q{i}", "model": "m`<img src=x onerror=alert(1)>`", "arm": "blind", "prediction": "A",
            "answer": "A", "hit_exact": i % 2 == 0, "scoring": "generate"} for i in range(7)])
    w.flush()
    sh.merge(out, [f"q{i}" for i in range(7)])
    sh.finish_output(out, {"model": "m`<img src=x onerror=alert(1)>`", "n_questions": 7, "image_mode": "none"},
                     "q`.parquet", inputs=[], command_line=["benchaudit", "blind"])
    return out, "default", 7


KINDS = {"audit": _audit, "index": _index, "tst": _tst, "prune": _prune, "curate": _curate, "blind": _blind}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_push_every_output_kind_and_load_it_back(hub, tmp_path, kind):  # noqa: F811
    import datasets

    from audit_hub.hub.publish import push_report

    folder, config, n_rows = KINDS[kind](tmp_path)
    man = json.loads((folder / "manifest.json").read_text())
    assert man["manifest_version"] == 2 and man["tool"] == "benchaudit"
    assert {"command", "command_line", "inputs", "environment", "outputs"} <= set(man)
    res = push_report(folder, f"benchaudit/{kind}-out")
    assert not res["no_op"] and res["n_files"] == len(man["outputs"]) + 1
    received = hub.state.folder("dataset", f"benchaudit/{kind}-out")
    assert_same_folder(received, folder)
    split = "test" if (kind == "curate" and config == "default") else "train"
    ds = datasets.load_dataset(str(received), config, split=split)
    assert ds.num_rows == n_rows
    assert push_report(folder, f"benchaudit/{kind}-out")["no_op"]


@pytest.mark.parametrize("kind, command", [("tst", "tst"), ("prune", "prune"), ("blind", "blind"), ("index", "audit")])
def test_push_refusal_names_the_command_that_wrote_the_folder(tmp_path, kind, command):
    from audit_hub.errors import InputError
    from audit_hub.hub.publish import push_report

    folder, _, _ = KINDS[kind](tmp_path)
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=f"rerun `benchaudit {command}`"):
        push_report(folder, "org/name")


def test_pruned_benchmark_and_index_reports_push_on_their_own(hub, tmp_path):  # noqa: F811
    import datasets

    from audit_hub.hub.publish import push_report

    prune, _, _ = _prune(tmp_path)
    push_report(prune / "pruned_benchmark", "benchaudit/pruned")
    got = datasets.load_dataset(str(hub.state.folder("dataset", "benchaudit/pruned")), split="test")
    assert got.num_rows == 110
    index, _, _ = _index(tmp_path)
    push_report(index / "POPE", "benchaudit/pope")
    assert datasets.load_dataset(str(hub.state.folder("dataset", "benchaudit/pope")), "questions",
                                 split="train").num_rows == 6
