"""A small CNN as a custom Estimator model_fn, trained with Adam into a model_dir.

Two convolutions, max pooling, a dense layer and 4 classes; predictions in PREDICT mode
(logits, probabilities and the class), accuracy in EVAL. MODEL_DIR (the environment) is the
model_dir and MAX_STEPS how far training goes: run it once to train 6 steps, `e2k checkpoint`
the model_dir, and the migrated program goes on from there. Two virtual CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1

MODEL_DIR = os.environ.get("MODEL_DIR") or tempfile.mkdtemp()
MAX_STEPS = int(os.environ.get("MAX_STEPS", "6"))
BATCH_SIZE = 8
NUM_CLASSES = 4

rng = np.random.RandomState(7)
images = rng.normal(size=(96, 10, 10, 1)).astype(np.float32)
labels = (np.arange(96) % NUM_CLASSES).astype(np.int64)
images += labels[:, None, None, None].astype(np.float32)


def train_input_fn():
  return tf1.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(BATCH_SIZE)


def eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices((images[:64], labels[:64])).batch(BATCH_SIZE)


def model_fn(features, labels, mode, params):
  net = tf1.layers.conv2d(features, 6, 3, activation=tf.nn.relu)
  net = tf1.layers.max_pooling2d(net, 2, 2)
  net = tf1.layers.conv2d(net, 8, 3, activation=tf.nn.relu)
  net = tf1.layers.flatten(net)
  net = tf1.layers.dense(net, 16, activation=tf.nn.relu)
  logits = tf1.layers.dense(net, NUM_CLASSES)
  classes = tf.argmax(logits, axis=1)
  if mode == tf1.estimator.ModeKeys.PREDICT:
    predictions = {"logits": logits, "probabilities": tf.nn.softmax(logits), "class": classes}
    return tf1.estimator.EstimatorSpec(mode, predictions=predictions)
  loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf1.estimator.ModeKeys.EVAL:
    metrics = {"accuracy": tf1.metrics.accuracy(labels, classes)}
    return tf1.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
  optimizer = tf1.train.AdamOptimizer(params["learning_rate"])
  train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf1.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
config = tf1.estimator.RunConfig(
    model_dir=MODEL_DIR, save_checkpoints_steps=3, train_distribute=strategy, eval_distribute=strategy,
    tf_random_seed=3, session_config=tf1.ConfigProto(device_count={"CPU": 2}))
classifier = tf1.estimator.Estimator(model_fn, config=config, params={"learning_rate": 0.01})
classifier.train(train_input_fn, max_steps=MAX_STEPS)
print(classifier.evaluate(eval_input_fn))
