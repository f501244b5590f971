"""The report folder: questions/summary/runs configs, card YAML, manifest, figures, atomic writes.

Most tests use a hand-built fake EngineResult (correct structure, known severities) so the combination
rules can be checked by hand; one test runs the real pipeline on a small simulated benchmark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from audit_hub.detectors.base import DetectorResult, summary_rows
from audit_hub.frame.core import AuditFrame

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------- fixtures
def tiny_frame() -> AuditFrame:
    """6 mc questions (4 options), 3 models in both arms; hand-chosen outcomes."""
    q = pd.DataFrame({
        "question_id": [f"q{i}" for i in range(6)],
        "question": [f"What is shown in picture {i}?" for i in range(6)],
        "options": [["cat", "dog", "cow", "hen"]] * 5 + [["red", "red", "blue", "green"]],
        "answer": ["A", "B", "C", "D", "A", "B"],
        "category": ["math", "math", "science", "science", "perception", "perception"],
    })
    rows = []
    # per question: letters chosen by m0..m2 in the full arm, then the blind arm
    full = {"q0": "BBB", "q1": "BBB", "q2": "CAD", "q3": "DDA", "q4": "AAA", "q5": "BBC"}
    blind = {"q0": "BCD", "q1": "BBB", "q2": "ABD", "q3": "ABA", "q4": "AAA", "q5": "ACD"}
    gold = dict(zip(q.question_id, q.answer))
    for arm, table in (("full", full), ("blind", blind)):
        for qid, letters in table.items():
            for m, let in enumerate(letters):
                hit = let == gold[qid]
                # m2's judge disagrees with exact matching on q3 in the full arm
                exact = (not hit) if (qid == "q3" and m == 2 and arm == "full") else hit
                rows.append({"question_id": qid, "model": f"m{m}", "arm": arm, "prediction": f"The answer is {let}",
                             "answer": let, "hit": hit, "hit_exact": exact})
    frame = AuditFrame.from_tables(q, pd.DataFrame(rows))
    frame.meta["benchmark"] = "Tiny benchmark"
    frame.meta["dataset"] = {"name": "tiny", "split": "test", "license": "MIT", "revision": "abc123"}
    frame.meta["judges"] = {m: "exact letter judge" for m in frame.models}
    return frame


def _pq(frame, name, sev, extra=None):
    n = frame.n_questions
    sev = np.asarray(sev, dtype=object)
    flag = sev != "info"
    df = pd.DataFrame({"question_id": frame.question_ids.astype(str),
                       f"{name}_score": np.where(flag, 0.1, 0.9),
                       f"is_{name}_issue": flag, f"{name}_severity": sev})
    from audit_hub import detectors

    for k in detectors.get(name).evidence:  # every declared evidence column; missing ones as unknown
        df[f"{name}_{k}"] = (extra or {}).get(k, np.full(n, None, dtype=object))
    assert not set(extra or {}) - set(detectors.get(name).evidence), "a fake evidence column no detector emits"
    assert len(df) == n
    return df


def make_fake_result(frame: AuditFrame | None = None, *, with_alt: bool = True):
    """An EngineResult-shaped object with known per-question severities for tiny_frame()."""
    from audit_hub.engine.run import AuditConfig

    frame = frame or tiny_frame()
    f = (frame.correctness("full") == 1).sum(1)
    b = (frame.correctness("blind") == 1).sum(1)
    vd_sev = ["info", "high", "info", "info", "high", "info"]  # q1 and q4: all three right blind, zero gain
    ce_sev = ["high", "info", "info", "info", "info", "info"]  # q0: all chose B, gold A
    ds_sev = ["info"] * 5 + ["critical"]                         # q5: options A and B identical, gold B
    fk_sev = ["info", "info", "medium", "info", "info", "info"]  # q2: three distinct answers
    cats = ["(all)", "math", "perception", "science"]
    vd_table = summary_rows("visual_dependency", [
        {"category": c, "arm": "full-vs-blind", "field": "hit", "statistic": "zero_gain_share",
         "estimate": e, "ci_low": e - 0.1, "ci_high": e + 0.1, "null_mean": nm, "excess": e - nm,
         "p_value": p, "p_adjusted": p, "n_items": n}
        for c, e, nm, p, n in zip(cats, [0.5, 0.5, 0.5, 0.5], [0.3, 0.2, 0.4, 0.3], [0.04, 0.2, 0.5, 0.3],
                                  [6, 2, 2, 2])])
    vd_alt_table = vd_table.copy()
    vd_alt_table["field"] = "hit_exact"
    vd_alt_table.loc[vd_alt_table.category == "science", "estimate"] = 0.0
    ce_table = summary_rows("consensus_error", [
        {"category": c, "arm": "full", "field": None, "statistic": "n_unanimous_non_gold", "estimate": v, "n_items": n}
        for c, v, n in zip(cats, [1, 1, 0, 0], [6, 2, 2, 2])])
    vd_summary = {
        "n_items": 6, "zero_gain_share": 0.5, "share_ci": [0.19, 0.81], "null_mean": 0.3, "null_sd": 0.1,
        "excess": 0.2, "excess_ci": [-0.1, 0.5], "p_value": 0.04, "n_permutations": 99,
        "null_distribution": list(np.random.default_rng(0).normal(0.3, 0.1, 99).clip(0, 1)),
        "leave_one_model_out": [
            {"dropped_model": "m0", "n_items": 6, "zero_gain_share": 0.6, "null_mean": 0.35, "excess": 0.25,
             "p_value": 0.03},
            {"dropped_model": "m1", "n_items": 6, "zero_gain_share": 0.55, "null_mean": 0.4, "excess": 0.15,
             "p_value": 0.2},
        ],
        "fragile": True,
    }
    results = {
        "visual_dependency": DetectorResult("visual_dependency", _pq(frame, "visual_dependency", vd_sev,
                                            {"f": f, "b": b, "mf": np.full(6, 3), "mb": np.full(6, 3)}),
                                            vd_summary, vd_table,
                                            {"n_permutations": 99}),
        "consensus_error": DetectorResult("consensus_error", _pq(frame, "consensus_error", ce_sev, {
            "n_parseable": np.full(6, 3), "consensus_answer": ["B", "B", None, "D", "A", "B"],
            "consensus_share": [1.0, 1.0, np.nan, 2 / 3, 1 / 3, 2 / 3], "unanimous": [True, True, False, False, False, False],
            "duplicates_gold": [False] * 6}),
            {"n_unanimous_non_gold": 1, "expected_under_independence": 0.12, "n_majority_non_gold": 1}, ce_table),
        "distractor_similarity": DetectorResult("distractor_similarity", _pq(frame, "distractor_similarity", ds_sev, {
            "pair": [None] * 5 + ["A=B"], "similarity": [0.0] * 5 + [1.0],
            "rewrite_options": [False] * 5 + [True], "placeholder_gold": [False] * 6}),
            {"n_exact_duplicates": 1, "n_near_duplicates": 0}),
        "fleiss_kappa_agreement": DetectorResult("fleiss_kappa_agreement", _pq(frame, "fleiss_kappa_agreement", fk_sev,
                                                 {"agreement": [1, 1, 0, 1 / 3, 1, 1 / 3]}),
                                                 {"kappa": 0.41, "kappa_ci": [0.1, 0.7]}),
    }
    alt = {}
    if with_alt:
        alt["visual_dependency"] = DetectorResult(
            "visual_dependency", _pq(frame, "visual_dependency", vd_sev, {"f": f, "b": b, "mf": np.full(6, 3), "mb": np.full(6, 3)}),
            dict(vd_summary), vd_alt_table)
    summary = {"benchaudit_version": "0.1.0", "n_questions": 6, "primary_field": "hit", "seed": 0,
               "seeds": {"detectors": 0}, "pool": {"note": ""},
               **{k: v.summary for k, v in results.items()},
               "correctness_agreement": {"skipped": True, "reason": "needs 5 models"},
               "skipped": {"correctness_agreement": "needs 5 models"},
               "multiplicity": {"method": "holm", "tests": {"visual_dependency": {"p_value": 0.04, "p_holm": 0.04}}}}
    return SimpleNamespace(
        frame=frame, config=AuditConfig(seed=0, n_permutations=99), primary_field="hit", results=results,
        alt_results=alt, skipped={"correctness_agreement": "needs 5 models"}, judge_dependence={},
        calibration={"visual_dependency": {"fpr": 0.06, "nominal": 0.05, "n_sims": 50, "out_of_calibration": False,
                                           "note": "ok"},
                     "consensus_error": {"fpr": 0.2, "nominal": 0.05, "n_sims": 50, "out_of_calibration": True,
                                         "note": "yes/no items"}},
        summary=summary, timings={"visual_dependency": 0.01}, tst=None)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    from audit_hub.report import write_report

    out = tmp_path_factory.mktemp("rep") / "report"
    inp = tmp_path_factory.mktemp("inp") / "runs.csv"
    inp.write_text("question_id,model\nq0,m0\n")
    write_report(make_fake_result(), out, command_line=["benchaudit", "audit", "--out", str(out)],
                 inputs=[{"path": str(inp), "kind": "runs"}])
    return out


# ---------------------------------------------------------------------------------------------- tables
def test_questions_table_combines_detectors_by_hand():
    from audit_hub.report import build_questions_table

    q = build_questions_table(make_fake_result())
    assert list(q["question_id"]) == [f"q{i}" for i in range(6)]
    # overall severity = max over detectors
    assert list(q["severity"]) == ["high", "high", "medium", "info", "high", "critical"]
    assert list(q["n_flags"]) == [1, 1, 1, 0, 1, 1]
    # actions: q0 unanimous non-gold -> relabel; q1/q4 blind-solvable -> drop; q2 medium -> review;
    # q3 nothing -> keep; q5 duplicate gold option -> rewrite distractor
    assert list(q["suggested_action"]) == ["relabel", "drop", "review", "keep", "drop", "rewrite distractor"]
    assert "consensus error: all 3 parseable models chose B (gold A) [high]" in q.loc[0, "rationale"]
    assert "no gain from the image (3/3 right with it, 3/3 right blind) [high]" == q.loc[1, "rationale"]
    assert q.loc[3, "rationale"] == "no finding"
    assert "A=B" in q.loc[5, "rationale"] and "[critical]" in q.loc[5, "rationale"]
    assert q.loc[0, "flagged_by"] == "consensus_error"
    # exact-match re-run columns and the benchmark's own columns are carried
    assert "is_visual_dependency_issue_exact_match" in q and "options" in q and "question" in q
    assert q.loc[5, "options"] == ["red", "red", "blue", "green"]


def test_multiple_flags_join_and_rule_order():
    from audit_hub.report.tables import suggested_actions
    from audit_hub.severity import RANK

    r = make_fake_result()
    # an item that is both a consensus error and a duplicate-option item: rewrite distractor wins
    sev = {"consensus_error": np.array([RANK["high"], RANK["high"], 0]),
           "distractor_similarity": np.array([RANK["medium"], 0, RANK["low"]]),
           "visual_dependency": np.array([RANK["high"], 0, 0])}
    overall = np.array([RANK["high"], RANK["high"], RANK["low"]])
    # (distractor_similarity's rewrite trigger reads its rewrite_options evidence: a duplicate, not a placeholder gold)
    from types import SimpleNamespace

    ds_pq = pd.DataFrame({"distractor_similarity_rewrite_options": [True, False, False]})
    acts = suggested_actions(sev, overall, {"distractor_similarity": SimpleNamespace(per_question=ds_pq)})
    assert list(acts) == ["rewrite distractor", "relabel", "keep"]
    # two detectors on one question -> both phrases, in detector order
    res = make_fake_result()
    pq = res.results["fleiss_kappa_agreement"].per_question
    pq.loc[0, "fleiss_kappa_agreement_severity"] = "medium"
    pq.loc[0, "is_fleiss_kappa_agreement_issue"] = True
    from audit_hub.report import build_questions_table

    q = build_questions_table(res)
    assert q.loc[0, "n_flags"] == 2
    assert q.loc[0, "flagged_by"] == "consensus_error,fleiss_kappa_agreement"
    assert q.loc[0, "rationale"].index("consensus error") < q.loc[0, "rationale"].index("agreement")
    assert r is not None


def test_misaligned_detector_rows_are_refused():
    from audit_hub.report import build_questions_table

    res = make_fake_result()
    pq = res.results["consensus_error"].per_question
    res.results["consensus_error"].per_question = pq.iloc[::-1].reset_index(drop=True)
    with pytest.raises(ValueError, match="consensus_error"):
        build_questions_table(res)


def test_summary_table_types_and_arms():
    from audit_hub.report import build_summary_table

    s = build_summary_table(make_fake_result())
    assert len(s) == 4 + 4 + 4  # vd primary + vd exact-match + consensus
    assert s["estimate"].dtype == np.float64 and str(s["n_items"].dtype) == "Int64"
    vd_exact = s[(s.detector == "visual_dependency") & ~s.primary]
    assert set(vd_exact["field"]) == {"hit_exact"}
    assert s[(s.detector == "consensus_error")]["primary"].all()


# ---------------------------------------------------------------------------------------------- folder
def test_folder_layout_and_offline_load(report_dir):
    import datasets

    files = sorted(p.relative_to(report_dir).as_posix() for p in report_dir.rglob("*") if p.is_file())
    assert "README.md" in files and "summary.json" in files and "manifest.json" in files
    for c in ("questions", "summary", "runs"):
        assert f"data/{c}-00000-of-00001.parquet" in files
    assert {"figures/full_vs_blind.png", "figures/null_distribution.png", "figures/categories.png",
            "figures/judge.png"} <= set(files)
    assert not [p for p in report_dir.parent.iterdir() if p.name.startswith(".report.tmp")]
    q = datasets.load_dataset(str(report_dir), "questions", split="train")
    assert q.num_rows == 6
    assert q.features["options"] == datasets.List(datasets.Value("string"))
    assert q.features["severity"] == datasets.Value("string")
    assert q.features["is_consensus_error_issue"] == datasets.Value("bool")
    assert q[5]["suggested_action"] == "rewrite distractor"
    s = datasets.load_dataset(str(report_dir), "summary", split="train")
    assert s.num_rows == 12 and s.features["p_value"] == datasets.Value("float64")
    r = datasets.load_dataset(str(report_dir), "runs", split="train")
    assert r.num_rows == 36  # 6 questions x 3 models x 2 arms
    assert set(r.column_names) >= {"question_id", "model", "arm", "prediction", "answer", "hit", "hit_exact"}
    # the default config is questions
    d = datasets.load_dataset(str(report_dir), split="train")
    assert d.num_rows == 6


def test_card_yaml_matches_files(report_dir):
    import pyarrow.parquet as pq
    from datasets import Features
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(report_dir / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "mit"
    assert "benchaudit" in data["tags"] and data["pretty_name"].startswith("benchaudit report")
    names = [c["config_name"] for c in data["configs"]]
    assert names == ["questions", "summary", "runs"]
    infos = {d["config_name"]: d for d in data["dataset_info"]}
    for c in data["configs"]:
        pattern = c["data_files"][0]["path"]
        shards = sorted(report_dir.glob(pattern))
        assert shards, pattern
        n = sum(pq.ParquetFile(p).metadata.num_rows for p in shards)
        info = infos[c["config_name"]]
        assert info["splits"][0]["num_examples"] == n
        feats = Features._from_yaml_list(info["features"])
        assert feats == Features.from_arrow_schema(pq.read_schema(shards[0]))
    body = card.text
    for heading in ("## What was audited", "## Headline findings", "## Per-category findings", "## Judge dependence",
                    "## Calibration of each detector", "## Severity levels and suggested actions",
                    "## Most severe questions", "### Other Known Limitations"):
        assert heading in body, heading
    # severity levels explained from the single source of truth
    from audit_hub.severity import DESCRIPTIONS

    for d in DESCRIPTIONS.values():
        assert d in body
    assert "without m0" in body and "+25.0 pp" in body  # leave-one-model-out row
    assert "**out of calibration**" in body
    assert "`correctness_agreement` was skipped: needs 5 models." in body
    for fig in ("figures/full_vs_blind.png", "figures/categories.png", "figures/judge.png"):
        assert f"]({fig})" in body


def test_summary_and_manifest(report_dir):
    from audit_hub.hub.folders import sha256_file

    s = json.loads((report_dir / "summary.json").read_text())
    assert s["visual_dependency"]["excess"] == 0.2
    m = json.loads((report_dir / "manifest.json").read_text())
    inp = m["inputs"][0]
    assert inp["sha256"] == sha256_file(inp["path"]) and inp["bytes"] == Path(inp["path"]).stat().st_size
    assert m["dataset"]["revision"] == "abc123"
    assert m["config"]["seed"] == 0 and m["config"]["n_permutations"] == 99
    assert m["thresholds"]["visual_dependency"] == {"n_permutations": 99}
    assert m["command_line"][:2] == ["benchaudit", "audit"]
    assert m["environment"]["packages"]["numpy"] == np.__version__
    assert m["started_at"] <= m["finished_at"]
    outs = {o["path"]: o["sha256"] for o in m["outputs"]}
    assert "manifest.json" not in outs
    for rel, h in outs.items():
        assert sha256_file(report_dir / rel) == h


def test_figures_are_real_pngs(report_dir):
    from PIL import Image

    for p in (report_dir / "figures").glob("*.png"):
        with Image.open(p) as im:
            assert im.width >= 600 and im.height >= 300
            # not blank: some pixels differ from white
            arr = np.asarray(im.convert("L"))
            assert (arr < 200).mean() > 0.005


# ---------------------------------------------------------------------------------------------- atomicity
def test_failed_write_leaves_previous_folder(tmp_path):
    from audit_hub.report import write_report

    out = tmp_path / "rep"
    write_report(make_fake_result(), out, command_line=["x"], inputs=[], figures=False)
    before = sorted(p.name for p in out.rglob("*"))

    def boom(tmp):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_report(make_fake_result(), out, command_line=["x"], inputs=[], figures=False, _hook=boom)
    assert sorted(p.name for p in out.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]
    with pytest.raises(RuntimeError):
        write_report(make_fake_result(), tmp_path / "new", command_line=["x"], inputs=[], figures=False, _hook=boom)
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_killed_audit_leaves_no_partial_folder(tmp_path):
    """SIGKILL while the folder is being written: the target never appears."""
    out = tmp_path / "rep"
    flag = tmp_path / "writing"
    code = textwrap.dedent(f"""
        import sys, time, pathlib
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from test_report import make_fake_result
        from audit_hub.report import write_report
        def hang(tmp):
            pathlib.Path({str(flag)!r}).write_text(str(tmp))
            time.sleep(60)
        write_report(make_fake_result(), {str(out)!r}, command_line=['x'], inputs=[], figures=False, _hook=hang)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    try:
        t0 = time.time()
        while not flag.exists() and time.time() - t0 < 50:
            assert proc.poll() is None, "writer exited early"
            time.sleep(0.1)
        assert flag.exists()
        assert Path(flag.read_text()).is_dir()  # the temporary folder is complete at this point
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
    assert not out.exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "writing"]
    assert all(n.startswith(".rep.ba-tmp-") for n in leftovers)


