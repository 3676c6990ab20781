"""Per-replica batches scaled where the strategy is in sight (E2K602) when the program made the
strategy inline in its RunConfig: the Keras program binds it to `strategy` where the model is
built, and a factory's training call after that statement passes the global batch (two
testers' package programs were partial: `make_input_fn("train", args.batch_size)`)."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source

PROGRAM = textwrap.dedent('''\
    import argparse
    import tensorflow as tf


    def make_input_fn(split, batch_size, num_epochs=None):
        def input_fn():
            ds = tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 32}, [[1.0]] * 32))
            return ds.repeat(num_epochs).batch(batch_size)
        return input_fn


    def model_fn(features, labels, mode):
        out = tf.compat.v1.layers.dense(features["x"], 1)
        loss = tf.compat.v1.losses.mean_squared_error(labels, out)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    def main(args):
        config = tf.estimator.RunConfig(train_distribute=tf.distribute.MirroredStrategy(), save_checkpoints_steps=10)
        estimator = tf.estimator.Estimator(model_fn, config=config)
        train_spec = tf.estimator.TrainSpec(make_input_fn("train", args.batch_size), max_steps=20)
        eval_spec = tf.estimator.EvalSpec(make_input_fn("eval", args.batch_size, num_epochs=1), steps=None,
                                          throttle_secs=0)
        tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
''')


def test_a_factory_call_after_the_inline_strategy_gets_the_global_batch(rules):
    result = rewrite_source(PROGRAM.encode(), "train.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'make_input_fn("train", args.batch_size * strategy.num_replicas_in_sync)' in new
    assert 'make_input_fn("eval", args.batch_size, num_epochs=1)' in new


def test_a_factory_call_bound_before_the_estimator_never_reads_the_name_before_it_is_bound(rules):
    source = PROGRAM.replace(
        '    config = tf.estimator.RunConfig(',
        '    train_input = make_input_fn("train", args.batch_size)\n    config = tf.estimator.RunConfig(').replace(
        'TrainSpec(make_input_fn("train", args.batch_size)', 'TrainSpec(train_input')
    assert "train_input = make_input_fn" in source
    result = rewrite_source(source.encode(), "train.py", rules)
    # The name is bound after that statement: the batch is left for a human (E2K602), not scaled
    # with a name read before it exists.
    assert result.status == "partial"
    assert 'train_input = make_input_fn("train", args.batch_size)\n' in result.new.decode()
    assert any(f.code == "E2K602" for f in result.findings if f.kind == "manual")


def test_a_factory_call_leaving_the_batch_size_at_its_default_passes_the_global_one(rules):
    """`make_input_fn(TRAIN, None, True)` of `def make_input_fn(data, num_epochs, shuffle,
    batch_size=25)` (the census tutorial's shape): the training call passes the default times the
    replicas; the evaluation's keeps it (a tester's wide & deep program, parity on 2 replicas)."""
    source = PROGRAM.replace("def make_input_fn(split, batch_size, num_epochs=None):",
                             "def make_input_fn(split, num_epochs=None, batch_size=25):")
    source = source.replace('make_input_fn("train", args.batch_size)', 'make_input_fn("train")')
    source = source.replace('make_input_fn("eval", args.batch_size, num_epochs=1)', 'make_input_fn("eval", num_epochs=1)')
    result = rewrite_source(source.encode(), "train.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'make_input_fn("train", batch_size=25 * strategy.num_replicas_in_sync)' in new
    assert 'make_input_fn("eval", num_epochs=1)()' in new
