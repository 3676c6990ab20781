"""A canned DNNClassifier trained with Adagrad (its default) into a model_dir.

Two numeric features and a bucketized one, hidden units [8, 4], 3 classes. MODEL_DIR (the
environment) is the model_dir and MAX_STEPS how far training goes: run it once to train 6
steps, `e2k checkpoint` the model_dir, and the migrated program goes on from there. Two
virtual CPU devices stand in for two GPUs.
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

rng = np.random.RandomState(11)
height = rng.normal(size=96).astype(np.float32)
width = rng.normal(size=96).astype(np.float32)
labels = ((height > 0).astype(np.int64) + (width > 0.5).astype(np.int64))


def train_input_fn():
    features = {"height": height, "width": width}
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(BATCH_SIZE * strategy.num_replicas_in_sync)


def eval_input_fn():
    features = {"height": height[:64], "width": width[:64]}
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices((features, labels[:64])).batch(BATCH_SIZE * strategy.num_replicas_in_sync)


class DNNClassifierModel(tf.keras.Model):
    """The canned DNNClassifier (tf.compat.v1.estimator) as a Keras model.

    Hidden units [8, 4], 3 classes, loss summed over the batch. `preprocess` computes
    what the feature columns did, in tf.data; `call` is the network.
    """

    def __init__(self):
        super().__init__()
        self.height_bucketized = tf.keras.layers.Discretization(bin_boundaries=[-0.5, 0.0, 0.5])
        self.hiddenlayer_0 = tf.keras.layers.Dense(8, activation="relu")
        self.hiddenlayer_1 = tf.keras.layers.Dense(4, activation="relu")
        self.logits = tf.keras.layers.Dense(3)

    def preprocess(self, features, labels=None):
        """Raw features -> the model's inputs, as the Estimator's feature columns computed them."""
        height_column = tf.reshape(tf.cast(features["height"], tf.float32), [-1, 1])
        width_2 = tf.reshape(tf.cast(features["width"], tf.float32), [-1, 1])
        height_bucketized = tf.reshape(self.height_bucketized(height_column), [-1])
        inputs = (height_column, width_2, height_bucketized)
        if labels is None:
            return inputs
        return inputs, labels

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):  # raw features, as a served model gets them
            inputs = self.preprocess(inputs)
        height_column, width_2, height_bucketized = inputs
        # Ids come as floats when Keras 3 first traces the model (on the replicas' mean batch).
        height_bucketized = tf.cast(height_bucketized, tf.int64)
        net = tf.concat([
            height_column,
            tf.one_hot(height_bucketized, 4),
            width_2,
        ], axis=1)
        net = self.hiddenlayer_0(net)
        net = self.hiddenlayer_1(net)
        return self.logits(net)

    def predict_step(self, data):
        """The Estimator's predictions for a batch, as its head made them."""
        if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):
            data = data[0]  # (inputs, labels): a dataset with labels
        logits = self(data, training=False)
        class_ids = tf.argmax(logits, axis=1)[:, None]
        probabilities = tf.nn.softmax(logits)
        all_class_ids = tf.tile(tf.range(3)[None], [tf.shape(logits)[0], 1])
        return {
            "logits": logits,
            "probabilities": probabilities,
            "class_ids": class_ids,
            "classes": tf.strings.as_string(class_ids),
            "all_class_ids": all_class_ids,
            "all_classes": tf.strings.as_string(all_class_ids),
        }


strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
tf.keras.utils.set_random_seed(3)
with strategy.scope():
    model = DNNClassifierModel()
    model.compile(
        optimizer=tf.keras.optimizers.Adagrad(0.05),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum"),
        metrics=[
            tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            tf.keras.metrics.SparseCategoricalCrossentropy(name="average_loss", from_logits=True),
        ])
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, MODEL_DIR, save_steps=3)
callbacks = [checkpoints]
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = MAX_STEPS - checkpoints.global_step()
if steps_left > 0:
    model.fit(train_input_fn().map(model.preprocess), steps_per_epoch=steps_left, callbacks=callbacks)
print(model.evaluate(eval_input_fn().map(model.preprocess), callbacks=[checkpoints], return_dict=True))
