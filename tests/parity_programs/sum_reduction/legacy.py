"""A linear regression whose loss is a SUM over the batch, trained under MirroredStrategy.

With a SUM loss reduction the TF1 optimizer does not divide the loss by the number of
replicas, and the Estimator reports each step's loss as the SUM over replicas (the mean
when the optimizer did divide). The parity harness must compare it on Keras's scale.
"""
import numpy as np
import tensorflow.compat.v1 as tf1

PER_REPLICA_BATCH = 4

rng = np.random.RandomState(3)
features = rng.uniform(0.0, 2.0, size=(32, 3)).astype(np.float32)
labels = (features @ np.array([[0.5], [-1.0], [2.0]], dtype=np.float32) + 0.3).astype(np.float32)


def input_fn():
  return tf1.data.Dataset.from_tensor_slices((features, labels)).batch(PER_REPLICA_BATCH)


def model_fn(features, labels, mode):
  predictions = tf1.layers.dense(features, 1)
  loss = tf1.losses.mean_squared_error(
      labels, predictions, reduction=tf1.losses.Reduction.SUM)
  optimizer = tf1.train.GradientDescentOptimizer(0.01)
  train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy()
estimator = tf1.estimator.Estimator(
    model_fn, config=tf1.estimator.RunConfig(train_distribute=strategy))
estimator.train(input_fn)
