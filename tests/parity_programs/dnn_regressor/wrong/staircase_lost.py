"""WRONG MIGRATION (deliberate, for the parity tests): the exponential decay without
staircase=True: the rate decays continuously from the 2nd update instead of halving every 5,
so the learning rate of step 2 differs and the loss of step 3 is the first to differ.
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


def build_model():
  layers = [tf.keras.Input(shape=(4,))]
  for units in HIDDEN_UNITS:
    layers += [tf.keras.layers.Dense(units, activation="relu"), tf.keras.layers.Dropout(0.1)]
  layers.append(tf.keras.layers.Dense(1))
  model = tf.keras.Sequential(layers)
  learning_rate = tf.keras.optimizers.schedules.ExponentialDecay(0.01, decay_steps=5, decay_rate=0.5)
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
