"""ingest.build_frame end to end, provenance, pools, and a hypothesis round trip
(random questions/runs -> AuditFrame -> frame.save -> ingest -> equal tables)."""

from __future__ import annotations

import hashlib
import os
import string

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit_hub import ingest
from audit_hub.errors import InputError
from audit_hub.frame import LETTERS, AuditFrame

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
MMB_TSV = os.path.join(FIX, "vlmevalkit", "MMBench_DEV_EN.tsv")


def _write_vlmevalkit_outputs(root, model: str, preds: list[str], hits: list[int] | None):
    ds = pd.read_csv(MMB_TSV, sep="\t", keep_default_na=False, na_values=[""]).drop(columns=["image"])
    ds["prediction"] = preds
    d = root / model
    d.mkdir(parents=True, exist_ok=True)
    ds.to_excel(d / f"{model}_MMBench_DEV_EN.xlsx", index=False)
    if hits is not None:
        ds.assign(hit=hits, log="x").to_excel(d / f"{model}_MMBench_DEV_EN_gpt-4o-mini_result.xlsx", index=False)
    return d


def test_build_frame_vlmevalkit_full_and_blind(tmp_path):
    out = tmp_path / "outputs"
    _write_vlmevalkit_outputs(out, "modelA", ["A", "B", "C", "A", "A"], [1, 1, 1, 1, 1])
    _write_vlmevalkit_outputs(out, "modelB", ["B", "B", "D", "B", "C"], [0, 1, 0, 0, 0])
    blind_dir = tmp_path / "blind"
    _write_vlmevalkit_outputs(blind_dir, "modelA", ["B", "C", "C", "A", "B"], None)
    frame = ingest.build_frame(MMB_TSV, [str(out)], [str(blind_dir)], compute_exact=False)
    assert frame.models == ("modelA", "modelB")
    assert frame.models_in("blind") == ["modelA"]
    np.testing.assert_array_equal(frame.correctness("full", "hit"),
                                  np.array([[1, 0], [1, 1], [1, 0], [1, 0], [1, 0]], dtype=np.int8))
    assert frame.meta["judges"] == {"modelA": "gpt-4o-mini", "modelB": "gpt-4o-mini"}
    assert frame.meta["judges_blind"] == {}
    pool = frame.meta["pool"]
    assert pool == {"full_models": ["modelA", "modelB"], "blind_models": ["modelA"], "paired": ["modelA"],
                    "pool_level": True, "note": pool["note"]}
    assert "1 model(s) pair by name" in pool["note"]
    # provenance: the questions file and five sheets, with streamed sha256 equal to hashlib's
    paths = [s["path"] for s in frame.sources]
    assert paths[0] == os.path.abspath(MMB_TSV)
    assert len(paths) == 6
    src0 = frame.sources[0]
    assert src0["sha256"] == hashlib.sha256(open(MMB_TSV, "rb").read()).hexdigest()
    assert src0["bytes"] == os.path.getsize(MMB_TSV) and src0["rows"] == 5
    judged = [s for s in frame.sources if s["kind"] == "vlmevalkit-judged"]
    assert {s["judge"] for s in judged} == {"gpt-4o-mini"} and {s["model"] for s in judged} == {"modelA", "modelB"}
    # questions: VLMEvalKit circular copy shares the group of its original
    assert frame.questions["group_id"].tolist() == ["0", "1", "2", "3", "1"]


def test_same_pools_are_not_pool_level(tmp_path):
    out = tmp_path / "outputs"
    _write_vlmevalkit_outputs(out, "modelA", ["A", "B", "C", "A", "A"], [1, 1, 1, 1, 1])
    blind_dir = tmp_path / "blind"
    _write_vlmevalkit_outputs(blind_dir, "modelA", ["B", "C", "C", "A", "B"], None)
    frame = ingest.build_frame(None, [str(out)], [str(blind_dir)], compute_exact=False)
    assert frame.meta["pool"]["pool_level"] is False and frame.meta["pool"]["note"] is None
    assert frame.meta["pool"]["paired"] == ["modelA"]
    # questions derived from the sheets
    assert frame.questions["question_id"].tolist() == ["0", "1", "2", "3", "1000001"]
    assert frame.questions["gold_index"].tolist() == [0, 1, 2, 0, 0]


def test_build_frame_with_exact_extraction(tmp_path):
    pytest.importorskip("audit_hub.extract")
    out = tmp_path / "outputs"
    _write_vlmevalkit_outputs(out, "modelA", ["A", "B", "C", "A", "A"], None)
    frame = ingest.build_frame(MMB_TSV, [str(out)])
    assert (frame.correctness("full", "hit_exact") == 1).all()


