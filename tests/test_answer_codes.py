"""One answer code space: the parser's codes are the frame's codes.

The frame keeps the codes the parser returns (audit_hub.answers.fill) and never re-reads the answer
texts; frames derived from a parsed frame renumber the parent's codes. Both must equal encoding the
answer texts afresh (audit_hub.answers.codes.encode_text, the path for answers that arrive as text),
so the code space does not depend on which path built it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_hub.answers.codes import encode_text, renumber
from audit_hub.frame.core import AuditFrame
from audit_hub.readers.example import example_frame


def _same_as_text(frame: AuditFrame) -> None:
    space = encode_text(frame.questions, frame.runs)
    np.testing.assert_array_equal(frame.answer_code_vector(), space.codes)
    np.testing.assert_array_equal(frame.gold_codes(), space.gold)


def _mixed_frame() -> AuditFrame:
    q = pd.DataFrame({
        "question_id": ["q1", "q2", "q3", "q4", "q5", "q6"],
        "question": ["?"] * 6,
        "options": [["3", "4", "5"], [], [], [], ["red", "blue"], []],
        "answer": ["B", "yes", "0.5", "Paris", "A", "\\frac{2}{5}"],
        "answer_type": ["mc", "yesno", "numeric", "free", "mc", "numeric"],
    })
    preds = {"q1": ["(B)", "A", "5", "E"], "q2": ["Yes.", "no", "maybe", None],
             "q3": ["It is .5", "1/2", "0.50", "2"], "q4": ["paris", "A", "London", "PARIS "],
             "q5": ["blue", "The answer is (A)", "red", "b"], "q6": ["0.4", "2/5", "a", "0.40"]}
    rows = [(qid, f"m{j}", p) for qid, ps in preds.items() for j, p in enumerate(ps)]
    runs = pd.DataFrame(rows, columns=["question_id", "model", "prediction"])
    return AuditFrame.from_tables(q, runs)


def test_the_parser_codes_are_kept_and_hand_checked():
    f = _mixed_frame()
    assert f.cache["answer_space"].values is not None  # kept from the parser, not computed from texts
    A = f.answer_codes("full")
    # kmax = 3; mc: option index (q1 "E" is beyond its 3 options: unparseable); yes 0 / no 1
    assert A[0].tolist() == [1, 0, 2, -1]
    assert A[1].tolist() == [0, 1, -1, -1]
    assert A[4].tolist() == [1, 0, 0, 1]
    # numeric / free: equal values share a code above the option range, golds in the same space
    assert (A[2] >= 3).all() and A[2, 0] == A[2, 2] == f.gold_codes()[2] and A[2, 3] != A[2, 0]
    assert A[3, 0] == A[3, 3] == f.gold_codes()[3] and A[3, 1] != A[3, 0]
    assert A[5, 0] == A[5, 1] == A[5, 3] == f.gold_codes()[5]
    assert f.gold_codes()[[0, 1, 4]].tolist() == [1, 0, 0]
    _same_as_text(f)


@pytest.mark.parametrize("derive", ["questions", "models"])
def test_derived_frames_renumber_as_encoding_afresh(derive):
    f = _mixed_frame()
    f.answer_code_vector()
    if derive == "questions":
        sub = f.subset_questions(np.array([False, True, True, False, True, True]))
    else:
        sub = f.without_models(["m0", "m2"])
    assert "answer_parent" in sub.cache
    _same_as_text(sub)
    assert sub.cache["answer_space"].values is not None
    _same_as_text(sub.without_models(["m1"]))  # a frame derived from a derived frame


def test_the_bundled_example_and_its_subsets_match_encoding_the_texts():
    f = example_frame()
    _same_as_text(f)
    rng = np.random.default_rng(0)
    _same_as_text(f.subset_questions(rng.random(f.n_questions) < 0.5))
    _same_as_text(f.without_models(list(f.models[:3])))


def test_renumber_refuses_codes_that_do_not_determine_their_texts():
    f = AuditFrame.from_tables(_mixed_frame().questions_table(),
                               _mixed_frame().runs_table())  # answers given as text (with hit_exact)
    f.answer_code_vector()
    space = f.cache["answer_space"]
    assert space.values is None
    assert f.without_models(["m0"]).cache == {}
    with pytest.raises(ValueError, match="not recoverable"):
        renumber(space, f.questions, f.runs["q"].to_numpy(), space.codes)


def test_all_mc_letters_take_the_ids_as_codes():
    q = pd.DataFrame({"question_id": ["a", "b"], "question": ["?", "?"], "options": [["x", "y", "z"], ["u", "v"]],
                      "answer": ["C", "A"], "answer_type": ["mc", "mc"]})
    # model o answers b only: its empty row on a is -1 (a run with no text at all would be left out: empty_runs)
    runs = pd.DataFrame({"question_id": ["a", "b", "a", "b", "a", "b"], "model": ["m", "m", "n", "n", "o", "o"],
                         "prediction": ["(B)", "a", "z", "C", None, "B"]})
    f = AuditFrame.from_tables(q, runs)
    assert f.answer_code_vector().tolist() == [1, 0, 2, -1, -1, 1]  # "C" is beyond item b's two options
    _same_as_text(f)


@pytest.mark.parametrize("kinds", [("mc",), ("mc", "yesno"), ("yesno",)])
def test_derived_frames_of_closed_items_only_keep_their_answers(kinds):
    """A benchmark with no numeric or free item has no open values, so the parent's ``values`` is empty: the
    letters and yes / no must still be read back (they were read as missing, so every curation fold of BLINK,
    all multiple choice, audited frames without a single answer)."""
    rng = np.random.default_rng(4)
    n = 30
    typ = [kinds[i % len(kinds)] for i in range(n)]
    q = pd.DataFrame({"question_id": [f"q{i}" for i in range(n)], "question": ["?"] * n,
                      "options": [["x", "y", "z", "w"] if t == "mc" else [] for t in typ],
                      "answer": ["ABCD"[i % 4] if t == "mc" else ("yes" if i % 3 else "no") for i, t in enumerate(typ)],
                      "answer_type": typ})
    rows = [(f"q{i}", f"m{j}", ("ABCD"[rng.integers(4)] if t == "mc" else ("yes", "no")[rng.integers(2)]))
            for i, t in enumerate(typ) for j in range(5)]
    f = AuditFrame.from_tables(q, pd.DataFrame(rows, columns=["question_id", "model", "prediction"]))
    A = f.answer_codes("full")
    assert f.cache["answer_space"].values == () and (A >= 0).all()
    sub = f.without_models(["m1", "m3"])
    assert "answer_parent" in sub.cache
    np.testing.assert_array_equal(sub.answer_codes("full"), A[:, [0, 2, 4]])
    _same_as_text(sub)
    keep = np.arange(n) % 2 == 0
    np.testing.assert_array_equal(f.subset_questions(keep).answer_codes("full"), A[keep])
