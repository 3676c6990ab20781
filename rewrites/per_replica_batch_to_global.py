from __future__ import annotations

import os

import libcst as cst

from estimator2keras import _emit
from estimator2keras._context import iter_calls
from estimator2keras._rule import Case, Safety, UnitRule
from estimator2keras._modelfn_read import _walk
from estimator2keras._units import accesses_of, bind_arguments, resolve_call

BATCH_METHODS = ("batch", "padded_batch")
WHY = "Global batch: Keras splits it across the replicas; the Estimator batched per replica."
WHY_PARAMETER = "The Estimator batched per replica: the Keras program passes the global batch size."
WHY_JOINED = "The Estimator gave each replica the next batch in turn: Keras reads them as one global batch."


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
    A size read from a dict the input_fn is given (`.batch(params["batch_size"])`, no other
    read of that entry) is scaled in a copy of the dict at the training call:
    `input_fn("train", dict(params, batch_size=params["batch_size"] * strategy.num_replicas_in_sync))`,
    and for the `params` the Estimator passed the input_fn itself, in the dict the Keras
    program passes: `input_fn(params={"batch_size": flags.batch_size * strategy.num_replicas_in_sync})`.
    A local evaluation keeps the Estimator's size. An input_fn factory's training call that
    leaves the batch size at a number the factory defaults to (`make_input_fn(TRAIN, None,
    True)` of `def make_input_fn(data, num_epochs, shuffle, batch_size=25)`) passes it, times
    the replicas (`batch_size=25 * strategy.num_replicas_in_sync`). A strategy the program made inline
    (`RunConfig(train_distribute=tf.distribute.MirroredStrategy())`) is named `strategy`
    where the model is built; the calls after that statement in the same function read it.
    An input_fn passed by name, or called by a lambda that returns its dataset (`lambda:
    input_fn(train_x, train_y, True)`), that batches by a fixed size (`.batch(8)`,
    `.batch(BATCH_SIZE)`, or a parameter's default the calls leave alone) gets that size as a
    parameter, defaulting to it (other callers, such as an evaluation the Estimator did not
    distribute, see no change), and the Keras program passes the global size:
    `input_fn(train_x, train_y, True, batch_size=8 * strategy.num_replicas_in_sync)`
    (fixture `canned_columns_from_constants`).

    When the input_fn computes the size itself (`batch_size // NUM_TOWERS`,
    `params["batch_size"] // 8`) or reads it again (a `set_shape`, a `shuffle` buffer),
    scaling the argument would not give `replicas` times its batch (`(10 * 2) // 4` is not
    `(10 // 4) * 2`). The batches are then joined where the Keras program reads the dataset:
    `model.fit(global_batches(train_input_fn(FLAGS.batch_size), strategy.num_replicas_in_sync))`,
    with `global_batches` emitted once per module. It joins each `num_replicas` consecutive
    batches, in order, into one global batch, which `fit` splits back across the replicas
    as the Estimator had given them (each replica took the input_fn's next batch in turn),
    and drops an incomplete last round as the Estimator did. The input_fn itself is left as
    it was. This is exact only when every batch is full, so it is done only when each
    `.batch()` has `drop_remainder=True` or reads an endless dataset (`repeat()` earlier in
    its chain, or in the value the function last assigned to the name it batches, not under
    an `if`). Fixture `main_strategy_computed_batch` trains to bit-identical weights on 2
    replicas on TF 2.15 and the newest TF; scaling its argument instead differs at step 1.

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

    A TPUEstimator's input_fns already batched globally (TPUStrategy splits their batch as
    the TPUEstimator did): in a program whose other branch builds an Estimator with no
    strategy, neither batch changes.

    ## Limitations
    Otherwise the input_fn is marked E2K602 for a human, with the reason: a computed size
    where a pass over finite data may end with a smaller batch (no `drop_remainder=True`, no
    `repeat()` before the batch: the Estimator gave that batch to one replica alone, which
    no global batch reproduces), `padded_batch` with a computed size (padded shapes differ
    between batches), a lambda that does more with the input_fn's dataset than return it,
    and when no `.batch()` is found. Where the strategy is not visible in the input_fn, each
    place the Keras program reads its dataset (`fit`, `evaluate`) is marked too: it reads the
    per-replica batches as global ones until the batch is changed where it is made.

    ## References
    - https://www.tensorflow.org/guide/migrate/mirrored_strategy
    - https://www.tensorflow.org/tutorials/distribute/keras
    """

    code = "E2K602"
    notes = (WHY, WHY_PARAMETER, WHY_JOINED)
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
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf

BATCH_SIZE = 16


def input_fn():
    return (
        tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
        .shuffle(64)
        .batch(BATCH_SIZE * strategy.num_replicas_in_sync)
    )


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
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf


def input_fn(x, y, batch_size, training=True):
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if training:
        dataset = dataset.shuffle(8).repeat()
    return dataset.batch(batch_size)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


def main(x, y):
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()
    model.fit(input_fn(x, y, batch_size=4 * strategy.num_replicas_in_sync), steps_per_epoch=10)
    return model.evaluate(
        input_fn(x, y, 4 * strategy.num_replicas_in_sync, training=False), return_dict=True
    )
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
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 The Estimator batched per replica: the Keras program passes the global batch size.
import tensorflow as tf

BATCH_SIZE = 16


def input_fn(batch_size=BATCH_SIZE):
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
            id="computed-batch-joined-where-fit-reads-it",
            before='''\
import tensorflow as tf

NUM_TOWERS = 4


def train_input_fn(batch_size):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.batch(batch_size // NUM_TOWERS, drop_remainder=True)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(flags):
    strategy = tf.distribute.MirroredStrategy()
    estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=strategy))
    estimator.train(lambda: train_input_fn(flags.batch_size), steps=10)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 The Estimator gave each replica the next batch in turn: Keras reads them as one global batch.
import tensorflow as tf

from e2k_helpers import global_batches

NUM_TOWERS = 4


def train_input_fn(batch_size):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.batch(batch_size // NUM_TOWERS, drop_remainder=True)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


def main(flags):
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()
    model.fit(
        global_batches(train_input_fn(flags.batch_size), strategy.num_replicas_in_sync),
        steps_per_epoch=10,
    )
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
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf

BATCH_SIZE = 4


def train_input_fn():
    return (
        tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
        .repeat()
        .batch(BATCH_SIZE * strategy.num_replicas_in_sync)
    )


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
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 The Estimator batched per replica: the Keras program passes the global batch size.
import tensorflow as tf

BATCH_SIZE = 16


def input_fn(batch_size=BATCH_SIZE):
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
        Case(
            id="entry-of-params-scaled-at-the-training-call",
            before='''\
import tensorflow as tf


def input_fn(mode, params):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = dataset.shuffle(64).repeat()
    return dataset.batch(params["batch_size"])


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main():
    params = {"batch_size": 16}
    config = tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy())
    estimator = tf.estimator.Estimator(model_fn, config=config)
    estimator.train(lambda: input_fn(tf.estimator.ModeKeys.TRAIN, params), steps=10)
    print(estimator.evaluate(lambda: input_fn(tf.estimator.ModeKeys.EVAL, params)))
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf


def input_fn(mode, params):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    if mode == "train":
        dataset = dataset.shuffle(64).repeat()
    return dataset.batch(params["batch_size"])


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


def main():
    params = {"batch_size": 16}
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()
    model.fit(
        input_fn(
            "train",
            dict(params, batch_size=params["batch_size"] * strategy.num_replicas_in_sync),
        ),
        steps_per_epoch=10,
    )
    print(model.evaluate(input_fn("eval", params), return_dict=True))
''',
        ),
        Case(
            id="params-the-estimator-passed-scaled-for-training",
            before='''\
import tensorflow as tf


def input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.repeat().batch(params["batch_size"])


def model_fn(features, labels, mode, params):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(flags):
    strategy = tf.distribute.MirroredStrategy()
    config = tf.estimator.RunConfig(train_distribute=strategy)
    estimator = tf.estimator.Estimator(model_fn, config=config, params={"batch_size": flags.batch_size})
    estimator.train(input_fn, steps=10)
    print(estimator.evaluate(input_fn, steps=2))
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 The Estimator batched per replica: the Keras program passes the global batch size.
import tensorflow as tf


def input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64))
    return dataset.repeat().batch(params["batch_size"])


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


def main(flags):
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = build_model()
    model.fit(
        input_fn(params={"batch_size": flags.batch_size * strategy.num_replicas_in_sync}),
        steps_per_epoch=10,
    )
    print(model.evaluate(input_fn(params={"batch_size": flags.batch_size}), steps=2, return_dict=True))
''',
        ),
    ]

    def required(self, unit, plan, ctx):
        return _required(plan)

    def plan(self, unit, plan, ctx) -> None:
        if not (plan.has_strategy or plan.replicas_of_model):
            return
        if unit.owner.code == "E2K604":
            # A TPUEstimator gave its input_fns the global batch (per host): TPUStrategy splits it
            # alike. Sharing the calls with an Estimator whose batches were per replica, the
            # replica count is right for one of them only.
            plan.leftover(unit.call, self.code, "this TPUEstimator's input_fns batch globally, while those of the "
                                                "Estimator it shares calls with batched per replica")
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
            if not batches and any(i.function is not None and i.function.body is code and i.helpers
                                   for i in plan.input_fns):
                continue  # `def train_input(): return inputs.input_fn(...)`: its helper batches (below)
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
                        not _scale_estimator_params(code, batches, plan, ctx, reads) and \
                        not _batch_parameter(code, batches, plan, ctx, reads):
                    why = _join_batches(code, batches, plan, ctx, reads)
                    if why is not None:
                        plan.leftover(code, self.code, "training and a local evaluate(steps=N) share this input_fn: "
                                                       "the Estimator evaluated N batches of this size on one device, "
                                                       f"so only the training batch may grow, and {why}; give "
                                                       "evaluation its own input_fn")
                        continue
                plan.fixed(code, self.code, "per-replica batch -> global batch, for training only")
                continue
            if plan.strategy_name is None or plan.replicas_of_model:
                if not _scale_at_call_sites(code, batches, plan, ctx, reads) and \
                        not _scale_factory_calls(code, batches, plan, ctx, reads) and \
                        not _scale_estimator_params(code, batches, plan, ctx, reads) and \
                        not _batch_parameter(code, batches, plan, ctx, reads):
                    why = _join_batches(code, batches, plan, ctx, reads)
                    if why is not None:
                        plan.leftover(batches[0], self.code, f"the strategy is not visible here, and {why}; multiply "
                                                             "the batch by its num_replicas_in_sync")
                        _note_consumers(code, plan, ctx, reads, self.code, batches[0])
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
    strategy = _strategy_code(plan)
    if strategy is None:
        return False
    helper = next((d for d in plan.input_definitions() if d.body is code), None)
    calls = [call for input_fn in reads.scaled_input_fns() for call, fn in input_fn.helper_calls if fn is helper]
    if helper is None or not calls:
        return False
    names = [p.name.value for p in helper.params.params]
    sizes = [_batch_size_arg(call) for call in batches]
    # Each size is a parameter (`batch(batch_size)`) or an entry of one (`batch(params["batch_size"])`).
    sources = [_sized_by(s.value, names) if s is not None else None for s in sizes]
    if any(source is None for source in sources):
        return False
    params = {param: key for param, key in sources}
    if len({(param, key) for param, key in sources}) != len(params):
        return False  # two entries of one parameter
    size_reads = {id(s.value if key is None else s.value.value) for s, (_, key) in zip(sizes, sources)}
    for param in helper.params.params:
        if param.name.value in params:
            reads = accesses_of(ctx, param.name)
            if reads is None:
                return False  # assigned again
            if not _read_only_as_sizes(ctx, reads, size_reads, params[param.name.value]):
                return False  # read other than as a batch size (and its dict's other entries)
    scaled = []
    for call in calls:
        if any(arg.star for arg in call.args):
            return False
        for param, key in params.items():
            index = names.index(param)
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            if arg is None and index < len(call.args) and call.args[index].keyword is None:
                arg = call.args[index]
            if arg is None:
                return False  # left at its default: no argument to scale
            if key is not None and not (isinstance(arg.value, (cst.Name, cst.Attribute)) and key.isidentifier()):
                return False  # the entry's dict would be computed twice
            scaled.append((arg.value, key))
    for value, key in scaled:
        if key is None:
            plan.replace(value, _scaled(value, strategy))
        else:
            plan.replace(value, _with_scaled_entry(value, key, strategy))  # `input_fn("train", params)`
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
    strategy = _strategy_code(plan)
    if strategy is None:
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
            if found is None or not _read_only_as_sizes(ctx, found, {id(s.value) for s in sizes}, None):
                return False  # assigned again, or read other than as a batch size
    scaled, passed = [], []
    defaults = {p.name.value: p.default for p in factory.params.params}
    for user in users:
        call = user.chain.frames[0][0]
        if any(arg.star for arg in call.args):
            return False
        for param in params:
            index = names.index(param)
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            if arg is None and index < len(call.args) and call.args[index].keyword is None:
                arg = call.args[index]
            if arg is None and not _literal_size(defaults.get(param)):
                return False  # left at a default the call cannot spell: no argument to scale
            scope = ctx.scope(call)
            if not plan.replicas_of_model and (scope is None or strategy not in scope) \
                    and not _bound_by_config_factory(plan, ctx, strategy, scope) \
                    and not _named_at_the_unit(plan, ctx, strategy, call):
                return False  # the strategy is not visible where the factory is called
            if arg is None:
                # `make_input_fn(TRAIN, None, True)` leaving `batch_size=25`: passed, times the replicas.
                passed.append((call, _emit.keyword_arg(param, _scaled(defaults[param], strategy))))
            else:
                scaled.append(arg.value)
    for value in {id(v): v for v in scaled}.values():
        plan.replace(value, _scaled(value, strategy))
    for call, keyword in passed:
        _pass_argument(plan, call, keyword, set())
    return True


def _literal_size(default: cst.BaseExpression | None) -> bool:
    """A parameter's default the caller can write too: a number."""
    return isinstance(default, cst.Integer)


def _named_at_the_unit(plan, ctx, strategy: str, call: cst.Call) -> bool:
    """``strategy`` is the name the Keras program gives the strategy made inline in the RunConfig
    (``RunConfig(train_distribute=tf.distribute.MirroredStrategy())``), bound where the model
    is built, and ``call`` comes after that in the same function."""
    if plan.strategy_made_inline is None or plan.strategy_made_inline != strategy:
        return False
    site = plan.unit.statement
    return ctx.scope(site) is ctx.scope(call) and ctx.position(call) > ctx.position(site)


def _bound_by_config_factory(plan, ctx, strategy: str, scope) -> bool:
    """``strategy`` is the name the call of the function that made the RunConfig binds in
    ``scope`` (``distribution_strategy = create_strategy(args)``, ``_prepare_config_factory``)."""
    made, binding = plan.unit.config_factory, plan.unit.config_binding
    site = binding.statement if binding is not None else plan.unit.statement  # (inline: before the model)
    return made is not None and made.strategy == strategy and scope is not None and ctx.scope(site) is scope


def _batch_parameter(code: cst.CSTNode, batches: list[cst.Call], plan, ctx, reads: "_Reads") -> bool:
    """The strategy is local to a function and the input_fn batches by a fixed size
    (``.batch(8)``, ``.batch(BATCH_SIZE)``): the input_fn takes the size as a parameter whose
    default is that size (its other callers see no change), and the Keras program passes
    the global one: ``input_fn(batch_size=8 * strategy.num_replicas_in_sync)``. Only for an
    input_fn the Estimator called itself (passed by name) whose batches all have that one
    size. False: nothing was planned."""
    strategy = _strategy_code(plan)
    if strategy is None:
        return False
    function = next((d for d in plan.input_definitions() if d.body is code), None)
    scaled = reads.scaled_input_fns()
    users = [i for i in scaled if i.function is function and i.factory_call is None]
    # `lambda: input_fn(train_x, train_y, True)`: the lambda's call of the function is where
    # the Keras program calls it (the lambda's body becomes the dataset fit reads).
    lambdas = [i for i in scaled if i.lambda_ is not None and function in i.helpers]
    if function is None or not users and not lambdas:
        return False
    if any(not any(f is function and c is i.lambda_.body for c, f in i.helper_calls) for i in lambdas):
        return False  # the lambda does more with the function's dataset than return it
    calls = [call for user in users for call in user.calls_made]
    own = {id(call) for call in calls}  # written by the plan (the Estimator called the function itself)
    calls += [call for i in lambdas for call, f in i.helper_calls if f is function]
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
            _pass_argument(plan, call, _emit.keyword_arg(size.value, _scaled(default, strategy)), own)
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
        _pass_argument(plan, call, _emit.keyword_arg(name, _scaled(size, strategy)), own)
    plan.comment(ctx.enclosing_statement(batches[0]), WHY_PARAMETER)
    return True


def _scale_estimator_params(code: cst.CSTNode, batches: list[cst.Call], plan, ctx, reads: "_Reads") -> bool:
    """The input_fn batches by an entry of the ``params`` the Estimator passed it
    (``def input_fn(params): ... .batch(params["batch_size"])``): the Keras program passes it
    those params with the global batch size where training reads it
    (``input_fn(params={"batch_size": FLAGS.batch_size * strategy.num_replicas_in_sync})``);
    a local evaluation keeps the Estimator's. Only when every batch size is that one entry,
    which the input_fn reads nowhere else, and ``params`` is not assigned. False: nothing
    was planned."""
    strategy = _strategy_code(plan)
    if strategy is None:
        return False
    function = next((d for d in plan.input_definitions() if d.body is code), None)
    users = [i for i in reads.scaled_input_fns() if i.function is function and i.lambda_ is None]
    if function is None or not users:
        return False
    if any(ctx.scope(i.expr) is not ctx.scope(plan.unit.statement) for i in users):
        # Read where the strategy the model is built under is not in sight: the model knows it.
        strategy = f"{plan.model_var}.distribute_strategy"
    names = [p.name.value for p in function.params.params]
    sizes = [_batch_size_arg(call) for call in batches]
    sources = {_sized_by(s.value, names) if s is not None else None for s in sizes}
    if len(sources) != 1 or None in sources:
        return False
    (param, key), = sources
    if param != "params" or key is None or not key.isidentifier():
        return False
    parameter = next(p for p in function.params.params if p.name.value == param)
    found = accesses_of(ctx, parameter.name)
    if found is None:
        return False
    if not _read_only_as_sizes(ctx, found, {id(s.value.value) for s in sizes}, key):
        return False  # `params` read whole, or its batch size read again
    calls = [call for user in users for call in user.calls_made]
    replaced = []
    for call in calls:
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "params"), None)
        if arg is None:
            return False
        given = arg.value
        if isinstance(given, cst.Dict):
            elements = list(given.elements)
            at = next((n for n, e in enumerate(elements) if isinstance(e, cst.DictElement)
                       and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == key), None)
            if at is None:
                return False
            elements[at] = elements[at].with_changes(value=_scaled(elements[at].value, strategy))
            value = given.with_changes(elements=elements)
        elif isinstance(given, (cst.Name, cst.Attribute)):
            value = _with_scaled_entry(given, key, strategy)
        else:
            return False
        args = [a.with_changes(value=value) if a is arg else a for a in call.args]
        replaced.append((call, call.with_changes(args=args)))
    for call, new in replaced:
        plan.replace(call, new)
    plan.comment(ctx.enclosing_statement(batches[0]), WHY_PARAMETER)
    return True


