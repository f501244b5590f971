"""The six ``evaluate`` metric modules (metrics/<name>/) and ``benchaudit metrics install``.

Every module is loaded with ``evaluate.load`` from its folder and must return exactly what the
detector's ``run`` returns on an independently built frame of the same data; the small hand-built
benchmark below also has its headline numbers computed by hand. Installation into evaluate's module
cache is checked in-process (evaluate's offline switch patched) and end to end in a subprocess
(``benchaudit metrics install`` then ``evaluate.load("benchaudit/visual_dependency")`` with
``HF_EVALUATE_OFFLINE=1``).
"""

from __future__ import annotations

import doctest
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_hub.frame.core import AuditFrame
from audit_hub.hub.folders import to_jsonable
from audit_hub.metrics import adapter as ma
from audit_hub.metrics import install as mi

REPO = Path(__file__).resolve().parent.parent
METRICS = REPO / "metrics"
NAMES = ma.METRIC_NAMES
ADDED_KEYS = {"n_questions", "n_models", "n_flagged_questions", "flagged_question_ids", "severity_counts"}

# ---------------------------------------------------------------------------------- hand case
# 6 questions x 3 models, 4 options each. Full / blind answers per model (m1, m2, m3):
QUESTIONS = [
    # qid, gold, options, category, full answers, blind answers
    ("q1", "A", ["cat", "dog", "cow", "pig"], "animals", "AAA", "AAA"),   # f=3 b=3  zero gain
    ("q2", "B", ["1", "2", "3", "4"], "math", "BBC", "ACC"),              # f=2 b=0
    ("q3", "C", ["red", "blue", "green", "Green "], "colours", "DDD", "DDA"),  # f=0 b=0, unanimous D
    ("q4", "D", ["x", "y", "z", "w"], "math", "DAD", "BBB"),              # f=2 b=0
    ("q5", "A", ["left", "right", "up", "down"], "space", "ABC", "A-C"),   # f=1 b=1 ('-' = no answer)
    ("q6", "B", ["a dog runs", "a dog run", "cat", "bird"], "animals", "BBB", "BBA"),  # f=3 b=2
]
MODELS = ["m1", "m2", "m3"]


def _ans(c: str):
    return None if c == "-" else c


def rows() -> dict[str, list]:
    """Per-row metric columns: one row per (question, model)."""
    out: dict[str, list] = {k: [] for k in ("question_ids", "models", "predictions", "blind_predictions",
                                            "references", "options", "n_options", "categories")}
    for qid, gold, opts, cat, full, blind in QUESTIONS:
        for j, m in enumerate(MODELS):
            out["question_ids"].append(qid)
            out["models"].append(m)
            out["predictions"].append(_ans(full[j]))
            out["blind_predictions"].append(_ans(blind[j]))
            out["references"].append(gold)
            out["options"].append(list(opts))
            out["n_options"].append(len(opts))
            out["categories"].append(cat)
    return out


def reference_frame(*, with_runs: bool = True, blind: bool = True) -> AuditFrame:
    """The same benchmark built independently in the public long format (explicit hit / hit_exact)."""
    q = pd.DataFrame({"question_id": [r[0] for r in QUESTIONS], "answer": [r[1] for r in QUESTIONS],
                      "options": [list(r[2]) for r in QUESTIONS], "category": [r[3] for r in QUESTIONS]})
    if not with_runs:
        return AuditFrame.from_tables(q, None, compute_exact=False)
    recs = []
    for qid, gold, _opts, _cat, full, bl in QUESTIONS:
        for arm, answers in (("full", full), ("blind", bl)):
            if arm == "blind" and not blind:
                continue
            for j, m in enumerate(MODELS):
                a = _ans(answers[j])
                hit = int(a == gold)
                recs.append({"question_id": qid, "model": m, "arm": arm, "prediction": a, "answer": a,
                             "hit": hit, "hit_exact": hit})
    return AuditFrame.from_tables(q, pd.DataFrame(recs), compute_exact=False)


