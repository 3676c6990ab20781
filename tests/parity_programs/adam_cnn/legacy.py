"""A small CNN as a custom Estimator model_fn, trained with Adam under MirroredStrategy.

Two convolution + max-pooling blocks, a hidden dense layer with dropout, sparse softmax
cross-entropy over 10 classes, TF1's AdamOptimizer with its defaults (epsilon 1e-8), and
accuracy as an evaluation metric. The images (12x12, one channel: a noisy template per
class) are generated in the file.

A chaotic program on purpose: Adam divides each gradient by the root of its running
square, so rounding-level differences in tiny gradients become full-size steps, and two
runs that differ only in the last bit of their arithmetic separate after a few steps.
"""
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1

PER_REPLICA_BATCH = 16
EPOCHS = 20
NUM_CLASSES = 10
SIZE = 12

rng = np.random.RandomState(1234)
TEMPLATES = rng.normal(size=(NUM_CLASSES, SIZE, SIZE, 1)).astype(np.float32)


def _make_data(n):
  labels = np.arange(n) % NUM_CLASSES
  images = TEMPLATES[labels] + rng.normal(scale=1.5, size=(n, SIZE, SIZE, 1))
  return images.astype(np.float32), labels.astype(np.int64)


train_images, train_labels = _make_data(480)  # 15 steps per epoch on 2 replicas
eval_images, eval_labels = _make_data(128)


def train_input_fn():
  dataset = tf1.data.Dataset.from_tensor_slices((train_images, train_labels))
  return dataset.shuffle(480, seed=3).repeat(EPOCHS).batch(PER_REPLICA_BATCH)


def eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices((eval_images, eval_labels)).batch(PER_REPLICA_BATCH)


def model_fn(features, labels, mode, params):
  training = mode == tf1.estimator.ModeKeys.TRAIN
  net = tf1.layers.conv2d(features, 8, 3, activation=tf.nn.relu)
  net = tf1.layers.max_pooling2d(net, 2, 2)
  net = tf1.layers.conv2d(net, 16, 3, activation=tf.nn.relu)
  net = tf1.layers.max_pooling2d(net, 2, 1)
  net = tf1.layers.flatten(net)
  net = tf1.layers.dense(net, 32, activation=tf.nn.relu)
  net = tf1.layers.dropout(net, rate=params["dropout"], training=training)
  logits = tf1.layers.dense(net, NUM_CLASSES)
  predicted_classes = tf.argmax(logits, axis=1)
  if mode == tf1.estimator.ModeKeys.PREDICT:
    return tf1.estimator.EstimatorSpec(mode, predictions={"class": predicted_classes})

  loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf1.estimator.ModeKeys.EVAL:
    metrics = {"accuracy": tf1.metrics.accuracy(labels, predicted_classes)}
    return tf1.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

  optimizer = tf1.train.AdamOptimizer(params["learning_rate"])
  train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy()
config = tf1.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy, tf_random_seed=5)
classifier = tf1.estimator.Estimator(
    model_fn, config=config, params={"learning_rate": 0.003, "dropout": 0.5})
classifier.train(train_input_fn)
print(classifier.evaluate(eval_input_fn))
