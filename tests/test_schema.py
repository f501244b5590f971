"""The shared vocabulary (audit_hub/schema.py): one truth table for correctness cells, used the same
way by a single run file and by two files of one model merged; one options-cell parser; the
canonical answer value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_hub.errors import InputError
from audit_hub.frame.core import AuditFrame
from audit_hub.readers import ingest
from audit_hub.schema import MISSING, hit_code, normalise_value, options_cell

QUESTIONS = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"], "options": [["a", "b"]] * 4,
                          "answer": ["A", "B", "A", "B"]})
SPELLINGS = ["t", "y", "F", "N"]  # short spellings: 1, 1, 0, 0
EXPECTED = [1, 1, 0, 0]


@pytest.mark.parametrize("cell,code", [("1", 1), ("true", 1), (" T ", 1), ("y", 1), ("Yes", 1), ("correct", 1),
                                       ("1.0", 1), (True, 1), ("0", 0), ("f", 0), ("n", 0), ("wrong", 0),
                                       ("incorrect", 0), (False, 0), ("", MISSING), ("NaN", MISSING),
                                       (None, MISSING), (float("nan"), MISSING), ("maybe", None), ("2", None)])
def test_hit_truth_table(cell, code):
    assert hit_code(cell) == code


def test_short_spellings_mean_the_same_in_one_file_and_in_two_merged_files(tmp_path):
    q = tmp_path / "questions.csv"
    pd.DataFrame({"question_id": QUESTIONS["question_id"], "options": ['["a", "b"]'] * 4,
                  "answer": QUESTIONS["answer"]}).to_csv(q, index=False)
    one = tmp_path / "one" / "judged.csv"
    one.parent.mkdir()
    pd.DataFrame({"question_id": QUESTIONS["question_id"], "model": "m", "prediction": ["A", "B", "B", "A"],
                  "hit": SPELLINGS}).to_csv(one, index=False)
    single = ingest.build_frame(str(q), [str(one)])
    assert single.correctness("full", "hit")[:, 0].tolist() == EXPECTED
    # the same model in two files (predictions, then judged cells): rows are merged on the question ID
    preds = tmp_path / "two" / "preds.csv"
    preds.parent.mkdir()
    pd.DataFrame({"question_id": QUESTIONS["question_id"], "model": "m",
                  "prediction": ["A", "B", "B", "A"]}).to_csv(preds, index=False)
    judged = tmp_path / "two" / "judged.csv"
    pd.DataFrame({"question_id": QUESTIONS["question_id"], "model": "m", "prediction": ["A", "B", "B", "A"],
                  "hit": SPELLINGS}).to_csv(judged, index=False)
    merged = ingest.build_frame(str(q), [str(preds), str(judged)])
    assert merged.models == ("m",)
    assert merged.correctness("full", "hit")[:, 0].tolist() == EXPECTED


def test_a_bad_correctness_cell_names_file_row_and_column_on_both_paths(tmp_path):
    runs = pd.DataFrame({"question_id": ["q1", "q2"], "model": "m", "prediction": ["A", "B"], "hit": ["y", "maybe"]})
    with pytest.raises(InputError, match=r"row 2.*'hit'.*'maybe'"):
        AuditFrame.from_tables(QUESTIONS, runs)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    runs.drop(columns="hit").to_csv(a, index=False)
    runs.to_csv(b, index=False)
    with pytest.raises(InputError, match=r"b\.csv, row 2, column 'hit'.*'maybe'"):
        ingest.build_frame(_questions_csv(tmp_path), [str(a), str(b)])


def _questions_csv(tmp_path) -> str:
    p = tmp_path / "q.csv"
    pd.DataFrame({"question_id": QUESTIONS["question_id"], "options": ['["a", "b"]'] * 4,
                  "answer": QUESTIONS["answer"]}).to_csv(p, index=False)
    return str(p)


def test_options_cell_parses_lists_json_and_refuses_other_text():
    assert options_cell(["x", None, 3], "f", 1) == ["x", "", "3"]
    assert options_cell(np.array(["p", "q"]), "f", 1) == ["p", "q"]
    assert options_cell('["a", "b"]', "f", 1) == ["a", "b"]
    assert options_cell(None, "f", 1) == [] and options_cell("  ", "f", 1) == []
    with pytest.raises(InputError, match=r"file f, row 7, column 'options'.*JSON list"):
        options_cell("[a, b", "f", 7)
    with pytest.raises(InputError, match="list of option texts"):
        options_cell("a; b", "f", 7)


def test_normalise_value_is_the_one_canonical_form():
    assert normalise_value("1,000") == "1000" and normalise_value("3.50") == "3.5" and normalise_value("$5") == "5"
    assert normalise_value("2.0") == "2" and normalise_value("1e3") == "1000"
    assert normalise_value("  Hello   World ") == "hello world"


def test_correctness_fields_are_checked_in_one_place():
    """Every reader of a correctness matrix (the frame, the detectors, the metric adapter) takes ``hit`` or
    ``hit_exact`` only, through schema.check_correctness_field; anything else is a ValueError naming both."""
    from audit_hub.detectors import correctness_agreement, visual_dependency
    from audit_hub.metrics.adapter import FIELDS
    from audit_hub.schema import CORRECTNESS_FIELDS, RUN_COLUMNS, check_correctness_field

    assert CORRECTNESS_FIELDS == ("hit", "hit_exact") == FIELDS and RUN_COLUMNS[-2:] == CORRECTNESS_FIELDS
    runs = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4"] * 2, "model": ["m1"] * 4 + ["m2"] * 4,
                         "arm": "full", "prediction": ["A", "B", "B", "B"] * 2})
    frame = AuditFrame.from_tables(QUESTIONS, runs)
    assert frame.correctness("full", "hit_exact").tolist() == [[1, 1], [1, 1], [0, 0], [1, 1]]
    for call in (lambda: check_correctness_field("score"), lambda: frame.correctness("full", "score"),
                 lambda: frame.known_counts("hits"), lambda: correctness_agreement.run(frame, field="HIT"),
                 lambda: visual_dependency.run(frame, field="exact")):
        with pytest.raises(ValueError, match="field must be 'hit' or 'hit_exact', got"):
            call()
