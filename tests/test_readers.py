"""Reader tests on small fixture files in the exact layouts the real tools write.

Text fixtures live in tests/fixtures/; .xlsx sheets are written here into tmp_path with
pandas/openpyxl (no binaries committed).
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest

from audit_hub.errors import InputError
from audit_hub.readers import ingest
from audit_hub.readers.cells import options_are_bare_letters, split_embedded_options
from audit_hub.readers.vlmevalkit import parse_sheet_name

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
MMB_TSV = os.path.join(FIX, "vlmevalkit", "MMBench_DEV_EN.tsv")
# the project's shared data sits beside the repository (../shared), in CI as here
MATHV = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "mathv")

SHEET_COLS = ["index", "question", "hint", "A", "B", "C", "D", "answer", "category", "source", "l2-category",
              "comment", "split"]


def _pool(frame):
    """How the audit pairs the frame's models across arms."""
    from audit_hub.engine.run import pool_summary

    return frame.meta.get("pool") or pool_summary(frame.models_in("full"), frame.models_in("blind"))


def _mmbench_prediction_sheet() -> pd.DataFrame:
    """What VLMEvalKit writes as {model}_MMBench_DEV_EN.xlsx: dataset columns (no image) + prediction."""
    ds = pd.read_csv(MMB_TSV, sep="\t", keep_default_na=False, na_values=[""])
    ds = ds.drop(columns=["image"])
    ds["prediction"] = ["A", "The answer is B", "D", "A. STOP", "C"]
    return ds[SHEET_COLS + ["prediction"]]


# ---------------------------------------------------------------------------------------- VLMEvalKit
def test_vlmevalkit_dataset_tsv_questions():
    q = ingest.load_questions(MMB_TSV)
    assert q["question_id"].tolist() == ["0", "1", "2", "3", "1000001"]
    assert q["options"].tolist()[:4] == [["blue", "green", "red", "yellow"], ["a cup", "a plate", "a knife"],
                                         ["1", "2", "3", "4"], ["STOP", "GO"]]
    assert q["answer"].tolist() == ["A", "B", "C", "A", "A"]
    assert q["category"].tolist()[0] == "attribute_recognition"
    assert q["l2_category"].tolist()[2] == "coarse_perception"
    assert q["hint"].tolist()[:2] == [None, "The image shows a kitchen."]
    assert q["question"].iloc[3] == "What is written on the sign,\nif anything?"  # quoted multi-line cell
    # circular copies (index >= 1e6) share the group of their original
    assert q["group_id"].tolist() == ["0", "1", "2", "3", "1"]
    assert "image" not in q.columns
    src = q.attrs["sources"][0]
    assert src["kind"] == "vlmevalkit-questions" and src["rows"] == 5 and len(src["sha256"]) == 64


def test_vlmevalkit_prediction_and_judged_sheets_merge(tmp_path):
    out = tmp_path / "outputs" / "llava_v1.5_7b"
    out.mkdir(parents=True)
    pred = _mmbench_prediction_sheet()
    pred.to_excel(out / "llava_v1.5_7b_MMBench_DEV_EN.xlsx", index=False)
    judged = pred.copy()
    judged["hit"] = [1, 1, 0, 1, 0]
    judged["log"] = ["Match Log: A", "GPT extraction: B", "Match Log: D", "Match Log: A", "Match Log: C"]
    judged.to_excel(out / "llava_v1.5_7b_MMBench_DEV_EN_openai_result.xlsx", index=False)
    pd.DataFrame({"split": ["dev"], "Overall": [0.6]}).to_csv(out / "llava_v1.5_7b_MMBench_DEV_EN_acc.csv",
                                                              index=False)
    (out / "llava_v1.5_7b_MMBench_DEV_EN_openai_result.pkl").write_bytes(b"\x80\x04not unpickled")
    runs = ingest.load_runs([str(tmp_path / "outputs")])
    assert len(runs) == 5  # merged, not duplicated
    assert set(runs["model"].astype(str)) == {"llava_v1.5_7b"}
    r = runs.assign(question_id=runs["question_id"].astype(str)).set_index("question_id")
    assert r.loc["1", "prediction"] == "The answer is B"
    assert r.loc[["0", "1", "2", "3", "1000001"], "hit"].tolist() == [1, 1, 0, 1, 0]
    assert r["answer"].isna().all()  # the sheet's 'answer' is the gold, never the model's answer
    assert runs.attrs["judges"] == {"llava_v1.5_7b": "openai"}
    skipped = {os.path.basename(s["path"]): s["reason"] for s in runs.attrs["skipped"]}
    assert "pickle" in skipped["llava_v1.5_7b_MMBench_DEV_EN_openai_result.pkl"]
    assert "llava_v1.5_7b_MMBench_DEV_EN_acc.csv" in skipped
    # the sheet also carries the questions
    q = ingest.questions_from_runs([str(tmp_path / "outputs")])
    assert q["question_id"].tolist() == ["0", "1", "2", "3", "1000001"]
    assert q["options"].iloc[1] == ["a cup", "a plate", "a knife"]
    assert q["answer"].tolist() == ["A", "B", "C", "A", "A"]


