"""AuditFrame: validation messages (file, row, column), integer encoding, dense matrices."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_hub.errors import InputError
from audit_hub.frame.core import AuditFrame
from audit_hub.schema import normalise_value


def _questions():
    return pd.DataFrame({
        "question_id": ["q1", "q2", "q3", "q4"],
        "question": ["2+2?", "Is it red?", "How many?", "Pick"],
        "options": [["3", "4", "5"], [], [], ["cat", "dog"]],
        "answer": ["B", "Yes", "7", "A"],
        "category": ["math", "color", "count", "animals"],
    })


def _runs():
    rows = []
    # model m1: right on q1, q2; wrong q3; unparseable q4
    rows += [("q1", "m1", "full", "B", "B", 1), ("q2", "m1", "full", "yes", "yes", 1),
             ("q3", "m1", "full", "8", "8", 0), ("q4", "m1", "full", "??", None, 0)]
    rows += [("q1", "m2", "full", "C", "C", 0), ("q2", "m2", "full", "no", "no", 0),
             ("q3", "m2", "full", "7", "7", 1), ("q4", "m2", "full", "A", "A", 1)]
    rows += [("q1", "m1", "blind", "B", "B", 1), ("q3", "m1", "blind", "7.0", "7.0", 1)]
    return pd.DataFrame(rows, columns=["question_id", "model", "arm", "prediction", "answer", "hit"])


def test_encoding_and_matrices():
    f = AuditFrame.from_tables(_questions(), _runs().assign(hit_exact=_runs()["hit"]))
    assert f.n_questions == 4 and f.models == ("m1", "m2")
    assert list(f.questions["answer_type"]) == ["mc", "yesno", "numeric", "mc"]
    assert list(f.questions["answer"]) == ["B", "yes", "7", "A"]
    assert list(f.gold_index) == [1, -1, -1, 0]
    assert list(f.n_options) == [3, 0, 0, 2]
    full = f.correctness("full")
    np.testing.assert_array_equal(full, [[1, 0], [1, 0], [0, 1], [0, 1]])
    blind = f.correctness("blind")
    np.testing.assert_array_equal(blind, [[1, -1], [-1, -1], [1, -1], [-1, -1]])
    assert f.correctness("full", models=["m2"]).tolist() == [[0], [0], [1], [1]]
    codes = f.answer_codes("full")
    gold = f.gold_codes()
    # mc: option indices; yes/no: yes=0, no=1; numeric: shared code space, equal iff same value
    assert codes[0].tolist() == [1, 2] and gold[0] == 1
    assert codes[1].tolist() == [0, 1] and gold[1] == 0
    assert codes[2, 1] == gold[2] and codes[2, 0] != gold[2]
    assert codes[3].tolist() == [-1, 0] and gold[3] == 0
    bcodes = f.answer_codes("blind")
    assert bcodes[2, 0] == gold[2]  # "7.0" == "7" numerically
    assert f.models_in("blind") == ["m1"] and f.paired_models() == ["m1"]
    assert f.runs["q"].dtype == np.int32 and f.runs["m"].dtype == np.int16 and f.runs["hit"].dtype == np.int8


def test_accuracy_table_and_subsets():
    f = AuditFrame.from_tables(_questions(), _runs().assign(hit_exact=_runs()["hit"]))
    acc = f.accuracy_table().set_index(["model", "arm"])
    assert acc.loc[("m1", "full"), "accuracy_judged"] == pytest.approx(0.5)
    assert acc.loc[("m2", "full"), "accuracy_judged"] == pytest.approx(0.5)
    assert acc.loc[("m1", "full"), "unparseable_share"] == pytest.approx(0.25)
    assert acc.loc[("m1", "blind"), "n_items"] == 2
    sub = f.subset_questions(["q3", "q1"])
    assert list(sub.question_ids) == ["q1", "q3"]
    np.testing.assert_array_equal(sub.correctness("full"), [[1, 0], [0, 1]])
    nm = f.without_models(["m1"])
    assert nm.models == ("m2",) and nm.correctness("full").tolist() == [[0], [0], [1], [1]]
    assert not nm.has_arm("blind")


def test_paired_counts_scatter_matches_the_dense_matrices():
    """The per-model paired table (n11, n10, n01, n00) from one scatter and one gather equals the count from
    the dense matrices, on a hand-checked case and on a random frame with missing runs and unknown values."""
    f = AuditFrame.from_tables(_questions(), _runs().assign(hit_exact=_runs()["hit"]))
    # m1: q1 right in both arms, q3 wrong with the image and right without; m2 has no blind run
    assert f.paired_counts("full", "blind", "hit").tolist() == [[1, 0, 1, 0], [0, 0, 0, 0]]
    rng = np.random.default_rng(3)
    Q, M = 60, 5
    q = pd.DataFrame({"question_id": [f"q{i}" for i in range(Q)], "question": ["x"] * Q,
                      "options": [["a", "b", "c"]] * Q, "answer": ["A"] * Q})
    rows = [(f"q{i}", f"m{j}", arm, "A", "A", int(rng.integers(0, 2)))
            for arm in ("full", "blind") for j in range(M) for i in range(Q) if rng.random() < 0.8]
    r = pd.DataFrame(rows, columns=["question_id", "model", "arm", "prediction", "answer", "hit"])
    r["hit_exact"] = pd.array(np.where(rng.random(len(r)) < 0.2, pd.NA, r["hit"]), dtype="Int64")
    for field in ("hit", "hit_exact"):
        g = AuditFrame.from_tables(q, r)
        scatter = g.paired_counts("full", "blind", field)
        A, B = g.correctness("full", field), g.correctness("blind", field)
        want = np.zeros((M, 4), np.int64)
        for j in range(M):
            for a, b in zip(A[:, j], B[:, j]):
                if a >= 0 and b >= 0:
                    want[j, (1 - a) * 2 + (1 - b)] += 1
        np.testing.assert_array_equal(scatter, want)
        np.testing.assert_array_equal(g.paired_counts("full", "blind", field), want)  # from the cached cells
        assert g.known_counts(field).sum() == int(r[field].notna().sum())


def test_runs_table_round_trip(tmp_path):
    f = AuditFrame.from_tables(_questions(), _runs().assign(hit_exact=_runs()["hit"]))
    from sim import save_frame

    save_frame(f, tmp_path)
    q = pd.read_parquet(tmp_path / "questions.parquet")
    r = pd.read_parquet(tmp_path / "runs.parquet")
    g = AuditFrame.from_tables(q, r)
    np.testing.assert_array_equal(g.correctness("full"), f.correctness("full"))
    np.testing.assert_array_equal(g.correctness("blind", "hit_exact"), f.correctness("blind", "hit_exact"))
    assert g.runs_table()["answer"].isna().sum() == 1
    assert list(q["options"].iloc[0]) == ["3", "4", "5"]


def _err(q, r=None, **kw) -> InputError:
    with pytest.raises(InputError) as ei:
        AuditFrame.from_tables(q, r, **kw)
    return ei.value


def test_duplicate_question_id_names_row_and_column():
    q = _questions()
    q.loc[2, "question_id"] = "q1"
    e = _err(q, questions_source="bench.tsv")
    assert (e.file, e.row, e.column) == ("bench.tsv", 3, "question_id")
    assert "duplicate question_id 'q1'" in str(e) and "first seen at row 1" in str(e)


def test_gold_outside_options():
    q = _questions()
    q.loc[3, "answer"] = "C"
    e = _err(q, questions_source="b.csv")
    assert (e.row, e.column) == (4, "answer") and "'AB'" in str(e)


def test_unknown_question_ids_reports_count_and_first_five():
    r = _runs()
    extra = pd.DataFrame({"question_id": [f"x{i}" for i in range(7)], "model": "m3", "arm": "full",
                          "prediction": "A", "answer": "A", "hit": 1})
    r = pd.concat([r, extra], ignore_index=True)
    e = _err(_questions(), r, runs_source="runs.csv")
    assert "7 question IDs in the runs are not in the questions table" in str(e) and "['x0', 'x1', 'x2', 'x3', 'x4']" in str(e)
    assert e.row == 11 and e.column == "question_id"


def test_duplicate_run_row_uses_source_file_and_row():
    r = _runs()
    r = pd.concat([r, r.iloc[[5]]], ignore_index=True)
    r["source_file"] = "m2_bench.xlsx"
    r["source_row"] = np.arange(1, len(r) + 1) + 100
    e = _err(_questions(), r)
    assert e.file == "m2_bench.xlsx" and e.row == 111 and "first seen at row 106" in str(e)
    assert "model 'm2'" in str(e) and "arm 'full'" in str(e)


def test_unknown_arm_and_bad_hit_and_empty():
    r = _runs()
    r.loc[4, "arm"] = "text"
    e = _err(_questions(), r)
    assert e.row == 5 and e.column == "arm" and "unknown arm 'text'" in str(e)
    r = _runs()
    r["hit"] = r["hit"].astype(object)
    r.loc[2, "hit"] = "maybe"
    e = _err(_questions(), r)
    assert e.row == 3 and e.column == "hit"
    e = _err(_questions().iloc[:0], None, questions_source="empty.csv")
    assert "empty" in str(e) and e.file == "empty.csv"
    e = _err(_questions().drop(columns=["answer"]))
    assert e.column == "answer"


def test_answer_type_rules_and_normalise():
    q = pd.DataFrame({"question_id": ["a", "b", "c"], "options": [None, None, ["x", "y"]],
                      "answer": ["no", "3.50", "y"], "question": ["", "", ""]})
    f = AuditFrame.from_tables(q)
    assert list(f.questions["answer_type"]) == ["yesno", "numeric", "mc"]
    assert list(f.questions["answer"]) == ["no", "3.50", "B"]  # gold given as option text -> letter
    assert normalise_value("1,000") == "1000" and normalise_value("3.50") == "3.5"
    assert normalise_value(" Hello  World ") == "hello world"


def test_large_frame_memory_is_compact():
    rng = np.random.default_rng(0)
    nq, nm = 20_000, 10
    q = pd.DataFrame({"question_id": np.arange(nq).astype(str), "options": [["a", "b", "c", "d"]] * nq,
                      "answer": rng.choice(list("ABCD"), nq)})
    qid = np.tile(np.arange(nq).astype(str), nm)
    r = pd.DataFrame({"question_id": pd.Categorical(qid),
                      "model": pd.Categorical(np.repeat([f"m{i}" for i in range(nm)], nq)),
                      "arm": "full", "answer": rng.choice(list("ABCD"), nq * nm),
                      "hit": rng.integers(0, 2, nq * nm).astype(bool),
                      "hit_exact": rng.integers(0, 2, nq * nm).astype(bool)})
    f = AuditFrame.from_tables(q, r)
    per_row = sum(f.runs[c].to_numpy().itemsize for c in ("q", "m", "arm", "hit", "hit_exact"))
    assert per_row == 4 + 2 + 1 + 1 + 1
    assert f.correctness("full").shape == (nq, nm)


def test_arrow_dictionary_runs_match_plain_strings():
    """Runs read from Parquet as Arrow dictionary chunks (one dictionary per row group, equal or not)
    give the same frame as plain string columns."""
    import pyarrow as pa

    runs = _runs().assign(hit_exact=_runs()["hit"])
    plain = AuditFrame.from_tables(_questions(), runs)
    half = len(runs) // 2

    def chunked(col, dicts):
        parts = []
        for (lo, hi), d in zip(((0, half), (half, len(runs))), dicts):
            vals = [v if pd.notna(v) else None for v in runs[col].iloc[lo:hi].tolist()]
            dd = pa.array(d, pa.string())
            idx = pa.array([None if v is None else d.index(v) for v in vals], pa.int32())
            parts.append(pa.DictionaryArray.from_arrays(idx, dd))
        return pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array(parts)))

    cols = {}
    for c in ("question_id", "model", "arm", "answer"):
        u = sorted({v for v in runs[c] if pd.notna(v)})
        cols[c] = chunked(c, [u, u[::-1]])  # different dictionaries per chunk
    cols["hit"] = pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array([pa.array(runs["hit"].astype(bool))])))
    cols["hit_exact"] = cols["hit"]
    cols["prediction"] = runs["prediction"]
    arrow = AuditFrame.from_tables(_questions(), pd.DataFrame(cols))
    for arm in ("full", "blind"):
        np.testing.assert_array_equal(arrow.correctness(arm), plain.correctness(arm))
        np.testing.assert_array_equal(arrow.answer_codes(arm), plain.answer_codes(arm))
    np.testing.assert_array_equal(arrow.gold_codes(), plain.gold_codes())
    assert set(arrow.models) == set(plain.models)
    assert arrow.runs["answer"].isna().sum() == plain.runs["answer"].isna().sum()
    pd.testing.assert_frame_equal(arrow.accuracy_table().sort_values(["model", "arm"]).reset_index(drop=True),
                                  plain.accuracy_table().sort_values(["model", "arm"]).reset_index(drop=True))


def test_numeric_gold_codes_use_the_parser_canonical_form():
    """A LaTeX / formatted gold ("\\frac{2}{5}", "1,000") gets the same code as an equal extracted value,
    so consensus and agreement detectors agree with hit_exact."""
    q = pd.DataFrame({"question_id": ["a", "b"], "answer": ["\\frac{2}{5}", "1,000"],
                      "answer_type": ["numeric", "numeric"]})
    r = pd.DataFrame({"question_id": ["a", "b", "a"], "model": ["m", "m", "n"],
                      "prediction": ["The answer is 0.4", "1000", "2/5"]})
    f = AuditFrame.from_tables(q, r)
    codes, gold = f.answer_codes("full"), f.gold_codes()
    assert codes[0].tolist() == [gold[0], gold[0]] and codes[1, 0] == gold[1] and gold[0] != gold[1]
    np.testing.assert_array_equal(f.correctness("full", "hit_exact"), [[1, 1], [1, -1]])


def test_bad_hit_error_names_the_file_it_came_from():
    r = _runs()
    r["hit"] = r["hit"].astype(object)
    r.loc[9, "hit"] = "perhaps"
    r["source_file"] = ["full.csv"] * 8 + ["blind.csv"] * 2
    r["source_row"] = list(range(1, 9)) + [1, 2]
    e = _err(_questions(), r, runs_source="full.csv, blind.csv")
    assert (e.file, e.row, e.column) == ("blind.csv", 2, "hit")


def test_duplicate_run_row_in_sorted_runs_is_found():
    # rows in (arm, model, question) order take the no-bitmap path; a repeated row there is still an error
    q = _questions()
    r = pd.DataFrame({"question_id": ["q1", "q2", "q2", "q3"], "model": "m1", "arm": "full", "hit": [1, 0, 0, 1]})
    e = _err(q, r)
    assert e.row == 3 and e.column == "question_id" and "first seen at row 2" in str(e)
    ok = AuditFrame.from_tables(q, r.drop_duplicates(ignore_index=True))
    assert ok.runs["q"].tolist() == [0, 1, 2]


def test_fixed_width_answer_categories_decode_like_arrow():
    import pyarrow as pa

    from audit_hub.columns import _decode_fixed_width, null_string_array, to_arrow_strings

    codes = np.array([0, -1, 2, 1, -1, 0, 2], dtype=np.int8)
    for cats in (["A", "B", "C"], ["é", "ab", "zz"]):  # (é: two UTF-8 bytes)
        s = pd.Series(pd.Categorical.from_codes(codes, categories=cats))
        got = _decode_fixed_width(codes, pd.Index(cats, dtype=object), chunk=3)
        assert got.num_chunks == 3 and got.type == pa.string()
        assert got.to_pylist() == [None if c < 0 else cats[c] for c in codes]
        assert to_arrow_strings(s).tolist()[:3] == [cats[0], pd.NA, cats[2]]
    assert _decode_fixed_width(codes, pd.Index(["A", "BB", "C"], dtype=object)) is None  # widths differ
    nulls = null_string_array((1 << 20) + 5)
    assert len(nulls) == (1 << 20) + 5 and nulls.null_count == len(nulls) and nulls.type == pa.string()
