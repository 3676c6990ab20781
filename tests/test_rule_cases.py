"""Every case of every rule, as its own test: the rules' examples are the rules' tests."""
from __future__ import annotations

import pytest

from estimator2keras._registry import RuleSet
from estimator2keras._rule import Diagnostic, ExpressionRule
from estimator2keras.testing import case_params, check_case, check_docs, is_program_case

ALL_RULES = list(RuleSet.load().rules.values())


def _cases(program: bool):
    return [param for param in case_params(ALL_RULES) if is_program_case(*param.values) == program]


@pytest.mark.parametrize("rule,case", _cases(program=True))
def test_program_case(rule, case, rules):
    check_case(rule, case, rules)


@pytest.mark.parametrize("rule,case", _cases(program=False))
def test_expression_case(rule, case, rules):
    check_case(rule, case, rules)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    assert check_docs(rule) == []


@pytest.mark.parametrize("rule", [r for r in ALL_RULES if r.code not in ("E2K900", "E2K903", "E2K904")], ids=lambda r: r.code)
def test_rule_has_cases(rule):
    assert rule.cases, "every rule carries at least one case"
    if not issubclass(rule, Diagnostic):
        assert any(case.changes for case in rule.cases), "a converting rule shows a conversion"


def test_expression_rules_do_not_overlap():
    seen = {}
    for rule in ALL_RULES:
        if issubclass(rule, ExpressionRule):
            for target in rule.targets:
                assert target not in seen, f"{target} is claimed by {seen.get(target)} and {rule.code}"
                seen[target] = rule.code