def direct(name: str, frame: AuditFrame, **params) -> dict:
    mod = importlib.import_module(f"audit_hub.detectors.{name}")
    return to_jsonable(mod.run(frame, field=params.pop("field", "hit"), seed=params.pop("seed", 0), **params).summary)


def assert_same(out: dict, expected: dict) -> None:
    """The metric returns the detector's summary unchanged, plus only the adapter's own keys."""
    assert {k: out.get(k, "<missing>") for k in expected} == expected
    assert set(out) - set(expected) <= ADDED_KEYS


# ---------------------------------------------------------------------------------- evaluate fixture
@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    """``evaluate`` with its module cache and metric cache in a temporary folder for this file.

    ``evaluate_modules`` is a package found through ``sys.path``; it is dropped again on teardown so
    that later tests resolve evaluate's own cache afresh.
    """
    evaluate = pytest.importorskip("evaluate")
    from evaluate import config

    if any(k == "evaluate_modules" or k.startswith("evaluate_modules.") for k in sys.modules):
        pytest.skip("evaluate_modules already imported from another cache in this process")
    root = tmp_path_factory.mktemp("hf")
    saved = (config.HF_MODULES_CACHE, config.HF_METRICS_CACHE, config.HF_EVALUATE_OFFLINE)
    config.HF_MODULES_CACHE = root / "modules"
    config.HF_METRICS_CACHE = root / "metrics"
    yield evaluate
    config.HF_MODULES_CACHE, config.HF_METRICS_CACHE, config.HF_EVALUATE_OFFLINE = saved
    for k in [k for k in sys.modules if k == "evaluate_modules" or k.startswith("evaluate_modules.")]:
        del sys.modules[k]
    if str(root / "modules") in sys.path:
        sys.path.remove(str(root / "modules"))


def load_local(ev, name: str, config_name: str | None = None):
    return ev.load(str(METRICS / name), config_name)


# ---------------------------------------------------------------------------------- module == detector
def test_visual_dependency_module_equals_detector_and_hand_values(ev):
    r = rows()
    out = load_local(ev, "visual_dependency").compute(
        question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
        blind_predictions=r["blind_predictions"], references=r["references"], options=r["options"],
        categories=r["categories"], n_permutations=199, seed=3)
    assert_same(out, direct("visual_dependency", reference_frame(), n_permutations=199, seed=3))
    # f = (3,2,0,2,1,3), b = (3,0,0,0,1,2): zero gain on q1, q3, q5
    assert out["zero_gain_share"] == pytest.approx(3 / 6)
    # E[#diagonal] = sum_k r_k c_k / N with f margins {0:1,1:1,2:2,3:2}, b margins {0:3,1:1,2:1,3:1}
    assert out["null_mean"] == pytest.approx((1 * 3 + 1 * 1 + 2 * 1 + 2 * 1) / 6 / 6)
    assert out["excess"] == pytest.approx(0.5 - 8 / 36)
    assert 0 < out["p_value"] <= 1 and out["n_permutations"] == 199
    assert [d["dropped_model"] for d in out["leave_one_model_out"]] == MODELS
    assert "q1" in out["flagged_question_ids"]  # every model right with and without the image
    assert out["n_questions"] == 6 and out["n_models"] == 3
    assert sum(out["severity_counts"].values()) == 6
    json.dumps(out, allow_nan=False)  # plain Python values only


