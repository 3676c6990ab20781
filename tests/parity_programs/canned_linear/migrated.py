"""The canned LinearRegressor of legacy.py, migrated by hand to Keras (Keras 2 and Keras 3).

The numeric column becomes a named input, the linear model one Dense unit, the head's mean
squared error over the batch Keras's default MeanSquaredError, and the canned SGD its
default learning rate, 0.2; the head's eval metrics are compiled as metrics.
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
  # The regression head's eval metrics: the mean loss and the means of labels and predictions.
  model.compile(optimizer=tf.keras.optimizers.SGD(0.2), loss=tf.keras.losses.MeanSquaredError(),
                metrics=[tf.keras.metrics.MeanSquaredError(name="average_loss"),
                         tf.keras.metrics.MeanMetricWrapper(lambda y, p: y, name="label/mean"),
                         tf.keras.metrics.MeanMetricWrapper(lambda y, p: p, name="prediction/mean")])

dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(GLOBAL_BATCH)
model.fit(dataset, verbose=2)
print(model.evaluate(dataset, return_dict=True, verbose=0))