# ---------------------------------------------------------------------------------------------- real pipeline
def test_real_pipeline_on_simulated_benchmark(tmp_path):
    """run_audit on a simulated benchmark -> write_report -> load; planted items rank on top."""
    pytest.importorskip("audit_hub.detectors.visual_dependency")
    pytest.importorskip("audit_hub.detectors.consensus_error")
    sys.path.insert(0, str(REPO / "tests"))
    from sim import simulate_frame

    from audit_hub.engine.run import AuditConfig, run_audit
    from audit_hub.report import write_report

    frame = simulate_frame(300, 5, n_options=4, accuracy_full=0.6, accuracy_blind=0.4,
                           planted={"consensus_wrong": 10, "blind_solvable": 15}, judge_flip_rate=0.02, seed=3)
    res = run_audit(frame, AuditConfig(seed=0, n_permutations=99, run_calibration=False))
    out = write_report(res, tmp_path / "rep", command_line=["test"], inputs=[], figures=True)
    import datasets

    q = datasets.load_dataset(str(out), "questions", split="train").to_pandas()
    assert len(q) == 300
    planted = set(frame.meta["planted"]["consensus_wrong"])
    relabel = set(q.loc[q.suggested_action == "relabel", "question_id"])
    assert len(planted & relabel) >= 8
    assert (q.loc[q.question_id.isin(planted), "severity"].isin(["high", "critical"])).mean() >= 0.8
    s = datasets.load_dataset(str(out), "summary", split="train")
    assert s.num_rows > 0
    r = datasets.load_dataset(str(out), "runs", split="train")
    assert r.num_rows == len(frame.runs)


