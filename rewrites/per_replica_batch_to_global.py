from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._rule import Case, Safety, UnitRule
from estimator2keras._modelfn_read import _walk
from estimator2keras._units import accesses_of, bind_arguments, resolve_call

BATCH_METHODS = ("batch", "padded_batch")
WHY = "Global batch: Keras splits it across replicas (the Estimator batched per replica)."


class PerReplicaBatchToGlobalBatch(UnitRule):
    """A per-replica batch size becomes a global one: `batch(n * strategy.num_replicas_in_sync)`.

    ## What it does
    Under a distribution strategy, multiplies the batch size of every `.batch(n)` /
    `.padded_batch(n)` in the converted input_fns by `strategy.num_replicas_in_sync`, with a
    one-line comment saying why.

    ## Why
    An Estimator under `MirroredStrategy` calls the input_fn's dataset once per replica and
    step: each replica gets a batch of `n`. Keras `fit` splits one global batch across the
    replicas. Keeping `batch(n)` would give each replica `n / replicas` examples, change the
    number of steps, and train to different weights; on TensorFlow 2.16+ it can crash when
    a replica receives an empty batch.

    ## Fix safety
    Safe: with the scaled batch, the canonical 2-replica program trains to bit-identical
    weights (fixture `seed_mirrored_linear`). One difference remains for *finite* datasets:
    an Estimator drops the last round of per-replica batches when fewer than
    `num_replicas` remain, while Keras trains on that remainder. `e2k parity` reports it as a
    step-count difference.

    When the strategy is not a module-level variable, the input_fn cannot read its replica
    count; the batch is then scaled where the input_fn is called, where the strategy is in
    sight: `lambda: input_fn(x, y, 8)` becomes `input_fn(x, y, 8 * strategy.num_replicas_in_sync)`.
    That is done only when the batch size is a parameter of the input_fn that nothing else
    in it reads (a `shuffle(batch_size * 10)` would change too) and every call passes it.
    An input_fn passed by name that batches by a fixed size (`.batch(8)`, `.batch(BATCH_SIZE)`)
    gets that size as a parameter, defaulting to it (other callers see no change), and the
    Keras program passes the global size: `input_fn(batch_size=BATCH_SIZE *
    strategy.num_replicas_in_sync)`.

    Only what the Estimator read under the strategy grows. `train()` and a `TrainSpec` read
    under `train_distribute`; `evaluate()` and an `EvalSpec` only under `eval_distribute`:
    without it the Estimator evaluates on one device, one batch of the input_fn's size per
    step, and `predict()` is never distributed. An input_fn only those read keeps its batch
    (Keras splits it across the replicas: the same examples are evaluated, and
    `evaluate(steps=N)` reads the same N batches). An input_fn that training and such an
    evaluation with a number of steps share gets the global batch at the training call only
    (`input_fn(batch_size=BATCH_SIZE * strategy.num_replicas_in_sync)`, the evaluation calls
    `input_fn()`), or is marked E2K602 when that cannot be done: `steps=N` global batches would
    be N x replicas of the Estimator's batches.

    ## Limitations
    Otherwise (batches of different sizes in one input_fn, a size the input_fn computes
    itself), and when no `.batch()` is found, the input_fn is marked E2K602 for a human.

    ## References
    - https://www.tensorflow.org/guide/migrate/mirrored_strategy
    - https://www.tensorflow.org/tutorials/distribute/keras
    """

    code = "E2K602"
    summary = "per-replica .batch(n) under a strategy -> .batch(n * strategy.num_replicas_in_sync)"
    safety = Safety.SAFE
    order = 70

    cases = [
        Case(
            id="inline-strategy",
            before='''\
import tensorflow as tf

BATCH_SIZE = 16


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).shuffle(64).batch(BATCH_SIZE)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy())
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf

BATCH_SIZE = 16


def input_fn():
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).shuffle(64).batch(BATCH_SIZE * strategy.num_replicas_in_sync)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(input_fn())
''',
        ),
        Case(
            id="scaled-where-the-input-fn-is-called",
            before='''\
import tensorflow as tf


def input_fn(x, y, batch_size, training=True):
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if training:
        dataset = dataset.shuffle(8).repeat()
    return dataset.batch(batch_size)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(x, y):
    strategy = tf.distribute.MirroredStrategy()
    config = tf.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy)
    estimator = tf.estimator.Estimator(model_fn, config=config)
    estimator.train(lambda: input_fn(x, y, batch_size=4), steps=10)
    return estimator.evaluate(lambda: input_fn(x, y, 4, training=False))
''',
            after='''\
import tensorflow as tf


def input_fn(x, y, batch_size, training=True):
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if training:
        dataset = dataset.shuffle(8).repeat()
    return dataset.batch(batch_size)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


def main(x, y):
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    model.fit(input_fn(x, y, batch_size=4 * strategy.num_replicas_in_sync), steps_per_epoch=10)
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return model.evaluate(input_fn(x, y, 4 * strategy.num_replicas_in_sync, training=False), return_dict=True)
''',
        ),
        Case(
            id="fixed-size-becomes-a-parameter",
            before='''\
import tensorflow as tf

BATCH_SIZE = 16


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(BATCH_SIZE)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main():
    strategy = tf.distribute.MirroredStrategy()
    estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=strategy))
    estimator.train(input_fn, steps=10)
''',
            after='''\
import tensorflow as tf

BATCH_SIZE = 16


def input_fn(batch_size=BATCH_SIZE):
    # The Estimator batched per replica: the Keras program passes the global batch size.
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(batch_size)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


def main():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()
    model.fit(input_fn(batch_size=BATCH_SIZE * strategy.num_replicas_in_sync), steps_per_epoch=10)
''',
        ),
        Case(
            id="local-evaluation-keeps-its-batch",
            before='''\
import tensorflow as tf

BATCH_SIZE = 4


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat().batch(BATCH_SIZE)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 32, [[2.0]] * 32)).batch(BATCH_SIZE)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy())
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(train_input_fn, steps=10)
print(estimator.evaluate(eval_input_fn, steps=3))
''',
            after='''\
import tensorflow as tf

BATCH_SIZE = 4


def train_input_fn():
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat().batch(BATCH_SIZE * strategy.num_replicas_in_sync)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 32, [[2.0]] * 32)).batch(BATCH_SIZE)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(train_input_fn(), steps_per_epoch=10)
print(model.evaluate(eval_input_fn(), steps=3, return_dict=True))
''',
        ),
        Case(
            id="shared-input-fn-global-for-training-only",
            before='''\
import tensorflow as tf

BATCH_SIZE = 16


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat().batch(BATCH_SIZE)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


config = tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy())
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn, steps=5)
print(estimator.evaluate(input_fn, steps=2))
''',
            after='''\
import tensorflow as tf

BATCH_SIZE = 16


def input_fn(batch_size=BATCH_SIZE):
    # The Estimator batched per replica: the Keras program passes the global batch size.
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat().batch(batch_size)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(input_fn(batch_size=BATCH_SIZE * strategy.num_replicas_in_sync), steps_per_epoch=5)
print(model.evaluate(input_fn(), steps=2, return_dict=True))
''',
        ),
    ]

    def required(self, unit, plan, ctx):
        return _required(plan)

    def plan(self, unit, plan, ctx) -> None:
        if not (plan.has_strategy or plan.replicas_of_model):
            return
        reads = _Reads(unit, plan, ctx)
        for code in plan.input_code():
            if not reads.distributed(code):
                continue  # only a local evaluation or prediction reads it: the Estimator batched it whole
            batches = [
                call
                for call in iter_calls(code)
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in BATCH_METHODS
            ]
            if not batches:
                elsewhere = _called_elsewhere(code, ctx)
                if elsewhere:
                    plan.leftover(code, self.code, f"the dataset is batched in `{elsewhere}`, outside this file; pass it "
                                                   "the global batch (per replica x replicas)")
                else:
                    plan.leftover(code, self.code, "no .batch() found here; Keras needs a global batch (per replica x replicas)")
                continue
            if reads.counted_locally(code):
                # Shared with an evaluation that is not distributed and reads a number of batches:
                # only the training calls may get the global batch.
                if not _scale_at_call_sites(code, batches, plan, ctx, reads) and \
                        not _scale_factory_calls(code, batches, plan, ctx, reads) and \
                        not _batch_parameter(code, batches, plan, ctx, reads):
                    plan.leftover(code, self.code, "training and a local evaluate(steps=N) share this input_fn: the "
                                                   "Estimator evaluated N batches of this size on one device, so only "
                                                   "the training batch may grow; give evaluation its own input_fn")
                    continue
                plan.fixed(code, self.code, "per-replica batch -> global batch, for training only")
                continue
            if plan.strategy_name is None or plan.replicas_of_model:
                if not _scale_at_call_sites(code, batches, plan, ctx, reads) and \
                        not _scale_factory_calls(code, batches, plan, ctx, reads) and \
                        not _batch_parameter(code, batches, plan, ctx, reads):
                    plan.leftover(
                        batches[0], self.code, "the strategy is not visible here; multiply the batch by its num_replicas_in_sync"
                    )
                    continue
                plan.fixed(code, self.code, "per-replica batch -> global batch, where the input_fn is called")
                continue
            for call in batches:
                size = _batch_size_arg(call)
                if size is None:
                    plan.leftover(call, self.code, "this batch size could not be found; multiply it by the replica count")
                    continue
                plan.replace(size.value, _scaled(size.value, plan.strategy_name))
                plan.comment(ctx.enclosing_statement(call), WHY)
            plan.fixed(code, self.code, "per-replica batch -> global batch")