def test_visual_dependency_hits_configuration_and_override(ev):
    r = rows()
    ref = reference_frame()
    hits = ref.correctness("full")[[int(q[1:]) - 1 for q in r["question_ids"]],
                                   [MODELS.index(m) for m in r["models"]]].tolist()
    bhits = ref.correctness("blind")[[int(q[1:]) - 1 for q in r["question_ids"]],
                                     [MODELS.index(m) for m in r["models"]]].tolist()
    out = load_local(ev, "visual_dependency", "hits").compute(
        question_ids=r["question_ids"], models=r["models"], hits=hits, blind_hits=bhits, n_permutations=99)
    assert out["zero_gain_share"] == pytest.approx(0.5)
    # judged hits override the exact match: mark q2 right for every model blind -> f=2, b=3, no zero gain change
    bh2 = [1 if q == "q2" else h for q, h in zip(r["question_ids"], bhits)]
    out2 = load_local(ev, "visual_dependency").compute(
        question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
        blind_predictions=r["blind_predictions"], references=r["references"], blind_hits=bh2, n_permutations=99)
    pq = ma.compute("visual_dependency", question_ids=r["question_ids"], models=r["models"],
                    predictions=r["predictions"], blind_predictions=r["blind_predictions"],
                    references=r["references"], blind_hits=bh2, params={"n_permutations": 99},
                    return_per_question=True)
    q2 = next(p for p in pq["per_question"] if p["question_id"] == "q2")
    assert (q2["visual_dependency_f"], q2["visual_dependency_b"]) == (2, 3)
    assert out2["zero_gain_share"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="configuration"):
        load_local(ev, "visual_dependency", "nope")


def test_consensus_error_module_equals_detector(ev):
    r = rows()
    out = load_local(ev, "consensus_error").compute(
        question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
        references=r["references"], options=r["options"], categories=r["categories"])
    assert_same(out, direct("consensus_error", reference_frame(blind=False)))
    assert out["n_unanimous_non_gold"] == 1  # q3: every model chose D, gold C
    assert "q3" in out["flagged_question_ids"]


def test_fleiss_kappa_module_equals_detector_and_hand_value(ev):
    r = rows()
    out = load_local(ev, "fleiss_kappa_agreement").compute(
        question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
        options=r["options"], categories=r["categories"])
    frame = reference_frame(blind=False)
    assert_same(out, direct("fleiss_kappa_agreement", frame))
    # P_i = 1, 1/3, 1, 1/3, 0, 1 -> P_bar = 11/18; p = (5, 6, 2, 5)/18 -> P_e = 90/324 = 5/18
    assert out["kappa"] == pytest.approx((11 / 18 - 5 / 18) / (1 - 5 / 18))
    from statsmodels.stats.inter_rater import fleiss_kappa

    table = np.array([[3, 0, 0, 0], [0, 2, 1, 0], [0, 0, 0, 3], [1, 0, 0, 2], [1, 1, 1, 0], [0, 3, 0, 0]])
    assert out["kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"))


def test_correctness_agreement_module_equals_detector_both_configurations(ev):
    r = rows()
    out = load_local(ev, "correctness_agreement").compute(
        question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
        references=r["references"], options=r["options"], categories=r["categories"])
    assert_same(out, direct("correctness_agreement", reference_frame(blind=False)))
    assert (out["n_saturated"], out["n_floor"]) == (2, 1)  # q1, q6 all right; q3 all wrong
    hits = [int(p == g) for p, g in zip(r["predictions"], r["references"])]
    out_h = load_local(ev, "correctness_agreement", "hits").compute(
        question_ids=r["question_ids"], models=r["models"], hits=hits, categories=r["categories"])
    assert (out_h["n_saturated"], out_h["n_floor"]) == (2, 1)


def test_answer_options_distribution_module_equals_detector_both_configurations(ev):
    per_q = {"question_ids": [q[0] for q in QUESTIONS], "references": [q[1] for q in QUESTIONS],
             "categories": [q[3] for q in QUESTIONS]}
    out = load_local(ev, "answer_options_distribution", "options").compute(
        **per_q, options=[list(q[2]) for q in QUESTIONS])
    assert_same(out, direct("answer_options_distribution", reference_frame(with_runs=False)))
    assert out["gold_position_counts"] == {"A": 2, "B": 2, "C": 1, "D": 1}
    assert out["dof"] == 3
    # chi-square against uniform: expected 1.5 each -> (0.25*2 + 0.25*2) / 1.5
    assert out["chi2"] == pytest.approx(((2 - 1.5) ** 2 * 2 + (1 - 1.5) ** 2 * 2) / 1.5)
    out_k = load_local(ev, "answer_options_distribution").compute(**per_q, n_options=[4] * 6)
    assert out_k["gold_position_counts"] == out["gold_position_counts"]
    assert out_k["chi2"] == pytest.approx(out["chi2"])


