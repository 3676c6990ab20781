"""Run a rule's own cases: the one check that every rule, built-in or a user's, passes.

``tests/test_rule_cases.py`` turns every case of the built-in rules into a pytest test with
these functions, and ``e2k test pkg.module[:Rule]`` runs a user's rules the same way. A user
can also call them from their own pytest suite::

    import pytest
    from estimator2keras.testing import case_params, check_case

    @pytest.mark.parametrize("rule,case", case_params("team_e2k_rules"))
    def test_case(rule, case):
        check_case(rule, case)
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterator, Sequence

import libcst as cst

from estimator2keras._registry import RuleSet, load_pack
from estimator2keras._rule import CODE_PATTERN, Case, Diagnostic, ExpressionRule, Rule, Unsupported

PREAMBLE = "import tensorflow as tf\nimport tensorflow.compat.v1 as tf1\n"

__all__ = ["CaseFailure", "case_id", "case_params", "check_case", "check_docs", "is_program_case", "run_rules"]


class CaseFailure(AssertionError):
    """A case did not give what it says it gives."""


def case_id(rule: type[Rule], case: Case, index: int) -> str:
    return f"{rule.code}-{case.id or index}"


def _diff(expected: str, actual: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(keepends=True), actual.splitlines(keepends=True), "expected", "actual"
    )
    return "".join(lines)


def is_program_case(rule: type[Rule], case: Case) -> bool:
    """Whole-program cases (any rule may have them); an expression rule's one-liners are not."""
    return not issubclass(rule, ExpressionRule) or "\n" in case.before


def _rules_with(rule: type[Rule], rules: RuleSet | None) -> RuleSet:
    rules = rules or RuleSet.load()
    if rules.rules.get(rule.code) is not rule:
        rules = RuleSet({**rules.rules, rule.code: rule})
    return rules


def check_case(rule: type[Rule], case: Case, rules: RuleSet | None = None) -> None:
    """Raise ``CaseFailure`` unless ``case`` holds for ``rule``.

    A program case (every case of a module, unit or diagnostic rule; an expression rule's
    multi-line ones) is a whole program run through the full engine with ``rules`` (default:
    every installed rule, plus ``rule``): the output must be ``case.after`` exactly (or the
    input, when ``after`` is None), the leftovers reported must be ``case.findings``, a
    changing case must report the rule's own code, and a second rewrite must change nothing.
    An expression rule's one-line case converts one expression.
    """
    rules = _rules_with(rule, rules)
    if is_program_case(rule, case):
        _check_program_case(rule, case, rules)
    else:
        _check_expression_case(rule, case, rules)


def _check_program_case(rule: type[Rule], case: Case, rules: RuleSet) -> None:
    import dataclasses

    from estimator2keras._engine import rewrite_source

    if case.target != rules.target:
        rules = dataclasses.replace(rules, target=case.target)
    result = rewrite_source(case.before.encode(), "case.py", rules)
    expected = case.after if case.after is not None else case.before
    if result.status == "error":
        raise CaseFailure("the case could not be rewritten: " + "; ".join(f.format() for f in result.findings))
    actual = result.new.decode()
    if actual != expected:
        raise CaseFailure("the output is not the expected one:\n" + _diff(expected, actual))
    reported = sorted({f.code for f in result.manual})
    if reported != sorted(set(case.findings)):
        raise CaseFailure(f"left for a human: {reported}, the case expects {sorted(set(case.findings))}")
    if case.changes and not any(f.code == rule.code for f in result.findings):
        raise CaseFailure(f"{rule.code} did not report its own change")
    again = rewrite_source(result.new, "case.py", rules)
    if again.new != result.new:
        raise CaseFailure("a second rewrite changed the output:\n" + _diff(actual, again.new.decode()))