def _scale_at_call_sites(code: cst.CSTNode, batches: list[cst.Call], plan, ctx, reads: "_Reads") -> bool:
    """Scale the batch where the strategy is visible: at the lambdas' calls of the helper
    (``lambda: input_fn(x, y, 8, True)`` -> ``input_fn(x, y, 8 * strategy.num_replicas_in_sync,
    True)``). Only when every batch size is a parameter of the helper that nothing else in it
    reads or assigns (scaling it must change the batches and nothing else), and every call of
    the helper passes it. False: nothing was planned."""
    if plan.replicas_of_model:
        strategy = f"{plan.model_var}.distribute_strategy"
    elif plan.scope_strategy is not None:
        strategy = _emit.code(plan.scope_strategy)
    else:
        return False
    helper = next((d for d in plan.input_definitions() if d.body is code), None)
    calls = [call for input_fn in reads.scaled_input_fns() for call, fn in input_fn.helper_calls if fn is helper]
    if helper is None or not calls:
        return False
    names = [p.name.value for p in helper.params.params]
    sizes = [_batch_size_arg(call) for call in batches]
    if any(s is None or not isinstance(s.value, cst.Name) or s.value.value not in names for s in sizes):
        return False
    params = {s.value.value for s in sizes}
    for param in helper.params.params:
        if param.name.value in params:
            reads = accesses_of(ctx, param.name)
            if reads is None or {id(r) for r in reads} - {id(s.value) for s in sizes}:
                return False  # assigned again, or read other than as a batch size
    scaled = []
    for call in calls:
        if any(arg.star for arg in call.args):
            return False
        for param in params:
            index = names.index(param)
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            if arg is None and index < len(call.args) and call.args[index].keyword is None:
                arg = call.args[index]
            if arg is None:
                return False  # left at its default: no argument to scale
            scaled.append(arg.value)
    for value in scaled:
        plan.replace(value, _scaled(value, strategy))
    for statement in {id(s): s for s in map(ctx.enclosing_statement, calls)}.values():
        plan.comment(statement, WHY)
    return True


