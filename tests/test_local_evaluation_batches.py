"""E2K602 grows only what the Estimator read under its strategy (issue 12).

Without ``eval_distribute`` the Estimator evaluates on one device: ``evaluate(steps=N)`` and
``EvalSpec(steps=N)`` read N batches of the input_fn's own size, so the Keras evaluation must
read those same batches, not N global ones. Parity of the evaluation itself is proven by the
fixture ``mirrored_local_eval_steps`` (tests/test_fixture_parity.py).
"""
from __future__ import annotations

from estimator2keras._engine import rewrite_source
from conftest import flat

MODEL_FN = '''

def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

'''


def _program(config: str, calls: str, input_fns: str) -> bytes:
    return ("import tensorflow as tf\n\nBATCH = 4\n\n" + input_fns + MODEL_FN
            + f"\nstrategy = tf.distribute.MirroredStrategy()\nconfig = tf.estimator.RunConfig({config})\n"
            + "estimator = tf.estimator.Estimator(model_fn, config=config)\n" + calls).encode()


TWO_INPUT_FNS = '''
def train_input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat().batch(BATCH)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 32, [[2.0]] * 32)).batch(BATCH)
'''

SHARED_INPUT_FN = '''
def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).repeat().batch(BATCH)
'''


def _rewrite(source: bytes, rules):
    result = rewrite_source(source, "train.py", rules)
    return result, flat(result.new.decode())


def test_an_evaluation_only_input_keeps_its_batch_without_eval_distribute(rules):
    calls = "estimator.train(train_input_fn, steps=10)\nestimator.evaluate(eval_input_fn, steps=3)\n"
    result, new = _rewrite(_program("train_distribute=strategy", calls, TWO_INPUT_FNS), rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert ".repeat().batch(BATCH * strategy.num_replicas_in_sync)" in new
    assert "[[2.0]] * 32)).batch(BATCH)\n" in new
    assert "model.evaluate(eval_input_fn(), steps=3)" in new


def test_an_evaluation_under_eval_distribute_gets_the_global_batch(rules):
    calls = "estimator.train(train_input_fn, steps=10)\nestimator.evaluate(eval_input_fn, steps=3)\n"
    config = "train_distribute=strategy, eval_distribute=strategy"
    result, new = _rewrite(_program(config, calls, TWO_INPUT_FNS), rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert new.count("batch(BATCH * strategy.num_replicas_in_sync)") == 2


def test_eval_spec_steps_on_a_shared_input_fn_scale_only_the_training_call(rules):
    calls = ("tf.estimator.train_and_evaluate(estimator, tf.estimator.TrainSpec(input_fn, max_steps=10),\n"
             "                                tf.estimator.EvalSpec(input_fn, steps=2))\n")
    result, new = _rewrite(_program("train_distribute=strategy", calls, SHARED_INPUT_FN), rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert "def input_fn(batch_size=BATCH):" in new
    assert "model.fit(input_fn(batch_size=BATCH * strategy.num_replicas_in_sync), steps_per_epoch=10)" in new
    assert "model.evaluate(input_fn(), steps=2)" in new


def test_a_shared_input_fn_that_cannot_take_the_batch_is_marked(rules):
    # A lambda calling the input_fn with a size it computes: neither the call site nor a
    # parameter can carry the training-only global batch, and joining the training batches
    # is not exact when a pass may end with a smaller one (batch before repeat).
    input_fns = '''
def input_fn(scale):
    return tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [[2.0]] * 64)).batch(BATCH * scale).repeat()
'''
    calls = ("estimator.train(lambda: input_fn(1), steps=10)\n"
             "estimator.evaluate(lambda: input_fn(1), steps=3)\n")
    result, new = _rewrite(_program("train_distribute=strategy", calls, input_fns), rules)
    assert result.status == "partial"
    messages = [f.format() for f in result.findings]
    assert any("E2K602" in m and "local evaluate(steps=N)" in m for m in messages), messages
