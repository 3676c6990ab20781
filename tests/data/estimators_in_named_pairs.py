"""Compare a linear and a DNN classifier on the same data."""
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(2)
X = rng.randn(400, 4).astype(np.float32)
Y = ((X[:, 0] * X[:, 1] + X[:, 2]) > 0).astype(np.int64)


def input_fn(train=True):
    ds = tf.data.Dataset.from_tensor_slices(({"a": X[:, :2], "b": X[:, 2:]}, Y))
    if train:
        ds = ds.shuffle(100, seed=0).repeat()
    return ds.batch(32)


feature_columns = [tf.feature_column.numeric_column("a", shape=(2,)),
                   tf.feature_column.numeric_column("b", shape=(2,))]

results = {}
estimators = [("linear", tf.estimator.LinearClassifier(feature_columns=feature_columns)),
              ("dnn", tf.estimator.DNNClassifier(hidden_units=[16, 8],
                                                 feature_columns=feature_columns))]
for name, est in estimators:
    est.train(input_fn=lambda: input_fn(True), steps=30)
    metrics = est.evaluate(input_fn=lambda: input_fn(False))
    results[name] = metrics
    print(name, metrics)

best = max(results, key=lambda k: results[k]["accuracy"])
print("best model:", best)