def test_release_memory_drops_only_the_dense_caches_and_they_recompute_equal():
    from audit_hub.bounds import release_memory, trim_heap

    frame = tiny_frame()
    hit = frame.correctness("full", "hit").copy()
    codes = frame.answer_codes("full").copy()
    kept = [k for k in frame.cache if not (isinstance(k, tuple) and k[0] == "dense")]
    assert ("dense", "hit", "full") in frame.cache and ("dense", "answer_codes", "full") in frame.cache
    release_memory(frame)
    assert not [k for k in frame.cache if isinstance(k, tuple) and k[0] == "dense"]
    assert [k for k in frame.cache] == kept  # everything else (answer space, gold codes, counts) stays
    np.testing.assert_array_equal(frame.correctness("full", "hit"), hit)
    np.testing.assert_array_equal(frame.answer_codes("full"), codes)
    release_memory()  # no frame: only the heap is trimmed
    trim_heap()


def test_judge_figure_keeps_the_runs_that_disagree_most_on_a_wide_pool(monkeypatch, tmp_path):
    """150 models x 2 arms: the per-run panel draws the 25 runs with the largest disagreement share (legible
    labels), in order, and its title says how many runs it leaves out; a small pool keeps every run."""
    from audit_hub.report import figures

    drawn = {}
    monkeypatch.setattr(figures, "save_png", lambda fig, path: drawn.update(fig=fig))
    models = [f"model_{i:03d}" for i in range(150)]
    n_both = np.full(300, 1000)
    n_dis = np.arange(300) * 3 % 997            # distinct shares; the largest are not the last runs
    fi = SimpleNamespace(judge={"m2": pd.DataFrame(), "counts": {"n_both": n_both, "n_dis": n_dis}, "models": models})
    figures.fig_judge(fi, tmp_path / "judge.png")
    ax = drawn["fig"].axes[-1]
    widths = [p.get_width() for p in ax.patches]
    top = np.sort(100 * n_dis / n_both)[::-1][:25]
    assert len(widths) == 25 and widths == pytest.approx(top[::-1].tolist())   # the largest at the top
    labels = [t.get_text() for t in ax.get_yticklabels()]
    best = int(np.argmax(n_dis))
    assert labels[-1] == (f"{models[best % 150]} (blind)" if best >= 150 else models[best])
    assert "the 25 of 300 model runs with the most" in ax.get_title()
    fi.judge = {"m2": pd.DataFrame(), "counts": {"n_both": n_both[:6], "n_dis": n_dis[:6]}, "models": models[:3]}
    figures.fig_judge(fi, tmp_path / "judge.png")
    assert len(drawn["fig"].axes[-1].patches) == 6
    assert drawn["fig"].axes[-1].get_title().endswith("(labels: number of items)")