@pytest.mark.parametrize("name, hint, expected", [
    ("llava_v1.5_7b_MMBench_DEV_EN.xlsx", "MMBench_DEV_EN", ("llava_v1.5_7b", "MMBench_DEV_EN", "sheet", None)),
    ("llava_v1.5_7b_MMBench_DEV_EN_openai_result.xlsx", "MMBench_DEV_EN",
     ("llava_v1.5_7b", "MMBench_DEV_EN", "judged", "openai")),
    ("InternVL2_5-8B_MMStar_exact_matching_result.xlsx", None,
     ("InternVL2_5-8B", "MMStar", "judged", "exact_matching")),
    ("Qwen2-VL-7B_MathVista_MINI_gpt-4o-mini.xlsx", None, ("Qwen2-VL-7B", "MathVista_MINI", "extract", "gpt-4o-mini")),
    ("GPT4o_MME_auxmatch.xlsx", None, ("GPT4o", "MME", "auxmatch", "auxmatch")),
    ("my_model_MyBench_v2_gpt4_result.xlsx", "MyBench_v2", ("my_model", "MyBench_v2", "judged", "gpt4")),
    ("modelx_newbench.tsv", None, ("modelx", "newbench", "sheet", None)),
])
def test_sheet_names(name, hint, expected):
    n = parse_sheet_name(f"/nowhere/{name}", dataset_hint=hint)
    assert (n.model, n.dataset, n.kind, n.judge) == expected


def test_sheet_name_from_parent_folder_and_ambiguity():
    n = parse_sheet_name("/x/outputs/my_vlm_v2/T20240101_Gabc/my_vlm_v2_Some_New_Bench_gpt4_result.xlsx")
    assert (n.model, n.dataset, n.judge) == ("my_vlm_v2", "Some_New_Bench", "gpt4")
    with pytest.raises(InputError, match="--dataset"):
        parse_sheet_name("/x/a_b_c_d.xlsx")


def test_vlmevalkit_auxmatch_yes_no(tmp_path):
    df = pd.DataFrame({
        "index": [0, 1, 2, 3], "question": ["Is there a dog? Please answer yes or no."] * 4,
        "answer": ["Yes", "No", "Yes", "No"], "category": ["existence"] * 4, "l2-category": ["perception"] * 4,
        "prediction": ["Yes, there is.", "No", "I cannot tell", "yes"],
        "extracted": ["Yes", "No", "Unknown", "Yes"], "score": [True, True, False, False],
    })
    p = tmp_path / "GPT4o_MME_auxmatch.xlsx"
    df.to_excel(p, index=False)
    runs = ingest.load_runs([str(p)])
    # the exact arm reads the prediction with VLMEvalKit's yes/no rule; "Unknown" stays unparseable
    assert runs["answer"].tolist() == ["yes", "no", "Unknown", "yes"]
    assert runs["hit"].tolist() == [1, 1, 0, 0]
    assert runs.attrs["judges"] == {"GPT4o": "auxmatch"}
    q = ingest.questions_from_runs([str(p)])
    assert q["answer"].tolist() == ["Yes", "No", "Yes", "No"] and q["options"].iloc[0] == []


def test_mmstar_embedded_options():
    q = ingest.load_questions(os.path.join(FIX, "vlmevalkit", "MMStar.tsv"))
    assert q["options"].iloc[0] == ["The suitcase is on the book.", "The suitcase is beneath the cat.",
                                    "The suitcase is beneath the bed.", "The suitcase is beneath the book."]
    assert q["question"].iloc[0] == "Which option describe the object relationship in the image correctly?"
    assert q["options"].iloc[1] == ["2", "4, or 5", "6", "8"]  # the comma inside an option does not split it
    assert q["question"].iloc[1] == "What is the value of x?"
    assert q["options"].iloc[2] == ["yes", "no"]
    assert q["l2_category"].tolist()[0] == "image scene and topic"


def test_split_embedded_options_none():
    assert split_embedded_options("How many apples, pears: two?") == ("How many apples, pears: two?", [])


