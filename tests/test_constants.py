"""Values computed from constants (``_constants``): what Python computes, or not a constant."""
from __future__ import annotations

import libcst as cst
import pytest

from estimator2keras._constants import NotConstant, as_node, constant_value

MODULE = {
    "CSV_COLUMNS": '"age,hours,color,label".split(",")',
    "LABEL": '"label"',
    "VOCABS": '{"color": ["red", "blue"], "size": ["S", "M"]}',
    "N": "3",
    "ARRAYS": '{"pickuplon": pickup_lon, "pickuplat": np.zeros(3)}',  # keys constant, values arrays
}


def lookup(name: cst.Name):
    text = MODULE.get(name.value)
    return cst.parse_expression(text) if text is not None else None


@pytest.mark.parametrize("expr, value", [
    ('[c for c in CSV_COLUMNS if c != LABEL]', ["age", "hours", "color"]),
    ('["f%d" % i for i in range(N)]', ["f0", "f1", "f2"]),
    ("VOCABS.items()", [("color", ["red", "blue"]), ("size", ["S", "M"])]),
    ("sorted(VOCABS.keys()) + CSV_COLUMNS[:1]", ["color", "size", "age"]),
    ('[k.upper() for k, v in VOCABS.items() if len(v) > 1]', ["COLOR", "SIZE"]),
    ('"-".join(CSV_COLUMNS[1:3])', "hours-color"),
    ("sorted(ARRAYS.keys())", ["pickuplat", "pickuplon"]),  # a tester's taxi notebook
])
def test_what_python_computes_from_constants(expr, value):
    assert constant_value(cst.parse_expression(expr), lookup) == value


@pytest.mark.parametrize("expr", [
    "load_columns()",  # a function of the program
    "UNKNOWN + [1]",  # a name bound otherwise (or more than once: the lookup gives None)
    "open('cols.txt').read().split()",
    'f"{LABEL}_x"',
    "list(range(2000))",  # too large to spell out
    "ARRAYS.values()",  # its values are arrays
])
def test_what_is_not_a_constant(expr):
    with pytest.raises(NotConstant):
        constant_value(cst.parse_expression(expr), lookup)


def test_literals_spell_the_values():
    assert cst.Module([]).code_for_node(as_node(("color", ["red", 1, 2.5, None]))) == "('color', ['red', 1, 2.5, None])"
    with pytest.raises(NotConstant):
        as_node({"a": 1})
