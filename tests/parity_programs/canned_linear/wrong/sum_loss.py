"""WRONG MIGRATION (deliberate, for the parity tests): the loss sums over the batch where
the canned head averaged. The Estimator reported a SUM over replicas too, but of means:
the harness divides it by the replicas, and must still see that this loss differs at step 1.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 4

rng = np.random.RandomState(0)
x = rng.uniform(size=(32, 2)).astype(np.float32)
y = (x @ np.array([[1.0], [2.0]], dtype=np.float32) - 0.5).astype(np.float32)

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH = PER_REPLICA_BATCH * strategy.num_replicas_in_sync

with strategy.scope():
  features = tf.keras.Input(shape=(2,), name="x")
  model = tf.keras.Model({"x": features}, tf.keras.layers.Dense(1)(features))
  model.compile(optimizer=tf.keras.optimizers.SGD(0.2), loss=tf.keras.losses.MeanSquaredError(reduction="sum"),
                metrics=[tf.keras.metrics.MeanSquaredError(name="average_loss"),
                         tf.keras.metrics.MeanMetricWrapper(lambda y, p: y, name="label/mean"),
                         tf.keras.metrics.MeanMetricWrapper(lambda y, p: p, name="prediction/mean")])

dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(GLOBAL_BATCH)
model.fit(dataset, verbose=2)
print(model.evaluate(dataset, return_dict=True, verbose=0))
