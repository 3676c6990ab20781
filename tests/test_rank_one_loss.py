"""A rank-1 model output with a Keras loss that averages over the last axis, trained under a
distribution strategy: Keras 3 does not divide that loss by the replicas (it divides
per-example losses only), so the newest TensorFlow trains with N times the gradient
(measured with e2k parity on 2 replicas). Reported, never converted silently."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

SOURCE = '''\
import numpy as np
import tensorflow as tf

X = np.ones((8, 4), np.float32)


def model_fn(features, labels, mode, params):
    pred = OUTPUT
    loss = LOSS
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn, config=CONFIG)
est.train(lambda: tf.data.Dataset.from_tensor_slices((X, X[:, 0])).repeat().batch(4), steps=1)
'''
STRATEGY = "tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy())"
SQUEEZED = "tf.squeeze(tf.compat.v1.layers.dense(features, 1), axis=1)"
MSE = "tf.compat.v1.losses.mean_squared_error(labels, pred)"


def convert(rules, output=SQUEEZED, loss=MSE, config=STRATEGY):
    source = SOURCE.replace("OUTPUT", output).replace("LOSS", loss).replace("CONFIG", config)
    return rewrite_source(source.encode(), "program.py", rules)


@pytest.mark.parametrize("output, loss", [
    (SQUEEZED, MSE),
    ("tf.reshape(tf.compat.v1.layers.dense(features, 1), [-1])", MSE),
    (SQUEEZED, "tf.compat.v1.losses.sigmoid_cross_entropy(labels, pred)"),
])
def test_a_rank_one_output_under_a_strategy_is_reported(rules, output, loss):
    result = convert(rules, output, loss)
    assert result.status == "partial", result.new.decode()
    assert any(f.code == "E2K201" and "Keras does not divide that loss by the replicas" in f.message
               for f in result.findings), [f.format() for f in result.findings]


@pytest.mark.parametrize("output, config", [
    (SQUEEZED, "tf.estimator.RunConfig()"),  # one replica: nothing to divide
    ("tf.compat.v1.layers.dense(features, 1)", STRATEGY),  # a per-example loss: Keras divides it
])
def test_otherwise_it_converts(rules, output, config):
    result = convert(rules, output, config=config)
    assert result.status == "converted", [f.format() for f in result.findings]
