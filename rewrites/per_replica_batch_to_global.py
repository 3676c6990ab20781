from __future__ import annotations

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._rule import Case, Safety, UnitRule

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

    ## Limitations
    The strategy must be a module-level variable (or defined in the function that also
    defines the input_fn) for the input_fn to read its replica count; otherwise, and when
    no `.batch()` is found, the input_fn is marked E2K602 for a human.

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
    ]

    def required(self, unit, plan, ctx):
        return _required(plan)

    def plan(self, unit, plan, ctx) -> None:
        if not plan.has_strategy:
            return
        for code in plan.input_code():
            batches = [
                call
                for call in iter_calls(code)
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in BATCH_METHODS
            ]
            if not batches:
                plan.leftover(code, self.code, "no .batch() found here; Keras needs a global batch (per replica x replicas)")
                continue
            if plan.strategy_name is None:
                plan.leftover(
                    batches[0], self.code, "the strategy is not visible here; multiply the batch by its num_replicas_in_sync"
                )
                continue
            for call in batches:
                size = _batch_size_arg(call)
                if size is None:
                    plan.leftover(call, self.code, "this batch size could not be found; multiply it by the replica count")
                    continue
                plan.replace(size.value, _scaled(size.value, plan.strategy_name))
                plan.comment(ctx.enclosing_statement(call), WHY)
            plan.fixed(code, self.code, "per-replica batch -> global batch")


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
