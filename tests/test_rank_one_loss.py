"""A rank-1 model output with a Keras loss that averages over the last axis, trained under a
distribution strategy: Keras 3 does not divide that loss by the replicas (it divides
per-example losses only), so the newest TensorFlow trains with N times the gradient
(measured with e2k parity on 2 replicas). The loss is computed per example instead, which
both Keras versions divide by the replicas (fixture `rank_one_output_mirrored` passes parity
on 2 replicas on TF 2.15 and the newest TF, where the loss object fails it at step 1)."""
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


@pytest.mark.parametrize("output, loss, tf1_loss", [
    (SQUEEZED, MSE, "mean_squared_error"),
    ("tf.reshape(tf.compat.v1.layers.dense(features, 1), [-1])", MSE, "mean_squared_error"),
    (SQUEEZED, "tf.compat.v1.losses.sigmoid_cross_entropy(labels, pred)", "sigmoid_cross_entropy"),
    (SQUEEZED, "tf.compat.v1.losses.huber_loss(labels, pred, delta=0.5)", "huber_loss"),
])
def test_a_rank_one_output_under_a_strategy_gets_its_loss_per_example(rules, output, loss, tf1_loss):
    """The emitted function's per-example values average to TF1's loss of the batch (labels in
    either rank), and compile() takes it."""
    import numpy as np
    import tensorflow as tf

    result = convert(rules, output, loss)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "loss=per_example_loss" in new and 'reduction="none"' in new, new
    definition = new[new.index("def per_example_loss"):new.index("class Model")]
    names = {"tf": tf}
    exec(definition, names)
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 2, size=(6,)).astype(np.float32)
    pred = rng.normal(size=(6,)).astype(np.float32)
    expected = getattr(tf.compat.v1.losses, tf1_loss)(labels, pred, **({"delta": 0.5} if tf1_loss == "huber_loss" else {}))
    for given in (labels, labels[:, None]):
        per_example = names["per_example_loss"](tf.constant(given), tf.constant(pred)).numpy()
        assert per_example.shape == (6,)
        assert np.isclose(per_example.mean(), expected.numpy(), rtol=1e-6), (per_example.mean(), expected)


def test_without_a_strategy_too(rules):
    """The same model trained later under a strategy stays right."""
    result = convert(rules, config="tf.estimator.RunConfig()")
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "loss=per_example_loss" in result.new.decode()


def test_a_rank_two_output_keeps_the_loss_object(rules):
    """Its loss is one value per example already: Keras divides it by the replicas."""
    result = convert(rules, "tf.compat.v1.layers.dense(features, 1)")
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "loss=tf.keras.losses.MeanSquaredError()" in result.new.decode()
