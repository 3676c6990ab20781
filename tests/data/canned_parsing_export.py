"""A canned DNNClassifier with a vocabulary column, exported on serialized tf.Examples parsed
with the columns' own spec (make_parse_example_spec gives the categorical feature as a
SparseTensor)."""
import os
import tempfile

import numpy as np
import tensorflow as tf

VOCABULARY = ["private", "self_emp", "gov"]
columns = [
    tf.feature_column.numeric_column("age"),
    tf.feature_column.indicator_column(
        tf.feature_column.categorical_column_with_vocabulary_list("workclass", VOCABULARY)),
]


def input_fn():
    rng = np.random.RandomState(0)
    features = {"age": rng.uniform(20, 60, size=(32,)).astype(np.float32),
                "workclass": np.array(VOCABULARY * 10 + ["gov", "gov"])}
    labels = (features["age"] > 40).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)


model_dir = tempfile.mkdtemp()
classifier = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns, model_dir=model_dir)
classifier.train(input_fn, steps=3)
serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(
    tf.feature_column.make_parse_example_spec(columns))
export_dir = classifier.export_saved_model(os.path.join(model_dir, "export"), serving_input_fn)
