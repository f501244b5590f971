"""The one number formatter (issue 27): hand-computed cases."""

from __future__ import annotations

import math

import pytest

from audit_hub.fmt import ci, fmt_num, fmt_p, pct, plain, pp


@pytest.mark.parametrize("x,out", [(0.4227, "42.3%"), (0.05, "5.0%"), (1.0, "100.0%"), (0.0094, "0.94%"),
                                   (0.00029, "0.029%"), (0.0, "0.0%"), (None, "n/a"), (math.nan, "n/a")])
def test_shares_keep_significant_digits(x, out):
    assert pct(x) == out


def test_differences_are_signed_points():
    assert (pp(0.0109), pp(-0.0034), pp(0.000293)) == ("+1.1 pp", "-0.34 pp", "+0.029 pp")
    # a tiny nonzero difference keeps two significant digits (it printed "-0.0000 pp" for the blind-solvable cell,
    # 0 observed and 0.00133 expected of 3,040, in the README's loop: the bundled example with a blind rerun added)
    assert (pp(-0.00133 / 3040), pct(4.4e-7)) == ("-0.000044 pp", "0.000044%")


@pytest.mark.parametrize("p,B,out", [(0.001, 999, "0.001"), (0.32, 999, "0.320"), (0.1, 9, "0.1"),
                                     (0.0001, 9999, "0.0001"), (0.001, None, "0.001"), (0.0123, None, "0.012"),
                                     (0.32, None, "0.32"), (0.0004, None, "< 0.001")])
def test_p_values_at_their_resolution(p, B, out):
    assert fmt_p(p, B) == out


def test_intervals_at_the_precision_of_their_estimate():
    assert ci([0.20026, 0.2108], "num", 0.2057) == "[0.200, 0.211]"
    assert ci([0.0088, 0.0101], "pct", 0.0094) == "[0.88, 1.01]%"
    assert ci([0.405, 0.44], "pct", 0.4227) == "[40.5, 44.0]%"
    assert ci([0.0064, 0.0156], "pp", 0.0109) == "[+0.6, +1.6] pp"


def test_numbers_and_plain_values():
    assert (fmt_num(0.00016723653445557783), fmt_num(1285), fmt_num(7.6912)) == ("0.000167", "1,285", "7.69")
    assert plain({"choice": "budget", "numeric": "budget"}) == "choice: budget, numeric: budget"
    assert plain(None) == "none" and plain({"k": 5, "repeats": 3}) == "k: 5, repeats: 3"


def test_md_table_folds_a_long_table_into_a_details_block_and_keeps_it_whole():
    from audit_hub.fmt import FOLD_ROWS, md_table

    rows = [[f"m{i}", i] for i in range(FOLD_ROWS + 1)]
    plain = md_table(["Model", "n"], rows[:FOLD_ROWS])
    assert plain.splitlines()[0] == "| Model | n |" and len(plain.splitlines()) == FOLD_ROWS + 2
    folded = md_table(["Model", "n"], rows)
    lines = folded.splitlines()
    assert lines[0] == f"<details><summary>The table: {FOLD_ROWS + 1} rows (select to expand)</summary>"
    assert lines[1] == "" and lines[-2] == "" and lines[-1] == "</details>"   # Markdown inside needs the blank lines
    assert "\n".join(lines[2:-2]) == md_table(["Model", "n"], rows, fold_rows=None)
    assert lines[-3] == f"| m{FOLD_ROWS} | {FOLD_ROWS} |"


def test_a_p_value_beside_its_level_never_prints_as_the_level():
    """The demo card said "Bonferroni-adjusted p = 0.050 over 16 categories, above 0.05" (0.00315 x 16 = 0.0504)."""
    from audit_hub.fmt import fmt_p_vs

    assert fmt_p_vs(0.0504, 0.05) == "0.0504" and fmt_p_vs(0.0496, 0.05) == "0.0496"
    assert fmt_p_vs(0.05004, 0.05) == "0.05004"
    assert fmt_p_vs(0.05, 0.05) == "0.050" and fmt_p_vs(0.12, 0.05) == "0.12" and fmt_p_vs(0.0004, 0.05) == "< 0.001"
    from audit_hub.stats.label_checks import _not_identifiable_reason

    assert "Bonferroni-adjusted p = 0.0504 over 16 categories, above 0.05" in _not_identifiable_reason(
        0.00315, 16, 0.3, 0.25, 0.07)


def test_p_is_never_writes_p_equals_less_than():
    """MMBench's card said "p = < 0.001"."""
    from audit_hub.fmt import p_is

    assert p_is(0.0004) == "p < 0.001" and p_is(0.036) == "p = 0.036" and p_is(0.05, 999) == "p = 0.050"


def test_the_gold_position_line_names_a_monte_carlo_p():
    """MathVista: "chi-square 40.3 on 28 df, p = 0.036" read as the chi-square tail (0.062); the p was Monte Carlo
    because some strata expect fewer than 5 per cell."""
    from audit_hub.detectors.answer_options_distribution import card_line

    s = {"gold_position_counts": {"A": 3}, "chi2": 40.309, "dof": 28, "p_value": 0.036, "p_method": "monte_carlo"}
    assert "p = 0.036 (Monte Carlo p, 9,999 draws under uniform gold positions" in card_line(s)
    assert "Monte Carlo" not in card_line({**s, "p_method": "asymptotic"})


def test_a_figure_beside_the_level_it_is_compared_with_never_prints_as_that_level():
    """Statistics review: "kappa over the baseline 0.20 < 0.2" (0.19637) and "its rate is 2.1%, above the 2.1%
    margin" (2.083% against 2.064%) read as contradictions."""
    from audit_hub.fmt import num_vs, pct_pair

    assert num_vs(0.19637, 0.2) == "0.196" and num_vs(0.15, 0.2) == "0.15" and num_vs(0.2, 0.2) == "0.20"
    assert pct_pair(0.02083, 1.5 * 0.01376) == ("2.08%", "2.06%")
    assert pct_pair(0.5, 0.075) == ("50.0%", "7.5%") and pct_pair(0.05, 0.05) == ("5.0%", "5.0%")