def test_questions_from_runs_conflicting_gold(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("question_id,model,question,gold,prediction\n1,m1,Q?,A,A\n")
    b = tmp_path / "b.csv"
    b.write_text("question_id,model,question,gold,prediction\n1,m2,Q?,B,A\n")
    with pytest.raises(InputError, match="has gold 'B' here but 'A'") as ei:
        ingest.questions_from_runs([str(a), str(b)])
    assert ei.value.file == str(b)


def test_questions_from_runs_needs_questions():
    mathv = "/work/shared/data/mathv/outputs/open-source/LLavA/LLaVA-v1.5-7B.jsonl"
    if not os.path.exists(mathv):
        pytest.skip("MATH-V snapshot absent")
    with pytest.raises(InputError, match="carries the questions"):
        ingest.questions_from_runs([mathv])


def test_glob_spec_and_model_map(tmp_path):
    for m in ("x", "y"):
        (tmp_path / f"run_{m}.csv").write_text(f"question_id,model,prediction,hit_exact\n1,{m},A,1\n2,{m},B,0\n")
    runs = ingest.load_runs([str(tmp_path / "run_*.csv")], model_map={"x": "renamed"})
    assert sorted(set(runs["model"].astype(str))) == ["renamed", "y"]
    assert runs["hit_exact"].tolist() == [1, 0, 1, 0]
    with pytest.raises(InputError, match="matches no files"):
        ingest.load_runs([str(tmp_path / "none_*.csv")])


# ---------------------------------------------------------------------------------------- round trip
_text = st.text(alphabet=string.ascii_letters + string.digits + " ,.?'\"\n\té", min_size=1, max_size=12)


@st.composite
def _tables(draw):
    nq = draw(st.integers(1, 8))
    ids = draw(st.lists(st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=6),
                        min_size=nq, max_size=nq, unique=True))
    qrows = []
    for qid in ids:
        kind = draw(st.sampled_from(["mc", "yesno", "numeric", "free"]))
        opts = draw(st.lists(_text, min_size=2, max_size=5)) if kind == "mc" else []
        if kind == "mc":
            ans = LETTERS[draw(st.integers(0, len(opts) - 1))]
        elif kind == "yesno":
            ans = draw(st.sampled_from(["yes", "no"]))
        elif kind == "numeric":
            ans = str(draw(st.integers(-50, 500)))
        else:
            ans = draw(_text).strip() or "x"
        qrows.append({"question_id": qid, "question": draw(_text), "options": opts, "answer": ans,
                      "answer_type": kind, "category": draw(st.sampled_from(["c1", "c2", None])),
                      "l2_category": draw(st.sampled_from(["l2a", None])), "group_id": None,
                      "hint": draw(st.one_of(st.none(), _text))})
    models = draw(st.lists(st.sampled_from(["m1", "m-2", "model three"]), min_size=1, max_size=3, unique=True))
    rrows = []
    for m in models:
        for arm in draw(st.sampled_from([["full"], ["full", "blind"]])):
            for qid in ids:
                if draw(st.booleans()) or not rrows:
                    rrows.append({"question_id": qid, "model": m, "arm": arm,
                                  "prediction": draw(st.one_of(st.none(), _text)),
                                  "answer": draw(st.one_of(st.none(), st.sampled_from(["A", "B", "yes", "7"]))),
                                  "hit": draw(st.sampled_from([True, False, None])),
                                  "hit_exact": draw(st.sampled_from([True, False, None]))})
    return pd.DataFrame(qrows), pd.DataFrame(rrows)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(tables=_tables())
def test_round_trip_save_load(tmp_path_factory, tables):
    q, r = tables
    frame = AuditFrame.from_tables(q, r)
    d = tmp_path_factory.mktemp("rt")
    frame.save(str(d))
    q2 = ingest.load_questions(str(d))  # a saved frame folder
    r2 = ingest.load_runs([str(d / "runs.parquet")])
    frame2 = AuditFrame.from_tables(q2, r2)
    pd.testing.assert_frame_equal(frame.questions_table(), frame2.questions_table())
    pd.testing.assert_frame_equal(frame.runs_table(), frame2.runs_table())
    assert frame.models == frame2.models
    np.testing.assert_array_equal(frame.correctness("full", "hit"), frame2.correctness("full", "hit"))
    np.testing.assert_array_equal(frame.answer_codes("full"), frame2.answer_codes("full"))


def test_runs_from_a_hub_dataset_id_record_the_resolved_commit(tmp_path, monkeypatch):
    """`--runs ORG/NAME@REV`: the snapshot is fetched with huggingface_hub and its commit lands in sources."""
    import huggingface_hub
    import pandas as pd

    from audit_hub import ingest

    sha = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "snapshots" / sha
    (snap / "data").mkdir(parents=True)
    pd.DataFrame({"question_id": ["1", "2"], "model": "m", "prediction": ["A", "B"], "hit": [True, False]}) \
        .to_parquet(snap / "data" / "runs-00000-of-00001.parquet")
    calls = []

    def fake_snapshot_download(repo_id, repo_type, revision):
        calls.append((repo_id, repo_type, revision))
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    df = ingest.load_runs(["org/preds@v1"])
    assert calls == [("org/preds", "dataset", "v1")]
    assert list(df["prediction"]) == ["A", "B"]
    src = df.attrs["sources"][0]
    assert src["repo_id"] == "org/preds" and src["revision"] == "v1" and src["resolved_commit"] == sha