def convert_expression(rule: type[ExpressionRule], source: str, rules: RuleSet):
    """What ``rule`` makes of the expression ``source`` (with ``tf`` and ``tf1`` imported)."""
    from estimator2keras import _modelfn
    from estimator2keras._context import RewriteContext

    ctx = RewriteContext("case.py", rules)
    module = ctx.begin_pass(cst.parse_module(f"{PREAMBLE}_ = {source}\n"), rule.code)
    call = module.body[-1].body[0].value
    result = rule().convert(call, ctx, "tf")
    # What the model_fn converter gets back from each role, and the Keras expression in it.
    for kind, attribute in (("LossConversion", "keras_loss"), ("LayerCall", "constructor"), ("ScheduleConversion", "keras_schedule")):
        cls = getattr(_modelfn, kind, None)
        if cls is not None and isinstance(result, cls):
            return getattr(result, attribute)
    return result


def _check_expression_case(rule: type[ExpressionRule], case: Case, rules: RuleSet) -> None:
    from estimator2keras._emit import code

    if case.after is None:
        try:
            convert_expression(rule, case.before, rules)
        except Unsupported:
            return
        raise CaseFailure(f"{case.before!r} should be refused (Unsupported), but it converted")
    actual = code(convert_expression(rule, case.before, rules))
    if actual != case.after:
        raise CaseFailure(f"{case.before!r} became {actual!r}, the case expects {case.after!r}")


def check_docs(rule: type[Rule]) -> list[str]:
    """What is missing from a rule's declaration and documentation (empty: nothing)."""
    problems = []
    if not CODE_PATTERN.match(getattr(rule, "code", "")):
        problems.append(f"code {getattr(rule, 'code', None)!r} is not E2K + three digits")
    summary = getattr(rule, "summary", "")
    if not summary or "\n" in summary:
        problems.append("`summary` must be one line")
    docs = rule.docs()
    if not docs.title:
        problems.append("the first paragraph of the docstring is the rule's title")
    missing = docs.missing_sections()
    if missing:
        problems.append(f"missing docs sections: {', '.join(missing)}")
    if not rule.cases and not issubclass(rule, Diagnostic):
        problems.append("no cases: every rule carries at least one")
    elif not issubclass(rule, Diagnostic) and not any(case.changes for case in rule.cases):
        problems.append("no case shows a conversion")
    return problems


def case_params(spec_or_rules) -> list:
    """``pytest.param(rule, case, id=...)`` for every case of the rules in ``spec_or_rules``
    (a ``pkg.module[:Rule]`` string, or a list of rule classes)."""
    import pytest

    rules = load_pack(spec_or_rules) if isinstance(spec_or_rules, str) else list(spec_or_rules)
    return [
        pytest.param(rule, case, id=case_id(rule, case, index))
        for rule in rules
        for index, case in enumerate(rule.cases)
    ]


@dataclass
class Outcome:
    rule: type[Rule]
    name: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_rules(rules_under_test: Sequence[type[Rule]], rules: RuleSet | None = None) -> Iterator[Outcome]:
    """Every check of every rule: its documentation, then each case."""
    for rule in rules_under_test:
        problems = check_docs(rule)
        yield Outcome(rule, "docs", "; ".join(problems) if problems else None)
        for index, case in enumerate(rule.cases):
            name = f"case {case.id or index}"
            try:
                check_case(rule, case, rules)
            except CaseFailure as exc:
                yield Outcome(rule, name, str(exc))
            except Exception as exc:  # a user's rule may fail in any way: say how, go on
                yield Outcome(rule, name, f"raised {type(exc).__name__}: {exc}")
            else:
                yield Outcome(rule, name)


def write_converted(result, path) -> "Path":
    """Write a conversion (``FileResult``) to ``path`` as `e2k rewrite` writes it: the file, and
    the helpers it imports in the module beside it. Returns ``path``."""
    from pathlib import Path

    path = Path(path)
    path.write_bytes(result.new)
    write_helpers(result, path.parent)
    return path


def write_helpers(result, directory) -> None:
    """Write the helpers module a conversion (``FileResult``) imports into ``directory``
    (nothing when it imports none)."""
    from pathlib import Path

    from estimator2keras import _helpers

    if result.helpers:
        (Path(directory) / f"{_helpers.MODULE}.py").write_text(
            _helpers.render(result.helpers, result.indent, limit=result.limit))
