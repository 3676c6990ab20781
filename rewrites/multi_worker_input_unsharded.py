from __future__ import annotations

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule
from estimator2keras._units import resolve_call
from estimator2keras.rewrites.distribute_strategy_scope import STRATEGIES

UNSHARDED = '''
def {name}(dataset):
    """Every worker reads all of the dataset, as each worker's input_fn did under the Estimator."""
    options = {tf}.data.Options()
    options.experimental_distribute.auto_shard_policy = {tf}.data.experimental.AutoShardPolicy.OFF
    return dataset.with_options(options)
'''
KERAS_3 = (
    "MultiWorkerMirroredStrategy runs with Keras 2: on TensorFlow 2.16+ install tf-keras and set "
    "TF_USE_LEGACY_KERAS=1 (Keras 3 does not support it, keras-team/keras#20585)."
)


class MultiWorkerInputUnsharded(UnitRule):
    """Under MultiWorkerMirroredStrategy, each worker reads all of its input, as under the Estimator.

    ## What it does
    For an Estimator trained with `MultiWorkerMirroredStrategy` (or
    `CollectiveAllReduceStrategy`) across the workers `TF_CONFIG` names, the converted program
    creates the same strategy (E2K601) and passes every dataset it trains, evaluates or
    predicts on through `unsharded(dataset)`, a short function added to the file that turns
    tf.data's auto-sharding off. The batch size becomes global as under any strategy (E2K602).

    ## Why
    An Estimator called the input_fn on every worker and gave each replica the next batch of
    that worker's own, complete dataset: the workers did not split the data. Keras splits a
    dataset between workers by default (`AutoShardPolicy.AUTO`), which trains on other
    batches. With sharding off and the global batch, each replica again takes the batches
    in turn from its worker's complete dataset.

    ## Fix safety
    Safe on Keras 2 (TensorFlow 2.15; fixture `multi_worker`, two workers on localhost,
    bit-identical). Keras 3 cannot train with `MultiWorkerMirroredStrategy`
    (keras-team/keras#20585): on TensorFlow 2.16+ the program needs `tf-keras` and
    `TF_USE_LEGACY_KERAS=1`; a comment above the strategy says so. The strategy must be
    created before the program runs any TensorFlow operation, as TensorFlow requires for
    collective operations. With a `model_dir`, only the chief writes checkpoints there
    (E2K402).

    ## References
    - https://www.tensorflow.org/guide/migrate/multi_worker_cpu_gpu_training
    - https://www.tensorflow.org/tutorials/distribute/input#sharding
    """

    code = "E2K606"
    summary = "MultiWorkerMirroredStrategy: datasets read whole on every worker (auto-shard off), as the Estimator read them"
    safety = Safety.SAFE
    order = 31

    cases = [
        Case(
            id="two-workers",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 8, [[2.0]] * 8)).repeat().batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
config = tf.estimator.RunConfig(train_distribute=strategy)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn, max_steps=10)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K602 Global batch: Keras splits it across the replicas; the Estimator batched per replica.
import tensorflow as tf

from e2k_helpers import unsharded


def input_fn():
    return (
        tf.data.Dataset.from_tensor_slices(([[1.0]] * 8, [[2.0]] * 8))
        .repeat()
        .batch(2 * strategy.num_replicas_in_sync)
    )


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


# MultiWorkerMirroredStrategy runs with Keras 2: on TensorFlow 2.16+ install tf-keras and set
# TF_USE_LEGACY_KERAS=1 (Keras 3 does not support it, keras-team/keras#20585).
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build_model()
model.fit(unsharded(input_fn()), steps_per_epoch=10)
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        if not plan.multi_worker:
            return
        plan.dataset_wrapper = plan.add_helper(
            "unsharded", lambda name: _emit.statements(UNSHARDED, name=name, tf=plan.tf))
        strategy = unit.config_value("train_distribute")
        _, binding = resolve_call(ctx, strategy, frozenset(STRATEGIES))
        plan.comment(binding.statement if binding is not None else unit.statement, KERAS_3)
        plan.fixed(strategy, self.code, "multi-worker input: every worker reads its whole dataset, auto-sharding off")