def test_per_category_section_without_blind_runs_has_no_empty_gain_columns(tmp_path):
    """BLINK (19 real models, no blind runs): the section had four zero-gain columns of n/a under 'Sorted by
    zero-gain excess', and its Items column showed the unanimity rule's eligible items (Jigsaw 10 of its 150).
    Now: Items is the category's questions, the gain columns and their sort are left out and said why."""
    from audit_hub import api

    real = Path(__file__).parent / "fixtures" / "real_pools" / "blink"
    res = api.audit(str(real / "questions.parquet"), str(real / "runs.parquet"), out=tmp_path / "r",
                    calibration_sims=0, figures=False)
    card = (tmp_path / "r" / "README.md").read_text()
    sec = card.split("## Per-category findings", 1)[1].split("\n## ", 1)[0]
    assert "Zero-gain share" not in sec and "Sorted by zero-gain excess" not in sec
    assert "`visual_dependency` did not run (no blind runs)" in sec
    assert "| Category | Items | Unanimous non-gold (of eligible items) |" in sec
    sizes = res.frame.questions["category"].value_counts()
    assert sizes["Jigsaw"] == 150
    assert "| Jigsaw | 150 | 0 of 10 (0.0%) |" in sec
    # with a blind arm the gain columns stay, sorted by excess, Items the category's questions (bundled example)
    res = api.audit(out=tmp_path / "m", calibration_sims=0, figures=False)
    sec = (tmp_path / "m" / "README.md").read_text().split("## Per-category findings", 1)[1].split("\n## ", 1)[0]
    assert "Sorted by zero-gain excess" in sec and "| arithmetic | 140 | 44.3% |" in sec