def _pass_argument(plan, call: cst.Call, passed: cst.Arg, own: set[int]) -> None:
    """``call`` passes ``passed`` too: a call the plan writes is replaced; one of the program
    (a lambda's body) is wrapped, so that other rules' edits inside it (ModeKeys as strings)
    are kept."""
    if id(call) in own:
        plan.replace(call, call.with_changes(args=_emit.call_args([*call.args, passed])))
    else:
        plan.wrap(call, lambda node: node.with_changes(args=_emit.call_args([*node.args, passed])))


JOINED = '''
def {name}(dataset, num_replicas):
    """The batches an Estimator gave its replicas in one step, as one global batch.

    Under a distribution strategy the Estimator gave each replica the input_fn's next batch
    in turn; Keras splits one global batch across the replicas, in order. Each num_replicas
    consecutive batches are joined, and an incomplete last round is dropped, as the
    Estimator dropped it."""

    def join(*batches):
        joined = {tf}.nest.map_structure(lambda t: {tf}.concat({tf}.unstack(t, num_replicas), 0), batches)
        return joined if len(joined) > 1 else joined[0]

    return dataset.batch(num_replicas, drop_remainder=True).map(join)
'''
#: Dataset methods that keep an endless dataset endless (between its repeat() and its batch()).
ENDLESS = ("map", "shuffle", "prefetch", "cache", "filter", "with_options")


