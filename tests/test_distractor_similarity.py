"""distractor_similarity and audit_hub.detectors.text_norm: hand cases, bare letters, planted simulation."""

from __future__ import annotations

import pandas as pd
import pytest
from sim import simulate_frame

from audit_hub.detectors import distractor_similarity as ds
from audit_hub.detectors.text_norm import (
    canonical_number,
    is_bare_letter_option,
    normalise_many,
    normalise_text,
    parse_number,
    same_value,
    skeletons,
    strip_letter_prefix,
)
from audit_hub.errors import DetectorSkipped
from audit_hub.frame.core import AuditFrame


def test_normalisation_rules():
    assert normalise_text("A. Foo  Bar.") == "foo bar"
    assert normalise_text("(b) x") == "x"
    assert normalise_text("C) Straße") == "strasse"
    assert normalise_text("$\\frac{1}{2}$") == "0.5"
    assert normalise_text("$4 \\mathrm{~cm}$") == normalise_text("4.0 cm") == "4 cm"
    assert normalise_text("$30^{\\circ}$") == "30°"
    for a, b in [("0.5", ".50"), ("0.5", "1/2"), ("2/4", "1/2"), ("1,000", "1000"), ("007", "7")]:
        assert same_value(a, b), (a, b)
    assert not same_value("1/3", "0.33")
    assert parse_number("-3/4") == pytest.approx(-0.75) and parse_number("1/0") is None
    assert parse_number("abc") is None
    assert canonical_number(parse_number("1/3")) == "1/3" and canonical_number(parse_number("0.125")) == "0.125"
    n = normalise_many(["0.5", "x = 0.25 m", "A", "(C)", "c)", "A. cat", None])
    assert n.is_number.tolist() == [True, False, False, False, False, False, False]
    assert n.bare_letter.tolist() == [-1, -1, 0, 2, 2, -1, -1]
    assert n.n_tokens.tolist() == [1, 4, 1, 1, 1, 1, 0]
    assert strip_letter_prefix("(B) Dog") == "Dog" and strip_letter_prefix("B") == "B"
    assert is_bare_letter_option("(B)", 1) and not is_bare_letter_option("(B)", 0)
    assert skeletons(["ii only", "iii only", "4 cm", "option 12-3"]).tolist() == [
        "# only", "# only", "# cm", "option #-#"]


def _frame(options, answers):
    qs = pd.DataFrame({"question_id": [f"q{i}" for i in range(len(options))], "options": options,
                       "answer": answers})
    return AuditFrame.from_tables(qs, None)


def test_hand_cases_tiers_and_severity():
    f = _frame([
        ["A", "B", "C", "D", "E"],                                   # 0 bare letters (MATH-Vision)
        ["0.5", "1/2", "3", "4"],                                    # 1 exact numeric duplicate with gold A
        ["the red car is fast", "the red car is fasts", "blue", "green"],  # 2 near dup with gold
        ["A. cat", "(B) dog", "C) bird", "D. Cat"],                  # 3 exact A=D after prefix strip, gold A
        ["I and II", "I, II and III", "II only", "III only"],        # 4 roman-numeral / subset: not dup
        ["4 cm", "$5 \\mathrm{~cm}$", "6 cm", "7 cm"],              # 5 numbers differ: not dup
        ["it is possible to do so", "it is impossible to do so", "maybe", "never"],  # 6 contrastive
        ["red", "blue", "green apple pie", "green apple pies"],      # 7 near dup of distractors (C, D)
        ["dog", "cat", "cat", "fish"],                               # 8 exact distractor dup
        ["(A)", "(B)", "(C)", "(D)"],                                # 9 bare letters in parentheses
    ], ["A", "A", "A", "A", "A", "B", "A", "A", "A", "C"])
    r = ds.run(f)
    pq = r.per_question
    sev = pq["distractor_similarity_severity"].tolist()
    assert sev == ["info", "critical", "medium", "critical", "info", "info", "info", "low", "high", "info"]
    assert pq["distractor_similarity_pair"].tolist()[:4] == ["", "A=B", "A~B", "A=D"]
    assert pq["distractor_similarity_tier"][6] == "contrastive"
    assert pq["distractor_similarity_pair"][8] == "B=C"
    assert pq["is_distractor_similarity_issue"].tolist() == [s != "info" for s in sev]
    assert pq["distractor_similarity_score"][1] == 0.0
    assert pq["distractor_similarity_score"][2] == pytest.approx(1 - 0.95)
    assert pq["distractor_similarity_bare_letter_options"].tolist() == [True] + [False] * 8 + [True]
    s = r.summary
    assert s["n_exact_duplicates"] == 3 and s["n_exact_duplicates_with_gold"] == 2
    assert s["n_near_duplicates"] == 2 and s["n_near_duplicates_with_gold"] == 1
    # contrastive pairs: item 4 "II only"/"III only" (changed numeral), item 5 the 6 pairs of 4/5/6/7 cm
    # (changed numbers), item 6 the negating prefix
    assert s["n_bare_letter_option_items"] == 2 and s["n_contrastive_pairs"] == 1 + 6 + 1
    assert s["n_items_compared"] == 8 and s["p_value"] is None and s["n_flagged"] == 5
    assert any("bare-letter" in n for n in s["notes"])
    t = r.table
    row = t[(t.category == "(all)") & (t.statistic == "exact_duplicate_share")].iloc[0]
    assert row.estimate == pytest.approx(3 / 8) and row.n_items == 8


