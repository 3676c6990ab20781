"""Step limits and exports written the way a tester's programs wrote them: the same limit given
twice (`StopAtStepHook(last_step=MAX_STEPS)` and `max_steps=MAX_STEPS`), early stopping up to a
module constant, a raw serving receiver of a dict comprehension. Each was refused as if e2k
could not tell the value."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tensorflow as tf

MAX_STEPS = 60


def model_fn(features, labels, mode):
    output = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, output)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions={"y": output})


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 8}, [[0.5]] * 8)).repeat().batch(4)


def main(args):
    config = tf.estimator.RunConfig(model_dir=args.model_dir, save_checkpoints_steps=20)
    estimator = tf.estimator.Estimator(model_fn=model_fn, config=config)
    HOOKS
    train_spec = tf.estimator.TrainSpec(input_fn=input_fn, max_steps=LIMIT, hooks=hooks)
    eval_spec = tf.estimator.EvalSpec(input_fn=input_fn, steps=2, throttle_secs=0)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
'''

STOP_AT = "hooks = [tf.compat.v1.train.StopAtStepHook(last_step=LIMIT)]"
EARLY = ('hooks = [tf.estimator.experimental.stop_if_no_decrease_hook(estimator, "loss", 100, min_steps=20, '
         'run_every_secs=None, run_every_steps=20)]')


def convert(rules, hooks: str, limit: str):
    source = PROGRAM.replace("HOOKS", hooks).replace("LIMIT", limit)
    return rewrite_source(source.encode(), "trainer.py", rules)


@pytest.mark.parametrize("limit", ["MAX_STEPS", "args.max_steps"])
def test_the_same_limit_given_twice_is_one_limit(rules, limit):
    result = convert(rules, STOP_AT, limit)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    # Evaluating at each checkpoint (throttle_secs=0) up to a constant, else once at the end.
    expected = "epochs=MAX_STEPS // 20" if limit == "MAX_STEPS" else f"steps_left = {limit} - checkpoints.global_step()"
    assert expected in new, new


def test_two_different_limits_that_are_not_numbers_are_still_refused(rules):
    result = convert(rules, STOP_AT.replace("LIMIT", "args.last_step"), "args.max_steps")
    assert result.status == "partial"
    assert any("several max_steps limits" in f.message for f in result.findings), \
        [f.message for f in result.findings]


def test_early_stopping_up_to_a_module_constant_evaluates_at_each_checkpoint(rules):
    result = convert(rules, EARLY, "MAX_STEPS")
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "epochs=MAX_STEPS // 20" in new and "steps_per_epoch=20" in new, new


@pytest.mark.parametrize("limit, epochs", [("args.max_steps", "(args.max_steps + 19) // 20"), ("50", "3")])
def test_early_stopping_up_to_a_flag_or_a_number_of_steps_that_is_no_multiple(rules, limit, epochs):
    """The Estimator's last round was shorter (a checkpoint and its evaluation at max_steps):
    fit's last epoch is stopped there (StopAtStep, fixture early_stopping_max_steps_flag), and
    a model already at max_steps (restored from its model_dir) takes no step."""
    result = convert(rules, EARLY, limit)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert f"epochs={epochs}," in new and "steps_per_epoch=20" in new, new
    assert f"StopAtStep({limit})" in new, new
    assert f"if checkpoints.global_step() < {limit}:" in new, new


def test_a_multiple_of_the_checkpoint_steps_needs_no_stop(rules):
    result = convert(rules, EARLY, "60")
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    assert "epochs=3," in result.new.decode() and "StopAtStep" not in result.new.decode()


def test_early_stopping_without_max_steps_is_refused_saying_why(rules):
    source = PROGRAM.replace("HOOKS", EARLY).replace("LIMIT", "None").replace(".repeat().batch(4)", ".batch(4)")
    result = rewrite_source(source.encode(), "trainer.py", rules)
    assert result.status == "partial"
    assert any("with no TrainSpec(max_steps=...)" in f.message for f in result.findings), \
        [f.message for f in result.findings]


def test_a_raw_receiver_of_a_dict_comprehension_exports_one_input_per_feature(rules):
    source = PROGRAM.replace("HOOKS", "hooks = []").replace("LIMIT", "10") + '''
    serving = tf.estimator.export.build_raw_serving_input_receiver_fn(
        {key: tf.zeros([1, 2], tf.float32) for key in ["x"]})
    estimator.export_saved_model("/tmp/export", serving)
'''
    result = rewrite_source(source.encode(), "trainer.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    assert 'serving_signature({key: tf.zeros([1, 2], tf.float32) for key in ["x"]})' in result.new.decode()


def test_train_and_evaluate_returned_gives_the_metrics_and_the_export_paths(rules):
    # `return tf.estimator.train_and_evaluate(...)` with the caller unpacking `metrics, _ = ...`
    # (a tester's Cloud ML Engine package): refused as "used inside an expression".
    source = PROGRAM.replace("HOOKS", "hooks = []").replace("LIMIT", "10").replace(
        "    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)\n",
        "    return tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)\n")
    assert "return tf.estimator.train_and_evaluate(" in source
    result = rewrite_source(source.encode(), "trainer.py", rules)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "eval_result = model.evaluate(" in new and "return_dict=True" in new, new
    assert "return eval_result, []" in new, new