def test_sheet_missing_column_names_file_and_column(tmp_path):
    df = _mmbench_prediction_sheet()
    p = tmp_path / "m_MMBench_DEV_EN_openai_result.xlsx"
    df.to_excel(p, index=False)  # judged sheet without 'hit'
    with pytest.raises(InputError) as ei:
        ingest.load_runs([str(p)])
    assert ei.value.file == str(p) and ei.value.column == "hit"
    assert str(p) in str(ei.value) and "'hit'" in str(ei.value)


def test_two_llm_judges_for_one_model_is_an_error(tmp_path):
    df = _mmbench_prediction_sheet()
    for judge in ("openai", "gpt4"):
        d = df.assign(hit=1, log="x")
        d.to_excel(tmp_path / f"m_MMBench_DEV_EN_{judge}_result.xlsx", index=False)
    with pytest.raises(InputError, match="several judges"):
        ingest.load_runs([str(tmp_path)])


def test_exact_matching_yields_to_llm_judge(tmp_path):
    df = _mmbench_prediction_sheet()
    df.assign(hit=[0, 0, 0, 0, 0], log="x").to_excel(tmp_path / "m_MMBench_DEV_EN_exact_matching_result.xlsx",
                                                      index=False)
    df.assign(hit=[1, 1, 0, 1, 0], log="x").to_excel(tmp_path / "m_MMBench_DEV_EN_openai_result.xlsx", index=False)
    runs = ingest.load_runs([str(tmp_path)])
    assert runs["hit"].tolist() == [1, 1, 0, 1, 0]
    assert runs.attrs["judges"] == {"m": "openai"}


def test_conflicting_predictions_for_one_model(tmp_path):
    df = _mmbench_prediction_sheet()
    df.to_csv(tmp_path / "m_MMBench_DEV_EN.csv", index=False)
    df.assign(prediction="Z", hit=0, log="x").to_excel(tmp_path / "m_MMBench_DEV_EN_openai_result.xlsx",
                                                       index=False)
    with pytest.raises(InputError, match="two different predictions"):
        ingest.load_runs([str(tmp_path)])


# ---------------------------------------------------------------------------------------- lmms-eval
def test_lmms_eval_mme_samples():
    p = os.path.join(FIX, "lmms_eval", "llava-hf__llava-1.5-7b-hf", "samples_mme_2024-06-01T10-00-00.123456.jsonl")
    runs = ingest.load_runs([p])
    # MME's question_id (an image name) is shared by two questions -> doc_id is the key
    assert runs["question_id"].tolist() == ["0", "1", "2", "3"]
    assert set(runs["model"].astype(str)) == {"llava-hf/llava-1.5-7b-hf"}  # from results_*.json
    assert runs["prediction"].tolist() == ["Yes", "Yes", "No", "no"]
    assert runs["hit"].tolist() == [1, 0, 0, 1]
    assert runs.attrs["judges"] == {"llava-hf/llava-1.5-7b-hf": "lmms-eval:mme_percetion_score"}
    q = ingest.load_questions(p)
    assert q["answer"].tolist() == ["Yes", "No", "Yes", "No"]
    assert q["category"].tolist() == ["code_reasoning", "code_reasoning", "artwork", "artwork"]


def test_lmms_eval_mmbench_samples():
    p = os.path.join(FIX, "lmms_eval", "qwen_vl", "2024-07-02T08-30-00.000001_samples_mmbench_en_dev.jsonl")
    runs = ingest.load_runs([p])
    assert runs["question_id"].tolist() == ["241", "242", "243"]  # doc['index'] is unique
    assert set(runs["model"].astype(str)) == {"qwen_vl"}  # parent folder (no results json)
    assert runs["prediction"].tolist() == ["A. blue", "B", "The answer is B."]
    assert "hit" not in runs.columns  # gpt_eval_score holds no 0/1 value
    assert runs.attrs["judges"] == {}
    q = ingest.questions_from_runs([p])
    assert q["options"].tolist() == [["blue", "green", "red", "yellow"], ["1", "2", "3", "4"],
                                     ["a cat", "an elephant"]]
    assert q["answer"].tolist() == ["A", "C", "B"]
    assert q["l2_category"].iloc[1] == "coarse_perception"
    from audit_hub.readers.lmms_eval import task_name
    assert task_name(p) == "mmbench_en_dev"


