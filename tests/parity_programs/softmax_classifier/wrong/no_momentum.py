"""WRONG MIGRATION (deliberate, for the parity tests): MomentumOptimizer(0.1, momentum=0.9)
became SGD(0.1), whose momentum defaults to 0. The first update is the same (the momentum
accumulator starts at zero), the second is not: step 3 is the first loss to differ.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 8
EPOCHS = 2
NUM_CLASSES = 3

rng = np.random.RandomState(7)
CENTRES = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]], dtype=np.float32)


def _make_data(n):
  labels = np.arange(n) % NUM_CLASSES
  points = CENTRES[labels] + rng.normal(scale=1.2, size=(n, 2)).astype(np.float32)
  return points.astype(np.float32), labels.astype(np.int64)


train_points, train_labels = _make_data(96)
eval_points, eval_labels = _make_data(48)

strategy = tf.distribute.MirroredStrategy()
# The Estimator's input_fn batched per replica; Keras splits a global batch across replicas.
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync


def train_dataset():
  dataset = tf.data.Dataset.from_tensor_slices(({"point": train_points}, train_labels))
  return dataset.batch(GLOBAL_BATCH)


def eval_dataset():
  dataset = tf.data.Dataset.from_tensor_slices(({"point": eval_points}, eval_labels))
  return dataset.batch(GLOBAL_BATCH)


def build_model(hidden_units=16, learning_rate=0.1):
  point = tf.keras.Input(shape=(2,), name="point")
  net = tf.keras.layers.Dense(hidden_units)(point)
  net = tf.keras.layers.BatchNormalization()(net)
  net = tf.keras.layers.ReLU()(net)
  logits = tf.keras.layers.Dense(NUM_CLASSES)(net)
  model = tf.keras.Model(inputs={"point": point}, outputs=logits)
  model.compile(
      optimizer=tf.keras.optimizers.SGD(learning_rate),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])
  return model


with strategy.scope():
  model = build_model()

# repeat(EPOCHS) in the input_fn becomes epochs=EPOCHS.
model.fit(train_dataset(), epochs=EPOCHS, verbose=2)
print(model.evaluate(eval_dataset(), return_dict=True, verbose=0))
