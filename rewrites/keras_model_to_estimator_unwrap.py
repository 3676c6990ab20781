from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
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
    its Keras optimizer (E2K101), TF1 defaults written out.

    ## Why
    TensorFlow 2019-2021 tutorials wrapped Keras models with `model_to_estimator` to train
    them with `train_and_evaluate` and distribution strategies; the wrapper is gone with
    `tf.estimator` in TensorFlow 2.16, and the Keras model trains with `fit` under the same
    strategies.

    ## Fix safety
    Safe: the Estimator trained the Keras model's own loss, optimizer and metrics; `fit`
    does the same steps on the same batches.

    ## Limitations
    Not converted (the unit is left as it was, E2K902): `keras_model_path=` (load the model
    with `tf.keras.models.load_model`), `custom_objects`, `metric_names_map`,
    `export_outputs`, a model that is not a variable, and a RunConfig with a distribution
    strategy under whose `scope()` the model was not built (Keras needs its variables made
    there; `compile` enters the model's strategy itself). A model built under `with
    strategy.scope():` of the strategy the RunConfig is given by that name converts: `fit`
    trains it under that strategy, each replica's batch made the global one (E2K602).

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
        if not isinstance(model, cst.Name):
            raise Unsupported("the Keras model is not a variable e2k can use in the Estimator's place", unit.call, "E2K902")
        strategy = next((unit.config_value(k) for k in ("train_distribute", "eval_distribute", "experimental_distribute")
                         if unit.config_value(k) is not None), None)
        bound = resolve(ctx, model)
        if not isinstance(bound, Binding):
            raise Unsupported(f"`{model.value}` is not one model e2k can follow here", model, "E2K902")
        if strategy is not None and not _built_under(ctx, bound.statement, strategy):
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
        self._keras_optimizer(model, plan, ctx)
        plan.fixed(unit.call, self.code, f"model_to_estimator -> the Keras model `{model.value}` itself")

    def _keras_optimizer(self, model: cst.Name, plan, ctx) -> None:
        """`model.compile(optimizer=tf.train.GradientDescentOptimizer(0.2))`: Keras 3 takes
        no TF1 optimizer; the one it stands for, TF1 defaults written out."""
        scope = ctx.scope(model)
        for call in iter_calls(ctx.module):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "compile"
                    and isinstance(func.value, cst.Name) and func.value.value == model.value
                    and ctx.scope(func.value) is scope):
                continue
            for index, arg in enumerate(call.args):
                if not ((arg.keyword is None and index == 0) or (arg.keyword is not None and arg.keyword.value == "optimizer")):
                    continue
                value = arg.value
                path = ctx.call_api_path(value) if isinstance(value, cst.Call) else None
                rule = ctx.rules.expression_rule("optimizer", path) if path else None
                if rule is None:
                    continue
                plan.replace(value, rule().convert(value, ctx, plan.tf))
                plan.fixed(value, rule.code, f"`{path}` -> Keras")


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
