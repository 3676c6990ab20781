from __future__ import annotations

from estimator2keras._rule import Case, Diagnostic


class SummaryInModelFn(Diagnostic):
    """`tf.summary.*` calls in a model_fn: left out when they could not be seen, reported when they could.

    ## What it does
    A `tf.summary.scalar/histogram/image(...)` in a converted model_fn is not carried into
    the Keras model. When the Estimator had no `model_dir`, its summaries went to a
    temporary directory that nothing read: the summary is left out and the conversion says
    so (a `fixed` finding). When it had a `model_dir`, the summaries were something a
    human looked at in TensorBoard: the call is reported (E2K404) and marked, unless it is a
    `tf.summary.scalar` of what Keras logs itself at every step, the training loss or a metric
    the Keras model compiles (`tf.summary.scalar("train_accuracy", accuracy[1])` where
    `accuracy` is an `eval_metric_ops` metric): it is left out with a finding that says so,
    the `TensorBoard` callback writing that value. So is a `tf.summary.scalar` of the
    optimizer's learning rate (`tf.summary.scalar("learning_rate", lr)` of its decay): the
    callback writes it at the end of each epoch (on Keras 2, the rate of a schedule only).

    ## Why
    Keras writes the compiled metrics (and the loss) to TensorBoard through the
    `tf.keras.callbacks.TensorBoard` callback; arbitrary summaries of a graph have no place
    in a Keras model's forward pass.

    ## Fix safety
    Nothing that training computes changes. With a `model_dir`, add a `TensorBoard`
    callback to `fit` (metrics of `eval_metric_ops` are already compiled metrics).

    ## References
    - https://www.tensorflow.org/guide/migrate/tensorboard
    """

    code = "E2K404"
    summary = "tf.summary.* in a model_fn: left out without a model_dir, reported with one"

    cases = [
        Case(
            id="with-model-dir",
            before='''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features, 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    tf.summary.histogram("logits", logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(model_dir="/tmp/run"))
estimator.train(input_fn)
''',
            after='''\
# e2k converted this file to Keras (`e2k explain CODE` says more):
# - E2K402 ModelDirCheckpoints restores and saves checkpoints in model_dir, as the Estimator did.
import tensorflow as tf

from e2k_helpers import ModelDirCheckpoints


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


# e2k: E2K404 summaries in the model_fn are not carried over; Keras logs metrics with the TensorBoard callback
def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError()
    )
    return model


model = build_model()
checkpoints = ModelDirCheckpoints(model, "/tmp/run", save_secs=600)
model.fit(input_fn(), callbacks=[checkpoints])
''',
            findings=("E2K404",),
        ),
    ]
