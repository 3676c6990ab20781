"""A canned LinearRegressor (TF1) trained with Ftrl (its default) into a model_dir.

Per-column weights linear/linear_model/<column>/weights and the bias, each with Ftrl's
accumulator and linear slots: two numeric features, a bucketized one, a vocabulary list
with an out-of-vocabulary bucket and an identity column. MODEL_DIR (the environment) is
the model_dir and MAX_STEPS how far training goes: run it once to train 6 steps,
`e2k checkpoint` the model_dir, and the migrated program goes on from there. Two virtual
CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow as tf
import time

# From RunConfig(session_config=...): TensorFlow 2 configures devices once, before any op runs.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2)


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
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours)
        self.writer = self.manager
        if not model.distribute_strategy.extended.should_checkpoint:
            # Another worker than the chief of a multi-worker strategy: it saves too (the
            # variables are read collectively), but aside, as under an Estimator.
            self.writer = tf.train.CheckpointManager(self.checkpoint, tempfile.mkdtemp(), 1)
        self.save_steps = save_steps
        self.save_secs = save_secs
        self.restored = not restore

    def global_step(self):
        """The step training goes on from: the latest checkpoint's until it is restored."""
        if self.restored or self.manager.latest_checkpoint is None:
            return int(self.checkpoint.optimizer.iterations.numpy())
        return int(self.manager.latest_checkpoint.rsplit("-", 1)[-1])

    def restore(self):
        # Not before: Keras 3 restores into a model under a distribution strategy only once
        # the model is built, which it is when a callback starts.
        if not self.restored:
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


MODEL_DIR = os.environ.get("MODEL_DIR") or tempfile.mkdtemp()
MAX_STEPS = int(os.environ.get("MAX_STEPS", "6"))
BATCH_SIZE = 8

rng = np.random.RandomState(5)
N = 96
length = rng.uniform(1, 10, N).astype(np.float32)
width = rng.uniform(1, 5, N).astype(np.float32)
color = rng.choice(["red", "green", "blue", "black"], N)
shelf = rng.randint(0, 6, N)
targets = (length * 0.5 - width + (color == "red") * 2.0 + shelf * 0.3 + rng.normal(0, 0.1, N)).astype(np.float32)


def train_input_fn():
    features = {"length": length, "width": width, "color": color, "shelf": shelf}
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices((features, targets)).repeat().batch(BATCH_SIZE * strategy.num_replicas_in_sync)


def eval_input_fn():
    features = {"length": length[:64], "width": width[:64], "color": color[:64], "shelf": shelf[:64]}
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices((features, targets[:64])).batch(BATCH_SIZE * strategy.num_replicas_in_sync)


class LinearModel(tf.keras.layers.Layer):
    """A canned Estimator's linear model: a weight matrix per feature column, created in the
    columns' name order, then the bias; all start at zero. Categorical columns come as
    one-hot rows, so a column adds the rows of its ids."""

    def __init__(self, units, column_names, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.column_names = column_names

    def build(self, input_shape):
        self.column_weights = [
            self.add_weight(name=f"{name}_weights", shape=(shape[-1], self.units), initializer="zeros")
            for name, shape in zip(self.column_names, input_shape)]
        self.bias = self.add_weight(name="bias_weights", shape=(self.units,), initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        weighted_sums = [tf.matmul(x, w) for x, w in zip(inputs, self.column_weights)]
        return tf.nn.bias_add(tf.add_n(weighted_sums), self.bias)


class LinearRegressorModel(tf.keras.Model):
    """The canned LinearRegressor (tf.compat.v1.estimator) as a Keras model.

    Loss summed over the batch. `preprocess` computes
    what the feature columns did, in tf.data; `call` is the network.
    """

    def __init__(self):
        super().__init__()
        self.length_bucketized = tf.keras.layers.Discretization(bin_boundaries=[3.0, 6.0])
        self.color_2_lookup = tf.keras.layers.StringLookup(vocabulary=["red", "green", "blue"])
        self.color_2_oov = tf.keras.layers.Hashing(num_bins=1)
        self.linear = LinearModel(1, ["color", "length", "length_bucketized", "shelf", "width"])

    def preprocess(self, features, labels=None):
        """Raw features -> the model's inputs, as the Estimator's feature columns computed them."""
        length_column = tf.reshape(tf.cast(features["length"], tf.float32), [-1, 1])
        width_2 = tf.reshape(tf.cast(features["width"], tf.float32), [-1, 1])
        length_bucketized = tf.reshape(self.length_bucketized(length_column), [-1])
        color_values = tf.reshape(features["color"], [-1])
        # The Estimator's ids: the vocabulary's, then 1 out-of-vocabulary bucket; "" has no id (-1).
        color_2 = self.color_2_lookup(color_values) - 1
        color_2 = tf.where(color_2 < 0, 3 + self.color_2_oov(color_values), color_2)
        color_2 = tf.where(color_values == "", tf.constant(-1, tf.int64), color_2)
        shelf_values = tf.reshape(features["shelf"], [-1])
        shelf_2 = tf.cast(shelf_values, tf.int64)
        inputs = (length_column, width_2, length_bucketized, color_2, shelf_2)
        if labels is None:
            return inputs
        labels = tf.reshape(labels, [-1, 1])
        return inputs, labels

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):  # raw features, as a served model gets them
            inputs = self.preprocess(inputs)
        length_column, width_2, length_bucketized, color_2, shelf_2 = inputs
        # Ids come as floats when Keras 3 first traces the model (on the replicas' mean batch).
        length_bucketized = tf.cast(length_bucketized, tf.int64)
        color_2 = tf.cast(color_2, tf.int64)
        shelf_2 = tf.cast(shelf_2, tf.int64)
        return self.linear((
            tf.one_hot(color_2, 4),
            length_column,
            tf.one_hot(length_bucketized, 3),
            tf.one_hot(shelf_2, 6),
            width_2,
        ))

    def predict_step(self, data):
        """The Estimator's predictions for a batch, as its head made them."""
        if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):
            data = data[0]  # (inputs, labels): a dataset with labels
        logits = self(data, training=False)
        return {"predictions": logits}


# On CPUs, the default collective ops cannot gather the sparse gradients of the linear weights.
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"],
                                          cross_device_ops=tf.distribute.ReductionToOneDevice())
tf.keras.utils.set_random_seed(3)
with strategy.scope():
    model = LinearRegressorModel()
    model.compile(
        optimizer=tf.keras.optimizers.Ftrl(0.2),
        loss=tf.keras.losses.MeanSquaredError(reduction="sum"),
        metrics=[tf.keras.metrics.MeanSquaredError(name="average_loss"),
                 tf.keras.metrics.MeanMetricWrapper(lambda y, p: y, name="label/mean"),
                 tf.keras.metrics.MeanMetricWrapper(lambda y, p: p, name="prediction/mean")])
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, MODEL_DIR, save_steps=3)
callbacks = [checkpoints]
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = MAX_STEPS - checkpoints.global_step()
if steps_left > 0:
    model.fit(train_input_fn().map(model.preprocess), steps_per_epoch=steps_left, callbacks=callbacks)
print(model.evaluate(eval_input_fn().map(model.preprocess), callbacks=[checkpoints], return_dict=True))
