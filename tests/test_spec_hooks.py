"""Hooks a model_fn returns in its EstimatorSpec become callbacks of the call that trains:
what they read of the model_fn is written as that call's code has it, or refused (a tester's
converted program raised NameError: params). One TensorBoard callback per fit."""
from __future__ import annotations

import textwrap

from estimator2keras._engine import rewrite_source
from conftest import flat

PROGRAM = '''\
import tempfile
import tensorflow as tf


def model_fn(features, labels, mode, params):
    pred = tf.compat.v1.layers.dense(features["x"], 1)
    LOSS
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    hook = HOOK
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[hook])


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 4}, [[1.0]] * 4)).repeat().batch(2)


def main():
    model_dir = tempfile.mkdtemp()
    config = tf.estimator.RunConfig(model_dir=model_dir, save_summary_steps=5)
    est = tf.estimator.Estimator(model_fn, config=config, params={"model_dir": model_dir, "every": 5})
    est.train(input_fn, steps=10)
'''
LOSS = "loss = tf.compat.v1.losses.mean_squared_error(labels, pred)"


def convert(rules, hook: str, loss: str = LOSS):
    source = PROGRAM.replace("HOOK", hook).replace("LOSS", loss)
    return rewrite_source(source.encode(), "program.py", rules)


def test_params_a_spec_hook_reads_are_the_estimators_params_where_fit_is(rules):
    result = convert(rules, 'tf.estimator.CheckpointSaverHook(params["model_dir"], save_steps=params["every"])')
    assert result.status == "converted", [f.format() for f in result.findings]
    fit = next(line for line in flat(result.new.decode()).splitlines() if "model.fit(" in line)
    assert "ModelDirCheckpoints(model, model_dir, save_steps=5" in fit and "params" not in fit, fit


def test_a_spec_hook_reading_another_value_of_the_model_fn_is_refused(rules):
    result = convert(rules, 'tf.estimator.CheckpointSaverHook(params["model_dir"], save_steps=int(pred.shape[1]) * 5)')
    assert result.status == "partial"
    assert any("a hook the model_fn returns reads `pred`" in f.message for f in result.findings), \
        [f.format() for f in result.findings]


def test_a_summary_hook_on_the_model_dir_is_the_one_tensorboard_callback(rules):
    # The RunConfig's summaries and the hook's would be two TensorBoard callbacks on one
    # directory, which crash when fit ends.
    result = convert(rules, 'tf.estimator.SummarySaverHook(save_steps=5, output_dir=params["model_dir"], '
                            'summary_op=tf.compat.v1.summary.merge_all())')
    assert result.status == "converted", [f.format() for f in result.findings]
    assert flat(result.new.decode()).count("tf.keras.callbacks.TensorBoard(") == 1, flat(result.new.decode())


def test_a_named_identity_of_the_loss_written_inline_is_the_loss(rules):
    # `loss = tf.identity(<the loss>, name="loss_value")`: a hook fetching "loss_value" reads the loss.
    source = textwrap.dedent('''\
    import tensorflow as tf


    class LossLogger(tf.estimator.SessionRunHook):
        def begin(self):
            self._loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss_value:0")

        def before_run(self, run_context):
            return tf.estimator.SessionRunArgs(self._loss)

        def after_run(self, run_context, run_values):
            print(run_values.results)


    def model_fn(features, labels, mode):
        pred = tf.compat.v1.layers.dense(features["x"], 1)
        loss = tf.identity(tf.compat.v1.losses.mean_squared_error(labels, pred), name="loss_value")
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


    est = tf.estimator.Estimator(model_fn)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": [[1.0]]}, [[1.0]])).repeat().batch(1),
              steps=2, hooks=[LossLogger()])
    ''')
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert 'logs["loss"]' in flat(result.new.decode())


def test_a_module_constant_a_spec_hook_reads_stays(rules):
    result = rewrite_source(("EVERY = 5\n" + PROGRAM.replace(
        "HOOK", 'tf.estimator.CheckpointSaverHook(params["model_dir"], save_steps=EVERY)').replace("LOSS", LOSS)).encode(),
        "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    fit = next(line for line in flat(result.new.decode()).splitlines() if "model.fit(" in line)
    assert "save_steps=EVERY" in fit, fit
