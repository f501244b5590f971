"""Files written by the harnesses' own code (tests/fixtures/*/real, see each PROVENANCE.md): for every
model and dataset the audit's judged and exact accuracies equal the harness's, and the question count
equals its scoring units."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pandas as pd
import pytest

from audit_hub.readers import ingest
from audit_hub.readers.vlmevalkit import parse_sheet_name

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
VLM = os.path.join(FIX, "vlmevalkit", "real")
LMMS = os.path.join(FIX, "lmms_eval", "real")
MODELS = ("ScriptedGood", "ScriptedMid", "ScriptedWeak")


def _vlm_files(dataset: str, model: str = "*") -> list[str]:
    return sorted(glob.glob(os.path.join(VLM, "outputs", model, "*", f"{model}_{dataset}*.xlsx")))


def _vlm_harness_accuracy(model: str, dataset: str) -> float:
    folder = glob.glob(os.path.join(VLM, "outputs", model, "*"))[0]
    if dataset in ("POPE", "HallusionBench"):
        sc = pd.read_csv(os.path.join(folder, f"{model}_{dataset}_score.csv"))
        col = "acc" if dataset == "POPE" else "aAcc"
        return float(sc.loc[sc["split"] == "Overall", col].iloc[0]) / 100
    return float(pd.read_csv(os.path.join(folder, f"{model}_{dataset}_acc.csv"))["Overall"].iloc[0])


@pytest.mark.parametrize("dataset", ["MMBench_DEV_EN", "MMStar", "POPE", "HallusionBench"])
def test_vlmevalkit_accuracies_equal_vlmevalkits(dataset):
    frame = ingest.build_frame(os.path.join(VLM, "LMUData", f"{dataset}.tsv"), _vlm_files(dataset))
    assert frame.models == MODELS
    acc = frame.accuracy_table().set_index("model")
    for m in MODELS:
        harness = _vlm_harness_accuracy(m, dataset)
        assert acc.loc[m, "accuracy_judged"] == pytest.approx(harness, abs=1e-12), (m, dataset)
        assert acc.loc[m, "accuracy_exact"] == pytest.approx(harness, abs=1e-12), (m, dataset)
    # question count = VLMEvalKit's scoring units (one row per question in its judged sheet; for
    # MMBench the circular groups, not the 70 option-shifted rows)
    units = pd.read_excel(_vlm_files(dataset, "ScriptedGood")[1], engine="openpyxl")
    assert frame.n_questions == len(units)
    if dataset == "MMBench_DEV_EN":
        assert frame.n_questions == 20 and frame.meta["circular"] == {
            "n_groups": 20, "n_copies": 70, "n_questions_before": 70,
            "rule": "a circular question is right only when every option-shifted copy is right and readable"}
        assert len(frame.meta["_circular_copies"]) == 70 * len(MODELS)


def test_vlmevalkit_benchmark_name_and_hallusion_metadata():
    frame = ingest.build_frame(None, _vlm_files("HallusionBench", "ScriptedGood"))
    assert frame.meta["benchmark"] == "HallusionBench"
    q = frame.questions.set_index("question_id")
    for col in ("subcategory", "visual_input", "set_id", "figure_id"):
        assert col in q.columns
    assert set(q["category"]) == {"VD", "VS"}
    assert q.loc["VD_math_chart_1_1_0", "subcategory"] == "math" and q.loc["VD_math_chart_1_1_0", "figure_id"] == "1"
    assert ingest.build_frame(None, _vlm_files("MMStar", "ScriptedMid")).meta["benchmark"] == "MMStar"


def test_vlmevalkit_mmstar_embedded_options_agree_with_columns():
    """MMStar's question field embeds the options in its three forms; parsed, they equal VLMEvalKit's A-D."""
    from audit_hub.readers.embedded_options import split_embedded_options

    df = pd.read_csv(os.path.join(VLM, "LMUData", "MMStar.tsv"), sep="\t")
    for _, r in df.iterrows():
        stem, opts = split_embedded_options(r["question"])
        assert opts == [r[c] for c in "ABCD" if isinstance(r[c], str)] and "\n" not in stem


@pytest.mark.parametrize("name, judge", [
    ("ScriptedGood_MMStar_gpt-4o-mini_result.xlsx", "gpt-4o-mini"),
    ("ScriptedGood_MMStar_exact_matching_result.xlsx", "exact_matching"),
    ("ScriptedGood_MMBench_DEV_EN_openai_result.xlsx", "openai"),
    ("llava_next_yi_34b_MMStar.xlsx", None)])
def test_vlmevalkit_judged_sheet_names(name, judge):
    n = parse_sheet_name(os.path.join("/x", name))
    assert n.judge == judge and n.dataset in ("MMStar", "MMBench_DEV_EN")
    assert n.model == ("llava_next_yi_34b" if judge is None else "ScriptedGood")


# ------------------------------------------------------------------------------------ lmms-eval
def _lmms_versions() -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(LMMS, "v*")))


def _samples(version: str, model: str, task: str) -> tuple[str, list[dict]]:
    path = glob.glob(os.path.join(LMMS, version, model, f"*samples_{task}*.jsonl"))[0]
    with open(path, encoding="utf-8") as fh:
        return path, [json.loads(line) for line in fh if line.strip()]


def _prediction(rec: dict) -> str:
    v = rec["resps"] if "resps" in rec else rec["filtered_resps"]
    while isinstance(v, list):
        v = v[0]
    return v


def _verdict(rec: dict, key: str) -> float:
    v = rec[key]
    return float(v["true_false"] if "true_false" in v else v["score"])


@pytest.mark.parametrize("version", _lmms_versions())
@pytest.mark.parametrize("model", ["StubGood", "StubWeak"])
def test_lmms_eval_accuracies_equal_lmms_evals(version, model):
    results_path = glob.glob(os.path.join(LMMS, version, model, "*results*.json"))[0]
    results = json.load(open(results_path, encoding="utf-8"))["results"]
    judge_key = "gpt_eval_score" if version.startswith("v0.3") else "llm_as_judge_eval"
    for task, key in (("local_pope", "pope_accuracy"), ("local_mmstar", "average"), ("local_mathvista", judge_key)):
        path, recs = _samples(version, model, task)
        frame = ingest.build_frame(None, [path])
        assert frame.meta["benchmark"] == task and frame.models == (model,)
        assert frame.n_questions == len(recs)  # one scoring unit per logged sample
        assert frame.meta["judges"] == {model: f"lmms-eval:{key}"}
        acc = frame.accuracy_table().iloc[0]
        per_item = np.array([_verdict(r, key) for r in recs])
        assert acc["accuracy_judged"] == pytest.approx(per_item.mean(), abs=1e-12)
        headline = results[task][f"{key},none"]
        if task == "local_pope":
            assert acc["accuracy_judged"] == pytest.approx(headline, abs=1e-12)
        elif task == "local_mathvista":
            assert 100 * acc["accuracy_judged"] == pytest.approx(headline, abs=0.01)
        else:  # lmms-eval's MMStar "average" is the mean over l2 categories of the per-item scores
            l2 = frame.questions["l2_category"].to_numpy(dtype=object)
            hits = frame.correctness("full", "hit")[:, 0]
            macro = np.mean([hits[l2 == c].mean() for c in sorted(set(l2))])
            assert macro == pytest.approx(headline, abs=1e-12)
        # the exact arm: our own reading of the prediction
        exact = frame.correctness("full", "hit_exact")[:, 0]
        judged = frame.correctness("full", "hit")[:, 0]
        preds = {str(r["doc_id"]): _prediction(r) for r in recs}
        if task == "local_mmstar":
            if version.startswith("v0.3"):
                # lmms-eval 0.3.5's MMStar rule reads only the first character (or after "(", "option ",
                # "the answer is "): "Answer: B" is wrong there; those are the only disagreements
                diff = np.flatnonzero(exact != judged)
                assert all(exact[i] == 1 and preds[str(i)].lower().startswith("answer:") for i in diff)
                answer_colon = [i for i in range(len(recs)) if preds[str(i)].lower().startswith("answer:")]
                assert sorted(diff) == sorted(i for i in answer_colon if exact[i] == 1 and preds[str(i)][8:9] != "A")
            else:
                np.testing.assert_array_equal(exact, judged)  # 0.7.3 extracts the letter as we do
        elif task == "local_pope":
            # lmms-eval's POPE scores prediction == gold after lower/strip only: "Yes." is wrong there;
            # every disagreement is such a punctuation/case variant of the gold, read right by the audit
            qid = frame.questions["question_id"].to_numpy(dtype=object)
            gold = frame.questions["answer"].to_numpy(dtype=object)
            diff = np.flatnonzero(exact != judged)
            for i in diff:
                assert exact[i] == 1 and judged[i] == 0
                p = preds[qid[i]] if qid[i] in preds else None
                assert p is not None and p.strip().strip(".").lower() == gold[i]
        else:
            # MathVista under API_TYPE=dummy: where lmms-eval's quick rules extracted the answer the two arms
            # agree; where its GPT extraction returned "dummy", lmms-eval snaps "dummy" to the nearest choice
            # (multi_choice: sometimes the gold, a false "right") or scores free-form answers wrong, so the
            # arms may differ there -- the judge failure the judged-vs-exact comparison exists to show
            qid = frame.questions["question_id"].to_numpy(dtype=object)
            extracted = {str(r[key]["question_id"]): r[key]["extraction"] not in ("dummy", None, "") for r in recs}
            read = np.array([extracted[q] for q in qid])
            assert read.any() and (~read).any()
            np.testing.assert_array_equal(exact[read], judged[read])


def test_lmms_eval_answer_types_mapped():
    version = _lmms_versions()[-1]
    path, recs = _samples(version, "StubGood", "local_mathvista")
    q = ingest.build_frame(None, [path]).questions.set_index("question_id")
    assert q.loc["1", "answer_type"] == "mc" and q.loc["1", "answer"] == "A"  # multi_choice text gold -> letter
    assert list(q.loc["1", "options"]) == ["red", "blue", "green", "yellow"]
    assert q.loc["2", "answer_type"] == "numeric" and q.loc["4", "answer_type"] == "numeric"  # integer, float


def test_runs_glob_expanded_by_the_shell_or_by_us(tmp_path):
    from audit_hub.cli import main

    version = _lmms_versions()[-1]
    files = sorted(glob.glob(os.path.join(LMMS, version, "*", "*samples_local_pope*.jsonl")))
    assert len(files) == 2
    base = ["audit", "--calibration-sims", "0", "--n-permutations", "9", "--no-figures"]
    # as the shell gives it: several words after --runs
    assert main(base + ["--out", str(tmp_path / "a"), "--runs", *files]) == 0
    # a quoted glob that we expand ourselves
    pattern = os.path.join(LMMS, version, "*", "*samples_local_pope*.jsonl")
    assert main(base + ["--out", str(tmp_path / "b"), "--runs", pattern]) == 0
    s = json.load(open(tmp_path / "a" / "summary.json", encoding="utf-8"))
    assert {a["model"] for a in s["accuracy"]} == {"StubGood", "StubWeak"}


# ------------------------------------------------------------------------------- lm-evaluation-harness
LMEVAL = os.path.join(FIX, "lm_eval", "real")


def _lm_eval_files() -> list[tuple[str, str, str]]:
    """(version, model, samples file) for every samples file lm-eval wrote."""
    out = []
    for path in sorted(glob.glob(os.path.join(LMEVAL, "v*", "*", "*.json*"))):
        if not os.path.basename(path).startswith("results"):
            parts = path.split(os.sep)
            out.append((parts[-3], parts[-2], path))
    return out


def _lm_eval_results(path: str) -> dict:
    found = glob.glob(os.path.join(os.path.dirname(path), "results*.json"))
    assert len(found) == 1
    return json.load(open(found[0], encoding="utf-8"))


def _lm_eval_records(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x]


def test_lm_eval_fixtures_cover_both_layouts():
    files = _lm_eval_files()
    assert {v for v, _, _ in files} == {"v0.4.13", "v0.4.2"} and len(files) == 14
    old = [p for v, _, p in files if v == "v0.4.2"]
    assert all("," in os.path.basename(p) for p in old)  # model arguments with their comma in the name
    assert all(open(p, encoding="utf-8").read(1) == "[" for p in old)  # one JSON array per file


@pytest.mark.parametrize("version, model, path", _lm_eval_files(), ids=lambda x: os.path.basename(str(x))[:40])
def test_lm_eval_accuracies_equal_lm_evals(version, model, path):
    results = _lm_eval_results(path)
    frame = ingest.build_frame(None, [path])
    task = frame.meta["benchmark"]
    assert task in results["results"] and frame.models == (model,)
    cfg = results["configs"][task]
    filters = [f["name"] for f in cfg.get("filter_list") or []] or ["none"]
    metric = cfg["metric_list"][0]["metric"]
    key = f"{metric},{filters[0]}"  # the headline: the task's first metric at its first filter
    assert frame.meta["judges"] == {model: f"lm-eval:{key}"}
    acc = frame.accuracy_table().iloc[0]
    assert acc["accuracy_judged"] == pytest.approx(results["results"][task][key], abs=1e-12)
    recs = _lm_eval_records(path)
    # scoring units: one per document (a task logs every document once per filter)
    assert frame.n_questions == len({r["doc_id"] for r in recs}) == len(recs) // len(filters)
    if "n-samples" in results:
        assert frame.n_questions == results["n-samples"][task]["effective"]
    src = next(s for s in frame.sources if s["path"] == os.path.abspath(path))
    assert src["harness"] == "lm-evaluation-harness"
    assert src["harness_version"] == ("0.4.13" if version == "v0.4.13" else "0.4.0-0.4.2")
    exact = frame.correctness("full", "hit_exact")[:, 0]
    judged = frame.correctness("full", "hit")[:, 0]
    if output_type := cfg["output_type"]:
        if output_type == "multiple_choice":  # the prediction is the option lm-eval chose: the arms agree
            np.testing.assert_array_equal(exact, judged)
    if task == "local_gen":  # the other filter is recorded, with lm-eval's own accuracy
        assert src["filters"]["flexible-extract"]["accuracy"] == pytest.approx(
            results["results"][task]["exact_match,flexible-extract"], abs=1e-12)


@pytest.mark.parametrize("version", ["v0.4.13", "v0.4.2"])
def test_lm_eval_multiple_choice_by_loglikelihood(version):
    """acc: the argmax of the logged log-likelihoods; acc_norm: of the log-likelihoods over the option's
    length in characters -- each equals lm-eval's own per-item field and its headline."""
    for model in ("StubGood", "StubWeak"):
        path = glob.glob(os.path.join(LMEVAL, version, model, "*local_mcq*"))[0]
        results = _lm_eval_results(path)["results"]["local_mcq"]
        recs = sorted(_lm_eval_records(path), key=lambda r: r["doc_id"])
        for metric in ("acc", "acc_norm"):
            frame = ingest.build_frame(None, [path], metric=metric)
            assert frame.accuracy_table().iloc[0]["accuracy_judged"] == pytest.approx(results[f"{metric},none"])
            q = frame.questions.set_index("question_id")
            runs = dict(zip(frame.questions["question_id"], frame.correctness("full", "hit_exact")[:, 0]))
            for r in recs:
                lls = np.array([float(x[0][0] if isinstance(x[0], list) else x[0]) for x in r["resps"]])
                opts = list(q.loc[r["doc"]["id"], "options"])
                assert opts == r["doc"]["choices"]
                if metric == "acc_norm":
                    lls = lls / np.array([len(o) for o in opts])
                assert int(np.argmax(lls) == int(r["target"])) == r[metric] == runs[r["doc"]["id"]]
        assert results["acc,none"] != results["acc_norm,none"]  # the fixture tells the two rules apart


