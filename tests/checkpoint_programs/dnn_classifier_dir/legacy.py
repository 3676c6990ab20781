"""A canned DNNClassifier trained with Adagrad (its default) into a model_dir.

Two numeric features and a bucketized one, hidden units [8, 4], 3 classes. MODEL_DIR (the
environment) is the model_dir and MAX_STEPS how far training goes: run it once to train 6
steps, `e2k checkpoint` the model_dir, and the migrated program goes on from there. Two
virtual CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

MODEL_DIR = os.environ.get("MODEL_DIR") or tempfile.mkdtemp()
MAX_STEPS = int(os.environ.get("MAX_STEPS", "6"))
BATCH_SIZE = 8

rng = np.random.RandomState(11)
height = rng.normal(size=96).astype(np.float32)
width = rng.normal(size=96).astype(np.float32)
labels = ((height > 0).astype(np.int64) + (width > 0.5).astype(np.int64))


def train_input_fn():
    features = {"height": height, "width": width}
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(BATCH_SIZE)


def eval_input_fn():
    features = {"height": height[:64], "width": width[:64]}
    return tf.data.Dataset.from_tensor_slices((features, labels[:64])).batch(BATCH_SIZE)


height_column = tf.feature_column.numeric_column("height")
columns = [
    height_column,
    tf.feature_column.numeric_column("width"),
    tf.feature_column.bucketized_column(height_column, boundaries=[-0.5, 0.0, 0.5]),
]
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
config = tf.estimator.RunConfig(
    model_dir=MODEL_DIR, save_checkpoints_steps=3, train_distribute=strategy, eval_distribute=strategy,
    tf_random_seed=3, session_config=tf.ConfigProto(device_count={"CPU": 2}))
classifier = tf.estimator.DNNClassifier(hidden_units=[8, 4], feature_columns=columns, n_classes=3, config=config)
classifier.train(train_input_fn, max_steps=MAX_STEPS)
print(classifier.evaluate(eval_input_fn))
