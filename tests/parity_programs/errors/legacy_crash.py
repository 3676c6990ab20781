"""An Estimator program whose model_fn raises: the harness must exit 2 with this traceback."""
import tensorflow.compat.v1 as tf1


def input_fn():
  return tf1.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [[1.0], [2.0]])).batch(1)


def model_fn(features, labels, mode):
  raise ValueError("model_fn cannot build this model")


tf1.estimator.Estimator(model_fn).train(input_fn)
