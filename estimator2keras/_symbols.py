"""TF2 spellings of ``tf.compat.v1`` names, for code that a conversion takes over.

Converted input_fns and forward passes must run on TensorFlow 2 without ``compat.v1``.
Where a ``compat.v1`` name means the same thing in TF2 (``tf1.data.Dataset`` ->
``tf.data.Dataset``), the reference is respelled; anything else is left as it is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from estimator2keras._context import RewriteContext

_TABLE = Path(__file__).with_name("tf2_same_symbols.txt")


def _load() -> tuple[frozenset[str], tuple[str, ...]]:
    names, prefixes = set(), []
    for line in _TABLE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.endswith(".*"):
            prefixes.append(line[:-1])
        else:
            names.add(line)
    return frozenset(names), tuple(prefixes)


SAME_IN_TF2, SAME_PREFIXES = _load()


def same_in_tf2(path: str) -> bool:
    """True when ``tf.compat.v1.<path>`` and ``tf.<path>`` are the same API in TF 2.x (and Keras 3 era)."""
    return path in SAME_IN_TF2 or path.startswith(SAME_PREFIXES)


def _v1_root(ctx: RewriteContext, node: cst.BaseExpression) -> bool:
    names = ctx.get_metadata(QualifiedNameProvider, node, set())
    return any(n.name in ("tensorflow.compat.v1", "tensorflow_estimator.compat.v1") for n in names)


def _outermost_chain(ctx: RewriteContext, node: cst.BaseExpression) -> cst.BaseExpression:
    current = node
    while True:
        parent = ctx.parent(current)
        if isinstance(parent, cst.Attribute) and parent.value is current:
            current = parent
        else:
            return current


def tf2_respellings(ctx: RewriteContext, within: cst.CSTNode, tf: str) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
    """(node, replacement) pairs that turn ``compat.v1`` references inside ``within`` into TF2 ones."""
    stack = [within]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)) and _v1_root(ctx, node):
            chain = _outermost_chain(ctx, node)
            path = ctx.api_path(chain)
            if path and same_in_tf2(path):
                yield node, cst.Name(tf)
            continue
        stack.extend(node.children)