def test_lm_eval_generate_filter_chosen_by_metric():
    path = glob.glob(os.path.join(LMEVAL, "v0.4.2", "StubGood", "*local_gen*"))[0]
    results = _lm_eval_results(path)["results"]["local_gen"]
    frame = ingest.build_frame(None, [path], metric="exact_match,flexible-extract")
    assert frame.meta["judges"] == {"StubGood": "lm-eval:exact_match,flexible-extract"}
    assert frame.accuracy_table().iloc[0]["accuracy_judged"] == pytest.approx(results["exact_match,flexible-extract"])
    assert results["exact_match,flexible-extract"] != results["exact_match,strict-match"]
    from audit_hub.errors import InputError

    with pytest.raises(InputError, match="filter 'loose' not in the samples"):
        ingest.build_frame(None, [path], metric="exact_match,loose")


def test_the_audit_command_takes_the_metric(tmp_path):
    """`benchaudit audit --metric exact_match,flexible-extract` (docs/harnesses.md) reaches the lm-eval reader: the
    judged accuracy is lm-eval's flexible-extract figure, not its first filter's; a filter the file lacks is one
    line and exit 2."""
    from cli_run import run_cli

    path = glob.glob(os.path.join(LMEVAL, "v0.4.2", "StubGood", "*local_gen*"))[0]
    results = _lm_eval_results(path)["results"]["local_gen"]
    res = run_cli("audit", "--runs", path, "--metric", "exact_match,flexible-extract", "--out", tmp_path / "o",
                  "--calibration-sims", "0", "--no-figures")
    assert res.returncode == 0, res.stderr
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert man["inputs"][0]["metric"] == "exact_match,flexible-extract"
    pm = {r["model"]: r for r in json.loads((tmp_path / "o" / "summary.json").read_text())["per_model"]["rows"]}
    assert pm["StubGood"]["accuracy_judged"] == pytest.approx(results["exact_match,flexible-extract"])
    bad = run_cli("audit", "--runs", path, "--metric", "exact_match,loose", "--out", tmp_path / "b")
    assert bad.returncode == 2 and "filter 'loose' not in the samples" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "b").exists()


