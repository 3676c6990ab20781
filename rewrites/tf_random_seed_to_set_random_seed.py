from __future__ import annotations

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule


class TfRandomSeedToSetRandomSeed(UnitRule):
    """RunConfig(tf_random_seed=S) becomes `tf.keras.utils.set_random_seed(S)` before the model is built.

    ## What it does
    Emits `tf.keras.utils.set_random_seed(S)` right before the statement that builds the
    Keras model (and before its strategy is created).

    ## Why
    The Estimator set `S` as the graph-level seed of every graph it built, which made the
    initial weights, dropout masks and shuffles repeatable. Keras draws from the global seeds
    instead: `set_random_seed` sets TensorFlow's, and on Keras 3 also the Python and NumPy
    seeds its initializers draw from.

    ## Fix safety
    Review. The run is repeatable again, but with other random numbers than the Estimator's
    (TF1 graph and TF2 eager initializers draw differently from one seed), and
    `set_random_seed` also seeds Python's `random` and NumPy's global generator from that
    point on, which the Estimator did not: data drawn with them after the model is built
    changes.

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/keras/utils/set_random_seed
    - https://www.tensorflow.org/guide/migrate/migrating_estimator
    """

    code = "E2K403"
    summary = "RunConfig(tf_random_seed=S) -> tf.keras.utils.set_random_seed(S) before the model is built"
    safety = Safety.REVIEW
    order = 33

    cases = [
        Case(
            id="seed",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(tf_random_seed=42))
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


tf.keras.utils.set_random_seed(42)
model = build_model()
model.fit(input_fn())
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        seed = unit.config_value("tf_random_seed")
        if seed is None:
            return
        plan.claimed_config.add("tf_random_seed")
        if isinstance(seed, type(_emit.expr("None"))) and _emit.code(seed) == "None":
            return
        plan.before_build.insert(0, _emit.statement("{tf}.keras.utils.set_random_seed({s})", tf=plan.tf, s=seed))
        plan.fixed(seed, self.code, "tf_random_seed -> tf.keras.utils.set_random_seed")
