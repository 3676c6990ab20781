"""WRONG MIGRATION (deliberate, for the parity tests): the learning rate 10% too high (0.55
instead of 0.5). Step 1 agrees (same weights); its update does not.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 16
EPOCHS = 25
NUM_CLASSES = 4

rng = np.random.RandomState(77)
CENTRES = rng.normal(scale=1.0, size=(NUM_CLASSES, 8)).astype(np.float32)


def _make_data(n):
  labels = np.arange(n) % NUM_CLASSES
  points = CENTRES[labels] + rng.normal(scale=1.3, size=(n, 8))
  return points.astype(np.float32), labels.astype(np.int64)


train_points, train_labels = _make_data(256)
eval_points, eval_labels = _make_data(128)

strategy = tf.distribute.MirroredStrategy()
# The Estimator's input_fn batched per replica; Keras splits a global batch across replicas.
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync

with strategy.scope():
  model = tf.keras.Sequential([
      tf.keras.Input(shape=(8,)),
      tf.keras.layers.Dense(64, activation="relu"),
      tf.keras.layers.Dense(64, activation="relu"),
      tf.keras.layers.Dense(NUM_CLASSES),
  ])
  model.compile(
      optimizer=tf.keras.optimizers.Adagrad(0.55, initial_accumulator_value=0.1),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])

# repeat(EPOCHS) in the input_fn becomes epochs=EPOCHS.
model.fit(tf.data.Dataset.from_tensor_slices((train_points, train_labels)).batch(GLOBAL_BATCH),
          epochs=EPOCHS, verbose=0)
print(model.evaluate(tf.data.Dataset.from_tensor_slices((eval_points, eval_labels)).batch(GLOBAL_BATCH),
                     return_dict=True, verbose=0))
