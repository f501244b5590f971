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

from audit_hub.errors import InputError
from audit_hub.frame.core import AuditFrame
from audit_hub.readers import ingest
from audit_hub.schema import LETTERS

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
MMB_TSV = os.path.join(FIX, "vlmevalkit", "MMBench_DEV_EN.tsv")


def _pool(frame):
    """How the audit pairs the frame's models across arms."""
    from audit_hub.engine.run import pool_summary

    return frame.meta.get("pool") or pool_summary(frame.models_in("full"), frame.models_in("blind"))


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
    # question 1 and its circular copy 1000001 are one question, right only if both copies are
    np.testing.assert_array_equal(frame.correctness("full", "hit"),
                                  np.array([[1, 0], [1, 0], [1, 0], [1, 0]], dtype=np.int8))
    assert frame.meta["circular"]["n_groups"] == 1 and frame.meta["circular"]["n_copies"] == 2
    assert frame.meta["judges"] == {"modelA": "gpt-4o-mini", "modelB": "gpt-4o-mini"}
    assert frame.meta["judges_blind"] == {}
    pool = _pool(frame)
    assert pool == {"full_models": ["modelA", "modelB"], "blind_models": ["modelA"], "paired": ["modelA"],
                    "pool_level": False, "unmatched_blind": [], "pairing": pool["pairing"], "named_roles": {},
                    "note": pool["note"], "truncated_prompts": {}, "truncation_note": None, "unfinished_note": None}
    # pools differ, but modelA is in both arms: visual_dependency pairs it (not pool level) and says so
    assert "pairs the 1 model present in both arms" in pool["note"] and "modelB" in pool["note"]
    # provenance: the questions file and five sheets, with streamed sha256 equal to hashlib's
    paths = [s["path"] for s in frame.sources]
    assert paths[0] == os.path.abspath(MMB_TSV)
    assert len(paths) == 6
    src0 = frame.sources[0]
    assert src0["sha256"] == hashlib.sha256(open(MMB_TSV, "rb").read()).hexdigest()
    assert src0["bytes"] == os.path.getsize(MMB_TSV) and src0["rows"] == 5
    judged = [s for s in frame.sources if s["kind"] == "vlmevalkit-judged"]
    assert {s["judge"] for s in judged} == {"gpt-4o-mini"} and {s["model"] for s in judged} == {"modelA", "modelB"}
    # questions: VLMEvalKit's circular copy is folded into its original; the copy's rows are kept
    assert frame.questions["group_id"].tolist() == ["0", "1", "2", "3"]
    copies = frame.meta["_circular_copies"]
    assert sorted(copies["question_id"].unique()) == ["1", "1000001"] and set(copies["group_id"]) == {"1"}


def test_same_pools_are_not_pool_level(tmp_path):
    out = tmp_path / "outputs"
    _write_vlmevalkit_outputs(out, "modelA", ["A", "B", "C", "A", "A"], [1, 1, 1, 1, 1])
    blind_dir = tmp_path / "blind"
    _write_vlmevalkit_outputs(blind_dir, "modelA", ["B", "C", "C", "A", "B"], None)
    frame = ingest.build_frame(None, [str(out)], [str(blind_dir)], compute_exact=False)
    assert _pool(frame)["pool_level"] is False and _pool(frame)["note"] is None
    assert _pool(frame)["paired"] == ["modelA"]
    # questions derived from the sheets
    assert frame.questions["question_id"].tolist() == ["0", "1", "2", "3"]
    assert frame.questions["gold_index"].tolist() == [0, 1, 2, 0]


def test_build_frame_with_exact_extraction(tmp_path):
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
    mathv = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data",
                         "mathv", "outputs", "open-source", "LLavA", "LLaVA-v1.5-7B.jsonl")
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
    from sim import save_frame

    save_frame(frame, str(d))
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

    from audit_hub.readers import ingest

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