def test_distractor_similarity_module_equals_detector(ev):
    per_q = {"question_ids": [q[0] for q in QUESTIONS], "options": [list(q[2]) for q in QUESTIONS],
             "references": [q[1] for q in QUESTIONS]}
    out = load_local(ev, "distractor_similarity").compute(**per_q)
    assert_same(out, direct("distractor_similarity", reference_frame(with_runs=False)))
    assert out["n_exact_duplicates"] == 1  # q3: "green" (gold C) == "Green " (D) after normalisation
    assert "q3" in out["flagged_question_ids"]
    assert out["severity_counts"]["critical"] >= 1


# ---------------------------------------------------------------------------------- adapter rules
@pytest.mark.parametrize("name", NAMES)
def test_module_info_names_its_space_and_cites_the_paper(ev, name):
    """Every module's MetricInfo is built in one place (``adapter.metric_info``): its Space under the default
    namespace as homepage and reference, the audit paper as citation (fleiss_kappa_agreement adds Fleiss 1971),
    and exactly the input features its configuration declares."""
    from audit_hub.metrics import NAMESPACE, space_url

    m = load_local(ev, name)
    assert NAMESPACE == "benchaudit"
    assert m.info.homepage == space_url(name) == f"https://huggingface.co/spaces/benchaudit/{name}"
    assert list(m.info.reference_urls) == [space_url(name)]
    assert m.info.citation.startswith(ma.CITATION)
    assert ("Fleiss" in m.info.citation) == (name == "fleiss_kappa_agreement")
    assert "question_ids" in m.info.features


def test_adapter_exact_match_semantics():
    f = ma.build_frame(["q1", "q1", "q1", "q2", "q2", "q3", "q3"],
                       models=["a", "b", "c", "a", "b", "a", "b"],
                       predictions=["a", "E", None, "0.50", "1/2", "YES", ""],
                       references=["A", "A", "A", ".5", ".5", "yes", "yes"],
                       n_options=[4, 4, 4, 0, 0, 0, 0])
    assert f.questions["answer_type"].tolist() == ["mc", "numeric", "yesno"]
    # lower-case letter matches; letter outside the options and missing answers count wrong
    assert f.correctness("full", "hit_exact", ["a", "b", "c"]).tolist() == [[1, 0, 0], [1, 0, -1], [1, 0, -1]]
    assert f.questions["options"].iloc[0] == ["A", "B", "C", "D"]  # letters stand in for texts


def test_adapter_conflicts_and_bad_inputs_raise_value_errors():
    base = {"question_ids": ["q1", "q1"], "models": ["a", "b"], "predictions": ["A", "B"]}
    with pytest.raises(ValueError, match=r"references must be the same.*'q1'.*row 2"):
        ma.compute("consensus_error", **base, references=["A", "B"])
    with pytest.raises(ma.MetricInputError, match="predictions has 1 entries"):
        ma.compute("consensus_error", **{**base, "predictions": ["A"]}, references=["A", "A"])
    with pytest.raises(ValueError, match="duplicate row"):
        ma.compute("consensus_error", **{**base, "models": ["a", "a"]}, references=["A", "A"])
    with pytest.raises(ValueError, match="needs the columns"):
        ma.compute("visual_dependency", **base, references=["A", "A"])
    with pytest.raises(TypeError, match="n_permutation"):  # a misspelled keyword is never dropped
        ma.compute("visual_dependency", **base, blind_predictions=["A", "B"], references=["A", "A"],
                   params={"n_permutation": 9})
    with pytest.raises(ValueError, match="without models"):
        ma.build_frame(["q1"], predictions=["A"])
    with pytest.raises(ValueError, match="hit must be 0/1"):
        ma.build_frame(["q1"], models=["a"], hits=[2])
    with pytest.raises(ValueError, match="not one of the option letters"):
        ma.build_frame(["q1", "q2"], references=["A", "F"], n_options=[4, 4])
    with pytest.raises(ValueError, match="n_options must be an integer"):
        ma.build_frame(["q1"], references=["A"], n_options=[2.5])
    # the error names the input row of the offending question (its first row), not a table row
    with pytest.raises(ma.MetricInputError) as ei:
        ma.build_frame(["q1", "q2", "q2"], references=["A", "Z", "Z"], n_options=[4, 4, 4])
    assert ei.value.row == 2 and ei.value.column == "references"
    from audit_hub.errors import InputError

    assert isinstance(ei.value, InputError)  # exit code 2 in the CLI


