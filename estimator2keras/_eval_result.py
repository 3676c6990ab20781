"""Reads of an Estimator's evaluation result, against the keys the Keras model's gives.

``Estimator.evaluate()`` (and ``train_and_evaluate``) returned a dict of the eval metrics, the
loss and the checkpoint's ``global_step``; ``model.evaluate(..., return_dict=True)`` gives the
loss and compile()'s metrics. Where the result is read:

- ``result["global_step"]`` and ``result.get("global_step")`` read the model's step count,
  ``int(model.optimizer.iterations.numpy())``;
- a key the Estimator gave that the Keras dict has not (a metric Keras cannot compute exactly,
  one left for a human), read by a literal key or ``.get``, or any key read by an expression,
  is a leftover at the read: fail closed, never a KeyError in a file reported converted;
- the whole dict used (printed, iterated, passed on) does not crash: what it lacks is reported.

The model-building rules record the keys on the plan (``plan.eval_keys``: the Estimator's, the
Keras model's); without them only ``global_step`` is handled.
"""
from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._units import accesses_of

GLOBAL_STEP = "global_step"


def check_reads(result: cst.CSTNode, plan, ctx, code: str) -> None:
    """``result``: the evaluate call as written (its parent is read) or the Name it is assigned to."""
    keys = getattr(plan, "eval_keys", None)
    estimator, keras = keys if keys is not None else (None, None)
    missing = sorted(estimator - keras - {GLOBAL_STEP}) if keys is not None else []
    if isinstance(result, cst.Name):
        reads = accesses_of(ctx, result)
        if reads is None:
            return
    else:
        reads = [result]
    whole = []
    for read in reads:
        parent = ctx.parent(read)
        key_node, access = None, None
        if isinstance(parent, cst.Subscript) and parent.value is read and len(parent.slice) == 1 \
                and isinstance(parent.slice[0].slice, cst.Index):
            if isinstance(ctx.parent(parent), cst.AssignTarget) or _deleted(ctx, parent):
                continue
            key_node, access = parent.slice[0].slice.value, parent
        elif isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value == "get":
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent and call.args:
                key_node, access = call.args[0].value, call
        if access is None:
            whole.append(read)
            continue
        if not isinstance(key_node, cst.SimpleString):
            if missing:
                plan.leftover(access, code, f"evaluate()'s result is read by a key e2k cannot read; the Keras "
                                            f"model's has no {_listed(missing)} (nor 'global_step': "
                                            "model.optimizer.iterations holds the step)")
            continue
        key = key_node.evaluated_value
        if key == GLOBAL_STEP and not isinstance(result, cst.Name):
            plan.leftover(access, code, "the Estimator's evaluate() gave 'global_step', the Keras model's does not: "
                                        "assign the result, or read model.optimizer.iterations")
        elif key == GLOBAL_STEP:
            plan.replace(access, _emit.expr("int({m}.optimizer.iterations.numpy())", m=plan.model_var))
        elif keys is not None and key in estimator and key not in keras:
            plan.leftover(access, code, f"the Estimator's evaluate() gave {key!r}, which the Keras model's "
                                        "evaluate() does not (e2k converts only metrics Keras computes exactly): "
                                        "compute it, or drop the read")
    if whole and keys is not None:
        lacks = [GLOBAL_STEP, *missing]
        plan.fixed(whole[0], code, f"the Keras evaluate() dict has no {_listed(lacks)}, which the Estimator's had "
                                   "(global_step: model.optimizer.iterations)")


def _listed(keys: list[str]) -> str:
    return ", ".join(repr(k) for k in keys)


def _deleted(ctx, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    return isinstance(parent, cst.Del) or isinstance(parent, cst.Element) and isinstance(ctx.parent(ctx.parent(parent)), cst.Del)
