"""An Estimator that a program only shows (`estimator` alone as a notebook cell's value,
`print(estimator)`) converts: the Keras model is shown instead. Any other use e2k does not
convert still leaves the unit for a human (E2K902)."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[2.0]] * 4)).batch(2)


def model_fn(features, labels, mode):
    pred = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
{use}
estimator.train(input_fn, steps=2)
'''


@pytest.mark.parametrize("use, shown", [("estimator", "model\n"), ("print(estimator)", "print(model)\n")])
def test_showing_the_estimator_shows_the_model(rules, use, shown):
    result = rewrite_source(PROGRAM.replace("{use}", use).encode(), "p.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert shown in new and "estimator" not in new.split("def build_model", 1)[-1], new
    assert any(f.code == "E2K902" and "shown" in f.message for f in result.findings if f.kind == "fixed")


@pytest.mark.parametrize("use", ["kept = [estimator]", "print(estimator, estimator)", "print(estimator.model_fn)"])
def test_other_uses_still_leave_the_unit_for_a_human(rules, use):
    result = rewrite_source(PROGRAM.replace("{use}", use).encode(), "p.py", rules)
    assert result.status == "partial"
    assert any(f.code == "E2K902" and f.kind == "manual" for f in result.findings), [f.format() for f in result.findings]
