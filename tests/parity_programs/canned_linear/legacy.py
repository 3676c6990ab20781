"""A canned TF2 LinearRegressor on a numeric feature column, trained under MirroredStrategy.

TF2 canned heads average the loss over the batch (SUM_OVER_BATCH_SIZE), divide it by the
number of replicas themselves before their Keras optimizer's get_updates, and the Estimator
reports the SUM over replicas of the undivided losses — N times the loss it differentiates.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 4

rng = np.random.RandomState(0)
x = rng.uniform(size=(32, 2)).astype(np.float32)
y = (x @ np.array([[1.0], [2.0]], dtype=np.float32) - 0.5).astype(np.float32)


def input_fn():
  return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(PER_REPLICA_BATCH)


strategy = tf.distribute.MirroredStrategy()
regressor = tf.estimator.LinearRegressor(
    feature_columns=[tf.feature_column.numeric_column("x", shape=(2,))],
    optimizer="SGD",  # the canned default learning rate for linear models is 0.2
    config=tf.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy))
regressor.train(input_fn)
print(regressor.evaluate(input_fn))