def _scale_factory_calls(code: cst.CSTNode, batches: list[cst.Call], plan, ctx, reads: "_Reads") -> bool:
    """Scale the batch where the strategy is visible, in the calls of an input_fn factory
    (``make_input_fn(320, batch_size)`` returning ``_input_fn``, which batches by the
    factory's ``batch_size``): ``make_input_fn(320, batch_size * strategy.num_replicas_in_sync)``
    for the input_fns training reads; the factory's other calls (a local evaluation) keep
    theirs. Only when every batch size is a parameter of the factory that nothing else reads
    or assigns, and every such call passes it. False: nothing was planned."""
    if plan.replicas_of_model:
        strategy = f"{plan.model_var}.distribute_strategy"
    elif plan.scope_strategy is not None:
        strategy = _emit.code(plan.scope_strategy)
    else:
        return False
    function = next((d for d in plan.input_definitions() if d.body is code), None)
    users = [i for i in reads.scaled_input_fns() if i.function is function and i.factory_call is not None]
    if function is None or not users:
        return False
    # The call of the factory itself (``train_input_fn = make_input_fn(...)`` when passed by
    # name); not one made inside another function, whose other callers would be scaled too.
    if any(u.chain is None or len(u.chain.frames) != 1 for u in users):
        return False
    factory = users[0].chain.frames[0][1]
    if any(u.chain.frames[0][1] is not factory for u in users):
        return False
    inner_scope = ctx.scope(function.body)
    names = [p.name.value for p in factory.params.params]
    sizes = [_batch_size_arg(call) for call in batches]
    if any(s is None or not isinstance(s.value, cst.Name) or s.value.value not in names
           or (inner_scope is not None and inner_scope.assignments[s.value.value]) for s in sizes):
        return False  # not the factory's parameter (or shadowed in the input_fn)
    params = {s.value.value for s in sizes}
    for param in factory.params.params:
        if param.name.value in params:
            found = accesses_of(ctx, param.name)
            if found is None or {id(r) for r in found} - {id(s.value) for s in sizes}:
                return False  # assigned again, or read other than as a batch size
    scaled = []
    for user in users:
        call = user.chain.frames[0][0]
        if any(arg.star for arg in call.args):
            return False
        for param in params:
            index = names.index(param)
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            if arg is None and index < len(call.args) and call.args[index].keyword is None:
                arg = call.args[index]
            if arg is None:
                return False  # left at its default: no argument to scale
            scope = ctx.scope(call)
            if not plan.replicas_of_model and (scope is None or strategy not in scope):
                return False  # the strategy is not visible where the factory is called
            scaled.append(arg.value)
    for value in {id(v): v for v in scaled}.values():
        plan.replace(value, _scaled(value, strategy))
    return True


