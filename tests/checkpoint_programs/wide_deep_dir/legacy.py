"""A wide & deep model (a canned DNNLinearCombinedClassifier, TF1) trained into a model_dir.

Two optimizers, the Estimator's defaults: Ftrl for the linear part (bucketized ages, a
vocabulary list with an out-of-vocabulary bucket, a hash-bucket column), Adagrad for the DNN
(numeric columns and embeddings of the vocabulary list and of the hash buckets). MODEL_DIR
(the environment) is the model_dir and MAX_STEPS how far training goes: run it once to
train 6 steps, `e2k checkpoint` the model_dir, and the migrated program goes on from there.
Two virtual CPU devices stand in for two GPUs.
"""
import os
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

MODEL_DIR = os.environ.get("MODEL_DIR") or tempfile.mkdtemp()
MAX_STEPS = int(os.environ.get("MAX_STEPS", "6"))
BATCH_SIZE = 8

rng = np.random.RandomState(6)
N = 96
age = rng.uniform(18, 80, N).astype(np.float32)
hours = rng.uniform(0, 60, N).astype(np.float32)
city = rng.choice(["paris", "rome", "oslo", "lima"], N)
job = rng.choice(["a", "b", "c", "d", "e"], N)
labels = ((age > 40).astype(np.int64) ^ (city == "rome").astype(np.int64))


def train_input_fn():
    features = {"age": age, "hours": hours, "city": city, "job": job}
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(BATCH_SIZE)


def eval_input_fn():
    features = {"age": age[:64], "hours": hours[:64], "city": city[:64], "job": job[:64]}
    return tf.data.Dataset.from_tensor_slices((features, labels[:64])).batch(BATCH_SIZE)


age_column = tf.feature_column.numeric_column("age")
age_buckets = tf.feature_column.bucketized_column(age_column, boundaries=[30.0, 50.0])
city_column = tf.feature_column.categorical_column_with_vocabulary_list(
    "city", ["paris", "rome", "oslo"], num_oov_buckets=1)
job_column = tf.feature_column.categorical_column_with_hash_bucket("job", 8)
wide_columns = [age_buckets, city_column, job_column]
deep_columns = [
    age_column,
    tf.feature_column.numeric_column("hours", normalizer_fn=lambda x: x / 60.0),
    tf.feature_column.embedding_column(city_column, 3),
    tf.feature_column.embedding_column(job_column, 2),
]
# On CPUs, the default collective ops cannot gather the sparse gradients of embeddings and
# linear weights. Evaluation runs on one device: a binary head's metrics under eval_distribute
# are per-replica values the Estimator cannot fetch (TF 2.15).
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"],
                                          cross_device_ops=tf.distribute.ReductionToOneDevice())
config = tf.estimator.RunConfig(
    model_dir=MODEL_DIR, save_checkpoints_steps=3, train_distribute=strategy, tf_random_seed=3, session_config=tf.ConfigProto(device_count={"CPU": 2}))
classifier = tf.estimator.DNNLinearCombinedClassifier(
    linear_feature_columns=wide_columns, dnn_feature_columns=deep_columns, dnn_hidden_units=[8, 4],
    config=config)
classifier.train(train_input_fn, max_steps=MAX_STEPS)
print(classifier.evaluate(eval_input_fn))