# ---------------------------------------------------------------------------------------- generic
def test_generic_csv_with_column_map():
    cmap = ingest.parse_column_map(["qid=question_id", "system=model,condition=arm", "output=prediction",
                                    "correct=hit"])
    runs = ingest.load_runs([os.path.join(FIX, "generic", "runs_other_layout.csv")], column_map=cmap)
    assert runs["question_id"].tolist() == ["q1", "q2", "q1", "q2", "q1", "q2"]
    assert runs["model"].astype(str).tolist() == ["model-a"] * 4 + ["model-b"] * 2
    assert runs["arm"].astype(str).tolist() == ["full", "full", "blind", "blind", "full", "full"]
    assert runs["prediction"].tolist()[:2] == ["The answer is (B).", "A"]
    assert pd.isna(runs["prediction"].iloc[5])
    frame = ingest.build_frame(os.path.join(FIX, "generic", "questions.csv"),
                               [os.path.join(FIX, "generic", "runs_other_layout.csv")], column_map=cmap,
                               compute_exact=False)
    assert frame.models == ("model-a", "model-b")
    hit = frame.correctness("full", "hit")
    np.testing.assert_array_equal(hit, np.array([[1, 1], [0, -1]], dtype=np.int8))
    np.testing.assert_array_equal(frame.correctness("blind", "hit")[:, 0], [0, 0])
    # blind pool {a} != full pool {a, b}: model-a pairs by name, so the comparison is per model
    assert _pool(frame)["pool_level"] is False and "model-b" in _pool(frame)["note"]
    assert _pool(frame)["paired"] == ["model-a"]


def test_parse_column_map_errors():
    assert ingest.parse_column_map(["a=b", "c = d"]) == {"a": "b", "c": "d"}
    with pytest.raises(InputError, match="OLD=NEW"):
        ingest.parse_column_map(["nonsense"])
    with pytest.raises(InputError, match="two new names"):
        ingest.parse_column_map(["a=b", "a=c"])


def test_parquet_runs_arrive_categorical(tmp_path):
    df = pd.DataFrame({"question_id": ["1", "2", "1", "2"], "model": ["m1", "m1", "m2", "m2"],
                       "arm": ["full"] * 4, "prediction": ["A", None, "B", "C"], "answer": ["A", None, "B", "C"],
                       "hit": pd.array([True, None, False, True], dtype="boolean"),
                       "hit_exact": pd.array([True, False, False, True], dtype="boolean")})
    p = tmp_path / "runs.parquet"
    df.to_parquet(p, index=False)
    runs = ingest.load_runs([str(p)])
    assert isinstance(runs["question_id"].dtype, pd.CategoricalDtype)
    assert isinstance(runs["model"].dtype, pd.CategoricalDtype)
    assert str(runs["prediction"].dtype) == "string[pyarrow]"
    assert runs["hit"].tolist()[0] == 1 and pd.isna(runs["hit"].iloc[1]) and runs["hit"].tolist()[2:] == [0, 1]
    assert runs["hit_exact"].tolist() == [1, 0, 0, 1]


# ---------------------------------------------------------------------------------------- Hugging Face
def test_hub_layout_local_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    root = tmp_path / "my_bench"
    (root / "data").mkdir(parents=True)
    feats = datasets.Features({"id": datasets.Value("string"), "question": datasets.Value("string"),
                               "options": datasets.Sequence(datasets.Value("string")),
                               "answer": datasets.Value("string"), "category": datasets.Value("string"),
                               "image": datasets.Image()})
    ds = datasets.Dataset.from_dict({
        "id": ["a1", "a2", "a3"], "question": ["Q1?", "Q2?", "Q3?"],
        "options": [["x", "y"], [], ["p", "q", "r"]], "answer": ["B", "42", "C"],
        "category": ["c1", "c2", "c1"],
        # deliberately undecodable bytes: the test fails if the reader ever decodes an image
        "image": [{"bytes": b"not an image", "path": None}] * 3}, features=feats)
    ds.to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text("---\nlicense: mit\n---\n# my bench\n")
    q = ingest.load_questions(str(root))
    assert q["question_id"].tolist() == ["a1", "a2", "a3"]
    assert [list(o) for o in q["options"]] == [["x", "y"], [], ["p", "q", "r"]]
    assert q["answer"].tolist() == ["B", "42", "C"]
    assert q.attrs["sources"][0]["dropped_media_columns"] == ["image"]
    assert q.attrs["sources"][0]["kind"] == "hf-local"


def test_hub_spec_parsing():
    from audit_hub.readers.hf import parse_hub_spec
    assert parse_hub_spec("Lin-Chen/MMStar") == ("Lin-Chen/MMStar", None, None)
    assert parse_hub_spec("MathLLMs/MathVision:default@3f1e2d") == ("MathLLMs/MathVision", "default", "3f1e2d")
    assert parse_hub_spec("not a hub id") is None


