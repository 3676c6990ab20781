"""`tf.losses.sparse_softmax_cross_entropy(...)` then `loss = tf.losses.get_total_loss()` (the
TF1 way of taking the loss collection): the collection's one loss and, unless told not, the
layers' regularization losses, which Keras's compiled loss and `model.losses` add alike. A
layer regularizer the Estimator's loss did not add is refused at that layer (it was reported
at 0:0, unmarked). Fixture total_loss_collection passes parity on both TFs."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 8}, [1] * 8)).repeat().batch(4)


def model_fn(features, labels, mode):
    hidden = tf.compat.v1.layers.dense(features["x"], 4, kernel_regularizer=tf.keras.regularizers.l2(0.01))
    logits = tf.compat.v1.layers.dense(hidden, 2)
    LOSSES
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn)
est.train(input_fn, steps=2)
'''
ONE = "tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)\n    loss = tf.compat.v1.losses.get_total_loss()"


def convert(rules, losses: str):
    return rewrite_source(PROGRAM.replace("LOSSES", losses).encode(), "train.py", rules)


def test_the_collections_one_loss_and_the_regularization(rules):
    result = convert(rules, ONE)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)" in new
    assert "kernel_regularizer=tf.keras.regularizers.l2(0.01)" in new
    assert "get_total_loss" not in new and "sparse_softmax_cross_entropy(labels" not in new


def test_two_losses_in_the_collection_are_refused(rules):
    result = convert(rules, ONE.replace("\n", "\n    tf.compat.v1.losses.mean_squared_error(labels, logits[:, 0])\n", 1))
    assert result.status == "partial"
    assert any("holds 2 tf.losses losses" in f.message for f in result.findings)


def test_without_the_regularization_losses_the_layer_penalty_is_refused_at_the_layer(rules):
    result = convert(rules, ONE.replace("get_total_loss()", "get_total_loss(add_regularization_losses=False)"))
    assert result.status == "partial"
    refused = [f for f in result.findings if "kernel_regularizer` was not part of the Estimator's loss" in f.message]
    assert refused and refused[0].line == 9, [f.format() for f in result.findings]
    assert "# e2k: E2K901 this layer's `kernel_regularizer`" in result.new.decode()
