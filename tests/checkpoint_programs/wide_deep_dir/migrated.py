"""A wide & deep model (a canned DNNLinearCombinedClassifier, TF1) trained into a model_dir.

Two optimizers, the Estimator's defaults: Ftrl for the linear part (bucketized ages, a
vocabulary list with an out-of-vocabulary bucket, a hash-bucket column), Adagrad for the DNN
(numeric columns and embeddings of the vocabulary list and of the hash buckets). MODEL_DIR
(the environment) is the model_dir and MAX_STEPS how far training goes: run it once to
train 6 steps, `e2k checkpoint` the model_dir, and the migrated program goes on from there.
Two virtual CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow as tf
from e2k_helpers import head_metrics
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

rng = np.random.RandomState(6)
N = 96
age = rng.uniform(18, 80, N).astype(np.float32)
hours = rng.uniform(0, 60, N).astype(np.float32)
city = rng.choice(["paris", "rome", "oslo", "lima"], N)
job = rng.choice(["a", "b", "c", "d", "e"], N)
labels = ((age > 40).astype(np.int64) ^ (city == "rome").astype(np.int64))


def train_input_fn():
    features = {"age": age, "hours": hours, "city": city, "job": job}
    # Global batch: Keras splits it across replicas (the Estimator batched per replica).
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(BATCH_SIZE * strategy.num_replicas_in_sync)


def eval_input_fn():
    features = {"age": age[:64], "hours": hours[:64], "city": city[:64], "job": job[:64]}
    return tf.data.Dataset.from_tensor_slices((features, labels[:64])).batch(BATCH_SIZE)


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


class DNNLinearCombinedClassifierModel(tf.keras.Model):
    """The canned DNNLinearCombinedClassifier (tf.compat.v1.estimator) as a Keras model.

    Hidden units [8, 4], loss summed over the batch. `preprocess` computes
    what the feature columns did, in tf.data; `call` is the network.
    """

    def __init__(self, linear_optimizer):
        super().__init__()
        self.city_column_lookup = tf.keras.layers.StringLookup(
            vocabulary=["paris", "rome", "oslo"])
        self.city_column_oov = tf.keras.layers.Hashing(num_bins=1)
        self.job_column_hashing = tf.keras.layers.Hashing(num_bins=8)
        self.age_buckets = tf.keras.layers.Discretization(bin_boundaries=[30.0, 50.0])
        self.city_column_embedding = tf.keras.layers.Dense(
            3,
            use_bias=False,
            kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=3 ** -0.5))
        self.job_column_embedding = tf.keras.layers.Dense(
            2,
            use_bias=False,
            kernel_initializer=tf.keras.initializers.TruncatedNormal(stddev=2 ** -0.5))
        self.hiddenlayer_0 = tf.keras.layers.Dense(8, activation="relu")
        self.hiddenlayer_1 = tf.keras.layers.Dense(4, activation="relu")
        self.logits = tf.keras.layers.Dense(1)
        self.linear = LinearModel(1, ["age_bucketized", "city", "job"])
        self.head_loss = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction="sum")
        self.loss_tracker = tf.keras.metrics.Mean(name="loss")
        # The binary head's eval metrics (e2k's helpers module beside this file).
        self.head_metrics = head_metrics("binary", compat_v1=True)
        # Built here, in the Estimator's order (the DNN, then the linear model), so that the
        # linear model's own optimizer can be built before training.
        self.city_column_embedding.build((None, 4))
        self.job_column_embedding.build((None, 8))
        self.hiddenlayer_0.build((None, 7))
        self.hiddenlayer_1.build((None, 8))
        self.logits.build((None, 4))
        self.linear.build([(None, 3), (None, 4), (None, 8)])
        self.linear_optimizer = linear_optimizer
        self.linear_optimizer.build(self.linear.trainable_weights)

    def preprocess(self, features, labels=None):
        """Raw features -> the model's inputs, as the Estimator's feature columns computed them."""
        age_column = tf.reshape(tf.cast(features["age"], tf.float32), [-1, 1])
        hours_2 = tf.reshape(tf.cast(features["hours"] / 60.0, tf.float32), [-1, 1])
        city_values = tf.reshape(features["city"], [-1])
        # The Estimator's ids: the vocabulary's, then 1 out-of-vocabulary bucket; "" has no id (-1).
        city_column = self.city_column_lookup(city_values) - 1
        city_column = tf.where(city_column < 0, 3 + self.city_column_oov(city_values), city_column)
        city_column = tf.where(city_values == "", tf.constant(-1, tf.int64), city_column)
        job_values = tf.reshape(features["job"], [-1])
        job_column = self.job_column_hashing(job_values)
        # Feature columns ignore "": no id (-1).
        job_column = tf.where(job_values == "", tf.constant(-1, tf.int64), job_column)
        age_buckets = tf.reshape(self.age_buckets(age_column), [-1])
        inputs = (age_column, hours_2, city_column, job_column, age_buckets)
        if labels is None:
            return inputs
        labels = tf.reshape(labels, [-1, 1])
        return inputs, labels

    def call(self, inputs, training=False):
        if isinstance(inputs, dict):  # raw features, as a served model gets them
            inputs = self.preprocess(inputs)
        age_column, hours_2, city_column, job_column, age_buckets = inputs
        # Ids come as floats when Keras 3 first traces the model (on the replicas' mean batch).
        city_column = tf.cast(city_column, tf.int64)
        job_column = tf.cast(job_column, tf.int64)
        age_buckets = tf.cast(age_buckets, tf.int64)
        net = tf.concat([
            age_column,
            self.city_column_embedding(tf.one_hot(city_column, 4)),
            hours_2,
            self.job_column_embedding(tf.one_hot(job_column, 8)),
        ], axis=1)
        net = self.hiddenlayer_0(net)
        net = self.hiddenlayer_1(net)
        dnn_logits = self.logits(net)
        linear_logits = self.linear((
            tf.one_hot(age_buckets, 3),
            tf.one_hot(city_column, 4),
            tf.one_hot(job_column, 8),
        ))
        return dnn_logits + linear_logits

    def predict_step(self, data):
        """The Estimator's predictions for a batch, as its head made them."""
        if isinstance(data, tuple) and isinstance(data[0], (tuple, dict)):
            data = data[0]  # (inputs, labels): a dataset with labels
        logits = self(data, training=False)
        two_class_logits = tf.concat([tf.zeros_like(logits), logits], axis=1)
        class_ids = tf.argmax(two_class_logits, axis=1)[:, None]
        probabilities = tf.nn.softmax(two_class_logits)
        all_class_ids = tf.tile(tf.range(2)[None], [tf.shape(logits)[0], 1])
        return {
            "logits": logits,
            "logistic": tf.sigmoid(logits),
            "probabilities": probabilities,
            "class_ids": class_ids,
            "classes": tf.strings.as_string(class_ids),
            "all_class_ids": all_class_ids,
            "all_classes": tf.strings.as_string(all_class_ids),
        }

    @property
    def metrics(self):
        return [self.loss_tracker, *self.head_metrics]

    def train_step(self, data):
        inputs, labels = data
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        with tf.GradientTape() as tape:
            logits = self(inputs, training=True)
            loss = self.head_loss(labels, logits)
        linear_vars = self.linear.trainable_variables
        dnn_vars = [v for v in self.trainable_variables if all(v is not w for w in linear_vars)]
        gradients = tape.gradient(loss, dnn_vars + linear_vars)
        self.optimizer.apply_gradients(zip(gradients[:len(dnn_vars)], dnn_vars))
        self.linear_optimizer.apply_gradients(zip(gradients[len(dnn_vars):], linear_vars))
        return self.update_metrics(loss * replicas, labels, logits, None)

    def test_step(self, data):
        inputs, labels = data
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        logits = self(inputs, training=False)
        loss = self.head_loss(labels, logits)
        return self.update_metrics(loss * replicas, labels, logits, None)

    def update_metrics(self, loss, labels, logits, weights):
        # Like Keras's own: the loss over the global batch (a mean tracker counts each replica).
        self.loss_tracker.update_state(loss, sample_weight=tf.shape(logits)[0])
        for metric in self.head_metrics:
            metric.update_state(labels, logits, sample_weight=weights)
        return {m.name: m.result() for m in self.metrics}


# On CPUs, the default collective ops cannot gather the sparse gradients of embeddings and
# linear weights. Evaluation runs on one device: a binary head's metrics under eval_distribute
# are per-replica values the Estimator cannot fetch (TF 2.15).
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"],
                                          cross_device_ops=tf.distribute.ReductionToOneDevice())
tf.keras.utils.set_random_seed(3)
with strategy.scope():
    model = DNNLinearCombinedClassifierModel(linear_optimizer=tf.keras.optimizers.Ftrl(0.005))
    model.compile(optimizer=tf.keras.optimizers.Adagrad(0.001))
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, MODEL_DIR, save_steps=3)
callbacks = [checkpoints]
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = MAX_STEPS - checkpoints.global_step()
if steps_left > 0:
    model.fit(train_input_fn().map(model.preprocess), steps_per_epoch=steps_left, callbacks=callbacks)
print(model.evaluate(eval_input_fn().map(model.preprocess), callbacks=[checkpoints], return_dict=True))
