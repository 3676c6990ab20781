"""The SUM-loss linear regression of legacy.py, migrated by hand to Keras.

The loss keeps reduction="sum": per replica, Keras then adds up the squared errors of
the replica's share of the global batch, and the replicas' gradients are summed — the
same update as the Estimator's.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 4

rng = np.random.RandomState(3)
features = rng.uniform(0.0, 2.0, size=(32, 3)).astype(np.float32)
labels = (features @ np.array([[0.5], [-1.0], [2.0]], dtype=np.float32) + 0.3).astype(np.float32)

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync

with strategy.scope():
  model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
  model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                loss=tf.keras.losses.MeanSquaredError(reduction="sum"))

model.fit(tf.data.Dataset.from_tensor_slices((features, labels)).batch(GLOBAL_BATCH), verbose=2)
