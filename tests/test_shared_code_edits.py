"""Estimators built in the branches of an `if` convert together and write the code after
the join once: each unit's rendering of that shared code must carry the same edits of
other rules inside it (here E2K009's ModeKeys -> strings in the input_fn's lambda)."""
from __future__ import annotations

from estimator2keras._engine import rewrite_source

SOURCE = '''\
import sys
import tensorflow as tf


def input_fn(mode, batch_size):
    ds = tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[1.0], [2.0]]))
    if mode == tf.estimator.ModeKeys.TRAIN:
        ds = ds.repeat()
    return ds.batch(batch_size)


def model_fn(features, labels, mode, params):
    out = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


if len(sys.argv) > 1:
    est = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy()))
else:
    est = tf.estimator.Estimator(model_fn)
est.train(input_fn=lambda: input_fn(tf.estimator.ModeKeys.TRAIN, 2), steps=2)
'''


def test_branches_sharing_a_lambda_with_mode_keys_convert(rules):
    # It crashed: the second unit rendered the shared call without the first one's
    # ModeKeys edit (E2K903, EditConflict "two different replacements for one Call").
    result = rewrite_source(SOURCE.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'model.fit(input_fn("train", 2 * model.distribute_strategy.num_replicas_in_sync), steps_per_epoch=2)' in new
    assert "ModeKeys" not in new
