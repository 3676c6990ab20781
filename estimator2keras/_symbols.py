"""TF2 spellings of TF1 names, for the code a conversion takes over (input_fns, forward passes).

The table (``tf2_symbols.txt``) is generated from TensorFlow 2.15 and TensorFlow's own
upgrade tables by ``tools/gen_tf2_symbols.py``; see that script for its format. A TF1 name
in converted code becomes:

- its TF2 name, when both are the same object (``tf1.log`` -> ``tf.math.log``);
- its TF2 namesake, for a call that only uses arguments both signatures share
  (``tf1.reduce_mean(x, 1, keep_dims=True)`` -> ``tf.reduce_mean(x, 1, keepdims=True)``);
- otherwise ``tf.compat.v1.<name>``, which still runs on TensorFlow 2 — but a name that TF2
  has with another behaviour (``tf.where``) is only respelled so in TF1 code (code that also
  uses names TF2 does not have), never in code written for TF2.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from estimator2keras import _emit
from estimator2keras._context import RewriteContext
from estimator2keras._nodes import fields_children, walk as _walk

_TABLE = Path(__file__).with_name("tf2_symbols.txt")
COMPAT = "compat.v1."


@dataclass(frozen=True)
class Spelling:
    target: str
    #: For a signature-compatible namesake: the most positional arguments both share.
    positional: int | None = None
    renames: tuple[tuple[str, str], ...] = ()
    v1_only: frozenset[str] = frozenset()
    #: "!" TF2 has no such name; "~" TF2 has it with another behaviour; "" same behaviour.
    flag: str = ""


@lru_cache(maxsize=1)
def table() -> dict[str, Spelling]:
    spellings = {}
    for line in _TABLE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) == 2:
            spellings[cells[0]] = Spelling(cells[1])
        elif len(cells) == 3:
            spellings[cells[0]] = Spelling(cells[1], flag=cells[2])
        else:
            renames = () if cells[3] == "-" else tuple(tuple(r.split("=")) for r in cells[3].split(","))
            v1_only = frozenset() if cells[4] == "-" else frozenset(cells[4].split(","))
            spellings[cells[0]] = Spelling(cells[1], int(cells[2]), renames, v1_only)
    return spellings


def _roots(ctx: RewriteContext, node: cst.CSTNode) -> set[str]:
    return {q.name for q in ctx.get_metadata(QualifiedNameProvider, node, set())}


def _is_compat_v1(ctx: RewriteContext, node: cst.CSTNode) -> bool:
    return any(name.startswith(("tensorflow.compat.v1.", "tensorflow_estimator.compat.v1.")) for name in _roots(ctx, node))


def _chain_prefixes(node: cst.BaseExpression):
    """``a.b.c`` -> ``a.b.c``, ``a.b``, ``a`` (longest first)."""
    current = node
    while isinstance(current, (cst.Attribute, cst.Name)):
        yield current
        if isinstance(current, cst.Name):
            return
        current = current.value


def is_tf1_code(ctx: RewriteContext) -> bool:
    """Does the module use, through ``tensorflow.``, names that only TF1 has?"""
    # Per tree: a pass over a program's modules asks of each, and each pass has its own tree.
    known = getattr(ctx, "_tf1_code", None)
    if not isinstance(known, dict):
        known = ctx._tf1_code = {}
    module = ctx.module
    cached = known[id(module)][1] if id(module) in known and known[id(module)][0] is module else None
    if cached is None:
        cached = False
        spellings = table()
        for node in _walk(ctx.module):
            if isinstance(node, cst.Attribute) and not _is_compat_v1(ctx, node):
                path = ctx.api_path(node)
                spelling = spellings.get(path) if path else None
                if spelling is not None and spelling.flag == "!":
                    cached = True
                    break
        known[id(module)] = (module, cached)
    return cached


def tf2_respellings(ctx: RewriteContext, within: cst.CSTNode, tf: str) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
    """(node, replacement) pairs that put TF1 names inside ``within`` into TF2 spelling."""
    spellings = table()
    stack = [within]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)) and not _inside_chain(ctx, node):
            found = _respell_chain(ctx, node, spellings, tf)
            if found is not None:
                yield from found
                if isinstance(node, cst.Attribute):
                    continue
        stack.extend(reversed(fields_children(node)))


def _inside_chain(ctx: RewriteContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    return isinstance(parent, cst.Attribute) and parent.value is node


def _respell_chain(ctx, chain, spellings, tf):
    for prefix in _chain_prefixes(chain):
        path = ctx.api_path(prefix)
        if not path or path not in spellings:
            continue
        spelling = spellings[path]
        compat = _is_compat_v1(ctx, prefix)
        target, renames = _choose(ctx, chain, prefix, path, spelling, compat)
        if target is None:
            return None
        if not compat and target == path and not renames:
            return None  # already its TF2 spelling
        out = [(prefix, _emit.expr("{tf}.{target}", tf=tf, target=target))]
        out += [(keyword, cst.Name(new)) for keyword, new in renames]
        return out
    return None


def _choose(ctx, chain, prefix, path, spelling, compat):
    """The target path and keyword renames for one reference, or (None, ()) to leave it."""
    if spelling.positional is None:
        if spelling.flag == "~" and not compat and not is_tf1_code(ctx):
            return None, ()  # written for TF2: its `tf.where` is TF2's
        return spelling.target, ()
    # A signature-compatible namesake: only for a direct call that fits both signatures.
    call = ctx.parent(chain)
    if prefix is not chain:
        return (None, ()) if compat else (COMPAT + path, ())
    if not (isinstance(call, cst.Call) and call.func is chain):
        # Passed as a value (`activation=tf.nn.tanh`): the same function in TF2.
        return (spelling.target, ()) if compat else (None, ())
    positional = [a for a in call.args if a.keyword is None]
    keywords = [a.keyword for a in call.args if a.keyword is not None]
    renames = dict(spelling.renames)
    if any(a.star for a in call.args) or len(positional) > spelling.positional or any(
        k.value in spelling.v1_only for k in keywords
    ):
        return (None, ()) if compat else (COMPAT + path, ())
    return spelling.target, [(k, renames[k.value]) for k in keywords if k.value in renames]


def respell_or_compat(ctx: RewriteContext, name: cst.Name, tf: str) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """For a reference through a ``compat.v1`` alias that is about to mean TensorFlow 2:
    its TF2 spelling when it has one, else ``tf.compat.v1.<name>`` (same meaning)."""
    chain = name
    parent = ctx.parent(chain)
    while isinstance(parent, cst.Attribute) and parent.value is chain:
        chain, parent = parent, ctx.parent(parent)
    if chain is name:
        return [(name, _emit.expr("{tf}.compat.v1", tf=tf))]  # the module itself, passed around
    for prefix in _chain_prefixes(chain):
        if prefix is not name and ctx.api_path(prefix) == "keras":
            # `tf.keras` through compat.v1 was TensorFlow's one Keras: the converted model is
            # `tf.keras`, and its layers must be of the same Keras (not `tf.compat.v1.keras`).
            return [(prefix, _emit.expr("{tf}.keras", tf=tf))]
    found = _respell_chain(ctx, chain, table(), tf)
    if found:
        return found
    return [(name, _emit.expr("{tf}.compat.v1", tf=tf))]
