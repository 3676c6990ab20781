"""A custom model_fn whose evaluation ends with a partial batch: 60 examples in batches of 32.

The Estimator's eval loss is `tf.compat.v1.metrics.mean(loss)` over the evaluation's batches:
the mean of each batch's mean loss, the last batch of 28 examples weighing as much as the full
one. Keras weighs each batch by its examples (the mean over all 60). Both are right; they differ.
The model_fn reports no other eval metric, so the loss is all the evaluation compares.
"""
import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 16
EVAL_BATCH = 32

rng = np.random.RandomState(11)
x = rng.normal(size=(256, 4)).astype(np.float32)
y = (np.argmax(x[:, :3], axis=1)).astype(np.int32)
x_test = rng.normal(size=(60, 4)).astype(np.float32)
y_test = (np.argmax(x_test[:, :3], axis=1)).astype(np.int32)


def train_input_fn():
  return tf.compat.v1.data.Dataset.from_tensor_slices((x, y)).batch(PER_REPLICA_BATCH)


def eval_input_fn():
  return tf.compat.v1.data.Dataset.from_tensor_slices((x_test, y_test)).batch(EVAL_BATCH)


def model_fn(features, labels, mode, params):
  net = tf.compat.v1.layers.dense(features, 10, activation=tf.nn.relu)
  logits = tf.compat.v1.layers.dense(net, params["n_classes"])
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf.estimator.ModeKeys.EVAL:
    return tf.estimator.EstimatorSpec(mode, loss=loss)
  optimizer = tf.compat.v1.train.AdagradOptimizer(params["learning_rate"])
  train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy()
estimator = tf.estimator.Estimator(
    model_fn, params={"n_classes": 3, "learning_rate": 0.1},
    config=tf.estimator.RunConfig(train_distribute=strategy))
estimator.train(train_input_fn)
print(estimator.evaluate(eval_input_fn))
