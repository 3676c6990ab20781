"""The label-smoothing classifier of legacy.py migrated to Keras: the smoothing kept.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 8
EPOCHS = 2
CLASSES = 3

rng = np.random.RandomState(7)


def _make_data(n):
  x = rng.normal(size=(n, 4)).astype(np.float32)
  labels = (np.argmax(x[:, :3] + 0.5 * x[:, 3:], axis=1)).astype(np.int64)
  return x, np.eye(CLASSES, dtype=np.float32)[labels]


train_x, train_y = _make_data(64)
eval_x, eval_y = _make_data(32)

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync

with strategy.scope():
  model = tf.keras.Sequential([
      tf.keras.Input(shape=(4,)),
      tf.keras.layers.Dense(16, activation="relu"),
      tf.keras.layers.Dense(CLASSES),
  ])
  model.compile(optimizer=tf.keras.optimizers.SGD(0.5), loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1))

model.fit(tf.data.Dataset.from_tensor_slices((train_x, train_y)).batch(GLOBAL_BATCH), epochs=EPOCHS, verbose=2)
print(model.evaluate(tf.data.Dataset.from_tensor_slices((eval_x, eval_y)).batch(GLOBAL_BATCH),
                     return_dict=True, verbose=0))
