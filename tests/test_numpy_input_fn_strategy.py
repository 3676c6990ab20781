"""E2K006 under a distribution strategy: refused only where the Estimator refused it.

The Estimator called an input_fn under its strategy for training with `train_distribute`,
for evaluation with `eval_distribute` (without it evaluation runs on one device) and never
for prediction; there a numpy_input_fn / pandas_input_fn (no Dataset) was refused. Elsewhere
the Estimator ran it, and e2k converts it as without a strategy. It refused every array
input_fn of a unit with a strategy: `RunConfig(train_distribute=...)` and an evaluation from
`numpy_input_fn` stayed unconverted with a false claim (testerE bug 08).
"""
from __future__ import annotations

import pytest

from conftest import flat
from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import numpy as np
import tensorflow as tf

X = np.random.RandomState(0).randn(64, 2).astype(np.float32)
Y = X.sum(axis=1, keepdims=True)


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(8)


def model_fn(features, labels, mode):
    out = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions=out)


strategy = tf.distribute.MirroredStrategy()
estimator = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig({config}))
array_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(X, Y, num_epochs=1, shuffle=False)
{calls}
'''
TRAIN_ONLY = "train_distribute=strategy"
BOTH = "train_distribute=strategy, eval_distribute=strategy"
REFUSED = "the Estimator refused this input_fn under a distribution strategy (it needs a Dataset)"
DATASET = "def array_input_fn():\n    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(128)"


def convert(rules, config: str, calls: str):
    source = PROGRAM.replace("{config}", config).replace("{calls}", calls)
    return rewrite_source(source.encode(), "task.py", rules)


def refusals(result) -> list[str]:
    return [f.message for f in result.manual if f.code == "E2K006"]


@pytest.mark.parametrize("calls", [
    "estimator.train(train_input_fn, steps=20)\nprint(estimator.evaluate(array_input_fn))",
    "tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(train_input_fn, max_steps=20),\n"
    "                                tf.estimator.EvalSpec(array_input_fn, steps=None))",
], ids=["evaluate", "eval-spec"])
def test_an_evaluation_without_eval_distribute_converts(rules, calls):
    result = convert(rules, TRAIN_ONLY, calls)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert DATASET in new, new
    assert "numpy_input_fn" not in new and "with strategy.scope():" in new, new


def test_an_evaluation_and_a_prediction_each_from_its_own_input_fn_convert(rules):
    calls = ("estimator.train(train_input_fn, steps=20)\nprint(estimator.evaluate(array_input_fn))\n"
             "predict_input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(X, shuffle=False)\n"
             "print(list(estimator.predict(predict_input_fn)))")
    result = convert(rules, TRAIN_ONLY, calls)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert DATASET in new and "return tf.data.Dataset.from_tensor_slices(X).batch(128)" in new, new


def test_a_prediction_converts_whatever_the_strategies(rules):
    calls = "estimator.train(train_input_fn, steps=20)\nprint(list(estimator.predict(array_input_fn)))"
    result = convert(rules, BOTH, calls)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "numpy_input_fn" not in result.new.decode()


@pytest.mark.parametrize("config, calls", [
    (TRAIN_ONLY, "estimator.train(array_input_fn, steps=20)"),
    (BOTH, "estimator.train(train_input_fn, steps=20)\nprint(estimator.evaluate(array_input_fn))"),
    (TRAIN_ONLY, "estimator.train(array_input_fn, steps=20)\nprint(estimator.evaluate(array_input_fn))"),
    (BOTH, "tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(train_input_fn, max_steps=20),\n"
           "                                tf.estimator.EvalSpec(array_input_fn, steps=None))"),
], ids=["train", "evaluate-distributed", "train-and-evaluate-share-it", "eval-spec-distributed"])
def test_where_the_estimator_distributed_it_it_is_refused(rules, config, calls):
    result = convert(rules, config, calls)
    assert result.status == "partial", [f.format() for f in result.findings]
    assert refusals(result) == [REFUSED], [f.format() for f in result.findings]
    assert b"numpy_input_fn" in result.new
