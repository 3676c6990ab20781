"""File-level TensorFlow set-up after a conversion: the `tf` alias and TF1 behaviour switches.

Two things stand between converted Keras code and TensorFlow 2 at the level of a file:

- ``import tensorflow.compat.v1 as tf``: the converted code needs ``tf`` to be TensorFlow 2.
  The import becomes ``import tensorflow as tf`` and every other reference through ``tf``
  keeps its meaning: its TF2 spelling where TensorFlow 2 has the same API
  (``tf.log`` -> ``tf.math.log``), ``tf.compat.v1.<name>`` otherwise.
- ``tf.disable_v2_behavior()`` / ``disable_eager_execution()``: Keras 3 needs eager
  execution. The call is removed when nothing left in the file needs graph mode (sessions,
  placeholders); otherwise it is kept and reported.
"""
from __future__ import annotations

from typing import Iterable

import libcst as cst
from libcst.metadata import GlobalScope, QualifiedNameProvider

from estimator2keras import _emit
from estimator2keras._context import RewriteContext
from estimator2keras._symbols import COMPAT, _is_compat_v1, respell_or_compat, tf2_respellings

CODE = "E2K005"
COMPAT_V1_MODULES = ("tensorflow.compat.v1",)
V2_SWITCHES = frozenset({"disable_v2_behavior", "disable_eager_execution", "compat.v1.disable_v2_behavior"})
GRAPH_ONLY = frozenset({
    "Session", "InteractiveSession", "placeholder", "placeholder_with_default", "get_default_graph",
    "global_variables_initializer", "train.Saver", "train.MonitoredTrainingSession",
    "train.SingularMonitoredSession", "train.start_queue_runners",
})


def compat_alias(ctx: RewriteContext) -> tuple[cst.ImportAlias, str] | None:
    """``import tensorflow.compat.v1 as tf`` (or ``from tensorflow.compat import v1 as tf``)
    binding the name ``tf`` at module level: the alias node, and the name."""
    scope = ctx.scope(ctx.module.body[0]) if ctx.module.body else None
    if not isinstance(scope, GlobalScope):
        return None
    for assignment in scope.assignments["tf"]:
        node = getattr(assignment, "node", None)
        if isinstance(node, cst.Import):
            for alias in node.names:
                if _emit.code(alias.name) in COMPAT_V1_MODULES and alias.asname and alias.asname.name.value == "tf":
                    return alias, "tf"
        if isinstance(node, cst.ImportFrom) and node.module is not None and _emit.code(node.module) == "tensorflow.compat":
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    if _emit.code(alias.name) == "v1" and alias.asname and alias.asname.name.value == "tf":
                        return alias, "tf"
    return None


def _inside(ctx: RewriteContext, node: cst.CSTNode, statements: set) -> bool:
    current = node
    while current is not None:
        if current in statements:
            return True
        current = ctx.parent(current)
    return False


def rebind_tf(ctx: RewriteContext, alias: cst.ImportAlias, replaced: set) -> None:
    """Make ``tf`` TensorFlow 2 and keep every reference outside ``replaced`` meaning what it did."""
    import_statement = ctx.enclosing_statement(alias)
    node = ctx.parent(alias)
    if isinstance(node, cst.ImportFrom):
        # `from tensorflow.compat import v1 as tf` -> `import tensorflow as tf`
        if len(node.names) != 1:
            return
        new = _emit.statement("import tensorflow as tf")
        ctx.edits.replace_statement(import_statement, [new.with_changes(leading_lines=())])
    else:
        ctx.edits.replace(alias.name, _emit.expr("tensorflow"))
    for reference in _references(ctx, alias):
        if _inside(ctx, reference, replaced) or _already_rewritten(ctx, reference):
            continue
        for node, new in respell_or_compat(ctx, reference, "tf"):
            ctx.edits.replace(node, new)
    ctx.report(alias, "`tensorflow.compat.v1 as tf` -> `tensorflow as tf`; the file's other TF1 names keep their meaning", code=CODE)


