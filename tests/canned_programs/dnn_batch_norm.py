"""A TF1 DNNRegressor with batch normalization, dropout and an ELU activation, on one device.

tests/test_parity_canned.py converts it with e2k and runs e2k parity on the pair: the
layer order (dense, dropout, batch normalization), the batch normalization's momentum and
its moving statistics must match the Estimator's.
"""
import numpy as np
import tensorflow.compat.v1 as tf1

rng = np.random.RandomState(5)
N = 64
features = {"x": rng.normal(0, 1, N).astype(np.float32), "k": rng.choice(["a", "b", "c"], N)}
targets = (features["x"] * 2 + 1).astype(np.float32)

x = tf1.feature_column.numeric_column("x")
k = tf1.feature_column.categorical_column_with_vocabulary_list("k", ["a", "b", "c"])


def input_fn():
  return tf1.data.Dataset.from_tensor_slices((features, targets)).batch(8)


regressor = tf1.estimator.DNNRegressor(
    hidden_units=[6, 3], feature_columns=[x, tf1.feature_column.indicator_column(k)],
    batch_norm=True, dropout=0.2, activation_fn=tf1.nn.elu)
regressor.train(input_fn)
print(regressor.evaluate(input_fn))