def _batch_parameter(code: cst.CSTNode, batches: list[cst.Call], plan, ctx, reads: "_Reads") -> bool:
    """The strategy is local to a function and the input_fn batches by a fixed size
    (``.batch(8)``, ``.batch(BATCH_SIZE)``): the input_fn takes the size as a parameter whose
    default is that size (its other callers see no change), and the Keras program passes
    the global one: ``input_fn(batch_size=8 * strategy.num_replicas_in_sync)``. Only for an
    input_fn the Estimator called itself (passed by name) whose batches all have that one
    size. False: nothing was planned."""
    if plan.replicas_of_model:
        strategy = f"{plan.model_var}.distribute_strategy"
    elif plan.scope_strategy is not None:
        strategy = _emit.code(plan.scope_strategy)
    else:
        return False
    function = next((d for d in plan.input_definitions() if d.body is code), None)
    users = [i for i in reads.scaled_input_fns() if i.function is function and i.factory_call is None]
    if function is None or not users or any(i.lambda_ is not None for i in plan.input_fns if function in i.helpers):
        return False
    calls = [call for user in users for call in user.calls_made]
    sizes = [_batch_size_arg(call) for call in batches]
    if not calls or any(s is None for s in sizes) or len({_emit.code(s.value) for s in sizes}) != 1:
        return False
    size = sizes[0].value
    if _defaulted_parameter(size, sizes, function, calls, ctx):
        # `def train_input_fn(batch_size=16)` called with no size: the Keras program passes
        # the parameter its default times the replicas (`train_input_fn(batch_size=16 * n)`).
        default = next(p.default for p in function.params.params if p.name.value == size.value)
        for call in calls:
            scope = ctx.scope(call)
            if plan.scope_strategy is not None and not plan.replicas_of_model and (
                    scope is None or _emit.code(plan.scope_strategy) not in scope):
                # The strategy is local to where the model is built (a factory, or another
                # module): the model knows it.
                strategy = f"{plan.model_var}.distribute_strategy"
            passed = _emit.keyword_arg(size.value, _scaled(default, strategy))
            plan.replace(call, call.with_changes(args=_emit.call_args([*call.args, passed])))
        return True
    if not _fixed_at_definition(size, function, ctx):
        return False
    params = function.params
    if params.star_arg != cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg:
        return False
    local = {n.value for n in _walk_names(function)}
    name = _emit.unique_name("batch_size", local)
    parameter = cst.Param(cst.Name(name), default=size.deep_clone(),
                          equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    if params.params and params.params[-1].comma == cst.MaybeSentinel.DEFAULT:
        plan.replace(params, params.with_changes(params=[*params.params[:-1], params.params[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), parameter]))
    else:
        plan.replace(params, params.with_changes(params=[*params.params, parameter]))
    for arg in sizes:
        plan.replace(arg.value, cst.Name(name))
    for call in calls:
        passed = _emit.keyword_arg(name, _scaled(size, strategy))
        plan.replace(call, call.with_changes(args=_emit.call_args([*call.args, passed])))
    plan.comment(ctx.enclosing_statement(batches[0]), WHY_PARAMETER)
    return True


WHY_PARAMETER = "The Estimator batched per replica: the Keras program passes the global batch size."


def _defaulted_parameter(size: cst.BaseExpression, sizes: list[cst.Arg], function: cst.FunctionDef,
                         calls: list[cst.Call], ctx) -> bool:
    """Is ``size`` a plain parameter of ``function`` with a literal default, read only as the
    batch size and passed by none of ``calls`` (the Estimator's own calls, with no arguments)?"""
    if not isinstance(size, cst.Name):
        return False
    param = next((p for p in function.params.params if p.name.value == size.value), None)
    if param is None or not isinstance(param.default, cst.Integer):
        return False
    reads = accesses_of(ctx, param.name)
    if reads is None or {id(r) for r in reads} - {id(s.value) for s in sizes}:
        return False  # assigned again, or read other than as a batch size
    return all(not call.args for call in calls)


def _fixed_at_definition(size: cst.BaseExpression, function: cst.FunctionDef, ctx) -> bool:
    """Can ``size`` be the parameter's default: a literal, or names bound outside the function
    (a module constant), never a value the function computes?"""
    if isinstance(size, cst.Integer):
        return True
    names = [n for n in _walk_names(size)]
    if not names or not isinstance(size, (cst.Name, cst.Attribute, cst.BinaryOperation)):
        return False
    scope = ctx.scope(function.body)
    for name in names:
        if ctx.parent(name) is not None and isinstance(ctx.parent(name), cst.Attribute) and ctx.parent(name).attr is name:
            continue
        if scope is not None and scope.assignments[name.value]:
            return False  # bound in the input_fn itself (a parameter, a local)
    return True


def _walk_names(node: cst.CSTNode):
    """The names ``node`` reads or binds: not an attribute's (``flags.batch_size``) or a
    keyword's (``batch(batch_size=8)``), which a new parameter of that name does not shadow."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        else:
            stack.extend(current.children)


def _called_elsewhere(code: cst.CSTNode, ctx) -> str | None:
    """The first call in ``code`` of a function imported from another module (``inputs.read(...)``)."""
    from estimator2keras._units import _single_assignment

    for call in iter_calls(code):
        root = call.func
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and ctx.api_path(call.func) is None:
            node = getattr(_single_assignment(ctx, root), "node", None)
            if isinstance(node, (cst.Import, cst.ImportFrom)):
                return _emit.code(call.func)
    return None


TRAIN_SIGNATURE = ("input_fn", "hooks", "steps", "max_steps", "saving_listeners")
EVALUATE_SIGNATURE = ("input_fn", "steps", "hooks", "checkpoint_path", "name")
TRAIN_SPEC = frozenset({"estimator.TrainSpec"})
EVAL_SPEC = frozenset({"estimator.EvalSpec"})
EVAL_SPEC_SIGNATURE = ("input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs", "throttle_secs")


class _Reads:
    """Which of the unit's input_fns the Estimator read under its strategy.

    ``train()`` and a TrainSpec read under ``train_distribute``; ``evaluate()`` and an EvalSpec
    only under ``eval_distribute`` (without it the Estimator evaluates on one device, a batch
    of the input_fn's size per step); ``predict()`` never. Code only local readers read keeps
    its batch: Keras splits it across the replicas and sees the same examples. Code shared by
    training and a local evaluation that reads a number of batches (``evaluate(steps=N)``)
    must keep it for that evaluation: N global batches would be N x replicas of the
    Estimator's batches."""

    def __init__(self, unit, plan, ctx):
        self.plan = plan
        self.ctx = ctx
        #: ``id`` of each expression passed as ``input_fn`` -> (read under the strategy, a count of batches)
        self.passed: dict[int, tuple[bool, bool]] = {}
        # Multi-worker programs evaluate apart (an evaluator task); their batches stay as they were planned.
        self.eval_distributed = unit.config_value("eval_distribute") is not None or plan.multi_worker
        for use in plan.uses("method", "train"):
            self._passed(bind_arguments(use.call, TRAIN_SIGNATURE), True, False)
        for use in plan.uses("method", "evaluate"):
            args = bind_arguments(use.call, EVALUATE_SIGNATURE)
            self._passed(args, self.eval_distributed, _given(args.get("steps")))
        for use in plan.uses("train_and_evaluate"):
            args = bind_arguments(use.call, ("estimator", "train_spec", "eval_spec"))
            train, _ = resolve_call(ctx, args["train_spec"].value, TRAIN_SPEC) if "train_spec" in args else (None, None)
            evaluation, _ = resolve_call(ctx, args["eval_spec"].value, EVAL_SPEC) if "eval_spec" in args else (None, None)
            if train is not None:
                self._passed(bind_arguments(train, ("input_fn",)), True, False)
            if evaluation is not None:
                spec = bind_arguments(evaluation, EVAL_SPEC_SIGNATURE)
                # No steps: EvalSpec's default of 100, which the converted program writes when the
                # input repeats (a finite one is read whole, as by the Estimator).
                counted = _given(spec.get("steps")) if "steps" in spec else self._repeats(spec.get("input_fn"))
                self._passed(spec, self.eval_distributed, counted)

    def _repeats(self, arg) -> bool:
        return arg is not None and any(
            i.may_repeat(self.ctx, "eval") for i in self.plan.input_fns if i.expr is arg.value)

    def _passed(self, args, distributed: bool, counted: bool) -> None:
        arg = args.get("input_fn")
        if arg is not None:
            before = self.passed.get(id(arg.value), (False, False))
            self.passed[id(arg.value)] = (before[0] or distributed, before[1] or counted)

    def _readers(self, code: cst.CSTNode):
        for input_fn in self.plan.input_fns:
            owned = [d.body for d in input_fn.definitions()]
            if input_fn.lambda_ is not None and not input_fn.helpers:
                owned.append(input_fn.lambda_.body)
            if any(node is code for node in owned):
                yield input_fn, self.passed.get(id(input_fn.expr))

    def distributed(self, code: cst.CSTNode) -> bool:
        """Does a reader under the strategy read ``code``? (True when a reader is not known.)"""
        return any(read is None or read[0] for _, read in self._readers(code))

    def counted_locally(self, code: cst.CSTNode) -> bool:
        """Does a local evaluation read a number of batches of ``code`` (that a distributed reader reads too)?"""
        return any(read is not None and not read[0] and read[1] for _, read in self._readers(code))

    def scaled_input_fns(self) -> list:
        """The input_fns whose calls get the global batch: those read under the strategy."""
        return [i for i in self.plan.input_fns if (self.passed.get(id(i.expr)) or (True,))[0]]


def _given(arg) -> bool:
    return arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")


def _required(plan) -> str | None:
    if plan.has_strategy:
        return "without it each replica would get a fraction of the batch it got from the Estimator"
    return None


def _batch_size_arg(call: cst.Call) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "batch_size":
            return arg if not arg.star else None
    return None


def _scaled(size: cst.BaseExpression, strategy: str) -> cst.BaseExpression:
    left = size.deep_clone()
    if isinstance(left, (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.Comparison)) and not left.lpar:
        left = left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return _emit.expr("{left} * {s}.num_replicas_in_sync", left=left, s=strategy)
