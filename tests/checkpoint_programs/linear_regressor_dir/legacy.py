"""A canned LinearRegressor (TF1) trained with Ftrl (its default) into a model_dir.

Per-column weights linear/linear_model/<column>/weights and the bias, each with Ftrl's
accumulator and linear slots: two numeric features, a bucketized one, a vocabulary list
with an out-of-vocabulary bucket and an identity column. MODEL_DIR (the environment) is
the model_dir and MAX_STEPS how far training goes: run it once to train 6 steps,
`e2k checkpoint` the model_dir, and the migrated program goes on from there. Two virtual
CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

MODEL_DIR = os.environ.get("MODEL_DIR") or tempfile.mkdtemp()
MAX_STEPS = int(os.environ.get("MAX_STEPS", "6"))
BATCH_SIZE = 8

rng = np.random.RandomState(5)
N = 96
length = rng.uniform(1, 10, N).astype(np.float32)
width = rng.uniform(1, 5, N).astype(np.float32)
color = rng.choice(["red", "green", "blue", "black"], N)
shelf = rng.randint(0, 6, N)
targets = (length * 0.5 - width + (color == "red") * 2.0 + shelf * 0.3 + rng.normal(0, 0.1, N)).astype(np.float32)


def train_input_fn():
    features = {"length": length, "width": width, "color": color, "shelf": shelf}
    return tf.data.Dataset.from_tensor_slices((features, targets)).repeat().batch(BATCH_SIZE)


def eval_input_fn():
    features = {"length": length[:64], "width": width[:64], "color": color[:64], "shelf": shelf[:64]}
    return tf.data.Dataset.from_tensor_slices((features, targets[:64])).batch(BATCH_SIZE)


length_column = tf.feature_column.numeric_column("length")
columns = [
    length_column,
    tf.feature_column.numeric_column("width"),
    tf.feature_column.bucketized_column(length_column, boundaries=[3.0, 6.0]),
    tf.feature_column.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"], num_oov_buckets=1),
    tf.feature_column.categorical_column_with_identity("shelf", num_buckets=6),
]
# On CPUs, the default collective ops cannot gather the sparse gradients of the linear weights.
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"],
                                          cross_device_ops=tf.distribute.ReductionToOneDevice())
config = tf.estimator.RunConfig(
    model_dir=MODEL_DIR, save_checkpoints_steps=3, train_distribute=strategy, eval_distribute=strategy,
    tf_random_seed=3, session_config=tf.ConfigProto(device_count={"CPU": 2}))
regressor = tf.estimator.LinearRegressor(feature_columns=columns, config=config)
regressor.train(train_input_fn, max_steps=MAX_STEPS)
print(regressor.evaluate(eval_input_fn))
