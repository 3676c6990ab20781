"""A small classifier trained into a model_dir given by a flag, through RunConfig(model_dir=...).

The Estimator restores the latest checkpoint of its model_dir before training: `e2k parity`
must run it (and its migration, whose ModelDirCheckpoints callback does the same) in fresh
directories, so that a checkpoint left by an earlier run of either program is never restored,
and nothing is written into the user's directory. tests/test_parity_model_dir.py points
E2K_TEST_MODEL_DIR at a directory holding such a checkpoint.
"""
import argparse
import os

import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH = 8

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", default=os.environ.get("E2K_TEST_MODEL_DIR", "/tmp/e2k_model_dir_legacy"))
parser.add_argument("--steps", type=int, default=12)
args = parser.parse_args()

rng = np.random.RandomState(5)
x = rng.normal(size=(192, 4)).astype(np.float32)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int32)


def input_fn():
  return tf.compat.v1.data.Dataset.from_tensor_slices((x, y)).repeat().batch(PER_REPLICA_BATCH)


def eval_input_fn():
  return tf.compat.v1.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(32)


def model_fn(features, labels, mode):
  net = tf.compat.v1.layers.dense(features, 8, activation=tf.nn.relu)
  logits = tf.compat.v1.layers.dense(net, 2)
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  if mode == tf.estimator.ModeKeys.EVAL:
    return tf.estimator.EstimatorSpec(mode, loss=loss)
  optimizer = tf.compat.v1.train.AdamOptimizer(0.05)
  train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy()
config = tf.estimator.RunConfig(model_dir=args.model_dir, train_distribute=strategy, save_checkpoints_steps=5)
estimator = tf.estimator.Estimator(model_fn, config=config)
estimator.train(input_fn, steps=args.steps)
print(estimator.evaluate(eval_input_fn))
