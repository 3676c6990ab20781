"""A model_fn whose export serves another dict than its PREDICT predictions (kubeflow mnist style)."""
import tempfile

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
x = rng.rand(64, 4).astype(np.float32)
y = (x.sum(axis=1) > 2.0).astype(np.int32)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(8)


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    probabilities = tf.nn.softmax(logits)
    classes = tf.cast(tf.argmax(probabilities, 1), tf.uint8)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"class": tf.argmax(logits, 1), "prob": probabilities}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
            "classes": tf.estimator.export.PredictOutput({"probabilities": probabilities, "classes": classes})})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def serving_input_receiver_fn():
    inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None, 4])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


estimator = tf.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
estimator.train(input_fn, steps=5)
export_dir = estimator.export_saved_model(tempfile.mkdtemp(), serving_input_receiver_fn)