def respell_tf1_names(ctx: RewriteContext, tf: str, replaced: set) -> None:
    """In a converted file whose ``tf`` is TensorFlow's root (a TF 1.x program's ``import
    tensorflow as tf``), the TF1 names left outside the converted code keep their meaning on
    TensorFlow 2: ``tf.reset_default_graph()`` -> ``tf.compat.v1.reset_default_graph()``,
    ``tf.log`` -> ``tf.math.log`` (what tf_upgrade_v2 does to them); TF2's own names stay."""
    respelled = []
    found = list(tf2_respellings(ctx, ctx.module, tf)) + list(_tf1_module_references(ctx, tf))
    for node, new in found:
        if _inside(ctx, node, replaced) or ctx.edits.covers(node, ctx.parent) or _is_compat_v1(ctx, node):
            continue
        if isinstance(node, cst.Attribute) and _emit.code(new) == _emit.code(node):
            continue
        ctx.edits.replace(node, new)
        respelled.append((node, new))
    if respelled:
        node, new = respelled[0]
        more = f" and {len(respelled) - 1} more" if len(respelled) > 1 else ""
        ctx.report(node, f"TF1 names outside the converted code keep their meaning on TensorFlow 2 "
                         f"(`{_emit.code(node)}` -> `{_emit.code(new)}`{more})", code=CODE)


#: Modules of TensorFlow 1's root that TensorFlow 2 no longer has but keeps under tf.compat.v1
#: (what tf_upgrade_v2 renames them to); the symbol table lists functions and classes only.
TF1_ONLY_MODULES = frozenset({"logging", "app", "flags", "gfile"})


def _tf1_module_references(ctx: RewriteContext, tf: str):
    """``tf.logging`` of ``tf.logging.info(...)`` -> ``tf.compat.v1.logging`` (and so on for
    TF1_ONLY_MODULES), where ``tf`` is TensorFlow's root."""
    for node in _walk(ctx.module):
        if (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == tf
                and node.attr.value in TF1_ONLY_MODULES and ctx.api_path(node) == node.attr.value):
            yield node, _emit.expr("{tf}.compat.v1.{m}", tf=tf, m=node.attr.value)


def _already_rewritten(ctx: RewriteContext, node: cst.CSTNode) -> bool:
    """A reference that a unit rule already rewrote (e2k601's TF2 strategy class) is kept so."""
    current = node
    while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if ctx.edits.replaces(current):
            return True
        current = ctx.parent(current)
    return False


def _references(ctx: RewriteContext, alias: cst.ImportAlias) -> Iterable[cst.Name]:
    scope = ctx.scope(ctx.module.body[0])
    for assignment in scope.assignments["tf"]:
        for access in assignment.references:
            if isinstance(access.node, cst.Name):
                yield access.node


def v2_switches(ctx: RewriteContext, replaced: set) -> None:
    """Remove `disable_v2_behavior()`-style calls that would stop the Keras code from running."""
    switches, graph_only = [], []
    for node in _walk(ctx.module):
        if isinstance(node, cst.Call) and not _inside(ctx, node, replaced):
            path = ctx.call_api_path(node)
            if path in V2_SWITCHES:
                switches.append(node)
            elif path in GRAPH_ONLY:
                graph_only.append(node)
    for call in switches:
        statement = ctx.enclosing_statement(call)
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr)):
            continue
        if graph_only:
            ctx.mark(call, "the converted Keras code needs eager execution, but this file still runs TF1 graph code", CODE)
            continue
        ctx.edits.remove_statement(statement)
        ctx.report(call, "TF1 behaviour switch removed: the Keras code runs eagerly", code=CODE)


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


__all__ = ["compat_alias", "rebind_tf", "v2_switches", "COMPAT", "QualifiedNameProvider"]
