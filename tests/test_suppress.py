"""`# e2k: ignore` and `# e2k: ignore[CODES]`: what is on a suppressed line is neither
reported, nor marked, nor converted."""
from __future__ import annotations

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras import ModuleRule
from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet
from estimator2keras._suppress import Suppressions

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_bytes()
ESTIMATOR_LINE = b"estimator = tf1.estimator.Estimator(model_fn=_model_fn, config=config)"
BATCH_LINE = b"  return tf1.data.Dataset.from_tensor_slices((features, labels)).batch(1)"


def with_comment(line: bytes, comment: bytes, above: bool = False) -> bytes:
    assert line in CANONICAL
    if above:
        indent = line[: len(line) - len(line.lstrip())]
        return CANONICAL.replace(line, indent + comment + b"\n" + line)
    return CANONICAL.replace(line, line + b"  " + comment)


@pytest.mark.parametrize(
    "source",
    [
        with_comment(ESTIMATOR_LINE, b"# e2k: ignore"),
        with_comment(ESTIMATOR_LINE, b"# e2k: ignore[E2K001]"),
        with_comment(ESTIMATOR_LINE, b"# e2k:ignore -- migrated by the platform team next quarter"),
        with_comment(ESTIMATOR_LINE, b"# keep TF1 for now\n# e2k: ignore", above=True),
    ],
    ids=["trailing", "code", "reason", "above"],
)
def test_suppressed_estimator_leaves_the_whole_unit_alone(source, rules):
    result = rewrite_source(source, "a.py", rules)
    assert result.status == "unchanged" and result.new == source and result.findings == []


def test_other_codes_on_the_estimator_line_do_not_stop_the_conversion(rules):
    result = rewrite_source(with_comment(ESTIMATOR_LINE, b"# e2k: ignore[E2K4]"), "a.py", rules)
    assert result.status == "converted"


def test_blank_line_ends_a_suppression_above(rules):
    source = CANONICAL.replace(ESTIMATOR_LINE, b"# e2k: ignore\n\n" + ESTIMATOR_LINE)
    assert rewrite_source(source, "a.py", rules).status == "converted"


def test_suppression_inside_a_string_is_not_a_suppression(rules):
    source = CANONICAL.replace(ESTIMATOR_LINE, ESTIMATOR_LINE + b'; note = "# e2k: ignore"')
    assert Suppressions.from_source(source).lines == {}


def test_suppressed_step_keeps_the_unit_unconverted_and_says_where(rules):
    source = with_comment(BATCH_LINE, b"# e2k: ignore[E2K602]")
    result = rewrite_source(source, "a.py", rules)
    assert result.status == "partial"
    (finding,) = result.manual
    assert finding.code == "E2K902" and "line 17 is marked `# e2k: ignore`" in finding.message
    assert b"tf.keras" not in result.new and b"num_replicas_in_sync" not in result.new


def test_suppressed_leftover_is_neither_reported_nor_marked(rules):
    source = CANONICAL.replace(b"eval_distribute=strategy,", b"eval_distribute=strategy,\n    protocol='grpc',")
    plain = rewrite_source(source, "a.py", rules)
    assert [f.code for f in plain.manual] == ["E2K400"] and b"# e2k: E2K400" in plain.new
    suppressed = source.replace(b"protocol='grpc',", b"protocol='grpc',  # e2k: ignore[E2K400]")
    result = rewrite_source(suppressed, "a.py", rules)
    assert result.status == "converted" and result.manual == []
    assert b"# e2k: E2K400" not in result.new and b"tf.keras" in result.new


def test_suppressed_mark_leaves_the_file_byte_identical(rules):
    source = CANONICAL.replace(
        b"tf1.layers.Dense(1)(features)",
        b"tf1.while_loop(lambda i: i < 3, lambda i: i + 1, [features])  # e2k: ignore[E2K901]",
    )
    result = rewrite_source(source, "a.py", rules)
    assert result.status == "unchanged" and result.new == source and result.findings == []


class RenameHelper(ModuleRule):
    """Renames `old_helper(...)` to `new_helper(...)` (a test rule).

    ## What it does
    Renames.

    ## Why
    To test suppression of module rules.

    ## Fix safety
    Safe.
    """

    code = "E2K899"
    summary = "old_helper -> new_helper"
    keywords = ("old_helper",)

    def transform(self, module, ctx):
        for call in _calls(module):
            if isinstance(call.func, cst.Name) and call.func.value == "old_helper":
                ctx.edits.replace(call.func, cst.Name("new_helper"))
                ctx.add_import("helpers", "new_helper")
                ctx.report(call, "old_helper -> new_helper")
        return module


def _calls(node):
    if isinstance(node, cst.Call):
        yield node
    for child in node.children:
        yield from _calls(child)


@pytest.fixture
def with_module_rule(rules):
    return RuleSet({**rules.rules, "E2K899": RenameHelper})


def test_module_rule_edits_on_a_suppressed_line_are_dropped_with_their_imports(with_module_rule):
    source = b"a = old_helper(1)  # e2k: ignore\nb = old_helper(2)  # e2k: ignore[E2K899]\n"
    result = rewrite_source(source, "m.py", with_module_rule)
    assert result.new == source and result.findings == []
    mixed = b"a = old_helper(1)  # e2k: ignore[E2K8]\nb = old_helper(2)\n"
    result = rewrite_source(mixed, "m.py", with_module_rule)
    assert result.new == b"from helpers import new_helper\n\na = old_helper(1)  # e2k: ignore[E2K8]\nb = new_helper(2)\n"
    assert [(f.line, f.code) for f in result.findings] == [(2, "E2K899")]


def test_suppression_parsing():
    source = b"""\
x = 1  # e2k: ignore[E2K1, e2k602]
# e2k: ignore[E2K400]
# an explanation
y = (
    2)
z = 3  # e2k: ignore[not-a-code]
"""
    lines = Suppressions.from_source(source)
    assert lines.covers(1, "E2K101") and lines.covers(1, "E2K602") and not lines.covers(1, "E2K001")
    assert lines.covers(4, "E2K400") and not lines.covers(5, "E2K400")
    assert not lines.covers(6, "E2K001")