def _join_batches(code: cst.CSTNode, batches: list[cst.Call], plan, ctx, reads: "_Reads") -> str | None:
    """The batch size is the input_fn's own business (computed: ``params["batch_size"] // 8``,
    read elsewhere in it: a ``set_shape``, a ``shuffle`` buffer) and the strategy is not
    visible there: where the Keras program reads the dataset, each ``num_replicas`` consecutive
    batches become one global batch (an emitted helper), which Keras splits across the
    replicas as the Estimator had given them. Exact when every batch is full: each
    ``.batch()`` drops its remainder, or reads an endless dataset (``repeat()`` before it).
    None: planned; else why it cannot be done."""
    if plan.replicas_of_model:
        strategy = f"{plan.model_var}.distribute_strategy"
    elif plan.scope_strategy is not None:
        strategy = _emit.code(plan.scope_strategy)
    else:
        return "the strategy is not known"
    function = next((d for d in plan.input_definitions() if d.body is code), None)
    if function is None:
        return "the input_fn is not a function of this program"
    for call in batches:
        if call.func.attr.value != "batch":
            return "padded batches may differ in shape from one to the next"
        if not _drops_remainder(call) and not _endless_before(call, function, ctx):
            return ("a pass over the data may end with a smaller batch (no drop_remainder=True, and no repeat() "
                    "before the batch whatever the input_fn is called with), which the Estimator gave one replica "
                    "alone")
    users = [i for i in reads.scaled_input_fns() if function in i.definitions()]
    if not users:
        return "e2k does not see where its dataset is read"
    for user in users:
        if user.alternatives or len(user.definitions()) != 1 or not user.datasets_made:
            return "its dataset is read with others'"
        if user.lambda_ is not None and not (
                len(user.helper_calls) == 1 and user.helper_calls[0][0] is user.lambda_.body):
            return "the lambda does more with its dataset than return it"
    helper = plan.add_helper("global_batches", lambda name: _emit.statements(JOINED, name=name, tf=plan.tf))
    for user in users:
        here = strategy
        scope = ctx.scope(user.expr)
        if not plan.replicas_of_model and (scope is None or strategy not in scope):
            here = f"{plan.model_var}.distribute_strategy"  # made in a function the model comes from
        for made in {id(d): d for d in user.datasets_made}.values():
            plan.wrap(made, lambda node, s=here: _emit.expr(
                "{h}({d}, {s}.num_replicas_in_sync)", h=helper, d=node, s=s))
    for statement in {id(s): s for s in (ctx.enclosing_statement(u.expr) for u in users)}.values():
        plan.comment(statement, WHY_JOINED)
    return None


