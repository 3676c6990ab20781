"""estimator.evaluate/predict(checkpoint_path=...) (E2K003): the model_dir's latest checkpoint
is what the converted model restores anyway; any other checkpoint is reported, not dropped."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]], [[2.0]])).repeat().batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn, model_dir="/tmp/model")
estimator.train(input_fn, steps=10)
estimator.evaluate(input_fn, steps=1, checkpoint_path=CHECKPOINT)
'''


def _rewrite(checkpoint: str, rules):
    source = PROGRAM.replace("CHECKPOINT", checkpoint).encode()
    return rewrite_source(source, "program.py", rules)


def test_the_model_dirs_latest_checkpoint_converts(rules):
    result = _rewrite('tf.train.latest_checkpoint("/tmp/model")', rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "checkpoint_path" not in new and "latest_checkpoint(" not in new
    assert "model.evaluate(input_fn(), steps=1, callbacks=[checkpoints])" in new


def test_another_checkpoint_is_reported_and_the_estimator_kept(rules):
    result = _rewrite('"/tmp/model/model.ckpt-5"', rules)
    assert result.status == "partial"
    messages = [f.message for f in result.findings if f.kind == "manual"]
    assert any("checkpoint_path= other than the model_dir's latest checkpoint" in m for m in messages), messages
    assert "tf.estimator.Estimator(model_fn" in result.new.decode()
