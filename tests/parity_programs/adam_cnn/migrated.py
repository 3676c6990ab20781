"""The CNN of legacy.py, migrated by hand to Keras (runs on Keras 2 and Keras 3).

The same layers, Adam with TF1's epsilon written out (Keras's default is 1e-7, TF1's
1e-8), sparse categorical cross-entropy on logits, accuracy as a metric.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 16
EPOCHS = 20
NUM_CLASSES = 10
SIZE = 12

rng = np.random.RandomState(1234)
TEMPLATES = rng.normal(size=(NUM_CLASSES, SIZE, SIZE, 1)).astype(np.float32)


def _make_data(n):
  labels = np.arange(n) % NUM_CLASSES
  images = TEMPLATES[labels] + rng.normal(scale=1.5, size=(n, SIZE, SIZE, 1))
  return images.astype(np.float32), labels.astype(np.int64)


train_images, train_labels = _make_data(480)
eval_images, eval_labels = _make_data(128)

strategy = tf.distribute.MirroredStrategy()
# The Estimator's input_fn batched per replica; Keras splits a global batch across replicas.
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync


def train_dataset():
  dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
  return dataset.shuffle(480, seed=3).batch(GLOBAL_BATCH)


def eval_dataset():
  return tf.data.Dataset.from_tensor_slices((eval_images, eval_labels)).batch(GLOBAL_BATCH)


def build_model():
  model = tf.keras.Sequential([
      tf.keras.Input(shape=(SIZE, SIZE, 1)),
      tf.keras.layers.Conv2D(8, 3, activation="relu"),
      tf.keras.layers.MaxPooling2D(2, 2),
      tf.keras.layers.Conv2D(16, 3, activation="relu"),
      tf.keras.layers.MaxPooling2D(2, 1),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(32, activation="relu"),
      tf.keras.layers.Dropout(0.5),
      tf.keras.layers.Dense(NUM_CLASSES),
  ])
  model.compile(
      optimizer=tf.keras.optimizers.Adam(0.003, epsilon=1e-8),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])
  return model


with strategy.scope():
  model = build_model()

# repeat(EPOCHS) in the input_fn becomes epochs=EPOCHS.
model.fit(train_dataset(), epochs=EPOCHS, verbose=0)
print(model.evaluate(eval_dataset(), return_dict=True, verbose=0))