def _drops_remainder(call: cst.Call) -> bool:
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "drop_remainder"), None)
    if arg is None and len(call.args) > 1 and call.args[1].keyword is None:
        arg = call.args[1]
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


def _endless_before(call: cst.Call, function: cst.FunctionDef, ctx) -> bool:
    """Does ``call`` (a ``.batch()``) read a dataset repeated without end: ``repeat()`` earlier in
    its chain of methods, or in the value last assigned to the name the chain starts from, by
    a statement of the function's own body (not under an ``if`` or a loop) before the batch's?"""
    node = call.func.value
    statement = ctx.enclosing_statement(call)
    body = list(function.body.body) if isinstance(function.body, cst.IndentedBlock) else []
    while True:
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method == "repeat":
                count = node.args[0].value if node.args else None
                return count is None or (isinstance(count, cst.Name) and count.value == "None")
            if method not in ENDLESS:
                return False
            node = node.func.value
        if not isinstance(node, cst.Name) or statement not in body:
            return False
        index = body.index(statement)
        value = None
        for earlier in reversed(body[:index]):
            if not isinstance(earlier, cst.SimpleStatementLine):
                if any(isinstance(n, cst.Name) and n.value == node.value for n in _walk_names(earlier)):
                    return False  # bound or read under an if, a loop, a with
                continue
            for small in earlier.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == node.value:
                    value = small.value
            if value is not None:
                statement = earlier
                break
        if value is None:
            return False
        node = value