def test_lm_eval_mmmu_multimodal_task():
    """lm-eval's own MMMU functions: options from the doc's list literal, one image per question; its
    parser needs the letter alone or in parentheses ("B. because" is not read and lm-eval picks an option
    at random), the only responses where the exact arm differs from lm-eval's verdict."""
    for model in ("StubGood", "StubWeak"):
        path = glob.glob(os.path.join(LMEVAL, "v0.4.13", model, "*local_mmmu_val*"))[0]
        frame = ingest.build_frame(None, [path])
        q = frame.questions.set_index("question_id")
        assert list(q.loc["validation_Local_1", "options"]) == ["red", "blue", "green", "black"]
        assert (q["answer_type"] == "mc").all()
        recs = {r["doc"]["id"]: r for r in _lm_eval_records(path)}
        qid = frame.questions["question_id"].to_numpy(dtype=object)
        exact = frame.correctness("full", "hit_exact")[:, 0]
        judged = frame.correctness("full", "hit")[:, 0]
        for i in np.flatnonzero(exact != judged):
            assert recs[qid[i]]["resps"][0][0].endswith(". because")


def test_lm_eval_runs_with_commas_in_names_through_the_cli(tmp_path):
    from audit_hub.cli import main

    files = sorted(glob.glob(os.path.join(LMEVAL, "v0.4.2", "*", "*local_yesno*")))
    assert len(files) == 2 and all("," in f for f in files)
    base = ["audit", "--calibration-sims", "0", "--n-permutations", "9", "--no-figures", "--out", str(tmp_path / "o")]
    assert main(base + ["--runs", *files]) == 0
    s = json.load(open(tmp_path / "o" / "summary.json", encoding="utf-8"))
    acc = {a["model"]: a for a in s["accuracy"]}
    assert set(acc) == {"StubGood", "StubWeak"}