# ---------------------------------------------------------------------------------------- MATH-V
@pytest.mark.skipif(not os.path.isdir(MATHV), reason="MATH-V snapshot absent")
def test_mathv_real_data():
    q = ingest.load_questions(os.path.join(MATHV, "data", "test.jsonl"))
    assert len(q) == 3040 and q["question_id"].iloc[0] == "1"
    assert q["answer_type"].value_counts().to_dict() == {"mc": 1532, "numeric": 1414, "free": 94}
    row2 = q.iloc[1]
    assert row2["options"] == ["A", "B", "C", "D", "E"] and row2["answer"] == "A"
    assert row2["category"] == "arithmetic" and row2["l2_category"] == "level 2"
    assert options_are_bare_letters(row2["options"]) and not options_are_bare_letters(["1", "2"])
    assert not options_are_bare_letters([])
    full = os.path.join(MATHV, "outputs", "open-source", "LLavA", "LLaVA-v1.5-7B.jsonl")
    blind = os.path.join(MATHV, "outputs", "closed-source", "GPT", "GPT4-CoT (Text Only).jsonl")
    frame = ingest.build_frame(os.path.join(MATHV, "data", "test.jsonl"), [full], [blind], compute_exact=False)
    assert frame.models == ("LLaVA-v1.5-7B", "GPT4-CoT (Text Only)")
    h = frame.correctness("full", "hit")[:, 0]
    assert int((h == 1).sum()) == 259  # 259/3040 in LLaVA-v1.5-7B_result.json
    runs = frame.runs_table()
    llava = runs[runs["model"] == "LLaVA-v1.5-7B"].set_index("question_id")
    assert llava.loc["2", "answer"] == "A"  # 'a' on an mc item -> option letter
    assert llava.loc["1", "answer"] == "80"
    pool = _pool(frame)
    assert pool["pool_level"] is True and pool["paired"] == [] and "pool level" in pool["note"]
    # explicit pairing through the model override
    paired = ingest.build_frame(os.path.join(MATHV, "data", "test.jsonl"), [full], [blind],
                                blind_model="LLaVA-v1.5-7B", compute_exact=False)
    assert _pool(paired)["paired"] == ["LLaVA-v1.5-7B"] and _pool(paired)["pool_level"] is False
    kinds = {s["kind"] for s in frame.sources}
    assert kinds == {"mathv-questions", "mathv-output"}


# ---------------------------------------------------------------------------------------- bad input
def test_pickle_refused(tmp_path):
    p = tmp_path / "m_MMBench_DEV_EN_openai_result.pkl"
    p.write_bytes(b"\x80\x04\x95")
    with pytest.raises(InputError, match="execute arbitrary code") as ei:
        ingest.load_runs([str(p)])
    assert ei.value.file == str(p) and "xlsx" in str(ei.value)
    with pytest.raises(InputError, match="pickle"):
        ingest.load_questions(str(p))


def test_empty_and_header_only_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty") as ei:
        ingest.load_questions(str(empty))
    assert ei.value.file == str(empty)
    header = tmp_path / "header.csv"
    header.write_text("question_id,answer\n")
    with pytest.raises(InputError, match="no data rows"):
        ingest.load_questions(str(header))
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    with pytest.raises(InputError, match="no JSON lines"):
        ingest.load_runs([str(blank)])


def test_bad_json_line_names_the_line(tmp_path):
    p = tmp_path / "samples_mme_x.jsonl"
    good = open(os.path.join(FIX, "lmms_eval", "llava-hf__llava-1.5-7b-hf",
                             "samples_mme_2024-06-01T10-00-00.123456.jsonl")).read().splitlines()
    p.write_text("\n".join(good[:2] + ['{"doc_id": 2, "doc": {'] + good[3:]) + "\n")
    with pytest.raises(InputError, match="line 3 is not valid JSON") as ei:
        ingest.load_runs([str(p)], model="m")
    assert ei.value.row == 3 and ei.value.file == str(p)


