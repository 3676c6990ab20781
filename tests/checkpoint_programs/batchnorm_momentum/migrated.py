"""A regressor with batch normalisation (the UPDATE_OPS idiom) and a momentum optimizer,
checkpointing to its model_dir.

MODEL_DIR (the environment) is the model_dir and MAX_STEPS how far training goes: train it
once, `e2k checkpoint` the model_dir, and the migrated program resumes with the moving
statistics and the momentum accumulators. Two virtual CPU devices stand in for two GPUs.
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
MAX_STEPS = int(os.environ.get("MAX_STEPS", "8"))
NUM_FEATURES = 5

rng = np.random.RandomState(3)
x_train = rng.normal(size=(96, NUM_FEATURES)).astype(np.float32)
y_train = (x_train @ rng.normal(size=(NUM_FEATURES, 1))).astype(np.float32)
x_eval = rng.normal(size=(32, NUM_FEATURES)).astype(np.float32)
y_eval = (x_eval @ rng.normal(size=(NUM_FEATURES, 1))).astype(np.float32)


def train_input_fn():
  # Global batch: Keras splits it across replicas (the Estimator batched per replica).
  return tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(8 * strategy.num_replicas_in_sync)


def eval_input_fn():
  # Global batch: Keras splits it across replicas (the Estimator batched per replica).
  return tf.data.Dataset.from_tensor_slices((x_eval, y_eval)).batch(8 * strategy.num_replicas_in_sync)


class Model(tf.keras.Model):
  def __init__(self, params):
    super().__init__()
    self.dense = tf.keras.layers.Dense(params["hidden"], use_bias=False)
    self.batch_normalization = tf.keras.layers.BatchNormalization(momentum=0.9)
    self.predictions = tf.keras.layers.Dense(1)

  def call(self, features, training=False):
    net = self.dense(features)
    net = self.batch_normalization(net, training=training)
    net = tf.nn.relu(net)
    predictions = self.predictions(net)
    return predictions

  def predict_step(self, data):
    features, _, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
    predictions = self(features, training=False)
    return {"value": predictions}


def build_model(params):
  model = Model(params)
  optimizer = tf.keras.optimizers.SGD(params["learning_rate"], momentum=0.9)
  model.compile(optimizer=optimizer, loss=tf.keras.losses.MeanSquaredError())
  return model


strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
tf.keras.utils.set_random_seed(1)
with strategy.scope():
  model = build_model({"hidden": 12, "learning_rate": 0.02})
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, MODEL_DIR, save_steps=4)
callbacks = [checkpoints]
# max_steps counts from global step 0, as in the Estimator: train only the steps left.
steps_left = MAX_STEPS - checkpoints.global_step()
if steps_left > 0:
  model.fit(train_input_fn(), steps_per_epoch=steps_left, callbacks=callbacks)
print(model.evaluate(eval_input_fn(), callbacks=[checkpoints], return_dict=True))
