"""Two Estimators built in the branches of one `if` (a TPUEstimator or an Estimator, by a
flag) whose conversions write a statement after the `if` differently: that statement is
written in both versions under the `if`'s own test, which must read the same there."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras._engine import rewrite_source
from conftest import flat

PROGRAM = '''\
import tensorflow as tf

TPU = tf.compat.v1.estimator.tpu


def model_fn(features, labels, mode, params):
    output = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def input_fn(params):
    batch_size = params.get("batch_size", 4)
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [[0.5]] * 8)).repeat().batch(batch_size)


def main(args):
    params = {"units": 1}
    if args.use_tpu:
        config = TPU.RunConfig(cluster=tf.distribute.cluster_resolver.TPUClusterResolver(args.tpu),
                               model_dir=args.model_dir)
        estimator = TPU.TPUEstimator(model_fn=model_fn, config=config, params=params, train_batch_size=32)
    else:
        estimator = tf.estimator.Estimator(model_fn, model_dir=args.model_dir, params=params)
    REBIND
    estimator.train(input_fn, max_steps=10)
'''


def convert(rules, rebind: str = "pass"):
    source = textwrap.dedent(PROGRAM).replace("REBIND", rebind).encode()
    return rewrite_source(source, "trainer.py", rules)


def test_a_statement_the_branches_convert_differently_is_written_under_their_test(rules):
    result = convert(rules)
    assert result.status == "converted", [f.message for f in result.findings]
    new = flat(result.new.decode())
    # What both write is written once; only the call that differs is under the test.
    assert new.count("steps_left = 10 - checkpoints.global_step()") == 1, new
    body = new.split("def main(args):")[1]
    assert textwrap.indent(textwrap.dedent('''\
        if steps_left > 0:
            if args.use_tpu:
                model.fit(input_fn(params={**params, "batch_size": 32}), steps_per_epoch=steps_left, callbacks=[checkpoints])
            else:
                model.fit(input_fn(params=params), steps_per_epoch=steps_left, callbacks=[checkpoints])
    '''), "    ") in body, body


@pytest.mark.parametrize("rebind", [
    "args = object()",  # the test's name is rebound: it may read otherwise after the `if`
    "args.use_tpu = False",  # not a rebinding of `args`, but its attribute changes
])
def test_a_test_that_may_read_otherwise_after_the_if_is_not_reused(rules, rebind):
    result = convert(rules, rebind)
    assert result.status == "partial"
    assert any("convert this code differently" in f.message for f in result.findings), \
        [f.message for f in result.findings]


def test_a_note_one_branch_leaves_on_shared_code_is_kept_with_the_others(rules):
    # A rank-1 output's loss is written per example whether or not a strategy trains it: the
    # model both branches share (one under a MirroredStrategy) is written once, not refused as
    # two different replacements (E2K903 before, when only the strategy's branch was noted).
    source = textwrap.dedent('''\
    import sys
    import tensorflow as tf


    def model_fn(features, labels, mode, params):
        out = tf.squeeze(tf.compat.v1.layers.dense(features, 1), axis=1)
        loss = tf.compat.v1.losses.mean_squared_error(labels, out)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(([[1.0], [2.0]], [1.0, 2.0])).repeat().batch(2)


    if len(sys.argv) > 1:
        est = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy()))
    else:
        est = tf.estimator.Estimator(model_fn)
    est.train(input_fn, steps=2)
    ''').encode()
    result = rewrite_source(source, "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert result.new.decode().count("def per_example_loss(") == 1, result.new.decode()


def test_exporters_bound_differently_in_branches_are_named_as_such(rules):
    source = textwrap.dedent('''\
    import sys
    import tensorflow as tf


    def model_fn(features, labels, mode):
        out = tf.compat.v1.layers.dense(features["x"], 1)
        loss = tf.compat.v1.losses.mean_squared_error(labels, out)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, predictions=out, loss=loss, train_op=train_op)


    def serving():
        x = tf.compat.v1.placeholder(tf.float32, [None, 1])
        return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[1.0]])).repeat().batch(1)


    est = tf.estimator.Estimator(model_fn, model_dir="/tmp/m")
    if len(sys.argv) > 1:
        exporter = tf.estimator.FinalExporter("final", serving)
    else:
        exporter = tf.estimator.LatestExporter("latest", serving)
    tf.estimator.train_and_evaluate(est, tf.estimator.TrainSpec(input_fn, max_steps=2),
                                    tf.estimator.EvalSpec(input_fn, steps=1, exporters=exporter))
    ''').encode()
    result = rewrite_source(source, "program.py", rules)
    assert result.status == "partial"
    assert any("may hold different exporters where it is read" in f.message for f in result.findings), \
        [f.format() for f in result.findings]
