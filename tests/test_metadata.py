"""RewriteContext's metadata answers as libcst's providers do, on every node.

The context computes parents from the nodes' fields, qualified names on demand from the
scopes, and positions on the first position query (estimator2keras/_context.py, for speed);
what a rule reads must be what ``MetadataWrapper.resolve_many`` of the four providers gives.
"""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst._metadata_dependent import LazyValue
from libcst.metadata import (
    ExpressionContextProvider,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from estimator2keras._context import RewriteContext, expression_contexts

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PROVIDERS = (PositionProvider, ScopeProvider, QualifiedNameProvider, ParentNodeProvider)

EDGE_CASES = '''
import os.path as osp, tensorflow as tf
from tensorflow import estimator as est
from . import sibling
from .pkg import *
x: "tf.Tensor" = 1
class C(tf.keras.Model):
    y = [i for i in range(3) if i]
    def f(self, a, /, b=lambda q: q, *args, c, **kw) -> None:
        global x
        def g():
            nonlocal a
            return {k: v for k, v in kw.items()}
        with tf.name_scope("s") as s, open(osp.join("a", "b")) as h:
            pass
        try:
            yield from (z async for z in args)
        except* ValueError as e:
            del e
        match b:
            case [1, *rest] | {"k": rest}:
                pass
        return f"{a!r:>{b}} {est.Estimator}"
type Alias[T] = list[T]
lambda: (yield)
del x.a, y[0], (z, w)
for i, (j, *k) in pairs: print(i)
with a as (b, c[1]), d as e.f: pass
(n := 10)
[m for m in range(3) for q in m if (r := q)]
class D(Base, metaclass=Meta, **extra): pass
@deco.attr[0](arg)
def h[U](p: int = default, *, q: "str" = ...) -> U: pass
x.y += z[w:v, ::2]
t: list[int]
match command:
    case Point(x=0, y=yy) as pt if yy: pass
    case {**rest}: pass
'''


def _nodes(module: cst.Module):
    stack = [module]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


class _SameScopes:
    """Two resolutions make different scope objects: the same scope of one must be the same
    scope of the other (of the same kind), node for node."""

    def __init__(self):
        self.pairs, self.seen = {}, {}

    def __call__(self, got, want) -> bool:
        if got is KeyError or want is KeyError:
            return got is want
        if id(want) not in self.pairs and not _same_contents(got, want):
            return False
        return (type(got) is type(want) and self.pairs.setdefault(id(want), got) is got
                and self.seen.setdefault(id(got), want) is want)


def _same_contents(got, want) -> bool:
    """The same assignments (name, node, kind) and accesses (node, what they refer to)."""
    def assignments(scope):
        return {(a.name, id(getattr(a, "node", None)), type(a).__name__) for a in scope.assignments}

    def accesses(scope):
        return {(id(a.node), frozenset((r.name, id(getattr(r, "node", None))) for r in a.referents))
                for a in scope.accesses}

    return assignments(got) == assignments(want) and accesses(got) == accesses(want)


def _check(source: str) -> None:
    module = cst.parse_module(source)
    # What the scopes are computed from (given to libcst's ScopeProvider by the context).
    contexts = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ExpressionContextProvider)
    assert expression_contexts(module) == dict(contexts)
    same_scope = _SameScopes()
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve_many(PROVIDERS)
    ctx = RewriteContext("m.py", rules=None)
    tree = ctx.begin_pass(module, "E2K001", parsed=True)
    assert tree is module
    for node in _nodes(module):
        for provider in PROVIDERS:
            want = expected[provider].get(node, KeyError)
            want = want() if isinstance(want, LazyValue) else want
            try:
                got = ctx.get_metadata(provider, node)
            except KeyError:
                got = KeyError
            if provider is ScopeProvider:
                assert same_scope(got, want), node
            elif provider is ParentNodeProvider:
                assert got is want, node
            else:
                assert got == want, (provider.__name__, node)
    stranger = cst.Name("elsewhere")
    for provider in PROVIDERS:
        with pytest.raises(KeyError):
            ctx.get_metadata(provider, stranger)
        assert ctx.get_metadata(provider, stranger, "default") == "default"


# Every fifth fixture (the test resolves libcst's metadata too: a second each for all of them).
@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if (p / "before.py").exists())[::5])
def test_fixture_metadata_as_libcst(name):
    _check((FIXTURES / name / "before.py").read_text())


def test_edge_case_metadata_as_libcst():
    _check(EDGE_CASES)


def test_program_pass_metadata_as_libcst():
    """Over several modules: each node answers for the module that holds it, a module being
    resolved when a query first reaches one of its nodes."""
    sources = {"a.py": "import b\nx = b.f(1)\n", "b.py": "import tensorflow as tf\ndef f(v):\n    return tf.constant(v)\n",
               "c.py": "y = 2\n"}
    modules = {path: cst.parse_module(code) for path, code in sources.items()}
    ctx = RewriteContext("a.py", rules=None)
    trees = ctx.begin_program_pass(modules, "E2K001", parsed={p: True for p in modules}, suppressions={})
    assert set(ctx.resolved_modules()) == set()
    assert ctx.get_metadata(ParentNodeProvider, trees["c.py"].body[0], "missing") is trees["c.py"]
    expected = {p: MetadataWrapper(m, unsafe_skip_copy=True).resolve_many(PROVIDERS) for p, m in modules.items()}
    same_scope = _SameScopes()
    for path in ("b.py", "a.py"):
        for node in _nodes(trees[path]):
            for provider in PROVIDERS:
                want = expected[path][provider].get(node, None)
                want = want() if isinstance(want, LazyValue) else want
                got = ctx.get_metadata(provider, node, "missing")
                if want is None:
                    assert got == "missing"
                elif provider is ScopeProvider:
                    assert same_scope(got, want), node
                else:
                    assert got == want, (path, provider.__name__, node)
    assert "b.py" in ctx.resolved_modules() and "a.py" in ctx.resolved_modules()
    assert ctx.path_of(trees["b.py"].body[1]) == "b.py"
