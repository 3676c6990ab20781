from __future__ import annotations

import libcst as cst
from libcst.metadata import GlobalScope, QualifiedNameProvider

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule, Unsupported
from estimator2keras._symbols import tf2_respellings
from estimator2keras._units import resolve_call

STRATEGIES = {
    "distribute.MirroredStrategy": "MirroredStrategy",
    "contrib.distribute.MirroredStrategy": "MirroredStrategy",
    "distribute.OneDeviceStrategy": "OneDeviceStrategy",
    "contrib.distribute.OneDeviceStrategy": "OneDeviceStrategy",
    "distribute.MultiWorkerMirroredStrategy": "MultiWorkerMirroredStrategy",
    "distribute.experimental.MultiWorkerMirroredStrategy": "MultiWorkerMirroredStrategy",
    "distribute.experimental.CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
    "contrib.distribute.CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
}
#: Strategies whose workers each run the program (TF_CONFIG names them).
MULTI_WORKER = frozenset({"MultiWorkerMirroredStrategy"})


class RunConfigDistributeToStrategyScope(UnitRule):
    """RunConfig(train_distribute=strategy) becomes a model built under `strategy.scope()`.

    ## What it does
    Takes the strategy given to `RunConfig(train_distribute=..., eval_distribute=...)`,
    keeps it as a variable (created with its TF2 name, `tf.distribute.MirroredStrategy`),
    and builds and compiles the Keras model inside `with strategy.scope():`. `fit`,
    `evaluate` and `predict` then run on all of the strategy's replicas.

    ## Why
    Keras has no RunConfig: a model is distributed by creating its variables, optimizer and
    metrics under the strategy's scope (TensorFlow's migration guide, "Migrate single-worker
    multiple-GPU training").

    ## Fix safety
    Safe together with E2K602, which turns the Estimator's per-replica batches into the
    global batches Keras splits across replicas; without it, each replica would see a
    fraction of the examples it saw before. The fixture `seed_mirrored_linear` (2 replicas)
    ends with bit-identical weights.

    ## Limitations
    `MirroredStrategy`, `OneDeviceStrategy`, and `MultiWorkerMirroredStrategy` /
    `CollectiveAllReduceStrategy` (E2K606 makes its input read as the Estimator read it).
    Different strategies for training and evaluation, or `eval_distribute` alone, are
    reported (E2K902) and not converted.

    ## References
    - https://www.tensorflow.org/guide/migrate/mirrored_strategy
    """

    code = "E2K601"
    summary = "RunConfig(train_distribute=S) -> the model built and compiled under S.scope()"
    safety = Safety.SAFE
    order = 30

    cases = [
        Case(
            id="named-strategy",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy()
config = tf.estimator.RunConfig(train_distribute=strategy)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[2.0], [4.0]])).batch(1 * strategy.num_replicas_in_sync)


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
    ]

    def required(self, unit, plan, ctx):
        if unit.config_value("train_distribute") is not None or unit.config_value("eval_distribute") is not None:
            return "the Estimator trains under a distribution strategy"
        return None

    def plan(self, unit, plan, ctx) -> None:
        train = unit.config_value("train_distribute")
        evaluation = unit.config_value("eval_distribute")
        if train is None and evaluation is None:
            return
        if train is None:
            raise Unsupported("only eval_distribute is set; e2k converts a training strategy", evaluation)
        if evaluation is not None and not evaluation.deep_equals(train):
            raise Unsupported("training and evaluation use different strategies", evaluation)
        call, binding = resolve_call(ctx, train, frozenset(STRATEGIES))
        if call is None:
            raise Unsupported("the strategy is not one e2k converts (MirroredStrategy, OneDeviceStrategy)", train)
        plan.claimed_config.update({"train_distribute", "eval_distribute"})
        plan.has_strategy = True
        plan.multi_worker = STRATEGIES[ctx.call_api_path(call)] in MULTI_WORKER
        tf2_class = _emit.expr("{tf}.distribute.{cls}", tf=plan.tf, cls=STRATEGIES[ctx.call_api_path(call)])
        if binding is not None:
            names = {q.name for q in ctx.get_metadata(QualifiedNameProvider, call.func, set())}
            through_v1 = any(n.startswith("tensorflow.compat.v1.") for n in names)
            if through_v1 or not call.func.deep_equals(tf2_class):
                plan.replace(call.func, tf2_class)
            for arg in call.args:
                for node, new in tf2_respellings(ctx, arg, plan.tf):
                    plan.replace(node, new)
            plan.scope_strategy = cst.Name(binding.name)
            if isinstance(ctx.scope(binding.target), GlobalScope):
                plan.strategy_name = binding.name
        else:
            scope = ctx.scope(unit.statement)
            name = _emit.unique_name("strategy", plan.names_taken())
            respelled = dict(tf2_respellings(ctx, call, plan.tf))
            created = _emit.replace_in(call, respelled).with_changes(func=tf2_class)
            plan.before_build.append(_emit.statement("{name} = {call}", name=name, call=created))
            plan.scope_strategy = cst.Name(name)
            if isinstance(scope, GlobalScope):
                plan.strategy_name = name
        plan.fixed(train, self.code, "the model is built and compiled under the strategy's scope")