# ---------------------------------------------------------------------------------------- inspect_ai
INSPECT = os.path.join(FIX, "inspect_ai", "real")


def _inspect_files() -> list[str]:
    return sorted(glob.glob(os.path.join(INSPECT, "*", "*", "*.eval")) + glob.glob(os.path.join(INSPECT, "*", "*", "*.json")))


def _inspect_log(path: str) -> dict:
    """The log as inspect wrote it, read here with the standard library (zstd members need zstandard)."""
    import zipfile

    if not path.endswith(".eval"):
        return json.load(open(path, encoding="utf-8"))
    with zipfile.ZipFile(path) as zf:
        if any(i.compress_type == 93 for i in zf.infolist()):
            pytest.importorskip("zstandard")
            from audit_hub.readers.inspect_logs import load_log

            return load_log(path)[0]
        log = json.loads(zf.read("header.json"))
        log["samples"] = [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]
        return log


def _inspect_ok() -> list[str]:
    return [p for p in _inspect_files() if json.dumps(_inspect_status(p)) == '"success"']


def _inspect_status(path: str) -> str:
    if path.endswith(".eval"):
        import zipfile

        with zipfile.ZipFile(path) as zf:
            if any(i.compress_type == 93 for i in zf.infolist()):
                return "success"  # header read below, with zstandard
            return json.loads(zf.read("header.json"))["status"]
    return json.load(open(path, encoding="utf-8"))["status"]