def _defaulted_parameter(size: cst.BaseExpression, sizes: list[cst.Arg], function: cst.FunctionDef,
                         calls: list[cst.Call], ctx) -> bool:
    """Is ``size`` a plain parameter of ``function`` with a literal default, read only as the
    batch size and passed by none of ``calls`` (the Estimator's own calls, with no arguments,
    or a lambda's, ``lambda: input_fn(ModeKeys.TRAIN)``, with others)?"""
    if not isinstance(size, cst.Name):
        return False
    param = next((p for p in function.params.params if p.name.value == size.value), None)
    if param is None or not isinstance(param.default, cst.Integer):
        return False
    reads = accesses_of(ctx, param.name)
    if reads is None or {id(r) for r in reads} - {id(s.value) for s in sizes}:
        return False  # assigned again, or read other than as a batch size
    index = list(function.params.params).index(param)
    return all(not any(a.star for a in call.args)
               and sum(1 for a in call.args if a.keyword is None) <= index
               and not any(a.keyword is not None and a.keyword.value == size.value for a in call.args)
               for call in calls)


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
PREDICT_SIGNATURE = ("input_fn", "predict_keys", "hooks", "checkpoint_path", "yield_single_examples")
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
        for use in plan.uses("method", "predict"):
            # Never distributed: one batch of the input_fn's size per step, on one device.
            self._passed(bind_arguments(use.call, PREDICT_SIGNATURE), False, False)
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


