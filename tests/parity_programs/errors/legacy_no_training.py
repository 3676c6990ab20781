"""An Estimator program that builds an Estimator but never trains it."""
import tensorflow.compat.v1 as tf1


def model_fn(features, labels, mode):
  raise AssertionError("never called")


estimator = tf1.estimator.Estimator(model_fn)
print("model_dir:", estimator.model_dir)
