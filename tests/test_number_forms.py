"""The three number readers answer different questions; these cases pin where they differ, so that a
later "unification" that would change results fails here (see the "Number forms" note in schema.py)."""

import math
from fractions import Fraction

import pytest

from audit_hub.answers.rules import num_full
from audit_hub.schema import canonical_number, normalise_value, parse_number
from audit_hub.tst.features import first_number


def test_exact_form_keeps_thirds_apart_from_their_float():
    # option identity: 1/3 and its float text are different options
    assert parse_number("1/3") == Fraction(1, 3)
    assert canonical_number(parse_number("1/3")) == "1/3"
    assert canonical_number(parse_number("0.3333333333333333")) == "0.3333333333333333"
    # answer parser: "1/3" is the float, whose canonical text is the float repr
    assert num_full("1/3") == 1 / 3
    assert normalise_value(repr(num_full("1/3"))) == "0.3333333333333333"
    assert parse_number("2/4") == parse_number("0.5") == Fraction(1, 2)


@pytest.mark.parametrize("text, exact, parser, first", [
    ("50%", None, 50.0, 50.0),               # percent: a number for the parser only
    ("\\frac{2}{5}", None, 0.4, 2.0),        # LaTeX fraction: parser evaluates, first number is 2
    ("1e3", None, 1000.0, 1000.0),           # exponent: not a plain number for the exact form
    ("1,2", None, None, 12.0),               # bad thousands grouping: only the TsT feature reads it
    ("x=2", None, None, 2.0),                # number inside text: only the TsT feature
    ("1/0", None, None, 1.0),                # zero denominator: no value, first number 1
    ("1,000", Fraction(1000), 1000.0, 1000.0),
    ("-3/4", Fraction(-3, 4), -0.75, -3.0),
])
def test_three_readers_differ_where_pinned(text, exact, parser, first):
    assert parse_number(text) == exact
    assert num_full(text) == parser
    assert first_number(text) == first


def test_units_only_when_allowed_and_nan_for_no_number():
    assert num_full("3 cm") is None and num_full("3 cm", allow_unit=True) == 3.0
    assert parse_number("3 cm") is None
    assert math.isnan(first_number("no digits"))
