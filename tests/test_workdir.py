"""Harness output folders with several benchmarks (issue 24 item 2, issue 29 "Harness folders"): one report per
benchmark, accuracies equal to the harness's own, nothing pooled, selection, disagreeing files, run folders,
CircularEval copies that disagree on the gold option. Fixtures written by VLMEvalKit's run.py and lmms-eval's
CLI (tests/fixtures/*/real/PROVENANCE.md)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
VLM = FIX / "vlmevalkit" / "real"
LMMS = FIX / "lmms_eval" / "real"
MODELS = ("ScriptedGood", "ScriptedMid", "ScriptedWeak")
FAST = ["--calibration-sims", "0", "--no-figures", "--n-permutations", "99"]


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "Agg")
    return subprocess.run([sys.executable, "-m", "audit_hub.cli", "audit", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


def _harness_accuracy(folder: Path, model: str, dataset: str) -> float:
    """VLMEvalKit's own overall accuracy for (model, dataset), from its _acc.csv / _score.csv in ``folder``."""
    if dataset in ("POPE", "HallusionBench"):
        sc = pd.read_csv(folder / f"{model}_{dataset}_score.csv")
        return float(sc.loc[sc["split"] == "Overall", "acc" if dataset == "POPE" else "aAcc"].iloc[0]) / 100
    return float(pd.read_csv(folder / f"{model}_{dataset}_acc.csv")["Overall"].iloc[0])


def _acc(summary: dict) -> dict[str, float]:
    return {r["model"]: r["accuracy_judged"] for r in summary["accuracy"] if r["arm"] == "full"}


