"""The LinearRegressor of linear_regressor_dir with its weights partitioned in two (the canned
Estimators' partitioner=, as programs for parameter servers set it): each column's weights
are saved as part_0 and part_1, which `e2k checkpoint` refuses by name. No distribution
strategy: MirroredStrategy does not partition variables. MODEL_DIR and MAX_STEPS as there.
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
config = tf.estimator.RunConfig(model_dir=MODEL_DIR, save_checkpoints_steps=3, tf_random_seed=3)
regressor = tf.estimator.LinearRegressor(feature_columns=columns, config=config,
                                         partitioner=tf.fixed_size_partitioner(2))
regressor.train(train_input_fn, max_steps=MAX_STEPS)
print(regressor.evaluate(eval_input_fn))