def test_the_per_model_section_describes_the_blind_arm_it_has():
    """MathVista's blind arm is text-only runs of other models (ChatGPT, Claude, GPT-4), not the full-arm models
    with the image removed: the card's arm description says which, per pool."""
    from audit_hub.report.card import _sentence, per_model_section

    def rows(full, blind):
        return {"rows": [{"model": m, "arm": a, "n_items": 10, "accuracy_judged": 0.5, "n_judged": 10,
                          "accuracy_exact": 0.5, "n_exact": 10, "unparseable_share": 0.0}
                         for a, ms in (("full", full), ("blind", blind)) for m in ms]}

    assert "blind: the same model, image removed" in per_model_section(rows(["a", "b"], ["a"]))
    assert ("blind: text-only runs of other models, compared with the full arm at pool level"
            in per_model_section(rows(["a", "b"], ["gpt4"])))
    assert ("blind: the same model with the image removed, or a text-only model's run"
            in per_model_section(rows(["a", "b"], ["a", "gpt4"])))
    assert _sentence("no blind run pairs with x") == "No blind run pairs with x." and _sentence(" ") == ""
    assert _sentence("Done.") == "Done."


def test_card_counts_models_in_words(report_dir):
    card = (report_dir / "README.md").read_text()
    assert "| Full arm (with images) | 3 models: m0, m1, m2 |" in card
    assert "| Blind arm (images removed) | 3 models: m0, m1, m2 |" in card and "model(s)" not in card