# ---------------------------------------------------------------------------------------- Parquet fast path
def _mixed_tables(seed: int = 7, n_q: int = 40, models=("m-a", "m-b", "m-c")):
    """Questions of every answer type and a long run table (both arms, nulls in every optional column)."""
    rng = np.random.default_rng(seed)
    qrows = []
    for i in range(n_q):
        t = ["mc", "mc", "yesno", "numeric"][i % 4]
        k = int(rng.integers(2, 6))
        qrows.append({"question_id": f"q{i:03d}", "question": f"question {i}",
                      "options": [f"opt {j}" for j in range(k)] if t == "mc" else [],
                      "answer": LETTERS[int(rng.integers(0, k))] if t == "mc" else
                      (["yes", "no"][i % 2] if t == "yesno" else str(i * 3)),
                      "answer_type": t, "category": f"c{i % 3}"})
    answers = ["A", "B", "C", "D", "yes", "no", "0", "3", "12", None]
    rrows = []
    for arm in ("full", "blind"):
        for m in models:
            for i in range(n_q):
                if rng.random() < 0.1:
                    continue  # not every model answers every question
                hit = rng.random() < 0.6
                rrows.append({"question_id": f"q{i:03d}", "model": m, "arm": arm,
                              "prediction": None if rng.random() < 0.1 else f"I think {i}",
                              "answer": answers[int(rng.integers(0, len(answers)))],
                              "hit": None if rng.random() < 0.1 else bool(hit),
                              "hit_exact": bool(rng.random() < 0.5)})
    return pd.DataFrame(qrows), pd.DataFrame(rrows)


