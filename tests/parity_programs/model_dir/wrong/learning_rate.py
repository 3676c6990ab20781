"""WRONG: migrated.py with Adam's learning rate 0.04 instead of 0.05 (caught at step 2).

legacy.py as `e2k rewrite` converts it, plus a ModelCheckpoint saving weights into the model_dir and a
BackupAndRestore under it (what a hand-finished migration often adds).

The Estimator restores the latest checkpoint of its model_dir before training: `e2k parity`
must run it (and its migration, whose ModelDirCheckpoints callback does the same) in fresh
directories, so that a checkpoint left by an earlier run of either program is never restored,
and nothing is written into the user's directory. tests/test_parity_model_dir.py points
E2K_TEST_MODEL_DIR at a directory holding such a checkpoint.
"""
import argparse
import os

import numpy as np
import tensorflow as tf
import tempfile
import time


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


PER_REPLICA_BATCH = 8

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default=os.environ.get("E2K_TEST_MODEL_DIR", "/tmp/e2k_model_dir_legacy"))
parser.add_argument("--steps", type=int, default=12)
args = parser.parse_args()

rng = np.random.RandomState(5)
x = rng.normal(size=(192, 4)).astype(np.float32)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32)


def input_fn():
  # Global batch: Keras splits it across replicas (the Estimator batched per replica).
  return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(PER_REPLICA_BATCH * strategy.num_replicas_in_sync)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(32)


def build_model():
  model = tf.keras.Sequential([
      tf.keras.layers.Dense(8, activation=tf.nn.relu),
      tf.keras.layers.Dense(2),
  ])
  optimizer = tf.keras.optimizers.Adam(0.04, epsilon=1e-08)
  model.compile(
      optimizer=optimizer,
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
  model = build_model()
# The Estimator restored and saved checkpoints in its model_dir; so does this callback.
checkpoints = ModelDirCheckpoints(model, args.model_dir, save_steps=5)
callbacks = [checkpoints, tf.keras.callbacks.ModelCheckpoint(
                 os.path.join(args.model_dir, "weights-{epoch}.weights.h5"), save_weights_only=True),
             tf.keras.callbacks.BackupAndRestore(os.path.join(args.model_dir, "backup"))]
model.fit(input_fn(), steps_per_epoch=args.steps, callbacks=callbacks)
print(model.evaluate(eval_input_fn(), callbacks=[checkpoints], return_dict=True))
