"""WRONG MIGRATION (deliberate, for the parity tests): the loss is the Keras default, a mean
over the global batch, where the Estimator summed. The reported loss differs from step 1
on, and every update is 8 times smaller (the global batch size).
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
                loss=tf.keras.losses.MeanSquaredError())

model.fit(tf.data.Dataset.from_tensor_slices((features, labels)).batch(GLOBAL_BATCH), verbose=2)
