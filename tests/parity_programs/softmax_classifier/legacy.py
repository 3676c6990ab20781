"""A softmax classifier as a custom Estimator model_fn, trained under MirroredStrategy.

Dict features, a hidden layer with batch normalisation, MomentumOptimizer, sparse softmax
cross-entropy, and accuracy as an evaluation metric. Three Gaussian blobs are generated
in the file.
"""
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1

PER_REPLICA_BATCH = 8
EPOCHS = 2
NUM_CLASSES = 3

rng = np.random.RandomState(7)
CENTRES = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]], dtype=np.float32)


def _make_data(n):
  labels = np.arange(n) % NUM_CLASSES
  points = CENTRES[labels] + rng.normal(scale=1.2, size=(n, 2)).astype(np.float32)
  return points.astype(np.float32), labels.astype(np.int64)


train_points, train_labels = _make_data(96)
eval_points, eval_labels = _make_data(48)


def train_input_fn():
  dataset = tf1.data.Dataset.from_tensor_slices(({"point": train_points}, train_labels))
  return dataset.repeat(EPOCHS).batch(PER_REPLICA_BATCH)


def eval_input_fn():
  dataset = tf1.data.Dataset.from_tensor_slices(({"point": eval_points}, eval_labels))
  return dataset.batch(PER_REPLICA_BATCH)


def model_fn(features, labels, mode, params):
  training = mode == tf1.estimator.ModeKeys.TRAIN
  net = tf1.layers.dense(features["point"], params["hidden_units"])
  net = tf1.layers.batch_normalization(net, training=training)
  net = tf.nn.relu(net)
  logits = tf1.layers.dense(net, NUM_CLASSES)
  predicted_classes = tf.argmax(logits, axis=1)
  if mode == tf1.estimator.ModeKeys.PREDICT:
    return tf1.estimator.EstimatorSpec(mode, predictions={"class": predicted_classes})

  loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf1.estimator.ModeKeys.EVAL:
    metrics = {"accuracy": tf1.metrics.accuracy(labels, predicted_classes)}
    return tf1.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

  optimizer = tf1.train.MomentumOptimizer(params["learning_rate"], momentum=0.9)
  # Batch normalisation's moving averages are updated by UPDATE_OPS.
  with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
    train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy()
config = tf1.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy)
classifier = tf1.estimator.Estimator(
    model_fn, config=config, params={"hidden_units": 16, "learning_rate": 0.1})
classifier.train(train_input_fn)
print(classifier.evaluate(eval_input_fn))
