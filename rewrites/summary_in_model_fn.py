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
    the `TensorBoard` callback writing that value.

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
import tempfile
import time

import tensorflow as tf


class ModelDirCheckpoints(tf.keras.callbacks.Callback):
    """An Estimator's model_dir for a Keras model and its optimizer: the latest checkpoint is
    restored when the model first trains, evaluates or predicts, and training saves one every
    `save_steps` steps or `save_secs` seconds and when it ends, numbered by global step."""

    def __init__(self, model, directory, max_to_keep=5, keep_checkpoint_every_n_hours=None,
                 save_steps=None, save_secs=None, restore=True):
        super().__init__()
        # No model_dir (None, or a flag left empty): the Estimator used a temporary directory.
        directory = directory or tempfile.mkdtemp()
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        self.keep = (max_to_keep, keep_checkpoint_every_n_hours)
        self.manager = self.writer = tf.train.CheckpointManager(self.checkpoint, directory, *self.keep)
        if not model.distribute_strategy.extended.should_checkpoint:
            # Another worker than the chief of a multi-worker strategy: it saves too (the
            # variables are read collectively), but aside, as under an Estimator.
            self.writer = tf.train.CheckpointManager(self.checkpoint, tempfile.mkdtemp(), 1)
        self.save_steps = save_steps
        self.save_secs = save_secs
        self.restored = not restore

    def latest(self):
        """The latest checkpoint in the directory as it is now: like the Estimator, which read
        its model_dir when it ran, not when it was made (a program may empty it in between)."""
        latest = tf.train.latest_checkpoint(self.manager.directory)
        if latest and "_CHECKPOINTABLE_OBJECT_GRAPH" not in dict(tf.train.list_variables(latest)):
            # A TF1 checkpoint by variable names: the Keras model's variables have none of them.
            raise ValueError(f"{latest} is an Estimator's checkpoint, which this Keras model cannot restore: "
                             "convert the model_dir with `e2k checkpoint` (its docs: checkpoints.md)")
        return latest

    def global_step(self):
        """The step training goes on from: the latest checkpoint's until it is restored."""
        latest = None if self.restored else self.latest()
        if latest is None:
            return int(self.checkpoint.optimizer.iterations.numpy())
        return int(latest.rsplit("-", 1)[-1])

    def restore(self):
        # Not before: Keras 3 restores into a model under a distribution strategy only once
        # the model is built, which it is when a callback starts.
        if not self.restored:
            self.latest()
            fresh = tf.train.CheckpointManager(self.checkpoint, self.manager.directory, *self.keep)
            if self.writer is self.manager:
                self.writer = fresh
            self.manager = fresh
            self.manager.restore_or_initialize()
            self.restored = True

    def on_train_begin(self, logs=None):
        self.restore()
        self.step = self.saved_step = int(self.model.optimizer.iterations.numpy())
        self.saved_time = time.time()

    def on_test_begin(self, logs=None):
        self.restore()

    def on_predict_begin(self, logs=None):
        self.restore()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        steps_due = self.save_steps and self.step - self.saved_step >= self.save_steps
        secs_due = self.save_secs and time.time() - self.saved_time >= self.save_secs
        if steps_due or secs_due:
            self.save()

    def on_train_end(self, logs=None):
        if self.step != self.saved_step and (self.save_steps or self.save_secs):
            self.save()

    def save(self):
        self.writer.save(checkpoint_number=self.step)
        self.saved_step, self.saved_time = self.step, time.time()


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).batch(1)


# e2k: E2K404 summaries in the model_fn are not carried over; Keras logs metrics with the TensorBoard callback
def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=tf.keras.losses.MeanSquaredError())
    return model


model = build_model()
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, "/tmp/run", save_secs=600)
callbacks = [checkpoints]
model.fit(input_fn(), callbacks=callbacks)
''',
            findings=("E2K404",),
        ),
    ]
