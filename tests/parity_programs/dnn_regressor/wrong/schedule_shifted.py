"""WRONG MIGRATION (deliberate, for the parity tests): the staircase decay written by hand,
counting steps from 1 instead of the global step's 0: the rate halves one update early (the
5th instead of the 6th), so the learning rate of step 5 differs and the loss of step 6 is the
first to differ.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 8
EPOCHS = 3
HIDDEN_UNITS = (16, 8)

rng = np.random.RandomState(20240601)


def _make_data(n):
  x = rng.uniform(-1.0, 1.0, size=(n, 4)).astype(np.float32)
  y = (np.sin(2.0 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:]
       + 0.05 * rng.normal(size=(n, 1))).astype(np.float32)
  return x, y


train_x, train_y = _make_data(64)
eval_x, eval_y = _make_data(32)

strategy = tf.distribute.MirroredStrategy()
# The Estimator's input_fn batched per replica; Keras splits a global batch across replicas.
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync


def train_dataset():
  dataset = tf.data.Dataset.from_tensor_slices((train_x, train_y))
  return dataset.shuffle(64, seed=1).batch(GLOBAL_BATCH)


def eval_dataset():
  return tf.data.Dataset.from_tensor_slices((eval_x, eval_y)).batch(GLOBAL_BATCH)


class StaircaseDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
  """TF1's exponential_decay(0.01, global_step, 5, 0.5, staircase=True), written out by hand,
  counting steps from 1 (the global step of the first update is 0)."""

  def __call__(self, step):
    step = tf.cast(step, tf.float32) + 1.0
    return 0.01 * tf.pow(0.5, tf.floor(step / 5.0))

  def get_config(self):
    return {}


def build_model():
  layers = [tf.keras.Input(shape=(4,))]
  for units in HIDDEN_UNITS:
    layers += [tf.keras.layers.Dense(units, activation="relu"), tf.keras.layers.Dropout(0.1)]
  layers.append(tf.keras.layers.Dense(1))
  model = tf.keras.Sequential(layers)
  learning_rate = StaircaseDecay()
  model.compile(
      optimizer=tf.keras.optimizers.Adam(learning_rate, epsilon=0.1),
      loss=tf.keras.losses.MeanSquaredError(),
      metrics=[tf.keras.metrics.MeanAbsoluteError(name="mae")])
  return model


with strategy.scope():
  model = build_model()

# repeat(EPOCHS) in the input_fn becomes epochs=EPOCHS.
model.fit(train_dataset(), epochs=EPOCHS, verbose=2)
print(model.evaluate(eval_dataset(), return_dict=True, verbose=0))