def test_inspect_fixtures_cover_both_containers_and_schemas():
    files = _inspect_files()
    assert {p.split(os.sep)[-3] for p in files} >= {"v0.3.285", "v0.3.10"}
    assert any(p.endswith(".eval") for p in files) and any(p.endswith(".json") for p in files)
    old = [json.load(open(p, encoding="utf-8")) for p in files if "v0.3.10" in p]
    assert {d["version"] for d in old} == {1}
    assert any(isinstance(s.get("score"), dict) for d in old for s in d.get("samples", []))  # schema 1: one score


@pytest.mark.parametrize("path", _inspect_ok(), ids=lambda p: "/".join(p.split(os.sep)[-3:])[:60])
def test_inspect_accuracies_equal_inspects(path):
    log = _inspect_log(path)
    frame = ingest.build_frame(None, [path])
    assert frame.models == (log["eval"]["model"],)  # the model from inside the log
    assert frame.meta["benchmark"] == log["eval"]["task"]
    res = log["results"]
    if "scores" in res:
        score = res["scores"][0]
        harness, scorer = score["metrics"]["accuracy"]["value"], score["name"]
        assert frame.n_questions == res["total_samples"] == score.get("scored_samples", res["completed_samples"])
    else:  # schema 1
        harness, scorer = res["metrics"]["accuracy"]["value"], res["scorer"]["name"]
        assert frame.n_questions == len(log["samples"])
    assert frame.meta["judges"] == {log["eval"]["model"]: f"inspect_ai:{scorer}"}
    assert frame.accuracy_table().iloc[0]["accuracy_judged"] == pytest.approx(harness, abs=1e-12)
    src = frame.sources[0]
    assert src["harness"] == "inspect_ai" and src["harness_version"] == log["eval"]["packages"]["inspect_ai"]
    if log["eval"]["task"] == "local_mcq":
        # inspect's choice() reads only "ANSWER: X"; "The answer is B." is wrong there and read by the audit
        q = frame.questions.set_index("question_id")
        assert float(q.loc["mcq-01", "n_images"]) == 1 and list(q.loc["mcq-01", "options"]) == ["blue", "red", "green", "black"]
        # 0.3.60 logs no output.completion: the text is the first choice's message
        preds = {str(s["id"]): s["output"].get("completion") or s["output"]["choices"][0]["message"]["content"]
                 for s in log["samples"]}
        qid = frame.questions["question_id"].to_numpy(dtype=object)
        exact = frame.correctness("full", "hit_exact")[:, 0]
        judged = frame.correctness("full", "hit")[:, 0]
        diff = np.flatnonzero(exact != judged)
        assert len(diff) > 0
        assert all(exact[i] == 1 and judged[i] == 0 and preds[qid[i]].startswith("The answer is") for i in diff)


