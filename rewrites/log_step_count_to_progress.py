from __future__ import annotations

from estimator2keras import _emit
from estimator2keras._rule import Case, Safety, UnitRule


class LogStepCountToProgress(UnitRule):
    """RunConfig(log_step_count_steps=...) becomes the progress `fit` logs.

    ## What it does
    `log_step_count_steps=N` is carried by `fit`'s own progress logging (the loss and the
    steps per second, as the Estimator logged every N steps); `log_step_count_steps=None`
    turned that logging off and becomes `fit(..., verbose=0)`.

    ## Why
    The Estimator logged the loss, the global step and the steps per second every
    `log_step_count_steps` steps; Keras prints the same in its progress bar.

    ## Fix safety
    Safe: only what is printed changes. Keras updates its progress bar every step and shows
    the mean loss of the epoch so far rather than the last step's.

    ## References
    - https://www.tensorflow.org/api_docs/python/tf/keras/Model#fit
    """

    code = "E2K405"
    summary = "RunConfig(log_step_count_steps=...) -> fit's progress logging (None -> verbose=0)"
    safety = Safety.SAFE
    order = 35

    cases = [
        Case(
            id="quiet",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(log_step_count_steps=None))
estimator.train(input_fn)
''',
            after='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
model.fit(input_fn(), verbose=0)
''',
        ),
    ]

    def plan(self, unit, plan, ctx) -> None:
        steps = unit.config_value("log_step_count_steps")
        if steps is None:
            return
        plan.claimed_config.add("log_step_count_steps")
        if _emit.code(steps) == "None":
            plan.fit_keywords.append(_emit.keyword_arg("verbose", _emit.expr("0")))
            plan.fixed(steps, self.code, "log_step_count_steps=None -> fit(verbose=0)")
        else:
            plan.fixed(steps, self.code, "log_step_count_steps -> fit's progress logging")
