"""An input_fn the program calls with a mode of its own (`lambda: input_fn(params,
tf.estimator.ModeKeys.EVAL)`) repeats only where that mode takes it: its `if training:`
(`training = mode == ModeKeys.TRAIN`) is decided with the mode the call passes. A tester's
predict() of such an input_fn was refused ("may repeat forever") while evaluate() of the same
call converted."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def input_fn(params, mode):
    training = mode == tf.estimator.ModeKeys.TRAIN
    ds = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 8}, [[1.0]] * 8))
    if training:
        ds = ds.repeat()
    return ds.batch(params["batch_size"])


def model_fn(features, labels, mode):
    out = tf.compat.v1.layers.dense(features["x"], 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": out})
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


params = {"batch_size": 4}
est = tf.estimator.Estimator(model_fn)
est.train(lambda: input_fn(params, tf.estimator.ModeKeys.TRAIN), steps=2)
print([p["y"] for p in est.predict(lambda: input_fn(params, tf.estimator.ModeKeys.PREDICT_MODE))])
'''


def test_predict_of_an_input_fn_given_a_mode_that_does_not_repeat(rules):
    result = rewrite_source(PROGRAM.replace("PREDICT_MODE", "EVAL").encode(), "train.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert 'model.predict(input_fn(params, "eval"))' in result.new.decode()


def test_predict_of_the_training_mode_still_repeats(rules):
    result = rewrite_source(PROGRAM.replace("PREDICT_MODE", "TRAIN").encode(), "train.py", rules)
    assert result.status == "partial"
    assert any("may repeat forever" in f.message for f in result.findings)
