"""Trainer packages written as users wrote them (a new-user trial): a model_fn factory with a
docstring, an input_fn whose batch size is already a parameter with a default, a model_dir
that may be None, and TensorFlow imported where the program pass puts code that reads it."""
from __future__ import annotations

import textwrap

import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source
from estimator2keras.cli import main
from conftest import flat

PROGRAM = '''\
import tensorflow.compat.v1 as tf


def make_model_fn(learning_rate):
  """Returns the model_fn."""

  def model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 1)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

  return model_fn


def train_input_fn(batch_size=8):
  return tf.data.Dataset.from_tensor_slices(({"x": [[1.0]] * 64}, [[2.0]] * 64)).repeat().batch(batch_size)


def build_estimator(model_dir):
  config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=tf.distribute.MirroredStrategy())
  return tf.estimator.Estimator(model_fn=make_model_fn(0.1), config=config)


def main(model_dir=None):
  estimator = build_estimator(model_dir)
  estimator.train(input_fn=train_input_fn, steps=4)
'''

TASK = textwrap.dedent('''\
    from trainer.model import build_estimator, train_input_fn


    def run(model_dir):
      estimator = build_estimator(model_dir)
      estimator.train(input_fn=train_input_fn, steps=4)
    ''')


def test_a_model_fn_factory_with_a_docstring_converts(rules):
    result = rewrite_source(PROGRAM.encode(), "task.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "make_model_fn" not in new and "model = build_model(learning_rate=0.1)" in new


def test_a_batch_size_parameter_with_a_default_gets_the_global_batch(rules):
    new = rewrite_source(PROGRAM.encode(), "task.py", rules).new.decode()
    # The strategy is local to the factory: the call reads it from the model.
    assert "train_input_fn(batch_size=8 * model.distribute_strategy.num_replicas_in_sync)" in new
    assert "def train_input_fn(batch_size=8):" in new  # its other callers see no change


def test_a_model_dir_that_may_be_none_means_a_temporary_directory(rules):
    result = rewrite_source(PROGRAM.encode(), "task.py", rules)
    assert "ModelDirCheckpoints(model, model_dir" in result.new.decode()
    module = _helpers.render(result.helpers, result.indent, limit=result.limit)
    assert "directory = directory or tempfile.mkdtemp()" in module and "import tempfile" in module


def test_the_module_that_gets_the_checkpoint_callback_imports_tensorflow(tmp_path):
    # The Estimator is built in model.py; task.py trains it and gets the callback class,
    # which reads TensorFlow: task.py imports it itself, never through model.py.
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "model.py").write_text(PROGRAM.split("\n\ndef main(")[0] + "\n")
    (tmp_path / "trainer" / "task.py").write_text(TASK)
    main(["rewrite", str(tmp_path)])
    task = (tmp_path / "trainer" / "task.py").read_text()
    assert "from trainer.e2k_helpers import ModelDirCheckpoints" in task and "from trainer.model import tf" not in task
    module = (tmp_path / "trainer" / "e2k_helpers.py").read_text()
    assert "class ModelDirCheckpoints(tf.keras.callbacks.Callback):" in module and "import tensorflow as tf" in module


def test_a_caller_that_trains_what_a_converted_factory_returns_is_not_left_as_it_was(tmp_path):
    # model.py builds and trains its Estimator itself (so it converts alone), and task.py
    # trains what build_estimator returns: task.py must be converted too, or reported.
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "model.py").write_text(PROGRAM)
    (tmp_path / "trainer" / "task.py").write_text(TASK)
    main(["rewrite", str(tmp_path)])
    task = (tmp_path / "trainer" / "task.py").read_text()
    assert "estimator.train(" not in task or "e2k: E2K" in task


FACTORY_INPUTS = '''\
import numpy as np
import tensorflow.compat.v1 as tf


def model_fn(features, labels, mode):
  logits = tf.layers.dense(features["x"], 1)
  loss = tf.losses.mean_squared_error(labels, logits)
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def make_input_fn(num, batch_size, seed):
  def _input_fn():
    x = np.random.RandomState(seed).normal(size=(num, 2)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, :1])).repeat().batch(batch_size)
  return _input_fn


def main(batch_size=16):
  strategy = tf.distribute.MirroredStrategy()
  config = tf.estimator.RunConfig(train_distribute=strategy)
  estimator = tf.estimator.Estimator(model_fn=model_fn, config=config)
  train_spec = tf.estimator.TrainSpec(input_fn=make_input_fn(320, batch_size, seed=1), max_steps=30)
  eval_spec = tf.estimator.EvalSpec(input_fn=make_input_fn(80, batch_size, seed=2), steps=5)
  tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
'''


def test_an_input_fn_factory_shared_with_a_local_evaluation_scales_the_training_call_only(rules):
    result = rewrite_source(FACTORY_INPUTS.encode(), "task.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = flat(result.new.decode())
    assert "make_input_fn(320, batch_size * strategy.num_replicas_in_sync, seed=1)()" in new
    assert "model.evaluate(make_input_fn(80, batch_size, seed=2)(), steps=5" in new
