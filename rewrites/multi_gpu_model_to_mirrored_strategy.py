from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import statements_of
from estimator2keras._nodes import walk as _walk
from estimator2keras._rule import Case, ModuleRule, Safety, Unsupported
from estimator2keras._units import bind_arguments, tf_alias

MULTI_GPU_MODEL = frozenset({"keras.utils.multi_gpu_model", "keras.utils.training_utils.multi_gpu_model",
                             "keras.utils.multi_gpu_utils.multi_gpu_model"})
SIGNATURE = ("model", "gpus", "cpu_merge", "cpu_relocation")
DEVICE = frozenset({"device", "compat.v1.device"})


class MultiGpuModelToMirroredStrategy(ModuleRule):
    """`multi_gpu_model(model, gpus=N)` becomes the model built and compiled under `MirroredStrategy`.

    ## What it does
    For

    ```python
    with tf.device("/cpu:0"):
        model = create_model()
    parallel_model = multi_gpu_model(model, gpus=N)
    parallel_model.compile(...)
    ```

    the template model is created, and the model compiled, inside
    `with strategy.scope():` of a `strategy = tf.distribute.MirroredStrategy(["/gpu:0", ...])`
    on the same N GPUs; the wrapper disappears and every use of `parallel_model` (`fit`,
    `evaluate`, `predict`, `save`) uses the template model, which is what multi_gpu_model's
    users were told to save.

    ## Why
    `multi_gpu_model` was removed from TensorFlow in 2.4: `tf.distribute.MirroredStrategy`
    replaced it. Both split each batch of `fit` across the replicas and apply the gradient of
    the whole batch's loss, so the batch size stays as it was (unlike an Estimator's
    per-replica batches, E2K602).

    ## Fix safety
    Safe: training the template model under MirroredStrategy on 2 replicas ends with the
    weights that multi_gpu_model's computation (the template trained on the whole batch)
    ends with (fixture `multi_gpu_model`). multi_gpu_model kept the weights on the CPU
    (`cpu_merge`, `cpu_relocation`); MirroredStrategy keeps a copy on each GPU.

    ## Limitations
    The template model must be created in the same block as the `multi_gpu_model(...)` call
    and compiled (through the wrapper) right after it; otherwise the call is marked.

    ## References
    - https://www.tensorflow.org/guide/migrate/mirrored_strategy
    - https://www.tensorflow.org/tutorials/distribute/keras
    """

    code = "E2K603"
    summary = "multi_gpu_model(model, gpus=N) + tf.device('/cpu:0') -> the model built and compiled under MirroredStrategy"
    safety = Safety.SAFE
    keywords = ("multi_gpu_model",)
    order = 200

    cases = [
        Case(
            id="template-on-cpu",
            before='''\
import tensorflow as tf
from tensorflow.keras.utils import multi_gpu_model

with tf.device("/cpu:0"):
    model = tf.keras.Sequential([tf.keras.layers.Dense(10, input_shape=(4,))])
parallel_model = multi_gpu_model(model, gpus=2)
parallel_model.compile(loss="mse", optimizer="sgd")
parallel_model.fit(tf.zeros([8, 4]), tf.zeros([8, 10]), batch_size=4)
model.save("model.h5")
''',
            after='''\
import tensorflow as tf

# multi_gpu_model(model, gpus=...): the model is built and compiled under
# MirroredStrategy.
strategy = tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(10, input_shape=(4,))])
    model.compile(loss="mse", optimizer="sgd")
model.fit(tf.zeros([8, 4]), tf.zeros([8, 10]), batch_size=4)
model.save("model.h5")
''',
        ),
    ]

    def transform(self, module: cst.Module, ctx) -> cst.Module:
        for call in _calls(module, ctx):
            try:
                self._convert(call, ctx)
            except Unsupported as exc:
                ctx.mark(exc.node or call, exc.reason, self.code)
        return module

    def _convert(self, call: cst.Call, ctx) -> None:
        statement = ctx.enclosing_statement(call)
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if not (isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            raise Unsupported("multi_gpu_model(...) is not assigned to a name", call)
        wrapper = small.targets[0].target
        args = bind_arguments(call, SIGNATURE)
        template = args.get("model")
        if template is None or not isinstance(template.value, cst.Name):
            raise Unsupported("the template model is not a name", call)
        template = template.value
        block, index = _position(ctx, statement)
        device_block = None
        if isinstance(ctx.parent(ctx.parent(statement)), cst.With) and _is_device_block(ctx, ctx.parent(ctx.parent(statement))):
            # multi_gpu_model called inside the `with tf.device(...)` block itself.
            device_block = ctx.parent(ctx.parent(statement))
            block, index = _position(ctx, device_block)
        body = statements_of(block)
        start = _creation(ctx, body, index, template.value, device_block)
        compile_index = _compile(body, index, wrapper.value)
        tf, needs_import = tf_alias(ctx)
        if needs_import:
            ctx.add_import("tensorflow", asname="tf")
        inside: list[cst.BaseStatement] = []
        renamed = _Rename(wrapper.value, template.value)
        for position in range(start, compile_index + 1):
            current = body[position]
            if current is statement:
                continue
            if isinstance(current, cst.With) and (current is device_block or _is_device_block(ctx, current)):
                inside.extend(s for s in current.body.body if s is not statement)
                continue
            inside.append(current.visit(renamed))
        inside[0] = inside[0].with_changes(leading_lines=())
        strategy = _emit.unique_name("strategy", _names(ctx))
        create = _emit.statement("{s} = {tf}.distribute.MirroredStrategy({d})", s=strategy, tf=tf, d=_devices(args))
        create = _emit.with_comment(create.with_changes(leading_lines=body[start].leading_lines),
                                    "multi_gpu_model(model, gpus=...): the model is built and compiled under MirroredStrategy.")
        scope = _emit.statement("with {s}.scope():\n    pass", s=strategy).with_changes(
            body=cst.IndentedBlock(body=inside))
        ctx.edits.replace_statement(body[start], [create, scope])
        for position in range(start + 1, compile_index + 1):
            ctx.edits.remove_statement(body[position])
        for name in _reads(ctx, wrapper):
            if not _inside(ctx, name, body[start:compile_index + 1]):
                ctx.edits.replace(name, cst.Name(template.value))
        for module, name in (("tensorflow.keras.utils", "multi_gpu_model"), ("keras.utils", "multi_gpu_model"),
                             ("keras.utils.training_utils", "multi_gpu_model")):
            ctx.remove_import_if_unused(module, name)
        ctx.report(call, "multi_gpu_model -> MirroredStrategy.scope()", self.code, kind="fixed")


def _calls(module, ctx):
    from estimator2keras._context import iter_calls

    return [c for c in iter_calls(module) if ctx.call_api_path(c) in MULTI_GPU_MODEL]


def _position(ctx, statement):
    parent = ctx.parent(statement)
    block = parent if isinstance(parent, cst.Module) else parent
    body = statements_of(block)
    for index, current in enumerate(body):
        if current is statement:
            return block, index
    raise Unsupported("e2k cannot place this statement", statement)


def _is_device_block(ctx, node) -> bool:
    return isinstance(node, cst.With) and all(
        isinstance(item.item, cst.Call) and ctx.call_api_path(item.item) in DEVICE and item.asname is None
        for item in node.items
    )


def _assigns(statement, name: str) -> bool:
    for node in _walk(statement):
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == name:
            return True
    return False


def _creation(ctx, body, index: int, template: str, device_block) -> int:
    """Where the template model is created: that statement (or its `with tf.device` block)."""
    if device_block is not None and any(_assigns(s, template) for s in device_block.body.body):
        return index
    for position in range(index - 1, -1, -1):
        if _assigns(body[position], template):
            return position
    raise Unsupported("the template model is not created in the same block as multi_gpu_model(...)", body[index])


def _compile(body, index: int, wrapper: str) -> int:
    for position in range(index + 1, len(body)):
        code = _emit.code(body[position]).strip()
        if code.startswith(f"{wrapper}.compile("):
            return position
    raise Unsupported("the multi_gpu_model wrapper is not compiled in the same block", body[index])


def _devices(args) -> cst.BaseExpression:
    gpus = args.get("gpus")
    if gpus is None:
        raise Unsupported("multi_gpu_model without gpus=", None)
    value = gpus.value
    if isinstance(value, cst.Integer):
        return _emit.expr("[" + ", ".join(f'"/gpu:{i}"' for i in range(value.evaluated_value)) + "]")
    if isinstance(value, (cst.List, cst.Tuple)):
        return _emit.expr('[f"/gpu:{{i}}" for i in {v}]', v=value)
    return _emit.expr('[f"/gpu:{{i}}" for i in range({v})]', v=value)


class _Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if original.value == self.old else updated


def _reads(ctx, target: cst.Name):
    scope = ctx.scope(target)
    if scope is None or len(scope.assignments[target.value]) != 1:
        raise Unsupported(f"`{target.value}` is assigned more than once", target)
    (assignment,) = scope.assignments[target.value]
    return [a.node for a in assignment.references if isinstance(a.node, cst.Name)]


def _inside(ctx, node, statements) -> bool:
    current = node
    while current is not None:
        if any(current is s for s in statements):
            return True
        current = ctx.parent(current)
    return False


def _names(ctx) -> set[str]:
    return {n.value for n in _walk(ctx.module) if isinstance(n, cst.Name)}