@pytest.fixture(scope="module")
def vlm_workdir(tmp_path_factory):
    out = tmp_path_factory.mktemp("vlm") / "out"
    p = _cli("--runs", VLM / "outputs", "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    return out, p


def test_vlmevalkit_work_dir_one_report_per_benchmark(vlm_workdir):
    out, p = vlm_workdir
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    names = [r["benchmark"] for r in index["benchmarks"]]
    assert sorted(names) == ["HallusionBench", "MMBench_DEV_EN", "MMStar", "POPE"]
    units = {"HallusionBench": 24, "MMBench_DEV_EN": 20, "MMStar": 12, "POPE": 40}  # VLMEvalKit's scoring units
    from audit_hub.hub.folders import manifest_command

    for row in index["benchmarks"]:
        name = row["benchmark"]
        sub = out / row["path"]
        summary = json.loads((sub / "summary.json").read_text(encoding="utf-8"))
        assert summary["n_questions"] == row["n_questions"] == units[name]
        run_folder = next((VLM / "outputs" / "ScriptedGood").iterdir()).name
        for m in MODELS:
            harness = _harness_accuracy(VLM / "outputs" / m / run_folder, m, name)
            assert _acc(summary)[m] == pytest.approx(harness, abs=1e-12), (name, m)
        # nothing pooled: every input of this report is a file of this benchmark
        manifest = json.loads((sub / "manifest.json").read_text(encoding="utf-8"))
        files = [os.path.basename(r["path"]) for r in manifest["inputs"]]
        assert files and all(f.split("_", 1)[1].startswith(name + ".") or f.split("_", 1)[1].startswith(name + "_")
                             for f in files), (name, files)
        assert manifest["dataset"]["name"] == name
        assert manifest_command(sub) == "audit"  # a complete output of its own (pushable alone)
        assert (sub / "README.md").is_file() and (sub / "data").is_dir()
    assert manifest_command(out) == "audit"
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| POPE | 40 |" in card and "(POPE/README.md)" in card
    assert "HallusionBench + POPE" not in card
    assert "reports:" in p.stdout


def test_the_index_the_command_writes_loads_every_benchmarks_configs(vlm_workdir):
    """The work_dir index `benchaudit audit` writes (report.index.write_report_set) declared no configs: a pushed
    index did not load ("BuilderConfig 'POPE-runs' not found"; a plain load mixed every benchmark's tables). Its
    YAML now lists `<benchmark>-<config>` as hub.output.index_card_text makes it, and each loads as the
    benchmark's own folder gives it."""
    import datasets
    import yaml

    out, _ = vlm_workdir
    head = yaml.safe_load((out / "README.md").read_text(encoding="utf-8").split("---\n")[1])
    names = [c["config_name"] for c in head["configs"]]
    assert {"POPE", "POPE-runs", "POPE-summary", "MMStar", "MMStar-runs"} <= set(names)
    assert head["configs"][0].get("default") is True and "benchmark-audit-index" in head["tags"]
    for name, sub, config in (("POPE-runs", "POPE", "runs"), ("MMStar", "MMStar", "questions")):
        whole = datasets.load_dataset(str(out), name, split="train")
        alone = datasets.load_dataset(str(out / sub), config, split="train")
        assert whole.num_rows == alone.num_rows > 0 and whole.column_names == alone.column_names


def test_index_rerun_replaces_previous_output_and_single_selection(vlm_workdir, tmp_path):
    out, _ = vlm_workdir
    # --benchmark selects; one benchmark -> the single report of today at OUT
    one = tmp_path / "one"
    p = _cli("--runs", VLM / "outputs", "--benchmark", "POPE", "--out", one, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((one / "summary.json").read_text(encoding="utf-8"))
    assert s["n_questions"] == 40 and not (one / "index.json").exists()
    single = json.loads((out / "POPE" / "summary.json").read_text(encoding="utf-8"))
    assert _acc(s) == _acc(single)
    # --dataset on a folder of several benchmarks audits that one (issue 29: it used to only rename the report)
    ds = tmp_path / "ds"
    p = _cli("--runs", VLM / "outputs", "--dataset", "POPE", "--out", ds, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads((ds / "summary.json").read_text(encoding="utf-8"))["n_questions"] == 40
    # two selected -> two reports + index; a single-report folder is replaced by the index output
    p = _cli("--runs", VLM / "outputs", "--benchmark", "POPE", "--benchmark", "MMStar", "--out", one, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    idx = json.loads((one / "index.json").read_text(encoding="utf-8"))
    assert [r["benchmark"] for r in idx["benchmarks"]] == ["POPE", "MMStar"]  # in the order asked
    assert not (one / "summary.json").exists()
    assert any("not selected" in s["reason"] for s in idx["skipped_files"])
    # an unknown name: one line listing what the runs hold, nothing written
    bad = tmp_path / "bad"
    p = _cli("--runs", VLM / "outputs", "--benchmark", "MMBench", "--out", bad, *FAST)
    assert p.returncode == 2 and not bad.exists()
    assert "--benchmark 'MMBench'" in p.stderr and "MMBench_DEV_EN" in p.stderr and "Traceback" not in p.stderr


def test_separate_folders_and_globs_are_not_pooled(tmp_path):
    """--runs HB --runs POPE used to be one 64-question report "HallusionBench + POPE"; a glob over
    *_MMBench_DEV_EN* merged DEV_EN and DEV_EN_V11."""
    hb, pope, v = tmp_path / "hb", tmp_path / "pope", tmp_path / "mmb"
    for d in (hb, pope, v):
        d.mkdir()
    for m in MODELS:
        src = next((VLM / "outputs" / m).iterdir())
        for f in src.glob(f"{m}_HallusionBench*.xlsx"):
            shutil.copy(f, hb)
        for f in src.glob(f"{m}_POPE*.xlsx"):
            shutil.copy(f, pope)
        for f in src.glob(f"{m}_MMBench_DEV_EN*.xlsx"):
            shutil.copy(f, v)
            shutil.copy(f, v / f.name.replace("MMBench_DEV_EN", "MMBench_DEV_EN_V11"))
    out = tmp_path / "out"
    p = _cli("--runs", hb, "--runs", pope, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads((out / "index.json").read_text(encoding="utf-8"))["benchmarks"]
    assert {r["benchmark"]: r["n_questions"] for r in rows} == {"HallusionBench": 24, "POPE": 40}
    out2 = tmp_path / "out2"
    p = _cli("--runs", str(v / "*_MMBench_DEV_EN*"), "--out", out2, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads((out2 / "index.json").read_text(encoding="utf-8"))["benchmarks"]
    assert {r["benchmark"]: r["n_questions"] for r in rows} == {"MMBench_DEV_EN": 20, "MMBench_DEV_EN_V11": 20}
    assert rows[0]["accuracy"] == rows[1]["accuracy"]  # the same files under two names: the same audit


def test_two_files_of_one_benchmark_that_disagree_name_both(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    src = next((VLM / "outputs" / "ScriptedGood").iterdir()) / "ScriptedGood_POPE.xlsx"
    shutil.copy(src, a)
    df = pd.read_excel(src, engine="openpyxl")
    df.loc[0, "prediction"] = "No" if str(df.loc[0, "prediction"]).lower().startswith("y") else "Yes"
    df.to_excel(b / "ScriptedGood_POPE.xlsx", index=False)
    out = tmp_path / "out"
    p = _cli("--runs", a, "--runs", b, "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists(), p.stderr
    assert str(a / "ScriptedGood_POPE.xlsx") in p.stderr and str(b / "ScriptedGood_POPE.xlsx") in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    # another benchmark's sheet under this benchmark's name: the golds disagree, both files named
    c = tmp_path / "c"
    c.mkdir()
    other = next((VLM / "outputs" / "ScriptedMid").iterdir()) / "ScriptedMid_MMStar.xlsx"
    shutil.copy(other, c / "ScriptedMid_POPE.xlsx")
    p = _cli("--runs", a, "--runs", c, "--out", out, *FAST)
    assert p.returncode == 2 and not out.exists(), p.stderr
    assert "ScriptedGood_POPE.xlsx" in p.stderr and "ScriptedMid_POPE.xlsx" in p.stderr and "gold" in p.stderr


def test_run_folders_newest_run_and_links_win():
    """tests/fixtures/vlmevalkit/real/workdir_runs: two runs of VLMEvalKit's run.py into one work_dir; its links
    in {model}/ point to the run that last evaluated each dataset. The audit reads those, each file once, and
    its accuracies are VLMEvalKit's figures of that run."""
    from audit_hub.readers import ingest
    from audit_hub.readers.dispatch import read_all

    wd = VLM / "workdir_runs"
    full, skipped = read_all([str(wd)], arm="full", questions=None, column_map=None, dataset_hint=None, model=None,
                             metric=None)
    real = [os.path.realpath(r.path) for r in full]
    assert len(real) == len(set(real))  # a link and its target: read once
    groups, _ = ingest.split_by_benchmark(full, [])
    assert sorted(g.name for g in groups) == ["HallusionBench", "MMBench_DEV_EN", "MMStar", "POPE"]
    older = {s["path"] for s in skipped if "older VLMEvalKit run" in s["reason"]}
    for m in ("ScriptedGood", "ScriptedMid"):
        for d in ("POPE", "MMStar"):
            assert any(f"{m}_{d}" in p and "T20261202-041948" in p for p in older), (m, d)
    for g in groups:
        frame = ingest.frame_from_results(None, g.full, g.blind, [])
        assert frame.n_questions == {"HallusionBench": 24, "MMBench_DEV_EN": 20, "MMStar": 12, "POPE": 40}[g.name]
        acc = frame.accuracy_table().set_index("model")
        for m in MODELS:
            # the model folder's _acc/_score files are VLMEvalKit's links to the run it used
            assert acc.loc[m, "accuracy_judged"] == pytest.approx(_harness_accuracy(wd / m, m, g.name), abs=1e-12)
        for src in frame.sources:
            assert "T20261202-041948" not in src["path"] or g.name in ("HallusionBench", "MMBench_DEV_EN") \
                or "ScriptedWeak" in src["path"]
    # the second run changed the answers: POPE of ScriptedGood differs between the runs
    r1 = _harness_accuracy(wd / "ScriptedGood" / "T20261202-041948", "ScriptedGood", "POPE")
    r2 = _harness_accuracy(wd / "ScriptedGood" / "T20261202-042034", "ScriptedGood", "POPE")
    assert r1 != r2 and _harness_accuracy(wd / "ScriptedGood", "ScriptedGood", "POPE") == r2


def test_lmms_eval_run_folder_one_report_per_task(tmp_path):
    version = LMMS / "v0.7.3"
    out = tmp_path / "out"
    p = _cli("--runs", version, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {r["benchmark"]: r for r in json.loads((out / "index.json").read_text(encoding="utf-8"))["benchmarks"]}
    assert sorted(rows) == ["local_mathvista", "local_mmstar", "local_pope"]
    keys = {"local_pope": "pope_accuracy", "local_mmstar": "average", "local_mathvista": "llm_as_judge_eval"}
    for task, key in keys.items():
        summary = json.loads((out / rows[task]["path"] / "summary.json").read_text(encoding="utf-8"))
        for model in ("StubGood", "StubWeak"):
            path = glob.glob(str(version / model / f"*samples_{task}*.jsonl"))[0]
            recs = [json.loads(x) for x in open(path, encoding="utf-8") if x.strip()]
            v = [r[key] for r in recs]
            per_item = np.mean([float(x["true_false"] if "true_false" in x else x["score"]) for x in v])
            assert summary["n_questions"] == len(recs)
            assert _acc(summary)[model] == pytest.approx(per_item, abs=1e-12), (task, model)
            if task == "local_pope":  # lmms-eval's own headline
                res = json.load(open(glob.glob(str(version / model / "*results*.json"))[0], encoding="utf-8"))
                assert _acc(summary)[model] == pytest.approx(res["results"][task][f"{key},none"], abs=1e-12)


def test_lmms_eval_runs_of_one_model_in_two_output_paths_newest_wins(tmp_path):
    """The real lmms-eval fixture's parent (v0.3.5/ and v0.7.3/, each with StubGood and StubWeak on three tasks):
    each model's runs were read from both output paths and the audit stopped on 'several judges' for StubGood's
    local_mathvista. The README's rule, the newest run date per task, now holds across output paths: the v0.3.5 runs
    (15:14, 15:15) win over v0.7.3's (14:44, 14:45), the older files are listed with the folder used, and each report
    equals the one of the v0.3.5 folder alone."""
    both, only = tmp_path / "both", tmp_path / "only"
    p = _cli("--runs", LMMS, "--out", both, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    q = _cli("--runs", LMMS / "v0.3.5", "--out", only, *FAST)
    assert q.returncode == 0, q.stderr[-2000:]
    idx = json.loads((both / "index.json").read_text(encoding="utf-8"))
    skipped = [s for s in idx["skipped_files"] if "samples_" in s["path"]]  # (the results.json summaries are too)
    assert len(skipped) == 6 and all("/v0.7.3/" in s["path"] for s in skipped)
    assert all("an older lmms-eval run" in s["reason"] and "v0.3.5" in s["reason"] for s in skipped)
    one = {r["benchmark"]: r for r in json.loads((only / "index.json").read_text(encoding="utf-8"))["benchmarks"]}
    for r in idx["benchmarks"]:
        a = json.loads((both / r["path"] / "summary.json").read_text(encoding="utf-8"))
        b = json.loads((only / one[r["benchmark"]]["path"] / "summary.json").read_text(encoding="utf-8"))
        assert _acc(a) == _acc(b) and a["n_questions"] == b["n_questions"], r["benchmark"]


def test_blind_matched_per_benchmark(tmp_path):
    """Blind files are matched to the full arm's benchmark by name: POPE blind runs join the POPE report only."""
    blind = tmp_path / "blind"
    blind.mkdir()
    for m in MODELS:
        shutil.copy(next((VLM / "outputs" / m).iterdir()) / f"{m}_POPE.xlsx", blind)
    out = tmp_path / "out"
    p = _cli("--runs", VLM / "outputs", "--blind", blind, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {r["benchmark"]: r for r in json.loads((out / "index.json").read_text(encoding="utf-8"))["benchmarks"]}
    assert rows["POPE"]["models"]["blind"] == list(MODELS)
    assert all(rows[b]["models"]["blind"] == [] for b in ("HallusionBench", "MMBench_DEV_EN", "MMStar"))


def test_blind_without_a_benchmark_name_needs_a_selection(tmp_path):
    from audit_hub.errors import InputError
    from audit_hub.readers import ingest
    from audit_hub.readers.cells import ReadResult

    full = [ReadResult(path="x_POPE.xlsx", kind="vlmevalkit-sheet", benchmark="POPE"),
            ReadResult(path="x_MMStar.xlsx", kind="vlmevalkit-sheet", benchmark="MMStar")]
    blind = [ReadResult(path="blind.parquet", kind="generic", benchmark=None)]
    with pytest.raises(InputError, match="name no benchmark.*--benchmark NAME"):
        ingest.split_by_benchmark(full, blind)
    groups, left = ingest.split_by_benchmark(full, blind, wanted=["MMStar"])
    assert [(g.name, len(g.full), len(g.blind)) for g in groups] == [("MMStar", 1, 1)]
    assert [os.path.basename(x["path"]) for x in left] == ["x_POPE.xlsx"]


def test_circular_gold_disagreement_is_reported(tmp_path):
    """One option-shifted copy of MMBench question 0 names another option as its gold (the copies disagree on
    the answer): the group is named, counted as an input defect, in summary.json, the card and the CLI."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for m in MODELS:
        src = next((VLM / "outputs" / m).iterdir()) / f"{m}_MMBench_DEV_EN.xlsx"
        df = pd.read_excel(src, engine="openpyxl")
        i = int(np.flatnonzero(df["index"].to_numpy() == 1_000_000)[0])
        gold = df.loc[i, "answer"]
        df.loc[i, "answer"] = next(L for L in "ABCD" if L != gold and isinstance(df.loc[i, L], str))
        df.to_excel(runs / src.name, index=False)
    out = tmp_path / "out"
    p = _cli("--runs", runs, "--out", out, *FAST)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert s["input_defects"] == {"circular_gold_disagreement": 1}
    gd = s["circular"]["gold_disagreement"]
    assert gd["n_groups"] == 1 and gd["groups"][0]["group_id"] == "0"
    golds = gd["groups"][0]["golds"]
    assert len(set(golds.values())) == 2 and "1000000" in golds
    assert "Input defect" in (out / "README.md").read_text(encoding="utf-8")
    assert "input defect: 1 CircularEval group" in p.stderr


def test_index_card_escapes_input_strings():
    from audit_hub.report.index import index_card

    evil = "<img src=x onerror=alert(1)>`](javascript:x)|"
    row = {"benchmark": evil, "path": "safe", "n_questions": 3, "models": {"full": [evil], "blind": []},
           "primary_field": "hit", "mean_accuracy_full": 0.5,
           "accuracy": [{"model": evil, "arm": "full", "n_items": 3, "accuracy": 0.5}],
           "headlines": [evil], "input_defects": {}}
    card = index_card([row], skipped_files=[{"path": f"/x/{evil}.xlsx", "reason": evil}])
    import re

    assert "<img" not in card and "&lt;img" in card
    assert not re.search(r"(?<!\\)\]\(javascript", card)  # the link syntax is escaped: no live link
    assert "\\](javascript" in card


def test_folder_names_are_safe_and_unique():
    from audit_hub.readers.grouping import folder_name

    taken: set[str] = set()
    names = [folder_name(n, taken) for n in ("..", "a/b", "POPE", "pope", "README.md", None, ".hidden")]
    assert names == ["benchmark", "a_b", "POPE", "pope-2", "README.md-2", "benchmark-2", "hidden"]


def test_files_not_read_with_one_name_in_two_folders_are_told_apart():
    from audit_hub.report.index import index_card

    card = index_card([], skipped_files=[{"path": "/w/A/T1/m_acc.csv", "reason": "older run"},
                                         {"path": "/w/A/m_acc.csv", "reason": "summary"},
                                         {"path": "/w/B/x.json", "reason": "scores only"}])
    assert "- A/T1/m\\_acc.csv: older run" in card and "- w/A/m\\_acc.csv: summary" in card
    assert "- x.json: scores only" in card