def test_latin1_bytes_name_offset_and_line(tmp_path):
    p = tmp_path / "q.csv"
    p.write_bytes("question_id,question,answer\n1,caf\u00e9?,A\n".encode("utf-8")
                  + "2,na\u00efve?,B\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"byte offset 43 \(line 3\)") as ei:
        ingest.load_questions(str(p))
    assert ei.value.file == str(p)


def test_utf8_bom_accepted_utf16_refused(tmp_path):
    p = tmp_path / "q.csv"
    p.write_bytes("question_id,answer\nq1,A\n".encode("utf-8-sig"))
    q = ingest.load_questions(str(p))
    assert q["question_id"].tolist() == ["q1"]
    p16 = tmp_path / "q16.csv"
    p16.write_bytes("question_id,answer\nq1,A\n".encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16"):
        ingest.load_questions(str(p16))


def test_malformed_csv_row_named(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("question_id,question,answer\n1,ok,A\n2,too,many,fields\n")
    with pytest.raises(InputError, match="data row 2 has 4 fields") as ei:
        ingest.load_questions(str(p))
    assert ei.value.row == 2


def test_unknown_extension_and_missing_column(tmp_path):
    p = tmp_path / "runs.txt"
    p.write_text("hello")
    with pytest.raises(InputError, match="unknown file type '.txt'") as ei:
        ingest.load_runs([str(p)])
    assert ei.value.file == str(p)
    q = tmp_path / "q.csv"
    q.write_text("question_id,question\n1,What?\n")
    with pytest.raises(InputError, match="missing column 'answer'") as ei:
        ingest.load_questions(str(q))
    assert ei.value.column == "answer" and ei.value.file == str(q)
    with pytest.raises(InputError, match="no such file"):
        ingest.load_runs([str(tmp_path / "nope.csv")])


def test_unknown_question_ids_reported(tmp_path):
    q = tmp_path / "q.csv"
    q.write_text("question_id,answer\n1,A\n2,B\n")
    r = tmp_path / "runs.csv"
    lines = ["question_id,model,prediction,hit_exact"] + [f"{i},m,A,0" for i in range(1, 10)]
    r.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as ei:
        ingest.build_frame(str(q), [str(r)], compute_exact=False)
    msg = str(ei.value)
    assert "7 question IDs in the runs are not in the questions table" in msg and "['3', '4', '5', '6', '7']" in msg
    assert ei.value.file == str(r) and ei.value.row == 3


def test_bad_hit_value_names_file_row_column(tmp_path):
    q = tmp_path / "q.csv"
    q.write_text("question_id,answer\n1,A\n2,B\n")
    r = tmp_path / "runs.csv"
    r.write_text("question_id,model,prediction,hit\n1,m,A,1\n2,m,B,maybe\n")
    with pytest.raises(InputError) as ei:
        ingest.build_frame(str(q), [str(r)], compute_exact=False)
    assert (ei.value.file, ei.value.row, ei.value.column) == (str(r), 2, "hit")


def test_folder_copy_of_fixtures_reads_all(tmp_path):
    for sub in ("llava-hf__llava-1.5-7b-hf", "qwen_vl"):  # the hand-made layouts (real/ is tested elsewhere)
        shutil.copytree(os.path.join(FIX, "lmms_eval", sub), tmp_path / "lm" / sub)
    runs = ingest.load_runs([str(tmp_path / "lm")])
    assert sorted(set(runs["model"].astype(str))) == ["llava-hf/llava-1.5-7b-hf", "qwen_vl"]
    assert {os.path.basename(s["path"]) for s in runs.attrs["skipped"]} == {
        "results_2024-06-01T10-00-00.123456.json"}
    assert all(len(s["sha256"]) == 64 for s in runs.attrs["sources"])
    assert json.dumps(runs.attrs["sources"])  # provenance is JSON-serialisable


# ---------------------------------------------------------------------------------------- JSONL / CSV run
# tables through pyarrow's streaming readers (issue 30), and the exact Python path for hostile files

def _jsonl_runs(tmp_path, body: bytes, name: str = "runs.jsonl"):
    q = tmp_path / "q.csv"
    q.write_text("question_id,answer\nq1,A\nq2,B\nq3,C\n")
    r = tmp_path / name
    r.write_bytes(body)
    return str(q), str(r)


def _line(qid: str, model: str = "m", pred: str = "A", hit: str = "true") -> bytes:
    return (f'{{"question_id": "{qid}", "model": "{model}", "arm": "full", "prediction": "{pred}", '
            f'"hit": {hit}}}\n').encode()


def test_jsonl_runs_take_the_arrow_path_with_line_numbers_as_rows(tmp_path):
    from audit_hub.readers.fileio import read_text_runs

    body = b"\xef\xbb\xbf" + _line("q1") + _line("q2", pred="B", hit="false") + _line("zz")
    q, r = _jsonl_runs(tmp_path, body)
    df = read_text_runs(r)
    assert df is not None and "source_row" not in df.columns  # the fast path: row i is line i + 1
    assert df["question_id"].astype(str).tolist() == ["q1", "q2", "zz"]
    assert isinstance(df["model"].dtype, pd.CategoricalDtype) and df["hit"].tolist() == [True, False, True]
    with pytest.raises(InputError) as ei:
        ingest.build_frame(q, [r], compute_exact=False)
    assert (ei.value.file, ei.value.row, ei.value.column) == (r, 3, "question_id")


def test_jsonl_runs_with_blank_lines_keep_true_line_numbers(tmp_path):
    from audit_hub.readers.fileio import read_text_runs

    q, r = _jsonl_runs(tmp_path, _line("q1") + b"\n   \n" + _line("q2") + _line("zz") + b"\n\n")
    assert read_text_runs(r) is None  # blank lines inside: the exact path numbers the lines
    with pytest.raises(InputError) as ei:
        ingest.build_frame(q, [r], compute_exact=False)
    assert ei.value.row == 5
    q, r = _jsonl_runs(tmp_path, _line("q1") + _line("q2") + b"\n \n", name="trailing.jsonl")
    df = read_text_runs(r)  # only trailing blank lines: still the fast path
    assert df is not None and len(df) == 2


@pytest.mark.parametrize("body, fragment, row", [
    (_line("q1") + b'{"question_id": "q2", "model": "m", "arm": "full", "prediction": "A", "hit": 1, "hit": 0}\n',
     "duplicate key", 2),
    (_line("q1") + b'[1, 2]\n', "expected an object", 2),
    (_line("q1") + _line("q2") + b'{"question_id": \n', "line 3 is not valid JSON", 3),
    (_line("q1") + _line("q2", pred="caf\xe9".encode("latin-1").decode("latin-1")).replace(b"\xc3\xa9", b"\xe9"),
     "byte offset", 2),
    (_line("q1") + b'{"question_id": "q2", "model": "m", "prediction": "A", "hit": ' + b"7" * 4500 + b"}\n",
     "number", 2),
    (_line("q1") + b'{"question_id": "q2", "model": "m", "prediction": "A", "x": ' + b"[" * 100000
     + b"]" * 100000 + b"}\n", "nested", 2),
])
def test_hostile_jsonl_runs_keep_their_one_line_messages(tmp_path, body, fragment, row):
    """Each falls back to the exact Python path (pyarrow would accept duplicate keys' absence of a
    message, turn a 4,500-digit integer into inf, or crash on deep nesting)."""
    from audit_hub.readers.fileio import read_text_runs

    q, r = _jsonl_runs(tmp_path, body)
    assert read_text_runs(r) is None
    with pytest.raises(InputError) as ei:
        ingest.build_frame(q, [r], compute_exact=False)
    assert fragment in str(ei.value) and ei.value.file == r and ei.value.row == row


def test_jsonl_runs_with_nan_read_like_the_python_path(tmp_path):
    from audit_hub.readers.fileio import read_text_runs

    body = _line("q1", hit="NaN") + _line("q2", hit="1") + _line("q3", hit="0")
    q, r = _jsonl_runs(tmp_path, body)
    assert read_text_runs(r) is None  # a non-finite number: the exact path
    frame = ingest.build_frame(q, [r], compute_exact=False)
    assert frame.runs["hit"].tolist() == [-1, 1, 0]


def test_jsonl_runs_skip_media_columns(tmp_path):
    from audit_hub.readers.fileio import read_text_runs

    body = b"".join(f'{{"question_id": "q{i}", "model": "m", "prediction": "A", "image": "AAAA"}}\n'.encode()
                    for i in (1, 2, 3))
    q, r = _jsonl_runs(tmp_path, body)
    df = read_text_runs(r)
    assert df is not None and "image" not in df.columns and list(df.columns) == ["question_id", "model",
                                                                                  "prediction"]


def test_csv_runs_take_the_arrow_path_and_hostile_csv_keeps_its_messages(tmp_path):
    from audit_hub.readers.fileio import read_text_runs

    q = tmp_path / "q.csv"
    q.write_text("question_id,answer\nq1,A\nq2,B\n")
    r = tmp_path / "runs.csv"
    r.write_text("question_id,model,arm,prediction,hit\nq1,m,full,A,1\nq2,m,full,\"B,\nC\",0\nzz,m,full,A,1\n")
    df = read_text_runs(str(r))
    assert df is not None and df["prediction"].astype(str).tolist() == ["A", "B,\nC", "A"]
    with pytest.raises(InputError) as ei:
        ingest.build_frame(str(q), [str(r)], compute_exact=False)
    assert ei.value.row == 3 and ei.value.column == "question_id"  # data row 3 (a quoted cell spans lines)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("question_id,model,prediction,hit\nq1,m,A,1\nq2,m,B,0,extra\n")
    assert read_text_runs(str(ragged)) is None
    with pytest.raises(InputError, match="data row 2 has 5 fields"):
        ingest.build_frame(str(q), [str(ragged)], compute_exact=False)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("question_id,model,prediction,hit\nq1,m,caf\xe9,1\n".encode("latin-1"))
    with pytest.raises(InputError, match="byte 0xe9 at byte offset 41 "):
        ingest.build_frame(str(q), [str(latin)], compute_exact=False)


def test_a_model_split_across_a_csv_and_a_jsonl_file_merges_on_the_codes(tmp_path):
    """Both files arrive with categorical model/arm columns (the Arrow path); the rows of the shared
    (model, arm) are picked on the codes and merged on the question ID, the other model's rows kept."""
    q = tmp_path / "q.csv"
    q.write_text("question_id,answer\nq1,A\nq2,B\n")
    a = tmp_path / "a.csv"
    a.write_text("question_id,model,arm,prediction\nq1,m,full,A\nq2,m,full,C\nq1,n,full,B\nq2,n,full,B\n")
    b = tmp_path / "b.jsonl"
    b.write_bytes(b'{"question_id": "q2", "model": "m", "arm": "FULL", "prediction": "C", "hit": false}\n'
                  b'{"question_id": "q1", "model": "m", "arm": "FULL", "prediction": "A", "hit": true}\n')
    runs = ingest.load_runs([str(a), str(b)])
    m = runs[runs["model"].astype(str) == "m"].sort_values("question_id")
    assert m["hit"].tolist() == [1, 0] and m["prediction"].astype(str).tolist() == ["A", "C"]
    n = runs[runs["model"].astype(str) == "n"]
    assert len(n) == 2 and n["hit"].isna().all()


def test_the_jsonl_prescan_catches_a_bracket_heavy_line_across_block_boundaries(tmp_path, monkeypatch):
    """A line with >= 512 opening brackets goes to the exact path even when it spans many blocks (here
    100-byte blocks: the open line's count is carried over); fewer stay on the fast path, line count right."""
    from audit_hub.readers import fileio

    monkeypatch.setattr(fileio, "_BLOCK", 100)
    many = tmp_path / "many.jsonl"
    many.write_bytes(_line("q1") + b'{"question_id": "q2", "prediction": "' + b"{[" * 300 + b'"}\n' + _line("q3"))
    assert fileio._jsonl_fast_ok(str(many)) is None
    few = tmp_path / "few.jsonl"
    few.write_bytes(_line("q1") + b'{"question_id": "q2", "prediction": "' + b"{[" * 250 + b'"}\n' + _line("q3")
                    + b"\n \n")
    assert fileio._jsonl_fast_ok(str(few)) == 3
    monkeypatch.undo()  # (pyarrow's reader needs blocks longer than a line)
    df = fileio.read_text_runs(str(few))
    assert df is not None and df["prediction"].astype(str).iloc[1] == "{[" * 250


def test_jsonl_ranges_read_on_threads_equal_one_pass(tmp_path, monkeypatch):
    """With ranges of about 200 bytes the file is cut into many ranges (each at a newline), parsed on
    reader threads and consumed in file order: the same frame, codes in first-appearance order; a type
    changing in a later range, blank lines inside (also at a range boundary), a NUL byte or a line with
    many brackets in a later range all still go to the exact path."""
    from audit_hub.readers import fileio

    monkeypatch.setattr(fileio, "_JSONL_CHUNK", 200)
    models = [f"m{i % 7}" for i in range(60)]
    body = b"".join(_line(f"q{(i * 13) % 40}", model=models[i], pred="ABCD"[i % 4], hit="true" if i % 3 else "false")
                    for i in range(60))
    q, r = _jsonl_runs(tmp_path, body + b"\n\n")
    ranges = list(fileio._jsonl_ranges(r, len(body) + 2))
    assert len(ranges) > 10 and ranges[0][0] == 0 and ranges[-1][1] == len(body) + 2
    assert all(body[e - 1:e] == b"\n" for _, e in ranges[:-1])
    df = fileio.read_text_runs(r)
    assert df is not None and len(df) == 60
    assert df["question_id"].astype(str).tolist() == [f"q{(i * 13) % 40}" for i in range(60)]
    assert list(df["model"].cat.categories) == [f"m{i}" for i in range(7)]
    assert df["model"].cat.codes.tolist() == [i % 7 for i in range(60)]
    assert df["prediction"].astype(str).tolist() == ["ABCD"[i % 4] for i in range(60)]
    assert df["hit"].tolist() == [bool(i % 3) for i in range(60)]
    lines = body.splitlines(keepends=True)
    bad = {
        "type": lines[:50] + [_line("q1", hit="7")] + lines[51:],
        "blank": lines[:30] + [b"\n"] + lines[30:],
        "nul": lines[:50] + [_line("q1", pred="A\x00")] + lines[51:],
        "brackets": lines[:50] + [b'{"question_id": "q1", "x": ' + b"[" * 600 + b"]" * 600 + b"}\n"] + lines[51:],
    }
    for label, ls in bad.items():
        q, r = _jsonl_runs(tmp_path, b"".join(ls), name=f"{label}.jsonl")
        assert fileio.read_text_runs(r) is None, label
