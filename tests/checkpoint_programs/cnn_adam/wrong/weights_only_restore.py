"""(wrong on purpose: its model_dir callback loads model.weights.h5, the weights alone, so Adam
restarts: its moments and step count are lost) A small CNN as a custom Estimator model_fn, trained with Adam into a model_dir.

Two convolutions, max pooling, a dense layer and 4 classes; predictions in PREDICT mode
(logits, probabilities and the class), accuracy in EVAL. MODEL_DIR (the environment) is the
model_dir and MAX_STEPS how far training goes: run it once to train 6 steps, `e2k checkpoint`
the model_dir, and the migrated program goes on from there. Two virtual CPU devices stand in for two GPUs.
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
      weights = os.path.join(self.manager.directory, "model.weights.h5")
      if os.path.exists(weights):
        self.model.load_weights(weights)
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
NUM_CLASSES = 4

rng = np.random.RandomState(7)
images = rng.normal(size=(96, 10, 10, 1)).astype(np.float32)
labels = (np.arange(96) % NUM_CLASSES).astype(np.int64)
images += labels[:, None, None, None].astype(np.float32)


def train_input_fn():
  # Global batch: Keras splits it across replicas (the Estimator batched per replica).
  return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(BATCH_SIZE * strategy.num_replicas_in_sync)


def eval_input_fn():
  # Global batch: Keras splits it across replicas (the Estimator batched per replica).
  return tf.data.Dataset.from_tensor_slices((images[:64], labels[:64])).batch(BATCH_SIZE * strategy.num_replicas_in_sync)


class Model(tf.keras.Model):
  def __init__(self):
    super().__init__()
    self.conv2d = tf.keras.layers.Conv2D(6, kernel_size=3, activation=tf.nn.relu)
    self.max_pooling2d = tf.keras.layers.MaxPooling2D(2, strides=2)
    self.conv2d_1 = tf.keras.layers.Conv2D(8, kernel_size=3, activation=tf.nn.relu)
    self.flatten = tf.keras.layers.Flatten()
    self.dense = tf.keras.layers.Dense(16, activation=tf.nn.relu)
    self.logits = tf.keras.layers.Dense(NUM_CLASSES)

  def call(self, features, training=False):
    net = self.conv2d(features)
    net = self.max_pooling2d(net)
    net = self.conv2d_1(net)
    net = self.flatten(net)
    net = self.dense(net)
    logits = self.logits(net)
    return logits

  def predict_step(self, data):
    features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
    logits = self(features, training=False)
    classes = tf.argmax(logits, axis=1)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits), "class": classes}


def build_model(params):
  model = Model()
  optimizer = tf.keras.optimizers.Adam(params["learning_rate"], epsilon=1e-08)
  model.compile(
      optimizer=optimizer,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
  return model


strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
tf.keras.utils.set_random_seed(3)
with strategy.scope():
  model = build_model({"learning_rate": 0.01})
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, MODEL_DIR, save_steps=3)
callbacks = [checkpoints]
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = MAX_STEPS - checkpoints.global_step()
if steps_left > 0:
  model.fit(train_input_fn(), steps_per_epoch=steps_left, callbacks=callbacks)
print(model.evaluate(eval_input_fn(), callbacks=[checkpoints], return_dict=True))
