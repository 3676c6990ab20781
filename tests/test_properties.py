"""Generated programs: the canonical Estimator program's statements mixed with unrelated code.

Whatever surrounds it, the Estimator converts the same; the unrelated code comes out exactly
as it went in; the output parses; a second rewrite changes nothing. A program with no
Estimator in it comes out byte-identical, with or without the syntactic pre-filter."""
from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from estimator2keras import _engine
from estimator2keras._engine import rewrite_source
from estimator2keras._prefilter import Screening
from estimator2keras._registry import RuleSet

RULES = RuleSet.load()
CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_text()
CONVERTED = (FIXTURES / "seed_mirrored_linear" / "after.py").read_text()


def _statements(source: str) -> tuple[str, list[str]]:
    """The module's imports (with its docstring), and each later top-level statement with
    the comments and blank lines above it."""
    module = cst.parse_module(source)
    chunks = [module.code_for_node(statement) for statement in module.body]
    split = max(i for i, s in enumerate(module.body) if m_import(s)) + 1
    return "".join(chunks[:split]), chunks[split:]


def m_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))


HEADER, BODY = _statements(CANONICAL)

# -- unrelated code ------------------------------------------------------------------------
# Names start with u_ / U so that they never meet the Estimator program's own names.
names = st.from_regex(r"u_[a-z][a-z0-9_]{0,8}", fullmatch=True)
classes = st.from_regex(r"U[A-Z][a-z]{1,8}", fullmatch=True)
numbers = st.integers(min_value=0, max_value=10**6)
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=0, max_size=24)


@st.composite
def unrelated_block(draw) -> str:
    name, other, number, word = draw(names), draw(names), draw(numbers), draw(words)
    kind = draw(st.sampled_from(range(12)))
    return [
        f"{name} = {number}\n",
        f"{name} = {{'estimator': {number}, 'note': {word!r}}}  # estimator {word}\n",
        f"def {name}({other}, *args, scale={number}, **kwargs):\n    return {other} * scale\n",
        f"class {draw(classes)}:\n    \"\"\"Not a tf.estimator.Estimator(model_fn=...), {word}.\"\"\"\n\n    {name} = {number}\n",
        f"@{other}\ndef {name}():\n    \"\"\"{word}\"\"\"\n    return [{number} for _ in range(3) if _]\n",
        f"{name} = f\"{{{other}!r:>{{{number % 20}}}}} estimator {{{other}['k']}}\"\n",
        f"match {name}:\n    case [{number}, *{other}]:\n        pass\n    case {{'estimator': {other}}}:\n        pass\n    case _:\n        pass\n",
        f"if ({name} := len({other})) > {number}:\n    print({name}, {word!r})\n",
        f"{name} = make_estimator({number})  # a helper, not tf.estimator\n",
        f"# estimator: {word}\n{name}: list[int] = []\n",
        f"async def {name}({other}):\n    async with {other} as u_lock:\n        return [u_x async for u_x in {other}]\n",
        f"try:\n    {name}({number})\nexcept ({draw(classes)}, ValueError) as {other}:\n    raise RuntimeError({word!r}) from {other}\n",
    ][kind]


def _program(draw, with_estimator: bool) -> tuple[str, list[str]]:
    """A program and its unrelated blocks in order (blank-line separated, as code is)."""
    blocks: list[str] = []
    parts = [HEADER if with_estimator else draw(st.sampled_from(["", "import tensorflow as tf\n"]))]
    for statement in (BODY if with_estimator else [""]):
        for block in draw(st.lists(unrelated_block(), max_size=2)):
            blocks.append(block)
            parts.append("\n\n" + block)
        parts.append(statement)
    for block in draw(st.lists(unrelated_block(), min_size=0 if with_estimator else 1, max_size=3)):
        blocks.append(block)
        parts.append("\n\n" + block)
    return "".join(parts), blocks


@st.composite
def programs(draw, with_estimator: bool):
    source, blocks = _program(draw, with_estimator)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return source.replace("\n", newline).encode(), [b.replace("\n", newline).encode() for b in blocks], newline


def _comment_words(text: str) -> list[str]:
    """The words of every comment, in order (a long one may be wrapped, or moved above its line)."""
    import io
    import tokenize

    comments = [t.string[1:] for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    return " ".join(comments).split()


def _without_prefilter(source: bytes) -> _engine.FileResult:
    screen = _engine.screen
    _engine.screen = lambda *args: Screening(parse=True, units=True)
    try:
        return rewrite_source(source, "p.py", RULES)
    finally:
        _engine.screen = screen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(with_estimator=False))
def test_program_without_an_estimator_is_byte_identical(program):
    source, _, _ = program
    result = rewrite_source(source, "p.py", RULES)
    assert result.status == "unchanged" and result.new == source
    full = _without_prefilter(source)
    assert (full.status, full.new, full.findings) == (result.status, result.new, result.findings)


@pytest.mark.slow
# Each example converts a program (~0.3 s): no shrinking, which takes minutes; the failing
# example is printed whole.
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(programs(with_estimator=True))
def test_estimator_mixed_with_unrelated_code(program):
    source, blocks, newline = program
    result = rewrite_source(source, "p.py", RULES)
    assert result.status == "converted", result.findings
    cst.parse_module(result.new)

    # The unrelated code is all there, byte for byte, in its order.
    at = 0
    for block in blocks:
        found = result.new.find(block, at)
        assert found >= 0, block
        at = found + len(block)

    # Without it, the Estimator program converted as it does alone: the same code and the same
    # notes (the code e2k writes is indented like the module's first indented block, and
    # wrapped at the file's length, which the unrelated code may set).
    rest = result.new
    for block in blocks:
        rest = rest.replace(block, b"", 1)
    rest_text = rest.decode().replace(newline, "\n")
    assert ast.dump(ast.parse(rest_text)) == ast.dump(ast.parse(CONVERTED))
    assert _comment_words(rest_text) == _comment_words(CONVERTED)

    again = rewrite_source(result.new, "p.py", RULES)
    assert again.new == result.new
