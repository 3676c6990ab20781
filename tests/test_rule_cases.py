"""Every case of every rule, as its own test: the rules' examples are the rules' tests."""
from __future__ import annotations

import libcst as cst
import pytest

from estimator2keras._context import RewriteContext
from estimator2keras._emit import code
from estimator2keras._engine import rewrite_source
from estimator2keras._modelfn import LayerCall, LossConversion, ScheduleConversion
from estimator2keras._registry import RuleSet
from estimator2keras._rule import CODE_PATTERN, Diagnostic, ExpressionRule, Unsupported

ALL_RULES = list(RuleSet.load().rules.values())
PREAMBLE = "import tensorflow as tf\nimport tensorflow.compat.v1 as tf1\n"


def is_program(rule, case) -> bool:
    """Whole-program cases (any rule may have them); expression rules' one-liners are not."""
    return not issubclass(rule, ExpressionRule) or "\n" in case.before


def _cases(program: bool):
    for rule in ALL_RULES:
        for index, case in enumerate(rule.cases):
            if is_program(rule, case) == program:
                yield pytest.param(rule, case, id=f"{rule.code}-{case.id or index}")


@pytest.mark.parametrize("rule,case", list(_cases(program=True)))
def test_program_case(rule, case, rules):
    result = rewrite_source(case.before.encode(), "case.py", rules)
    expected = case.after if case.after is not None else case.before
    assert result.status != "error", result.findings
    assert result.new.decode() == expected
    assert sorted({f.code for f in result.manual}) == sorted(set(case.findings))
    if case.changes:
        assert any(f.code == rule.code for f in result.findings), f"{rule.code} did not report its own change"
    again = rewrite_source(result.new, "case.py", rules)
    assert again.new == result.new, "a second rewrite changed the output"


def _convert_expression(rule, source: str, rules: RuleSet):
    ctx = RewriteContext("case.py", rules)
    module = ctx.begin_pass(cst.parse_module(f"{PREAMBLE}_ = {source}\n"), rule.code)
    call = module.body[-1].body[0].value
    result = rule().convert(call, ctx, "tf")
    if isinstance(result, LossConversion):
        return result.keras_loss
    if isinstance(result, LayerCall):
        return result.constructor
    if isinstance(result, ScheduleConversion):
        return result.keras_schedule
    return result


@pytest.mark.parametrize("rule,case", list(_cases(program=False)))
def test_expression_case(rule, case, rules):
    if case.after is None:
        with pytest.raises(Unsupported):
            _convert_expression(rule, case.before, rules)
        return
    assert code(_convert_expression(rule, case.before, rules)) == case.after


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    assert CODE_PATTERN.match(rule.code)
    assert rule.summary and "\n" not in rule.summary
    docs = rule.docs()
    assert docs.title, "the first paragraph of the docstring is the rule's title"
    assert not docs.missing_sections(), f"missing docs sections: {docs.missing_sections()}"


@pytest.mark.parametrize("rule", [r for r in ALL_RULES if r.code not in ("E2K900", "E2K903")], ids=lambda r: r.code)
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
