"""What a hook logged or fetched from the graph, as a Keras program reads it.

A ``LoggingTensorHook`` (and a ``SessionRunHook`` that fetched tensors with
``SessionRunArgs``) names graph tensors: a tensor object of the model_fn, or a name given to
one with ``tf.identity(value, "name")`` (the global step variable is named ``global_step``
without one). A Keras model exposes no tensors by name, but most of what such hooks log is
still at hand in a callback:

| the tensor | in a callback |
|---|---|
| the TRAIN EstimatorSpec's `loss` | `logs["loss"]` (the mean over the epoch's steps so far) |
| a `tf.metrics.*` value or update op that is also an `eval_metric_ops` metric | `logs[<its key>]` |
| `tf.metrics.mean(loss)`'s value or update op | `logs["loss"]` |
| the optimizer's learning rate (a number, a `params` entry, a decayed rate) | `model.optimizer.learning_rate.numpy()` |
| `tf.train.get_global_step()`, the name `"global_step"` | `model.optimizer.iterations.numpy() - 1` (after the step) |

Anything else (an activation, a tensor of another function) has no counterpart:
``keras_value`` raises ``Unsupported`` naming it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from estimator2keras import _emit
from estimator2keras._rule import Unsupported
from estimator2keras._nodes import walk_in_order as _walk

GLOBAL_STEP_CALLS = frozenset({"train.get_global_step", "train.get_or_create_global_step",
                               "contrib.framework.get_global_step", "contrib.framework.get_or_create_global_step"})
SPEC_SIGNATURE = (
    "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
    "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks",
)
LOSS = 'logs["loss"]'
LEARNING_RATE = "model.optimizer.learning_rate.numpy()"
#: After the step: the step that ran, counted from 0 as the global step fetched with it was.
GLOBAL_STEP = "model.optimizer.iterations.numpy() - 1"


@dataclass(frozen=True)
class KerasValue:
    """A logged value as a callback reads it: ``read`` is an expression of ``model`` and ``logs``."""

    read: str
    what: str


_LOSS_VALUE = KerasValue(LOSS, "the loss")


def keras_value(site, ctx, node: cst.BaseExpression) -> KerasValue:
    """The Keras counterpart of a tensor a hook logs: ``node`` is a tensor name (a string)
    or an expression of the model_fn or of the code that made the hook."""
    plan = site.plan
    if isinstance(node, cst.SimpleString):
        name = node.evaluated_value
        if not isinstance(name, str):
            raise Unsupported("a tensor name that is not a string", node)
        name = name[:-2] if name.endswith(":0") else name
        named = _named(ctx, plan, name)
        if named is None:
            if name == "global_step":  # the global step variable's own name
                return KerasValue(GLOBAL_STEP, "the global step")
            other = _named_op(plan, name)
            if other is not None:
                raise Unsupported(f"the tensor {name!r} is `{_emit.code(other)}` in the model_fn, which is not the loss, "
                                  "a compiled metric, the learning rate or the global step: a Keras model does not "
                                  "expose it", node)
            raise Unsupported(f"the tensor {name!r} is not named with tf.identity(..., {name!r}) in the model_fn, "
                              "so e2k cannot tell what it holds", node)
        fn, call, value = named
        if _is_spec_loss(ctx, plan, fn, call):
            return _LOSS_VALUE  # `loss = tf.identity(<the loss>, name="loss_value")`, then `loss=loss`
        found = _classify(ctx, plan, fn, call, value)
        if found is None:
            raise Unsupported(f"the tensor {name!r} (`{_emit.code(value)}` in the model_fn) is not the loss, a compiled "
                              "metric, the learning rate or the global step: a Keras model does not expose it", node)
        return found
    resolved = site.resolve(node)
    for fn in _model_fns(plan):
        if _contains(fn, node) or _contains(fn, resolved):
            found = _classify(ctx, plan, fn, node, node)
            if found is not None:
                return found
    found = _global_step_or_loss(ctx, plan, [node, resolved])
    if found is not None:
        return found
    raise Unsupported(f"the tensor `{_emit.code(node)}` is not the loss, a compiled metric, the learning rate or the "
                      "global step: a Keras model does not expose it", node)


# ---------------------------------------------------------------------------------------
# The model_fn
# ---------------------------------------------------------------------------------------
def _model_fns(plan) -> list[cst.FunctionDef]:
    return [node for node in plan.owned if isinstance(node, cst.FunctionDef)]


def _named(ctx, plan, name: str):
    """``tf.identity(value, name)`` in the model_fn: (the function, the call, value)."""
    found = []
    for fn in _model_fns(plan):
        for node in _walk(fn):
            if isinstance(node, cst.Call) and ctx.call_api_path(node) == "identity":
                args = _bind(node, ("input", "name"))
                given = args.get("name")
                if isinstance(given, cst.SimpleString) and given.evaluated_value == name and "input" in args:
                    found.append((fn, node, args["input"]))
    if len(found) > 1:
        raise Unsupported(f"the model_fn names several tensors {name!r}", found[1][1])
    return found[0] if found else None


def _named_op(plan, name: str) -> cst.Call | None:
    """Another op of the model_fn given the name (``tf.nn.softmax(logits, name=name)``)."""
    for fn in _model_fns(plan):
        for node in _walk(fn):
            if isinstance(node, cst.Call):
                for arg in node.args:
                    if (arg.keyword is not None and arg.keyword.value == "name" and isinstance(arg.value, cst.SimpleString)
                            and arg.value.evaluated_value == name):
                        return node
    return None


def _classify(ctx, plan, fn: cst.FunctionDef, at: cst.CSTNode, value: cst.BaseExpression) -> KerasValue | None:
    chain = _chain(fn, at, value)
    found = _global_step_or_loss(ctx, plan, chain)
    if found is not None:
        return found
    rate = _learning_rate(ctx, fn)
    if rate is not None:
        optimizer, rate = rate
        if any(_same(v, r) for v in chain for r in _chain(fn, optimizer, rate)):
            return KerasValue(LEARNING_RATE, "the learning rate")
    for i, v in enumerate(chain):
        # `acc, acc_op = tf.metrics.accuracy(...)`: a name bound by unpacking the pair.
        metric = v if i > 0 and _is_metric(ctx, v) else _metric_call(ctx, fn, at, v)
        if metric is not None and ctx.call_api_path(metric) == "metrics.mean" and metric.args \
                and _global_step_or_loss(ctx, plan, _chain(fn, metric, metric.args[0].value)) == _LOSS_VALUE:
            # `tf.metrics.mean(loss)`: the mean loss of the steps so far, which Keras reports.
            return KerasValue(LOSS, "the mean loss")
        if metric is not None:
            key = _compiled_metric(ctx, fn, metric)
            if key is None:
                raise Unsupported(f"`{_emit.code(value)}` is a {_emit.code(metric.func)}(...) that no eval_metric_ops "
                                  "entry computes the same way, so the Keras model does not compile it", value)
            return KerasValue(f"logs[{key!r}]".replace("'", '"'), f"the metric {key!r}")
    return None


def _is_spec_loss(ctx, plan, fn: cst.FunctionDef, call: cst.Call) -> bool:
    """The named op's result is what the EstimatorSpec returns as its loss: the op itself, or
    a name bound to it alone, once in the model_fn."""
    loss = plan.spec_loss
    if loss is None:
        return False
    if loss is call or _same(loss, call):
        return True
    parent = ctx.parent(call)
    if not (isinstance(loss, cst.Name) and isinstance(parent, cst.Assign) and parent.value is call
            and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)
            and parent.targets[0].target.value == loss.value):
        return False
    bindings = [n for n in _walk(fn) if isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name)
                and n.target.value == loss.value]
    return len(bindings) == 1


def _global_step_or_loss(ctx, plan, chain) -> KerasValue | None:
    loss = plan.spec_loss
    for v in chain:
        if isinstance(v, cst.Call) and ctx.call_api_path(v) in GLOBAL_STEP_CALLS:
            return KerasValue(GLOBAL_STEP, "the global step")
        if loss is not None and _same(v, loss):
            return _LOSS_VALUE
    return None


def _chain(fn: cst.FunctionDef, at: cst.CSTNode, value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``value`` and what its name was bound to before ``at``, followed a few times."""
    chain = [value]
    while isinstance(chain[-1], cst.Name) and len(chain) < 8:
        bound = assigned_before(fn, at, chain[-1].value)
        if bound is None:
            break
        chain.append(bound)
    return chain


