import numpy as np
import tensorflow as tf


def input_fn():
    x = np.random.RandomState(0).rand(32, 3).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x.sum(1) > 1.5).astype(np.int64))).repeat().batch(8)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    accuracy = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={"accuracy": accuracy})


def train_and_evaluate(classifier):
    classifier.train(input_fn=input_fn, steps=10)
    eval_results = classifier.evaluate(input_fn=input_fn, steps=2)
    print("eval:", eval_results)
    return eval_results


classifier = tf.estimator.Estimator(model_fn=model_fn, params={})
train_and_evaluate(classifier)