def test_inspect_failed_log_is_one_clear_error():
    from audit_hub.errors import InputError

    failed = [p for p in _inspect_files() if _inspect_status(p) == "error"]
    assert failed
    with pytest.raises(InputError, match=r"no samples \(status 'error'\)"):
        ingest.build_frame(None, [failed[0]])


def test_inspect_not_a_zip_is_one_clear_error(tmp_path):
    from audit_hub.errors import InputError

    bad = tmp_path / "x.eval"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(InputError, match="not a readable inspect_ai .eval log"):
        ingest.build_frame(None, [str(bad)])


def test_inspect_own_reader_gives_the_same_frame(monkeypatch):
    """With inspect_ai installed (the ``inspect`` extra) its own read_eval_log is used; the frame is the
    one the documented-format reader builds."""
    pytest.importorskip("inspect_ai")
    for path in _inspect_ok():
        a = ingest.build_frame(None, [path])
        monkeypatch.setenv("BENCHAUDIT_NO_INSPECT_READER", "1")
        b = ingest.build_frame(None, [path])
        monkeypatch.delenv("BENCHAUDIT_NO_INSPECT_READER")
        pd.testing.assert_frame_equal(a.accuracy_table(), b.accuracy_table())
        pd.testing.assert_frame_equal(a.questions, b.questions)


