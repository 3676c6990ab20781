"""A DNN regressor as a custom Estimator model_fn, trained under MirroredStrategy.

Two hidden ReLU layers with dropout, Adam (epsilon 0.1, as TF's docs suggest for some
models) with a staircase exponential learning-rate decay, mean squared error, and
mean absolute error as an evaluation metric. Synthetic data is generated in the file.
"""
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1

PER_REPLICA_BATCH = 8
EPOCHS = 3
HIDDEN_UNITS = (16, 8)

rng = np.random.RandomState(20240601)


def _make_data(n):
  x = rng.uniform(-1.0, 1.0, size=(n, 4)).astype(np.float32)
  y = (np.sin(2.0 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:]
       + 0.05 * rng.normal(size=(n, 1))).astype(np.float32)
  return x, y


train_x, train_y = _make_data(64)
eval_x, eval_y = _make_data(32)


def train_input_fn():
  dataset = tf1.data.Dataset.from_tensor_slices((train_x, train_y))
  return dataset.shuffle(64, seed=1).repeat(EPOCHS).batch(PER_REPLICA_BATCH)


def eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices((eval_x, eval_y)).batch(PER_REPLICA_BATCH)


def model_fn(features, labels, mode, params):
  training = mode == tf1.estimator.ModeKeys.TRAIN
  net = features
  for units in params["hidden_units"]:
    net = tf1.layers.dense(net, units, activation=tf.nn.relu)
    net = tf1.layers.dropout(net, rate=0.1, training=training)
  predictions = tf1.layers.dense(net, 1)
  if mode == tf1.estimator.ModeKeys.PREDICT:
    return tf1.estimator.EstimatorSpec(mode, predictions=predictions)

  loss = tf1.losses.mean_squared_error(labels, predictions)
  if mode == tf1.estimator.ModeKeys.EVAL:
    metrics = {"mae": tf1.metrics.mean_absolute_error(labels, predictions)}
    return tf1.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

  global_step = tf1.train.get_global_step()
  learning_rate = tf1.train.exponential_decay(
      params["learning_rate"], global_step, decay_steps=5, decay_rate=0.5, staircase=True)
  optimizer = tf1.train.AdamOptimizer(learning_rate, epsilon=0.1)
  train_op = optimizer.minimize(loss, global_step=global_step)
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy()
config = tf1.estimator.RunConfig(
    train_distribute=strategy, eval_distribute=strategy, tf_random_seed=42)
estimator = tf1.estimator.Estimator(
    model_fn, config=config,
    params={"hidden_units": HIDDEN_UNITS, "learning_rate": 0.01})
estimator.train(train_input_fn)
print(estimator.evaluate(eval_input_fn))