def _write_runs_parquet(r: pd.DataFrame, path, layout: str) -> pd.DataFrame:
    """Write ``r`` as Parquet; returns the rows in the order they are in the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if layout == "categorical":  # one dictionary for the whole file (pandas categoricals), many row groups
        rc = r.astype({"question_id": "category", "model": "category", "arm": "category", "answer": "category"})
        pq.write_table(pa.Table.from_pandas(rc, preserve_index=False), path, row_group_size=37)
        return r
    # plain strings sorted by model: each row group gets its own, different dictionary
    r = r.sort_values(["model", "arm"], kind="stable").reset_index(drop=True)
    pq.write_table(pa.Table.from_pandas(r, preserve_index=False), path, row_group_size=29)
    return r


def _assert_same_frame(a: AuditFrame, b: AuditFrame) -> None:
    assert a.models == b.models
    pd.testing.assert_frame_equal(a.questions_table(), b.questions_table())
    for arm in ("full", "blind"):
        for fld in ("hit", "hit_exact"):
            np.testing.assert_array_equal(a.correctness(arm, fld), b.correctness(arm, fld))
        np.testing.assert_array_equal(a.answer_codes(arm), b.answer_codes(arm))
    np.testing.assert_array_equal(a.gold_codes(), b.gold_codes())


@pytest.mark.parametrize("layout", ["categorical", "per-row-group dictionaries"])
@pytest.mark.parametrize("with_exact", [True, False])
def test_parquet_runs_fast_path_equals_the_plain_table_path(tmp_path, layout, with_exact):
    """build_frame on Parquet (Arrow/categorical columns, no source_row) gives the same frame as the
    same rows handed to AuditFrame.from_tables as plain object columns, and as the CSV reader gives."""
    q, r = _mixed_tables()
    if not with_exact:
        r = r.drop(columns=["hit_exact"])  # the frame extracts answers and exact hits itself
    qp = tmp_path / "questions.parquet"
    q.to_parquet(qp, index=False)
    rp = tmp_path / "runs.parquet"
    r = _write_runs_parquet(r, rp, layout)  # (numeric/free answer codes follow first appearance: same order)
    fast = ingest.build_frame(str(qp), [str(rp)], [])
    plain = AuditFrame.from_tables(q, r.astype(object).where(r.notna(), None))
    _assert_same_frame(fast, plain)
    # row order of the frame follows the file: compare the long table too
    exp = plain.runs_table().sort_values(["arm", "model", "question_id"]).reset_index(drop=True)
    got = fast.runs_table().sort_values(["arm", "model", "question_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, exp)
    csv = tmp_path / "runs.csv"
    r.to_csv(csv, index=False)
    _assert_same_frame(fast, ingest.build_frame(str(qp), [str(csv)], []))
    assert _pool(fast)["paired"] == ["m-a", "m-b", "m-c"]
    assert {s["kind"] for s in fast.sources} >= {"generic"} and fast.sources[-1]["rows"] == len(r)


def test_parquet_runs_read_as_codes_without_source_columns(tmp_path):
    from audit_hub.readers import fileio

    q, r = _mixed_tables(n_q=12)
    rp = tmp_path / "runs.parquet"
    _write_runs_parquet(r, rp, "categorical")
    df = fileio.read_parquet_runs(str(rp))
    assert "source_row" not in df.columns
    assert isinstance(df["question_id"].dtype, pd.CategoricalDtype)
    assert df["model"].cat.codes.dtype == np.int8 and df["question_id"].cat.codes.dtype == np.int8
    assert df["question_id"].astype(str).tolist() == r["question_id"].tolist()
    assert df["answer"].isna().tolist() == r["answer"].isna().tolist()
    assert df["answer"].dropna().astype(str).tolist() == r["answer"].dropna().tolist()
    assert str(df["hit"].dtype) == "bool[pyarrow]"
    # per-row-group dictionaries: mapped onto one code space, still a Categorical with int8 codes
    rp2 = tmp_path / "runs2.parquet"
    exp = _write_runs_parquet(r, rp2, "plain")
    df2 = fileio.read_parquet_runs(str(rp2))
    assert isinstance(df2["model"].dtype, pd.CategoricalDtype) and df2["model"].cat.codes.dtype == np.int8
    assert df2["model"].cat.categories.dtype == object
    assert df2["model"].astype(str).tolist() == exp["model"].tolist()
    assert df2["question_id"].astype(str).tolist() == exp["question_id"].tolist()


def _bad_runs(tmp_path, name: str, row: int, **change):
    """Runs parquet (5 questions x 2 models) with data row ``row`` (1-based) changed."""
    q = pd.DataFrame({"question_id": [f"q{i}" for i in range(5)], "question": "x",
                      "options": [["a", "b"]] * 5, "answer": "A"})
    r = pd.DataFrame({"question_id": [f"q{i}" for i in range(5)] * 2, "model": ["m1"] * 5 + ["m2"] * 5,
                      "prediction": "A", "hit": np.array([1, 0, 1, 0, 1] * 2, dtype=np.int64)})
    for k, v in change.items():
        r.loc[row - 1, k] = v
    qp, rp = tmp_path / "q.parquet", tmp_path / name
    q.to_parquet(qp, index=False)
    r.astype({"question_id": "category", "model": "category"}).to_parquet(rp, index=False, row_group_size=3)
    return str(qp), str(rp)


@pytest.mark.parametrize("change,column,row,message", [
    ({"hit": 2}, "hit", 7, "hit must be 0/1"),
    ({"question_id": "nope"}, "question_id", 4, "not in the questions table"),
    ({"question_id": "q2", "model": "m1"}, "question_id", 8, "duplicate row"),
])
def test_parquet_bad_rows_name_file_row_and_column(tmp_path, change, column, row, message):
    """Without a source_row column the errors still name the file and the data row (i + 1)."""
    qp, rp = _bad_runs(tmp_path, "runs.parquet", row, **change)
    with pytest.raises(InputError, match=message) as ei:
        ingest.build_frame(qp, [rp], [])
    assert ei.value.file == rp and ei.value.row == row and ei.value.column == column


def test_parquet_bad_row_in_the_blind_file_names_that_file(tmp_path):
    qp, full = _bad_runs(tmp_path, "full.parquet", 1)
    _, blind = _bad_runs(tmp_path, "blind.parquet", 9, question_id="nope")
    with pytest.raises(InputError, match="not in the questions table") as ei:
        ingest.build_frame(qp, [full], [blind])
    assert ei.value.file == blind and ei.value.row == 9 and ei.value.column == "question_id"
    _, blind = _bad_runs(tmp_path, "blind.parquet", 9, hit=5)
    with pytest.raises(InputError, match="hit must be 0/1") as ei:
        ingest.build_frame(qp, [full], [blind])
    # (the frame names the runs given for hit errors, "full.parquet, blind.parquet", and the row in its file)
    assert blind in ei.value.file and ei.value.row == 9 and ei.value.column == "hit"
    # two full files (different models): merged, and a bad row of the second names it
    d = tmp_path / "two"
    d.mkdir()
    _, a = _bad_runs(d, "a.parquet", 1)
    b = d / "b.parquet"
    pd.read_parquet(a).assign(model=["m3"] * 5 + ["m4"] * 5, hit=[1, 1, 1, 1, 7, 0, 0, 0, 0, 0]) \
        .to_parquet(b, index=False)
    with pytest.raises(InputError, match="hit must be 0/1") as ei:
        ingest.build_frame(qp, [a, str(b)], [])
    assert str(b) in ei.value.file and ei.value.row == 5 and ei.value.column == "hit"
    pd.read_parquet(a).assign(model="m3").to_parquet(b, index=False)  # q0..q4 twice for m3
    with pytest.raises(InputError, match="duplicate row") as ei:
        ingest.build_frame(qp, [a, str(b)], [])
    assert ei.value.file == str(b) and ei.value.row == 6 and ei.value.column == "question_id"
    b2 = d / "b.parquet"
    pd.read_parquet(a).assign(model=["m3"] * 5 + ["m4"] * 5).to_parquet(b2, index=False)
    frame = ingest.build_frame(qp, [str(d)], [])
    assert frame.models == ("m1", "m2", "m3", "m4")
    np.testing.assert_array_equal(frame.correctness("full", "hit")[:, 0], [1, 0, 1, 0, 1])
    np.testing.assert_array_equal(frame.correctness("full", "hit")[:, 3], [1, 0, 1, 0, 1])


def test_several_parquet_run_files_merge_as_before(tmp_path):
    """Several Parquet files (per-row-group dictionaries, a model renamed by --model-map): the rows are
    stacked with their file and row, load_runs keeps its public dtypes, and the frame equals the CSV one."""
    q, r = _mixed_tables(seed=3, n_q=24, models=("m-a", "m-b", "m-c", "m-d"))
    qp = tmp_path / "questions.parquet"
    q.to_parquet(qp, index=False)
    parts = []
    for k, models in enumerate((("m-a", "m-b"), ("m-c", "m-d"))):
        sub = r[r["model"].isin(models)].reset_index(drop=True)
        d = tmp_path / f"p{k}"
        d.mkdir()
        parts.append(_write_runs_parquet(sub, d / "runs.parquet", "plain" if k == 0 else "categorical"))
        parts[-1].to_csv(d / "runs.csv", index=False)
    pq_files = [str(tmp_path / f"p{k}" / "runs.parquet") for k in range(2)]
    csv_files = [str(tmp_path / f"p{k}" / "runs.csv") for k in range(2)]
    mm = {"m-d": "renamed"}
    fast = ingest.build_frame(str(qp), pq_files, [], model_map=mm)
    slow = ingest.build_frame(str(qp), csv_files, [], model_map=mm)
    assert fast.models == ("m-a", "m-b", "m-c", "renamed")
    _assert_same_frame(fast, slow)
    runs = ingest.load_runs(pq_files, model_map=mm)
    for c in ("question_id", "model", "arm", "source_file"):
        assert isinstance(runs[c].dtype, pd.CategoricalDtype), c
    assert str(runs["prediction"].dtype) == "string[pyarrow]" and str(runs["answer"].dtype) == "string[pyarrow]"
    assert str(runs["hit"].dtype) == "Int8"
    assert runs["source_row"].tolist() == list(range(1, len(parts[0]) + 1)) + list(range(1, len(parts[1]) + 1))
    assert runs["source_file"].astype(str).tolist() == [pq_files[0]] * len(parts[0]) + [pq_files[1]] * len(parts[1])
    assert sorted(runs["model"].astype(str).unique()) == ["m-a", "m-b", "m-c", "renamed"]
    one = ingest.load_runs(pq_files[1])  # one file: provenance added for the public table
    assert one["source_row"].tolist() == list(range(1, len(parts[1]) + 1))
    assert str(one["answer"].dtype) == "string[pyarrow]" and isinstance(one["model"].dtype, pd.CategoricalDtype)