# ----------------------------------------------------------------------------------------- lighteval
LIGHTEVAL = os.path.join(FIX, "lighteval", "real")


def _lighteval_files() -> list[str]:
    return sorted(glob.glob(os.path.join(LIGHTEVAL, "*", "details", "*", "*", "*.parquet")))


@pytest.mark.parametrize("path", _lighteval_files(), ids=lambda p: "/".join(p.split(os.sep)[-3:])[:60])
def test_lighteval_accuracies_equal_lightevals(path):
    model = path.split(os.sep)[-3]
    date = path.split(os.sep)[-2]
    results = json.load(open(os.path.join(LIGHTEVAL, "v0.13.0", "results", model, f"results_{date}.json"),
                             encoding="utf-8"))
    rows = pd.read_parquet(path)
    task_name = rows["doc"].iloc[0]["task_name"]  # e.g. local_mcq|0
    frame = ingest.build_frame(None, [path])
    assert frame.meta["benchmark"] == task_name.split("|")[0] and frame.models == (model,)
    assert frame.n_questions == len(rows)  # one scoring unit per details row
    metric = next(iter(rows["metric"].iloc[0]))
    assert frame.meta["judges"] == {model: f"lighteval:{metric}"}
    acc = frame.accuracy_table().iloc[0]
    assert acc["accuracy_judged"] == pytest.approx(results["results"][task_name][metric], abs=1e-12)
    exact = frame.correctness("full", "hit_exact")[:, 0]
    judged = frame.correctness("full", "hit")[:, 0]
    if metric == "acc":  # log-likelihood: the prediction is the option with the highest logged log-prob
        np.testing.assert_array_equal(exact, judged)
    else:
        # lighteval's em compares the raw text with the gold: " 9" and "9." are wrong there, read by the audit
        q = frame.questions.set_index("question_id")
        preds = {str(d["id"]): r["text"][0] for d, r in zip(rows["doc"], rows["model_response"])}
        qid = frame.questions["question_id"].to_numpy(dtype=object)
        diff = np.flatnonzero(exact != judged)
        assert len(diff) > 0
        for i in diff:
            assert exact[i] == 1 and judged[i] == 0
            assert preds[qid[i]] != q.loc[qid[i], "answer"] and preds[qid[i]].strip(" .") == q.loc[qid[i], "answer"]


