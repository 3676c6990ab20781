"""`with tf.variable_scope(..., initializer=...)` set the initializer of the TF1 layers'
kernels made inside it. It was dropped silently (Keras's glorot_uniform instead), which
parity cannot see: it copies the Estimator's initial weights into the Keras model."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

SOURCE = '''\
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
X = np.ones((8, 4), np.float32)


def model_fn(features, labels, mode):
    with tf1.variable_scope("body", initializer=tf1.constant_initializer(0.5)):
        net = tf1.layers.dense(features, 3, activation=tf.nn.relu)
        net = tf1.layers.batch_normalization(net, training=mode == tf.estimator.ModeKeys.TRAIN)
        with tf1.variable_scope("head", initializer=tf1.zeros_initializer()):
            pred = tf1.layers.dense(net, 1, kernel_initializer=tf1.ones_initializer())
            other = tf1.layers.dense(net, 1)
        out = tf.keras.layers.Dense(1)(net)
    loss = tf1.losses.mean_squared_error(labels, pred + other + out)
    update = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update):
        train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn)
est.train(lambda: tf.data.Dataset.from_tensor_slices((X, X[:, :1])).repeat().batch(4), steps=1)
'''


def test_the_scope_initializer_reaches_the_kernels_it_reached_in_tf1(rules):
    result = rewrite_source(SOURCE.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    # The outer scope's initializer for the first dense; the inner scope's for `other`; the
    # layer's own where it set one; a Keras layer never read the scope's.
    assert "tf.keras.layers.Dense(\n            3,\n            activation=tf.nn.relu,\n" \
           "            kernel_initializer=tf.keras.initializers.Constant(0.5))" in new
    assert "kernel_initializer=tf.keras.initializers.Zeros()" in new
    assert "kernel_initializer=tf.keras.initializers.Ones()" in new
    assert new.count("kernel_initializer") == 3
    assert "tf.keras.layers.BatchNormalization()" in new


def test_the_converted_kernels_start_where_tf1_started_them(rules):
    import numpy as np

    new = rewrite_source(SOURCE.encode(), "program.py", rules).new.decode()
    namespace: dict = {}
    exec(compile(new.split("\nmodel = build_model")[0], "converted.py", "exec"), namespace)
    model = namespace["build_model"]()
    model(np.ones((2, 4), np.float32))
    kernels = {w.shape: w.numpy() for w in model.trainable_weights if len(w.shape) == 2 and w.shape[0] == 4}
    np.testing.assert_array_equal(kernels[(4, 3)], np.full((4, 3), 0.5, np.float32))


@pytest.mark.parametrize("scope, reason", [
    ('tf1.variable_scope("body", regularizer=tf.keras.regularizers.l2(0.1))', "variable_scope(regularizer=...)"),
    ('tf1.variable_scope("body", initializer=tf1.constant_initializer(0.5))',
     "carries the scope's initializer to Dense and convolution kernels only"),
    # (A TF1 layer without a rule at all is refused whatever its scope: test_every_blocker.)
])
def test_scope_settings_e2k_cannot_carry_are_refused(rules, scope, reason):
    source = SOURCE.replace('tf1.variable_scope("body", initializer=tf1.constant_initializer(0.5))', scope)
    if "carries" in reason:  # a layer whose variables e2k cannot tell apart
        source = source.replace("net = tf1.layers.dense(features, 3, activation=tf.nn.relu)",
                                "net = tf1.layers.separable_conv2d(tf.reshape(features, [-1, 2, 2, 1]), 3, 1)\n"
                                "        net = tf1.layers.flatten(net)")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial", result.new.decode()
    assert any(reason in f.message for f in result.findings), [f.format() for f in result.findings]
