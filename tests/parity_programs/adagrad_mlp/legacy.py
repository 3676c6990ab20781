"""An MLP as a custom Estimator model_fn, trained with Adagrad at a large rate under
MirroredStrategy.

Two hidden ReLU layers of 64 units, sparse softmax cross-entropy over 4 classes, TF1's
AdagradOptimizer at 0.5 (initial accumulator 0.1, its default). The points (8 features, 4
interleaved spirals' worth of noise) are generated in the file.

A chaotic program on purpose: at this rate every update moves ReLU units across their
boundaries, so two runs that differ only in the last bit of their arithmetic separate.
"""
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1

PER_REPLICA_BATCH = 16
EPOCHS = 25
NUM_CLASSES = 4

rng = np.random.RandomState(77)
CENTRES = rng.normal(scale=1.0, size=(NUM_CLASSES, 8)).astype(np.float32)


def _make_data(n):
  labels = np.arange(n) % NUM_CLASSES
  points = CENTRES[labels] + rng.normal(scale=1.3, size=(n, 8))
  return points.astype(np.float32), labels.astype(np.int64)


train_points, train_labels = _make_data(256)  # 8 steps per epoch on 2 replicas
eval_points, eval_labels = _make_data(128)


def train_input_fn():
  dataset = tf1.data.Dataset.from_tensor_slices((train_points, train_labels))
  return dataset.repeat(EPOCHS).batch(PER_REPLICA_BATCH)


def eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices((eval_points, eval_labels)).batch(PER_REPLICA_BATCH)


def model_fn(features, labels, mode, params):
  net = features
  for _ in range(2):
    net = tf1.layers.dense(net, 64, activation=tf.nn.relu)
  logits = tf1.layers.dense(net, NUM_CLASSES)
  predicted_classes = tf.argmax(logits, axis=1)
  if mode == tf1.estimator.ModeKeys.PREDICT:
    return tf1.estimator.EstimatorSpec(mode, predictions={"class": predicted_classes})

  loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf1.estimator.ModeKeys.EVAL:
    metrics = {"accuracy": tf1.metrics.accuracy(labels, predicted_classes)}
    return tf1.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

  optimizer = tf1.train.AdagradOptimizer(params["learning_rate"])
  train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy()
config = tf1.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy, tf_random_seed=11)
classifier = tf1.estimator.Estimator(model_fn, config=config, params={"learning_rate": 0.5})
classifier.train(train_input_fn)
print(classifier.evaluate(eval_input_fn))