def _note_consumers(code: cst.CSTNode, plan, ctx, reads: "_Reads", rule_code: str, batch: cst.Call) -> None:
    """Where the Keras program reads the datasets of an input_fn whose per-replica batch was
    left for a human: each such read says so too (it reads the Estimator's per-replica batches
    as global ones until the batch is changed where it is made)."""
    function = next((d for d in plan.input_definitions() if d.body is code), None)
    if function is None:
        return
    line = f"{os.path.basename(ctx.path_of(batch))}:{ctx.position(batch)[0]}"
    for user in reads.scaled_input_fns():
        if function in user.definitions():
            plan.leftover(user.expr, rule_code, (
                f"this dataset is batched per replica ({line}): Keras splits each batch across the replicas, "
                "so each replica trains on a part of what the Estimator gave it until that batch is multiplied by "
                "num_replicas_in_sync"))


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


def _strategy_code(plan) -> str | None:
    """The strategy as the code that scales a batch where the input_fn is called reads it: the
    model's (built in a factory or another module) or the one its scope is entered with."""
    if plan.replicas_of_model:
        return f"{plan.model_var}.distribute_strategy"
    if plan.scope_strategy is not None:
        return _emit.code(plan.scope_strategy)
    return None


def _read_only_as_sizes(ctx, reads: list[cst.Name], size_reads: set[int], key: str | None) -> bool:
    """Each of a parameter's ``reads`` is a batch size (``size_reads``: their ids) or, for a dict
    whose ``key`` entry is the size, an entry under another key (``params["learning_rate"]``)."""
    for read in reads:
        if id(read) in size_reads:
            continue
        if key is None:
            return False
        parent = ctx.parent(read)
        entry = _entry_key(parent if isinstance(parent, cst.Subscript) else None, read)
        if entry is None or entry == key:
            return False  # the dict read whole, changed, or its size read again
    return True