def assigned_before(fn: cst.FunctionDef, at: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """The value ``name`` was last assigned in ``fn``'s straight-line code before ``at`` (a
    tuple unpacking gives the whole value)."""
    path = _path(fn, at)
    if path is None:
        return None
    for block, child in reversed(list(zip(path, path[1:]))):
        if not isinstance(block, cst.IndentedBlock):
            continue
        statements = list(block.body)
        index = next((i for i, s in enumerate(statements) if s is child), None)
        if index is None:
            continue
        for statement in reversed(statements[:index]):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in reversed(statement.body):
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        names = [target.target]
                        if isinstance(target.target, (cst.Tuple, cst.List)):
                            names = [e.value for e in target.target.elements]
                        if any(isinstance(n, cst.Name) and n.value == name for n in names):
                            return small.value
    return None


def _path(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    if root is target:
        return [root]
    for child in root.children:
        found = _path(child, target)
        if found is not None:
            return [root, *found]
    return None


def _learning_rate(ctx, fn: cst.FunctionDef) -> tuple[cst.Call, cst.BaseExpression] | None:
    """The model_fn's only optimizer and the learning rate given to it."""
    rates = []
    for node in _walk(fn):
        if not isinstance(node, cst.Call):
            continue
        path = ctx.call_api_path(node) or ""
        if (path.startswith("train.") and path.endswith("Optimizer")) or path.startswith("keras.optimizers."):
            args = _bind(node, ("learning_rate",), partial=True)
            if "learning_rate" in args:
                rates.append((node, args["learning_rate"]))
    return rates[0] if len(rates) == 1 else None


def _metric_call(ctx, fn, at, value) -> cst.Call | None:
    """The ``tf.metrics.*(...)`` call whose value or update op ``value`` is."""
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and len(value.slice) == 1:
        index = value.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value in ("0", "1"):
            bound = assigned_before(fn, at, value.value.value)
            return bound if _is_metric(ctx, bound) else None
    return None


def _is_metric(ctx, node) -> bool:
    return isinstance(node, cst.Call) and (ctx.call_api_path(node) or "").startswith("metrics.")


def _unpacked_metric(ctx, fn, at, node) -> cst.Call | None:
    if isinstance(node, cst.Name):
        bound = assigned_before(fn, at, node.value)
        return bound if _is_metric(ctx, bound) else None
    return None


def _compiled_metric(ctx, fn: cst.FunctionDef, metric: cst.Call) -> str | None:
    """The eval_metric_ops key of a metric computed as ``metric`` is."""
    keys = []
    for node in _walk(fn):
        if not (isinstance(node, cst.Call) and ctx.call_api_path(node) == "estimator.EstimatorSpec"):
            continue
        ops = _bind(node, SPEC_SIGNATURE, partial=True).get("eval_metric_ops")
        if isinstance(ops, cst.Name):
            ops = assigned_before(fn, node, ops.value)
        if not isinstance(ops, cst.Dict):
            continue
        for element in ops.elements:
            if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)):
                continue
            value = element.value
            candidates = [value]
            if isinstance(value, cst.Name):
                candidates.append(assigned_before(fn, node, value.value))
            if isinstance(value, cst.Tuple):
                candidates += [_unpacked_metric(ctx, fn, node, e.value) for e in value.elements]
            if any(_is_metric(ctx, c) and _same_metric(ctx, c, metric) for c in candidates):
                keys.append(element.key.evaluated_value)
    return keys[0] if len(set(keys)) == 1 else None


def _same_metric(ctx, a: cst.Call, b: cst.Call) -> bool:
    return ctx.call_api_path(a) == ctx.call_api_path(b) and _normalized_args(a) == _normalized_args(b)


def _normalized_args(call: cst.Call) -> str:
    """The arguments' code, the integer type of class ids and the metric's own name left out."""
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "name")]
    text = "".join(_emit.code(a.value if a.keyword is None else a).replace(" ", "") + ";" for a in args)
    return re.sub(r",?output_type=[\w.]+", "", re.sub(r"\s+", "", text))


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------
def _same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return re.sub(r"\s+", "", _emit.code(a)).replace("'", '"') == re.sub(r"\s+", "", _emit.code(b)).replace("'", '"')


def _bind(call: cst.Call, signature: tuple[str, ...], partial: bool = False) -> dict[str, cst.BaseExpression]:
    bound = {}
    position = 0
    for arg in call.args:
        if arg.star:
            return {}
        if arg.keyword is None:
            if position < len(signature):
                bound[signature[position]] = arg.value
            elif not partial:
                return {}
            position += 1
        else:
            bound[arg.keyword.value] = arg.value
    return bound


def _contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(n is node for n in _walk(root))
