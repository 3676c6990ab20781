import numpy as np
import tensorflow as tf


def input_fn():
    x = np.random.RandomState(0).rand(32, 3).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x.sum(1) > 1.5).astype(np.int64))).repeat().batch(8)


def serving_input_fn():
    x = tf.compat.v1.placeholder(tf.float32, [None, 3])
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


columns = [tf.feature_column.numeric_column("x", shape=[3])]
estimator = tf.estimator.DNNClassifier([4], columns, model_dir="/tmp/twoexp_model")
exporter = tf.estimator.FinalExporter("census", serving_input_fn)
latest = tf.estimator.LatestExporter("latest", serving_input_fn, exports_to_keep=2)
train_spec = tf.estimator.TrainSpec(input_fn, max_steps=10)
eval_spec = tf.estimator.EvalSpec(input_fn, steps=2, exporters=[exporter, latest], throttle_secs=0)
tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