def _with_scaled_entry(value: cst.BaseExpression, key: str, strategy: str) -> cst.BaseExpression:
    """``params`` -> ``dict(params, batch_size=params["batch_size"] * strategy.num_replicas_in_sync)``."""
    entry = _emit.expr("{d}[{k}]", d=value.deep_clone(), k=cst.SimpleString(f'"{key}"'))
    return _emit.expr("dict({d}, {k}={size})", d=value.deep_clone(), k=key, size=_scaled(entry, strategy))


def _sized_by(size: cst.BaseExpression, names: list[str]) -> tuple[str, str | None] | None:
    """The parameter a batch size is (``batch_size``: (name, None)) or the entry of one it
    reads (``params["batch_size"]``: ("params", "batch_size")); None otherwise."""
    if isinstance(size, cst.Name) and size.value in names:
        return size.value, None
    if isinstance(size, cst.Subscript) and isinstance(size.value, cst.Name) and size.value.value in names:
        key = _entry_key(size, size.value)
        if key is not None:
            return size.value.value, key
    return None


def _entry_key(subscript: cst.Subscript | None, read: cst.Name) -> str | None:
    """``params["key"]`` read (not assigned) -> "key"; None for anything else."""
    if subscript is None or subscript.value is not read or len(subscript.slice) != 1:
        return None
    index = subscript.slice[0].slice
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)):
        return None
    return index.value.evaluated_value


def _scaled(size: cst.BaseExpression, strategy: str) -> cst.BaseExpression:
    left = size.deep_clone()
    if isinstance(left, (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.Comparison)) and not left.lpar:
        left = left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return _emit.expr("{left} * {s}.num_replicas_in_sync", left=left, s=strategy)