def test_adapter_skipped_detector_is_a_value_error():
    # one model without a blind arm: visual_dependency cannot run
    with pytest.raises(ValueError, match="visual_dependency cannot run"):
        ma.compute("visual_dependency", question_ids=["q1", "q2"], models=["a", "a"], hits=[1, 0],
                   blind_hits=[None, None])


# ---------------------------------------------------------------------------------- module files
def _front_matter(text: str) -> dict:
    import yaml

    m = re.match(r"^---\n(.*?)\n---\n", text, flags=re.S)
    assert m, "README must start with a YAML header"
    return yaml.safe_load(m.group(1))


@pytest.mark.parametrize("name", NAMES)
def test_module_folder_is_space_ready(name):
    folder = METRICS / name
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == sorted(
        ["README.md", "app.py", "requirements.txt", f"{name}.py"])
    meta = _front_matter((folder / "README.md").read_text(encoding="utf-8"))
    for key in ("title", "emoji", "colorFrom", "colorTo", "sdk_version", "description"):
        assert meta.get(key), key
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and meta["pinned"] is False
    assert meta["tags"] == ["evaluate", "metric"]
    app = (folder / "app.py").read_text(encoding="utf-8")
    assert f'evaluate.load("benchaudit/{name}")' in app and "launch_gradio_widget(module)" in app
    reqs = (folder / "requirements.txt").read_text(encoding="utf-8").split()
    assert any(r.startswith("benchaudit") for r in reqs) and any(r.startswith("evaluate") for r in reqs)
    # evaluate's loader: library imports only (one per line), found installed; the class by attribute
    from evaluate.loading import get_imports

    imports = get_imports(str(folder / f"{name}.py"))
    assert sorted(i[1] for i in imports) == ["audit_hub", "datasets", "evaluate"]
    assert all(i[0] == "library" for i in imports)
    assert ("library", "audit_hub", "benchaudit", None) in imports  # pip hint names the distribution
    src = (folder / f"{name}.py").read_text(encoding="utf-8")
    assert re.search(r"^class \w+\(metric_adapter\.DeclaredInputs, evaluate\.Metric\):", src, flags=re.M)
    assert "from evaluate import" not in src


