"""E2K406: a LoggingTensorHook of graph tensors becomes a LoggingTensorCallback when each
tensor is the loss, a compiled metric, the learning rate or the global step; anything else
leaves the hook reported, with the tensor it names."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras._registry import RuleSet
from conftest import flat, helpers_beside

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = '''\
import tensorflow as tf
import tensorflow.compat.v1 as tf1


def input_fn():
    return tf.data.Dataset.from_tensor_slices(([[1.0, 2.0]] * 8, [1] * 8)).repeat().batch(4)


def model_fn(features, labels, mode, params):
    hidden = tf1.layers.dense(features, 3, activation=tf.nn.relu)
    logits = tf1.layers.dense(hidden, 2)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
{train}
        optimizer = tf1.train.GradientDescentOptimizer(learning_rate)
        train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    accuracy = tf1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={{"accuracy": accuracy}})


estimator = tf.estimator.Estimator(model_fn, params={{"learning_rate": 0.1}})
estimator.train(input_fn, steps=10, hooks=[tf1.train.LoggingTensorHook({tensors}, {every})])
'''


def rewrite(train: str, tensors: str, every: str = "every_n_iter=5"):
    source = PROGRAM.format(train=textwrap.indent(textwrap.dedent(train).strip("\n"), " " * 8),
                            tensors=tensors, every=every)
    return rewrite_source(source.encode(), "prog.py", RuleSet.load())


def callback_of(result) -> str:
    text = result.new.decode()
    start = text.index("LoggingTensorCallback({")
    return text[start:text.index(")]", start)]


def messages(result, code="E2K406") -> list[str]:
    return [f.message for f in result.findings if f.code == code and f.kind == "manual"]


def test_loss_metric_learning_rate_and_step_read_from_logs_and_optimizer():
    result = rewrite("""
        learning_rate = params["learning_rate"]
        acc, acc_op = tf1.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1, output_type=tf.int32))
        tf.identity(learning_rate, "lr")
        tf.identity(loss, name="cross_entropy")
        tf.identity(acc_op, name="train_accuracy")
    """, '["lr", "cross_entropy", "train_accuracy", "global_step"]')
    assert result.status == "converted", [f.format() for f in result.findings]
    assert callback_of(result) == (
        'LoggingTensorCallback({\n'
        '    "lr": lambda model, logs: model.optimizer.learning_rate.numpy(),\n'
        '    "cross_entropy": lambda model, logs: logs["loss"],\n'
        '    "train_accuracy": lambda model, logs: logs["accuracy"],\n'
        '    "global_step": lambda model, logs: model.optimizer.iterations.numpy() - 1,\n'
        '}, every_n_iter=5')
    assert "LoggingTensorCallback" in result.helpers  # in the helpers module
    assert "from e2k_helpers import LoggingTensorCallback" in result.new.decode()


def test_a_dict_of_tensor_objects_and_a_learning_rate_through_names():
    result = rewrite("""
        learning_rate = params["learning_rate"]
        rate = learning_rate
        step = tf1.train.get_global_step()
        tf.identity(rate, "rate")
    """, '{"step": "global_step", "rate": "rate:0", "loss": "rate"}')
    assert result.status == "converted", [f.format() for f in result.findings]
    assert '"step": lambda model, logs: model.optimizer.iterations.numpy() - 1' in callback_of(result)
    assert '"rate": lambda model, logs: model.optimizer.learning_rate.numpy()' in callback_of(result)


def test_the_mean_of_the_loss_is_the_loss_keras_reports():
    result = rewrite("""
        learning_rate = 0.1
        mean_loss, mean_loss_update = tf1.metrics.mean(loss)
        tf.identity(mean_loss_update, name="mean_loss")
        mean_hidden = tf1.metrics.mean(hidden)
        tf.identity(mean_hidden[1], name="mean_hidden")
    """, '["mean_loss"]')
    assert result.status == "converted", [f.format() for f in result.findings]
    assert '"mean_loss": lambda model, logs: logs["loss"]' in callback_of(result)
    # The mean of another value is no compiled metric.
    refused = rewrite("""
        learning_rate = 0.1
        mean_hidden = tf1.metrics.mean(hidden)
        tf.identity(mean_hidden[1], name="mean_hidden")
    """, '["mean_hidden"]')
    [message] = messages(refused)
    assert "`mean_hidden[1]` is a tf1.metrics.mean(...) that no eval_metric_ops entry computes" in message


def test_a_training_metric_computed_otherwise_than_the_compiled_one_is_refused():
    result = rewrite("""
        learning_rate = 0.1
        accuracy = tf1.metrics.accuracy(labels=labels, predictions=tf.argmax(hidden, axis=1))
        tf.identity(accuracy[1], name="train_accuracy")
    """, '["train_accuracy"]')
    assert result.status == "partial"
    [message] = messages(result)
    assert "`accuracy[1]` is a tf1.metrics.accuracy(...) that no eval_metric_ops entry computes" in message
    assert "LoggingTensorCallback" not in flat(result.new.decode())


def test_an_activation_is_refused_naming_it():
    result = rewrite("""
        learning_rate = 0.1
        tf.identity(hidden, name="hidden_relu")
    """, '{"hidden": "hidden_relu", "lr": "learning_rate"}')
    [message] = messages(result)
    assert "the tensor 'hidden_relu' (`hidden` in the model_fn) is not the loss" in message
    assert "LoggingTensorCallback" not in flat(result.new.decode())


def test_an_op_named_by_its_own_name_argument_is_refused_naming_it():
    result = rewrite("""
        learning_rate = 0.1
        probabilities = tf.nn.softmax(logits, name="softmax_tensor")
    """, '{"probabilities": "softmax_tensor"}')
    [message] = messages(result)
    assert "the tensor 'softmax_tensor' is `tf.nn.softmax(logits, name=\"softmax_tensor\")` in the model_fn" in message


def test_a_name_the_model_fn_does_not_give_is_refused():
    result = rewrite("""
        learning_rate = 0.1
    """, '["cross_entropy"]')
    [message] = messages(result)
    assert "the tensor 'cross_entropy' is not named with tf.identity" in message


def test_a_hook_timed_in_seconds_is_not_carried_over():
    result = rewrite("""
        learning_rate = 0.1
        tf.identity(loss, name="cross_entropy")
    """, '["cross_entropy", "global_step"]', every="every_n_secs=60")
    [message] = messages(result)
    assert "every_n_secs" in message
    assert "LoggingTensorCallback" not in flat(result.new.decode())


def test_the_learning_rate_of_another_optimizer_call_is_not_guessed():
    # Two optimizers: which one's rate the tensor is cannot be told.
    result = rewrite("""
        learning_rate = 0.1
        other = tf1.train.AdamOptimizer(0.5)
        tf.identity(learning_rate, "lr")
    """, '["lr"]')
    [message] = messages(result)
    assert "the tensor 'lr' (`learning_rate` in the model_fn) is not the loss" in message


@pytest.mark.slow
def test_fixture_logs_the_named_values_on_newest_tensorflow(tmp_path):
    python = ROOT / ".venv-newest" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .venv-newest")
    program = tmp_path / "after.py"
    program.write_text((ROOT / "fixtures" / "logging_named_tensors" / "after.py").read_text())
    helpers_beside(ROOT / "fixtures" / "logging_named_tensors", tmp_path)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([str(python), str(program)], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "learning_rate = " in line]
    # every_n_iter=2 over 6 steps: after the steps 0, 2 and 4, as the hook logged.
    assert len(lines) == 3, done.stderr[-3000:]
    assert all("learning_rate = 0.001, cross_entropy = " in line and "train_accuracy = " in line for line in lines)
    steps = [line for line in done.stderr.splitlines() if "step = " in line and "accuracy = " in line
             and "learning_rate" not in line]
    # The Estimator's hook logged `step = 0` and `step = 3`: the global step fetched with the step.
    assert [line.split("step = ")[1].split(",")[0] for line in steps] == ["0", "3"]


def test_a_logging_hook_of_evaluation_is_reported():
    source = PROGRAM.format(train="        learning_rate = 0.1", tensors='["global_step"]', every="every_n_iter=1")
    source = source.replace("estimator.train(input_fn, steps=10, hooks=[", "estimator.train(input_fn, steps=10)\n"
                            "estimator.evaluate(input_fn, steps=2, hooks=[")
    result = rewrite_source(source.encode(), "prog.py", RuleSet.load())
    assert messages(result) == [
        "a LoggingTensorHook passed to evaluate() is not converted (the callback it would become logs training steps): "
        "log from a tf.keras.callbacks.Callback's on_test_batch_end, or leave it out"]
