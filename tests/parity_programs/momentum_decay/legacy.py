"""A softmax classifier Estimator trained with TF1's MomentumOptimizer under a staircase
learning-rate decay (halved every 3 updates), under MirroredStrategy.

TF1's Momentum multiplies its whole accumulator by the current rate, Keras's SGD(momentum=)
accumulates each gradient times the rate of its own step: the same update under a constant
rate, not after the rate changes. No Keras SGD migrates it exactly.
"""
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1

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


def train_input_fn():
  return tf1.data.Dataset.from_tensor_slices((train_x, train_y)).repeat(EPOCHS).batch(PER_REPLICA_BATCH)


def eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices((eval_x, eval_y)).batch(PER_REPLICA_BATCH)


def model_fn(features, labels, mode):
  net = tf1.layers.dense(features, 16, activation=tf.nn.relu)
  logits = tf1.layers.dense(net, CLASSES)
  loss = tf1.losses.softmax_cross_entropy(labels, logits)
  if mode == tf1.estimator.ModeKeys.EVAL:
    return tf1.estimator.EstimatorSpec(mode, loss=loss)
  global_step = tf1.train.get_global_step()
  optimizer = tf1.train.MomentumOptimizer(
      tf1.train.exponential_decay(0.1, global_step, 3, 0.5, staircase=True), momentum=0.9)
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss, global_step=global_step))


strategy = tf1.distribute.MirroredStrategy()
config = tf1.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy, tf_random_seed=42)
estimator = tf1.estimator.Estimator(model_fn, config=config)
estimator.train(train_input_fn)
print(estimator.evaluate(eval_input_fn))