def test_pyproject_ships_metrics_folder_inside_the_package():
    """metrics/ is mapped to audit_hub.metric_modules in the wheel (no second copy in the repo)."""
    import tomllib

    cfg = tomllib.loads((METRICS.parent / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"]["audit_hub.metric_modules"] == "metrics"
    assert "audit_hub.metric_modules" in cfg["packages"]
    assert set(cfg["package-data"]["audit_hub.metric_modules"]) >= {"*/*.py", "*/*.md", "*/*.txt"}


class _LocalEvaluate:
    """Stands in for ``evaluate`` in the cards' examples: ``load("benchaudit/x")`` loads metrics/x."""

    def __init__(self, ev):
        self._ev = ev

    def load(self, path, config_name=None, **kw):
        return self._ev.load(str(METRICS / path.split("/")[-1]), config_name, **kw)


@pytest.mark.parametrize("name", NAMES)
def test_card_examples_run(ev, name):
    text = (METRICS / name / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the card needs a runnable example"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    shim = _LocalEvaluate(ev)
    for i, block in enumerate(blocks):
        block = block.replace(">>> import evaluate\n", ">>> pass\n")
        test = parser.get_doctest(block, {"evaluate": shim}, f"{name}-README-{i}", str(METRICS / name), 0)
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} failing example line(s) in metrics/{name}/README.md"


# ---------------------------------------------------------------------------------- install
def test_install_layout_and_offline_load_in_process(ev, monkeypatch):
    from evaluate import config

    cache = Path(config.HF_MODULES_CACHE)
    done = mi.install(namespace="benchaudit", cache_dir=cache)
    assert [m.name for m in done] == list(NAMES)
    vd = next(m for m in done if m.name == "visual_dependency")
    assert vd.path == (cache / "evaluate_modules" / "metrics" / "benchaudit--visual_dependency" / vd.hash
                       / "visual_dependency.py")
    assert len(vd.hash) == 64 and vd.path.read_bytes() == (METRICS / "visual_dependency" /
                                                            "visual_dependency.py").read_bytes()
    for d in (cache, cache / "evaluate_modules", cache / "evaluate_modules" / "metrics", vd.path.parent.parent,
              vd.path.parent):
        assert (d / "__init__.py").is_file(), d
    # a stale version of the module is removed, a second install is idempotent
    stale = vd.path.parent.parent / ("0" * 64)
    stale.mkdir()
    (stale / "visual_dependency.py").write_text("raise RuntimeError('stale')\n")
    again = mi.install(namespace="benchaudit", names=["visual_dependency"], cache_dir=cache)
    assert again[0].hash == vd.hash and again[0].removed_stale == 1 and not stale.exists()
    listing = {row["name"]: row for row in mi.installed(cache_dir=cache)}
    assert all(listing[n]["up_to_date"] for n in NAMES)

    monkeypatch.setattr(config, "HF_EVALUATE_OFFLINE", True)
    m = ev.load("benchaudit/visual_dependency")
    assert type(m).__module__.startswith("evaluate_modules.metrics.benchaudit--visual_dependency.")
    r = rows()
    out = m.compute(question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
                    blind_predictions=r["blind_predictions"], references=r["references"], n_permutations=99)
    assert out["zero_gain_share"] == pytest.approx(0.5)


def test_install_without_a_checkout_uses_the_packaged_copy(tmp_path, monkeypatch):
    """After a plain `pip install` there is no metrics/ folder: the copy inside the package is used."""
    monkeypatch.setattr(mi, "repo_metrics_dir", lambda: tmp_path / "no-checkout")
    # in an installed wheel, audit_hub/metric_modules is metrics/ (see pyproject's package-dir)
    monkeypatch.setattr(mi, "packaged_metrics_dir", lambda: METRICS)
    assert mi.source_dir() == METRICS
    done = mi.install(names=["distractor_similarity"], cache_dir=tmp_path / "cache")
    assert done[0].path.read_bytes() == (METRICS / "distractor_similarity" / "distractor_similarity.py").read_bytes()


def test_install_rejects_bad_requests(tmp_path):
    with pytest.raises(mi.MetricsInstallError, match="unknown metric"):
        mi.install(names=["nope"], cache_dir=tmp_path)
    with pytest.raises(mi.MetricsInstallError, match="invalid namespace"):
        mi.install(namespace="a/b", cache_dir=tmp_path)
    with pytest.raises(mi.MetricsInstallError, match="does not exist"):
        mi.install(source=tmp_path / "missing", cache_dir=tmp_path)


def test_modules_cache_dir_follows_evaluate_config(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_MODULES_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert mi.modules_cache_dir() == tmp_path / "home" / "modules"
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "mods"))
    assert mi.modules_cache_dir() == tmp_path / "mods"


def test_cli_list_and_user_error(tmp_path, capsys):
    from audit_hub.cli import main

    assert main(["metrics", "list", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("not installed") == 6
    assert main(["metrics", "install", "consensus_error", "--cache-dir", str(tmp_path)]) == 0
    assert "1 metric module installed" in capsys.readouterr().out
    assert main(["metrics", "list", "--cache-dir", str(tmp_path)]) == 0
    listing = capsys.readouterr().out
    assert listing.count("not installed") == 5 and re.search(r"benchaudit/consensus_error\s+installed", listing)
    assert main(["metrics", "install", "nope", "--cache-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: unknown metric(s) ['nope']")


PROBE = """
import json, sys
from audit_hub.cli import main
rc = main(["metrics", "install"])
assert rc == 0, rc
assert "evaluate" not in sys.modules  # evaluate reads its cache and offline settings at import
import evaluate
args = json.loads(sys.argv[1])
m = evaluate.load("benchaudit/visual_dependency")
out = m.compute(**args, n_permutations=99, seed=0)
print("RESULT=" + json.dumps({k: out[k] for k in ("zero_gain_share", "null_mean", "excess", "p_value")}))
"""


@pytest.mark.slow
def test_cli_install_then_offline_load_in_subprocess(tmp_path):
    """End to end as a user does it: `benchaudit metrics install`, then evaluate.load offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "modules"),
                "HF_EVALUATE_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    r = rows()
    args = {k: r[k] for k in ("question_ids", "models", "predictions", "blind_predictions", "references")}
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "6 metric modules installed" in p.stdout
    assert (tmp_path / "modules" / "evaluate_modules" / "metrics" / "benchaudit--visual_dependency").is_dir()
    res = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT=")][-1][len("RESULT="):])
    assert res["zero_gain_share"] == pytest.approx(0.5)
    assert res["null_mean"] == pytest.approx(8 / 36)
    assert res["excess"] == pytest.approx(0.5 - 8 / 36)
    assert 0 < res["p_value"] <= 1


def test_answer_options_distribution_takes_declared_predictions_and_refuses_undeclared(ev):
    r = rows()
    per_row = {k: r[k] for k in ("question_ids", "references", "categories")}
    m = load_local(ev, "answer_options_distribution", "options+predictions")
    out = m.compute(**per_row, options=r["options"], predictions=r["predictions"], models=r["models"],
                    blind_predictions=r["blind_predictions"])
    expected = direct("answer_options_distribution", reference_frame())
    assert_same(out, expected)
    # hand count: m1 answers A, B, D, D, A, B on q1..q6 (full arm)
    assert out["per_model"]["m1"]["full"]["predicted"] == {"A": 2, "B": 2, "C": 0, "D": 2}
    assert set(out["per_model"]["m1"]) == {"full", "blind"}
    k = load_local(ev, "answer_options_distribution", "default+predictions").compute(
        **per_row, n_options=r["n_options"], predictions=r["predictions"], models=r["models"])
    assert k["per_model"]["m1"]["full"] == out["per_model"]["m1"]["full"]
    # evaluate drops an undeclared ``predictions``: the modules refuse it instead
    with pytest.raises(TypeError, match="predictions not an input of configuration 'default'"):
        load_local(ev, "answer_options_distribution").compute(
            **per_row, n_options=r["n_options"], predictions=r["predictions"], models=r["models"])
    # fleiss_kappa_agreement's references are optional, as its card says: given, they reach the module (its
    # statistic needs no gold answer; without options they give the answer type), left out, it runs as before
    fk = load_local(ev, "fleiss_kappa_agreement")
    base = dict(question_ids=r["question_ids"], models=r["models"], predictions=r["predictions"],
                options=r["options"])
    assert fk.compute(**base, references=r["references"])["kappa"] == fk.compute(**base)["kappa"]
    with pytest.raises(ValueError, match="references"):
        fk.compute(**base, references=[1.5 + 2j] * len(r["question_ids"]))


def test_module_arguments_of_other_types_than_the_card_names(ev):
    """Library review: integers as predictions or IDs (the card: "list of str, number or None") gave evaluate's
    7-line format message, a missing `references` a TypeError inside evaluate, a string as a row's options a
    message that did not name `options`, and seed=None an unreproducible result. Now numbers are their text,
    and each misuse is one line naming the argument."""
    vd = load_local(ev, "visual_dependency")
    base = dict(question_ids=["q1", "q1", "q2", "q2"], models=["m1", "m2", "m1", "m2"],
                predictions=["1", "1", "2", "3"], blind_predictions=["1", "2", "2", "3"],
                references=["1", "1", "2", "2"], n_permutations=99, seed=0)
    want = vd.compute(**base)
    got = vd.compute(**{**base, "predictions": [1, 1, 2, 3], "blind_predictions": [1, 2, 2, 3],
                        "references": [1, 1, 2, 2], "question_ids": [1, 1, 2, 2]})
    assert got["zero_gain_share"] == want["zero_gain_share"] and got["p_value"] == want["p_value"]
    with pytest.raises(ValueError, match=r"^visual_dependency: references is required by configuration 'default'"):
        vd.compute(**{k: v for k, v in base.items() if k != "references"})
    with pytest.raises(ValueError, match=r"visual_dependency: question_ids\[1\] is NoneType None"):
        vd.compute(**{**base, "question_ids": ["q1", None, "q2", "q2"]})
    with pytest.raises(ValueError, match=r"visual_dependency: seed must be an integer in the range 0\.\.\d+, got None"):
        vd.compute(**{**base, "seed": None})
    ds = load_local(ev, "distractor_similarity")
    with pytest.raises(ValueError, match=r"distractor_similarity: options\[0\] is str 'a\|b'"):
        ds.compute(question_ids=["q1"], options=["a|b"], references=["A"])


def test_visual_dependency_module_gives_the_bundled_pool_level_headline(ev):
    """Library review: no module input reached the pool-level statistic (image models and one text-only run), and
    an all-None blind arm was read as every model wrong without the image. In the hits configuration a row not
    judged in an arm is not in it: the bundled example's headline, exactly; an empty blind arm is read as documented, with a warning."""
    import audit_hub as ba

    res = ba.audit(calibration_sims=0, figures=False, parallel=False)
    want = res.summary["visual_dependency"]
    r = pd.read_parquet(REPO / "audit_hub" / "data" / "mathv_runs.parquet")
    q = res.frame.questions.set_index("question_id")
    full, blind = r[r["arm"] == "full"], r[r["arm"] == "blind"]
    qid = pd.concat([full["question_id"], blind["question_id"]]).astype(str).tolist()

    def h(s):
        return [None if pd.isna(x) else int(x) for x in s]

    out = load_local(ev, "visual_dependency", "hits").compute(
        question_ids=qid, models=full["model"].tolist() + blind["model"].tolist(),
        hits=h(full["hit"]) + [None] * len(blind), blind_hits=[None] * len(full) + h(blind["hit"]),
        n_options=q.loc[qid, "n_options"].astype(int).tolist(), answer_types=q.loc[qid, "answer_type"].tolist(),
        seed=0)
    assert out["pool_level"] is True and out["n_models"] == want["n_models"] == 11
    for k in ("zero_gain_share", "null_mean", "excess", "p_value"):
        assert out[k] == pytest.approx(want[k], rel=1e-12), k
    with pytest.warns(UserWarning, match="every entry of blind_predictions is empty"):
        load_local(ev, "visual_dependency").compute(
            question_ids=["q1", "q1", "q2", "q2"], models=["m1", "m2", "m1", "m2"], predictions=["A", "B", "A", "A"],
            blind_predictions=[None] * 4, references=["A", "A", "B", "B"], n_permutations=99)