# --------------------------------------------------------------------------------------- OpenCompass
OPENCOMPASS = os.path.join(FIX, "opencompass", "real")


def _oc_files() -> list[str]:
    return sorted(glob.glob(os.path.join(OPENCOMPASS, "*", "*", "predictions", "*", "*.json")))


@pytest.mark.parametrize("path", _oc_files(), ids=lambda p: "/".join(p.split(os.sep)[-2:]))
def test_opencompass_accuracies_equal_opencompasss(path):
    parts = path.split(os.sep)
    model, dataset = parts[-2], parts[-1][: -len(".json")]
    res = json.load(open(os.sep.join(parts[:-3] + ["results", model, dataset + ".json"]), encoding="utf-8"))
    metric = next(k for k in res if k != "details")
    frame = ingest.build_frame(None, [path])
    assert frame.meta["benchmark"] == dataset and frame.models == (model,)
    assert frame.n_questions == len(res["details"])  # one scoring unit per details entry
    assert frame.meta["judges"] == {model: f"opencompass:{metric}"}
    assert 100 * frame.accuracy_table().iloc[0]["accuracy_judged"] == pytest.approx(res[metric], abs=1e-9)
    assert frame.sources[0]["harness"] == "OpenCompass"
    exact = frame.correctness("full", "hit_exact")[:, 0]
    judged = frame.correctness("full", "hit")[:, 0]
    if dataset == "local_mcq":  # options embedded in the prompt (A. .. D. ..), parsed: every option letter read
        assert (frame.questions["options"].map(len) == 4).all()
    else:
        # EMEvaluator strips "The answer is" only partly ("answer is 36") and so misses "The answer is 30";
        # the audit reads those; they are the only disagreements
        preds = {k: v["prediction"] for k, v in json.load(open(path, encoding="utf-8")).items()}
        qid = frame.questions["question_id"].to_numpy(dtype=object)
        diff = np.flatnonzero(exact != judged)
        assert len(diff) > 0 and all(exact[i] == 1 and preds[qid[i]].startswith("The answer is") for i in diff)


def test_opencompass_results_file_alone_is_one_clear_error():
    from audit_hub.errors import InputError

    res = sorted(glob.glob(os.path.join(OPENCOMPASS, "*", "*", "results", "*", "*.json")))[0]
    with pytest.raises(InputError, match="read with the predictions file"):
        ingest.build_frame(None, [res])


@pytest.mark.parametrize("pattern", ["lmms_eval/real/v0.7.3/*/*samples*mmstar*.jsonl",
                                     "lmms_eval/real/v0.3.5/*/*samples*mmstar*.jsonl",
                                     "vlmevalkit/real/workdir_runs/ScriptedGood/ScriptedGood_MMStar.xlsx",
                                     "lm_eval/real/v0.4.13/StubGood/*samples_local_gen*"])
def test_every_reader_records_its_harness_and_version(pattern):
    """The manifest's `inputs` (docs/harnesses.md) name the harness and its version for every reader: lmms-eval's
    results.json writes `lmms_eval_version` only from 0.4 on, and a git install without metadata writes
    "unknown@unknown" (v0.7.3 here), so both fixtures say it is not recorded; VLMEvalKit's sheets never carry it."""
    paths = sorted(glob.glob(os.path.join(FIX, pattern)))
    assert paths, pattern
    src = ingest.build_frame(None, paths[:1]).sources[0]
    assert src["harness"] in {"lmms-eval", "VLMEvalKit", "lm-evaluation-harness"}
    assert src["harness_version"] == {"lmms-eval": "not recorded in lmms-eval's output files",
                                      "VLMEvalKit": "not recorded in VLMEvalKit's output files",
                                      "lm-evaluation-harness": "0.4.13"}[src["harness"]]