def test_zero_gain_caveats_only_where_a_zero_gain_test_ran():
    """BLINK and the VLMEvalKit benchmarks (no blind arm, visual_dependency skipped) listed two zero-gain
    limitations although no zero-gain figure was on the card."""
    from audit_hub.report.card import _limitations

    r = make_fake_result()
    assert any("zero-gain share depends on the model pool" in x for x in _limitations(r))
    r.summary = {**r.summary, "visual_dependency": {"skipped": True}}
    assert not any("zero-gain" in x.lower() or "zero gain" in x.lower() for x in _limitations(r))


def test_a_detector_that_can_flag_nothing_here_is_not_within_calibration():
    """correctness_agreement on a 3-model pool (its item-rest test needs 5): nominal 0%, rate 0%, shown as
    "within calibration"."""
    from audit_hub.report.card import calibration_status, calibration_word

    c = {"out_of_calibration": False, "nominal": 0.0, "fpr": 0.0, "fpr_ci": [0.0, 0.07], "decided": True}
    assert calibration_word(c) == "not applicable"
    assert calibration_status(c) == "not applicable (it expects and raises no flag on this pool)"
    assert calibration_word({**c, "nominal": 0.05}) == "within calibration"


def _started(folder: Path) -> float:
    import datetime as dt

    m = json.loads((folder / "manifest.json").read_text())
    return dt.datetime.fromisoformat(m["started_at"]).timestamp()


def test_manifest_started_at_is_the_command_start_not_the_write_start(tmp_path, monkeypatch):
    """``started_at`` is when the command began: the CLI's own start, and for the library the call that computed
    the output (a later ``save`` keeps it). It used to be when the folder began to be written."""
    import audit_hub as ba
    from audit_hub import cli
    from audit_hub.report import writer

    real = writer.write_report

    def slow_write(*a, **k):  # the computation before the write takes 3 s more
        time.sleep(3)
        return real(*a, **k)

    monkeypatch.setattr(writer, "write_report", slow_write)
    t0 = time.time()
    assert cli.main(["audit", "--calibration-sims", "0", "--no-figures", "--out", str(tmp_path / "r")]) == 0
    assert t0 - 1 <= _started(tmp_path / "r") <= t0 + 1.5

    t1 = time.time()
    res = ba.audit(calibration_sims=0, figures=False)
    time.sleep(3)
    res.save(tmp_path / "lib")
    assert t1 - 1 <= _started(tmp_path / "lib") <= t1 + 1.5
