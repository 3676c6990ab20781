"""Accuracy of labels the model_fn bound to a name first: the class of one-hot labels
(`label_ids = tf.argmax(labels, 1)`) is CategoricalAccuracy; class ids squeezed and cast to
an integer type (`tf.squeeze(tf.cast(labels, tf.int64), axis=1)`) keep what accuracy counts
(SparseCategoricalAccuracy). Both were refused (E2K202) in a tester's programs, whose
converted versions pass parity with 2 replicas."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow.compat.v1 as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"x": [[1.0, 2.0]]}}, {labels})).repeat().batch(2)


def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 3)
    {label_ids}
    loss = {loss}
    predicted = tf.argmax(logits, 1)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops={{"accuracy": tf.metrics.accuracy({order})}})


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=2)
print(estimator.evaluate(input_fn, steps=1))
'''
ONE_HOT = dict(labels="[[0.0, 1.0, 0.0]]", label_ids="label_ids = tf.argmax(labels, 1)",
               loss="tf.losses.softmax_cross_entropy(onehot_labels=labels, logits=logits)")
SQUEEZED = dict(labels="[[1]]", label_ids="label_ids = tf.squeeze(tf.cast(labels, tf.int64), axis=1)",
                loss="tf.losses.sparse_softmax_cross_entropy(labels=label_ids, logits=logits)")


@pytest.mark.parametrize("case, metric", [(ONE_HOT, "CategoricalAccuracy"), (SQUEEZED, "SparseCategoricalAccuracy")])
@pytest.mark.parametrize("order", ["label_ids, predicted", "predicted, label_ids"])
def test_accuracy_of_labels_bound_to_a_name(rules, case, metric, order):
    result = rewrite_source(PROGRAM.format(order=order, **case).encode(), "program.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    assert f'metrics=[tf.keras.metrics.{metric}(name="accuracy")]' in result.new.decode()


def test_labels_cast_to_an_integer_type_are_still_refused_for_a_regression_metric(rules):
    source = PROGRAM.format(order="label_ids, predicted", **SQUEEZED).replace(
        "tf.metrics.accuracy(", "tf.metrics.mean_squared_error(")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert any("the metric's labels are not the model_fn's `labels`" in f.message for f in result.findings)