def test_no_options_skips_and_numeric_only():
    with pytest.raises(DetectorSkipped, match="no option texts"):
        ds.run(_frame([[], []], ["7", "yes"]))


def test_planted_simulation_found_without_false_positives():
    f = simulate_frame(3000, 2, planted={"duplicate_distractors": 30, "near_duplicate_distractors": 40}, seed=11)
    r = ds.run(f)
    issues = set(r.issues()["question_id"])
    planted = set(f.meta["planted"]["duplicate_distractors"]) | set(f.meta["planted"]["near_duplicate_distractors"])
    assert issues == planted
    assert r.summary["n_exact_duplicates"] == 30 and r.summary["n_near_duplicates"] == 40
    assert r.summary["n_exact_duplicates_with_gold"] == 0
    assert set(r.per_question.loc[r.per_question.is_distractor_similarity_issue, "distractor_similarity_severity"]) \
        == {"high", "low"}


def test_works_without_runs_and_with_one_model():
    f0 = simulate_frame(200, 1, planted={"duplicate_distractors": 5}, seed=2)
    qs = f0.questions_table()
    r0 = ds.run(AuditFrame.from_tables(qs, None))
    r1 = ds.run(f0)
    assert r0.summary["n_exact_duplicates"] == r1.summary["n_exact_duplicates"] == 5
    assert len(r0.per_question) == 200


def test_swapped_words_and_changed_numbers_are_contrastive_not_duplicates():
    """Issue 27 (MATH-Vision Q302): "40 black and 41 white ones" vs "40 white and 41 black ones" have the
    same token set (token-set ratio 100) but are opposite answers; an order-aware check makes them
    contrastive. A real near duplicate in the same benchmark is still found."""
    f = _frame([
        ["none", "40 of each colour", "40 black and 41 white ones", "41 of each colour",
         "40 white and 41 black ones"],                                  # 0 Q302: permutation
        ["the cat sat on the mat", "the mat sat on the cat", "a dog", "a bird"],  # 1 swapped words
        ["the red car is fast", "the red car is fasts", "blue", "green"],  # 2 real near duplicate
    ], ["E", "A", "A"])
    pq = ds.run(f).per_question
    assert pq["distractor_similarity_severity"].tolist() == ["info", "info", "medium"]
    assert pq["distractor_similarity_tier"].tolist()[:2] == ["contrastive", "contrastive"]
    assert pq["distractor_similarity_n_near_pairs"].tolist() == [0, 0, 1]
    # "none" before real options is an answer, not a placeholder distractor
    assert pq["distractor_similarity_n_placeholder_distractors"].tolist() == [0, 0, 0]


def test_changed_labels_are_contrastive_not_near_duplicates():
    """MathVista testmini 232 and 769 (read from the released result files): "Solution A" / "Solution B" name
    two different solutions (Levenshtein similarity 0.9, so they were near duplicates at medium). Texts that
    differ only in single letters or roman numerals are changed labels, contrastive; a real near duplicate
    and an exact duplicate beside them are still found."""
    f = _frame([
        ["neither; their concentrations are the same", "Solution B", "Solution A"],   # 0 MathVista 232
        ["the larger set is Set I", "the larger set is Set II", "both", "neither"],  # 1 roman numerals
        ["x = 5 at the top point", "y = 5 at the top point", "z", "w"],               # 2 variables
        ["Solution A is stronger", "Solution A is strongerr", "Solution B", "neither"],  # 3 near duplicate
        ["15", "100", "50", "50"],                                                    # 4 MathVista 740
    ], ["B", "A", "A", "C", "A"])
    pq = ds.run(f).per_question
    assert pq["distractor_similarity_tier"].tolist()[:3] == ["contrastive"] * 3
    assert pq["distractor_similarity_severity"].tolist() == ["info", "info", "info", "low", "high"]
    assert pq["distractor_similarity_n_near_pairs"].tolist() == [0, 0, 0, 1, 0]
    assert pq["distractor_similarity_n_contrastive_pairs"].tolist()[:3] == [1, 1, 1]


def test_a_token_set_of_100_from_repeated_or_exponent_tokens_is_not_a_duplicate():
    """MATH-Vision 1973 ("π cm²" vs "2π cm²": the words {pi, cm, 2} agree through the exponent) and 1992
    ("6 × 6 × 6 × 6" vs "6 × 6 × 6": one token set, different counts) were near duplicates with similarity 1:
    a token-set ratio of 100 says nothing when only the tokens' counts or the exponent's digit make the sets
    agree. A real near duplicate beside them is still found."""
    f = _frame([
        ["$\\pi \\mathrm{cm}^{2}$", "$2 \\pi \\mathrm{cm}^{2}$", "$3 \\pi \\mathrm{cm}^{2}$", "$4 \\pi \\mathrm{cm}^{2}$",
         "$5 \\pi \\mathrm{cm}^{2}$"],                                                    # 0 MATH-V 1973
        ["$6 \\times 6 \\times 6 \\times 6$", "$6 \\times 6 \\times 6$", "$2 \\times 2$",
         "$6 \\times 5 \\times 4 \\times 3 \\times 2 \\times 1$"],                          # 1 MATH-V 1992
        ["the red car is fast", "the red car is fasts", "blue", "green"],               # 2 real near duplicate
    ], ["B", "A", "A"])
    pq = ds.run(f).per_question
    assert pq["distractor_similarity_n_near_pairs"].tolist() == [0, 0, 1]
    assert pq["distractor_similarity_severity"].tolist()[:2] == ["info", "info"]
