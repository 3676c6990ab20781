"""A regressor with batch normalisation (the UPDATE_OPS idiom) and a momentum optimizer,
checkpointing to its model_dir.

MODEL_DIR (the environment) is the model_dir and MAX_STEPS how far training goes: train it
once, `e2k checkpoint` the model_dir, and the migrated program resumes with the moving
statistics and the momentum accumulators. Two virtual CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow as tf

MODEL_DIR = os.environ.get("MODEL_DIR") or tempfile.mkdtemp()
MAX_STEPS = int(os.environ.get("MAX_STEPS", "8"))
NUM_FEATURES = 5

rng = np.random.RandomState(3)
x_train = rng.normal(size=(96, NUM_FEATURES)).astype(np.float32)
y_train = (x_train @ rng.normal(size=(NUM_FEATURES, 1))).astype(np.float32)
x_eval = rng.normal(size=(32, NUM_FEATURES)).astype(np.float32)
y_eval = (x_eval @ rng.normal(size=(NUM_FEATURES, 1))).astype(np.float32)


def train_input_fn():
  return tf.data.Dataset.from_tensor_slices((x_train, y_train)).repeat().batch(8)


def eval_input_fn():
  return tf.data.Dataset.from_tensor_slices((x_eval, y_eval)).batch(8)


def model_fn(features, labels, mode, params):
  is_training = mode == tf.estimator.ModeKeys.TRAIN
  net = tf.compat.v1.layers.dense(features, params["hidden"], use_bias=False)
  net = tf.compat.v1.layers.batch_normalization(net, training=is_training, momentum=0.9)
  net = tf.nn.relu(net)
  predictions = tf.compat.v1.layers.dense(net, 1)
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(mode, predictions={"value": predictions})
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  optimizer = tf.compat.v1.train.MomentumOptimizer(params["learning_rate"], momentum=0.9)
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
  with tf.control_dependencies(update_ops):
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
config = tf.estimator.RunConfig(
    model_dir=MODEL_DIR, save_checkpoints_steps=4, train_distribute=strategy, eval_distribute=strategy,
    tf_random_seed=1, session_config=tf.compat.v1.ConfigProto(device_count={"CPU": 2}))
estimator = tf.estimator.Estimator(model_fn, params={"hidden": 12, "learning_rate": 0.02}, config=config)
estimator.train(train_input_fn, max_steps=MAX_STEPS)
print(estimator.evaluate(eval_input_fn))
