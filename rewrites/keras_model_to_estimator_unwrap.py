from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._modelfn_read import _walk
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._units import Binding, resolve

SIGNATURE = (
    "keras_model", "keras_model_path", "custom_objects", "model_dir", "config", "checkpoint_format",
    "metric_names_map", "export_outputs",
)
#: model_to_estimator arguments that change what the Estimator computes or exports.
NOT_CONVERTED = ("keras_model_path", "custom_objects", "metric_names_map", "export_outputs")


class KerasModelToEstimatorUnwrap(UnitRule):
    """A Keras model wrapped as an Estimator (`model_to_estimator`) is used as the model it is.

    ## What it does
    `estimator = tf.keras.estimator.model_to_estimator(keras_model=model, ...)` goes, and the
    Estimator's uses become the Keras model's: `estimator.train(input_fn, steps)` is
    `model.fit(input_fn(), steps_per_epoch=steps)`, `train_and_evaluate` is `fit` then
    `evaluate`, `predict` yields the model's outputs (E2K002, E2K003). The input_fns, the
    RunConfig settings (`model_dir` gives the checkpointing callback, E2K402) and the hooks
    convert as for any Estimator. A TF1 optimizer given to the model's `compile` becomes
    its Keras optimizer (E2K101), TF1 defaults written out. Keras's RMSprop (or `"rmsprop"`)
    becomes `KerasV2RMSprop`, a subclass written once in the file: model_to_estimator
    trained the model with Keras's OptimizerV2 optimizers (`tf.keras.optimizers.legacy` in
    TensorFlow 2.11-2.15, the only ones before), whose RMSprop without momentum divides by
    `sqrt(ms) + epsilon` where today's divides by `sqrt(ms + epsilon)` (a tester's program
    diverged at step 2; fixture `keras_model_rmsprop_to_estimator` passes e2k parity with the
    subclass, on TF 2.15 and the newest TF, and fails it without). Its other optimizers
    update alike (Adam in both takes the "epsilon hat" form).

    ## Why
    TensorFlow 2019-2021 tutorials wrapped Keras models with `model_to_estimator` to train
    them with `train_and_evaluate` and distribution strategies; the wrapper is gone with
    `tf.estimator` in TensorFlow 2.16, and the Keras model trains with `fit` under the same
    strategies.

    ## Fix safety
    Safe: the Estimator trained the Keras model's own loss, optimizer and metrics; `fit`
    does the same steps on the same batches.

    A Keras model made by a call of a function of the program (`model_to_estimator(
    keras_model=build_model(), ...)`) is built by that call where the Estimator was, under
    the strategy's scope. `KerasV2RMSprop` updates an embedding's sparse gradient as
    OptimizerV2 did: only the rows a batch looked up.

    ## Limitations
    A RunConfig with a distribution strategy needs the model built under the strategy's
    `scope()`, where Keras makes its variables (`compile` enters the model's strategy
    itself). A model built under `with strategy.scope():` of the strategy the RunConfig is
    given by that name converts: `fit` trains it under that strategy, each replica's batch
    made the global one (E2K602). A model built outside it, in the block that makes the
    strategy (`model = build_keras_model()` and the `model.add(...)` calls right after it),
    is built under it: `with strategy.scope():` goes around those statements, and a
    strategy made further down (`strategy = tf.distribute.MirroredStrategy()` after the
    model, TensorFlow's distribution examples) is made above them first, when its
    arguments read nothing the statements in between compute. A function of the program that
    builds the model and wraps it, given the RunConfig (`make_keras_estimator(output_dir,
    config)`), returns the model, and its call goes under the strategy's scope where the
    RunConfig was made.

    The TF1 optimizer the model was compiled with (given to `compile`, or bound to a name
    first, where the model is bound or in the function of the program that builds it)
    becomes its Keras optimizer; one e2k has no rule for is refused (Keras 3 takes no TF1
    optimizer). Under a distribution strategy the Estimator divided such a model's loss by
    the replica count twice (Keras's scaling and the TF1 optimizer's): it trained with
    gradients N times smaller, and reported a loss N times smaller, than `fit` does
    (verified with e2k parity on 2 replicas: identical weights to `fit` at learning rate /
    N). The converted program trains the model as written, and the report says how to
    reproduce the old training (E2K008).

    Not converted (the unit is left as it was, E2K902): `keras_model_path=` (load the model
    with `tf.keras.models.load_model`), `custom_objects`, `metric_names_map`,
    `export_outputs`, a model that is not a variable, and a model built outside the
    strategy's scope in another block than the strategy's, or before a strategy made from
    values computed after it.

    ## References
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K008"
    summary = "model_to_estimator(keras_model=model) -> the Keras model itself, trained with fit/evaluate"
    safety = Safety.SAFE
    order = 5
    constructors = ("keras.estimator.model_to_estimator",)
    signature = SIGNATURE

    cases = [
        Case(
            id="wrapped-sequential",
            before='''\
import numpy as np
import tensorflow as tf


def input_fn():
    x = np.random.random((64, 10)).astype(np.float32)
    y = np.random.randint(2, size=(64, 1))
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)


model = tf.keras.Sequential([tf.keras.layers.Dense(1, activation="sigmoid", input_shape=(10,))])
model.compile(loss="binary_crossentropy", optimizer=tf.train.GradientDescentOptimizer(0.2))
estimator = tf.keras.estimator.model_to_estimator(keras_model=model)
tf.estimator.train_and_evaluate(
    estimator,
    tf.estimator.TrainSpec(input_fn=input_fn, max_steps=10),
    tf.estimator.EvalSpec(input_fn=input_fn, steps=2),
)
''',
            after='''\
import numpy as np
import tensorflow as tf


def input_fn():
    x = np.random.random((64, 10)).astype(np.float32)
    y = np.random.randint(2, size=(64, 1))
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)


model = tf.keras.Sequential([tf.keras.layers.Dense(1, activation="sigmoid", input_shape=(10,))])
model.compile(loss="binary_crossentropy", optimizer=tf.keras.optimizers.SGD(0.2))
model.fit(input_fn(), steps_per_epoch=10)
model.evaluate(input_fn(), steps=2)
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if unit.owner is not type(self):
            return
        for name in NOT_CONVERTED:
            if name in unit.args:
                raise Unsupported(f"model_to_estimator({name}=...) is not converted", unit.args[name], "E2K902")
        model = unit.arg_value("keras_model")
        strategy = next((unit.config_value(k) for k in ("train_distribute", "eval_distribute", "experimental_distribute")
                         if unit.config_value(k) is not None), None)
        if isinstance(model, cst.Call) and isinstance(model.func, (cst.Name, cst.Attribute)) \
                and isinstance(resolve(ctx, model.func), cst.FunctionDef):
            # `model_to_estimator(keras_model=build_model(), ...)`: the model is built where the
            # Estimator was (under the strategy's scope, by the plan), by that call.
            plan.build.append(_emit.statement("{n} = {v}", n=plan.model_var, v=model))
            plan.predictions_kind = "output"
            plan.claimed_args.update({"keras_model", "config", "checkpoint_format"})
            self._keras_optimizer(cst.Name(plan.model_var), plan, ctx, strategy, builder_call=model)
            plan.fixed(unit.call, self.code, f"model_to_estimator -> the Keras model `{_emit.code(model.func)}()` "
                                             "builds")
            return
        if not isinstance(model, cst.Name):
            raise Unsupported("the Keras model is not a variable, nor a call of a function of the program, e2k "
                              "can use in the Estimator's place", unit.call, "E2K902")
        bound = resolve(ctx, model)
        if not isinstance(bound, Binding):
            raise Unsupported(f"`{model.value}` is not one model e2k can follow here", model, "E2K902")
        # A factory given the RunConfig (`make_keras_estimator(output_dir, config)`) builds the
        # model where it is called: that call goes under the strategy's scope (the plan's sites).
        at_site = unit.factory is not None and unit.config_parameter is not None \
            and ctx.within(bound.statement, (unit.factory,))
        if strategy is not None and not at_site and not _built_under(ctx, bound.statement, strategy) \
                and not _build_under_scope(ctx, plan, model, bound, strategy):
            if isinstance(strategy, cst.Name):
                how = (f"write `with {strategy.value}.scope():` around `{model.value} = ...` (the model's "
                       "construction), then convert")
            else:
                how = ("bind the strategy to a name (`strategy = ...`), build the model under `with "
                       "strategy.scope():` and give the RunConfig that name, then convert")
            raise Unsupported(f"the Keras model `{model.value}` is not built under the strategy's scope, where Keras "
                              f"needs it: {how}", strategy, "E2K902")
        plan.model_var = model.value
        plan.prebuilt = True
        plan.predictions_kind = "output"  # predict yields the model's outputs, as Keras does
        plan.claimed_args.update({"keras_model", "config", "checkpoint_format"})
        self._keras_optimizer(model, plan, ctx, strategy)
        plan.fixed(unit.call, self.code, f"model_to_estimator -> the Keras model `{model.value}` itself")

    def _keras_optimizer(self, model: cst.Name, plan, ctx, strategy=None, builder_call=None) -> None:
        """`model.compile(optimizer=tf.train.GradientDescentOptimizer(0.2))`, or an optimizer
        bound to a name first: Keras 3 takes no TF1 optimizer; the one it stands for, TF1
        defaults written out. A TF1 optimizer e2k has no rule for is refused. ``builder_call``:
        the model is what that call returns (no variable of the program holds it)."""
        scope = ctx.scope(model) if builder_call is None else None
        # Compiled where it is bound, or in the function of the program that builds it
        # (`model = build_keras_model()`, whose own `model.compile(...)` it returns).
        bound = resolve(ctx, model) if builder_call is None else Binding(model.value, None, model, builder_call)
        builder = resolve(ctx, bound.value.func) if isinstance(bound, Binding) and isinstance(bound.value, cst.Call) else None
        builder_calls = {id(c) for c in iter_calls(builder.body)} if isinstance(builder, cst.FunctionDef) else set()
        for call in iter_calls(ctx.module):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "compile" and isinstance(func.value, cst.Name)
                    and ((scope is not None and func.value.value == model.value and ctx.scope(func.value) is scope)
                         or id(call) in builder_calls)):
                continue
            for index, arg in enumerate(call.args):
                if not ((arg.keyword is None and index == 0) or (arg.keyword is not None and arg.keyword.value == "optimizer")):
                    continue
                value = arg.value
                if isinstance(value, cst.Name):  # `optimizer = tf.train.AdamOptimizer(...)` first
                    bound = resolve(ctx, value)
                    value = bound.value if isinstance(bound, Binding) else value
                path = ctx.call_api_path(value) if isinstance(value, cst.Call) else None
                if path in KERAS_RMSPROP or isinstance(value, cst.SimpleString) and str(
                        value.evaluated_value).lower() == "rmsprop":
                    # model_to_estimator trained it as Keras's OptimizerV2 RMSprop (`legacy` in
                    # TF 2.11+): without momentum, epsilon outside the root (parity: step 2 differed).
                    name = plan.add_helper("KerasV2RMSprop",
                                           lambda given: _emit.statements(KERAS_V2_RMSPROP, name=given, tf=plan.tf))
                    new = cst.Call(cst.Name(name)) if isinstance(value, cst.SimpleString) else value.with_changes(
                        func=cst.Name(name))
                    plan.replace(value, new)
                    plan.fixed(value, self.code, "Keras RMSprop -> the OptimizerV2 RMSprop model_to_estimator trained "
                                                 f"with (`{name}`: epsilon outside the root, without momentum)")
                    continue
                rule = ctx.rules.expression_rule("optimizer", path) if path else None
                if rule is None:
                    if path and path.startswith(("train.", "compat.v1.train.", "contrib.")):
                        raise Unsupported(f"the Keras model is compiled with `{path}`, a TF1 optimizer e2k has no Keras "
                                          "rule for (Keras 3 takes no TF1 optimizer)", value, "E2K902")
                    continue
                plan.replace(value, rule().convert(value, ctx, plan.tf))
                plan.fixed(value, rule.code, f"`{path}` -> Keras")
                if strategy is not None:
                    # Verified by running e2k parity (2 replicas, TF 2.15): the Estimator's loss
                    # and gradients were exactly those of the Keras program at lr / replicas.
                    plan.leftover(value, self.code, (
                        "under a distribution strategy, model_to_estimator trained a model compiled with a TF1 "
                        "optimizer on its loss divided by the replica count twice (by Keras and by the TF1 "
                        "optimizer): gradients, and the loss it reported, were N times smaller than `fit` "
                        "computes. The converted program trains the model as written; to reproduce the old "
                        "training, divide the learning rate by strategy.num_replicas_in_sync (exact for "
                        "gradient descent and momentum)"))


#: Keras's RMSprop, as a Keras model compiles it.
KERAS_RMSPROP = frozenset({"keras.optimizers.RMSprop", "keras.optimizers.rmsprop.RMSprop",
                           "keras.optimizers.experimental.RMSprop"})
#: model_to_estimator turned a Keras model's optimizer into Keras's OptimizerV2 one (the
#: `legacy` optimizers of TF 2.11+; before, the only ones): its RMSprop without momentum
#: divides by sqrt(ms) + epsilon, where today's Keras RMSprop divides by sqrt(ms + epsilon).
#: Keras 2 and Keras 3 keep the mean squares in `_velocities`, found by their own index.
KERAS_V2_RMSPROP = '''
class {name}({tf}.keras.optimizers.RMSprop):
    """Keras RMSprop as model_to_estimator trained with it (Keras's OptimizerV2 RMSprop, TF
    2.15's `legacy` one): without momentum, epsilon is added to the root of the mean square,
    where this RMSprop adds it under the root."""

    def update_step(self, gradient, variable, *learning_rate):
        if self.momentum > 0 or self.centered:  # the same update in both
            return super().update_step(gradient, variable, *learning_rate)
        lr = {tf}.cast(learning_rate[0] if learning_rate else self.learning_rate, variable.dtype)
        if hasattr(self, "_get_variable_index"):  # Keras 3
            velocity = self._velocities[self._get_variable_index(variable)]
        else:  # Keras 2 (TF 2.15)
            velocity = self._velocities[self._index_dict[self._var_key(variable)]]
        touched = None
        if isinstance(gradient, {tf}.IndexedSlices):
            # An embedding's rows: OptimizerV2 updated those a batch looked up, and no other.
            ones = {tf}.ones_like(gradient.indices, variable.dtype)
            rows = {tf}.math.unsorted_segment_max(ones, gradient.indices, {tf}.shape(variable)[0]) > 0
            touched = {tf}.reshape(rows, [-1] + [1] * (len(variable.shape) - 1))
        gradient = {tf}.convert_to_tensor(gradient)  # (duplicate rows summed, as OptimizerV2 did)
        mean_square = self.rho * velocity + (1 - self.rho) * {tf}.square(gradient)
        step = lr * gradient / ({tf}.sqrt(mean_square) + self.epsilon)
        if touched is not None:
            mean_square = {tf}.where(touched, mean_square, velocity)
            step = {tf}.where(touched, step, {tf}.zeros_like(step))
        velocity.assign(mean_square)
        variable.assign_sub(step)
'''


def _build_under_scope(ctx, plan, model: cst.Name, bound: Binding, strategy: cst.BaseExpression) -> bool:
    """``model = build_keras_model()`` (and ``model.add(...)`` right after it) in the block that
    makes the strategy (``strategy = tf.distribute.MirroredStrategy()``): the model is built
    under its scope, where Keras needs its variables; a strategy made further down is made
    first. Only when that moves nothing else: a `tf.distribute` strategy whose arguments read
    nothing the statements in between bind, and nothing in between reads it."""
    if not isinstance(strategy, cst.Name):
        return False
    made = resolve(ctx, strategy)
    if not isinstance(made, Binding) or not isinstance(made.value, cst.Call):
        return False
    if not (ctx.call_api_path(made.value) or "").startswith("distribute."):
        return False
    block = ctx.parent(bound.statement)
    if ctx.parent(made.statement) is not block or not hasattr(block, "body"):
        return False
    body = list(block.body)
    if bound.statement not in body or made.statement not in body:
        return False
    start, end = body.index(bound.statement), body.index(made.statement)
    moved = end > start  # made after the model: it moves above it
    building = [bound.statement]
    for statement in body[start + 1:end if moved else len(body)]:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        call = small.value if isinstance(small, cst.Expr) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "add"
                and isinstance(call.func.value, cst.Name) and call.func.value.value == model.value):
            break
        building.append(statement)  # `model.add(tf.keras.layers.Dense(...))`: its variables too
    if moved:
        between = body[start:end]
        bound_between = {n.value for statement in between for n in _walk(statement)
                         if isinstance(n, cst.Name) and isinstance(ctx.parent(n), (cst.AssignTarget, cst.For))}
        if any(isinstance(n, cst.Name) and n.value in bound_between for n in _walk(made.value)):
            return False
        if any(isinstance(n, cst.Name) and n.value == strategy.value for statement in between for n in _walk(statement)):
            return False
    scoped = _emit.statement("with {s}.scope():\n    pass", s=strategy.value)
    scoped = scoped.with_changes(body=cst.IndentedBlock(
        body=[building[0].with_changes(leading_lines=[]), *building[1:]]))
    plan.replace_statement(bound.statement, [made.statement.with_changes(leading_lines=[]), scoped] if moved else [scoped])
    for statement in building[1:]:
        plan.remove_statement(statement)
    if moved:
        plan.remove_statement(made.statement)
    plan.fixed(bound.statement, "E2K008", f"the Keras model `{model.value}` is built under the strategy's scope, where "
                                          "Keras needs its variables" + (" (the strategy is made first)" if moved else ""))
    return True


def _built_under(ctx, statement: cst.BaseStatement, strategy: cst.BaseExpression) -> bool:
    """Is ``statement`` inside ``with <strategy>.scope():`` (the strategy the RunConfig got,
    by the same name)?"""
    node = ctx.parent(statement)
    while node is not None:
        if isinstance(node, cst.With) and any(
                isinstance(item.item, cst.Call) and isinstance(item.item.func, cst.Attribute)
                and item.item.func.attr.value == "scope" and item.item.func.value.deep_equals(strategy)
                for item in node.items):
            return True
        node = ctx.parent(node)
    return False
