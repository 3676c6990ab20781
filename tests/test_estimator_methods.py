"""estimator.evaluate/predict(checkpoint_path=...) (E2K003): the model_dir's latest checkpoint
is what the converted model restores anyway; any other checkpoint is reported, not dropped."""
from __future__ import annotations

import pytest

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
    program = new.split("class ModelDirCheckpoints")[0] + new.split("self.saved_step, self.saved_time = self.step, time.time()")[-1]
    assert "checkpoint_path" not in program and "latest_checkpoint(" not in program  # (the helper reads its own)
    assert "model.evaluate(input_fn(), steps=1, callbacks=[checkpoints])" in new


def test_another_checkpoint_is_reported_and_the_estimator_kept(rules):
    result = _rewrite('"/tmp/model/model.ckpt-5"', rules)
    assert result.status == "partial"
    messages = [f.message for f in result.findings if f.kind == "manual"]
    assert any("checkpoint_path= other than the model_dir's latest checkpoint" in m for m in messages), messages
    assert "tf.estimator.Estimator(model_fn" in result.new.decode()


# -- which input_fns repeat forever in predict (the call decides the `if`s it can) ---------
REPEATING = '''\
import tensorflow as tf


def input_fn(x, training=True):
    dataset = tf.data.Dataset.from_tensor_slices((x, x))
    PREAMBLE
    if training:
        dataset = dataset.repeat()
    return dataset.batch(1)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=logits)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


flag = False
estimator = tf.estimator.Estimator(model_fn)
estimator.train(lambda: input_fn([[1.0]]), steps=2)
print(list(estimator.predict(lambda: PREDICT_CALL)))
'''


@pytest.mark.parametrize(
    "call,preamble,repeats",
    [
        pytest.param("input_fn([[1.0]], training=False)", "pass", False, id="keyword-false"),
        pytest.param("input_fn([[1.0]], False)", "pass", False, id="positional-false"),
        pytest.param("input_fn([[1.0]])", "pass", True, id="default-true"),
        pytest.param("input_fn([[1.0]], training=True)", "pass", True, id="keyword-true"),
        pytest.param("input_fn([[1.0]], training=flag)", "pass", True, id="not-a-literal"),
        pytest.param("input_fn(*[[[1.0]], False])", "pass", True, id="star-args"),
        pytest.param("input_fn([[1.0]], training=False)", "training = not training", True, id="reassigned"),
    ],
)
def test_predict_on_an_input_that_repeats_only_when_training(call, preamble, repeats, rules):
    source = REPEATING.replace("PREDICT_CALL", call).replace("PREAMBLE", preamble).encode()
    result = rewrite_source(source, "program.py", rules)
    refused = [f for f in result.findings if "may repeat forever" in f.message]
    assert bool(refused) is repeats, [f.format() for f in result.findings]
    assert result.status == ("partial" if repeats else "converted")


def test_an_input_fn_mode_with_a_default_still_gets_the_mode(rules):
    # Estimator._call_input_fn passes `mode` whenever the input_fn has such a parameter: with
    # its default kept, predict would read the training data.
    source = REPEATING.replace("def input_fn(x, training=True):", "def input_fn(x=((1.0,),), training=True, mode=tf.estimator.ModeKeys.TRAIN):")
    source = source.replace("lambda: input_fn([[1.0]])", "input_fn").replace("lambda: PREDICT_CALL", "input_fn")
    source = source.replace("if training:", "if mode == tf.estimator.ModeKeys.TRAIN:").replace("PREAMBLE", "pass")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'model.fit(input_fn(mode="train"), steps_per_epoch=2)' in new
    assert 'model.predict(input_fn(mode="infer"))' in new


def test_an_input_fn_reading_a_defaulted_config_is_refused(rules):
    source = REPEATING.replace("def input_fn(x, training=True):", "def input_fn(x=((1.0,),), config=None):")
    source = source.replace("PREAMBLE", "print(config)").replace("if training:", "if False:")
    source = source.replace("lambda: input_fn([[1.0]])", "input_fn").replace("lambda: PREDICT_CALL", "input_fn")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    assert any("reads the Estimator's `config`" in f.message for f in result.findings)


@pytest.mark.parametrize("flag, repeats", [("False", False), ("True", True), ("flag", True)])
def test_predict_on_an_input_fn_factory_whose_flag_the_call_fixes(flag, repeats, rules):
    # `make_input_fn(x, repeat=False)` returning a nested `_fn` that tests `if repeat:`: the
    # factory call's flag decides it (the predict was refused as repeating forever).
    source = REPEATING.replace('''def input_fn(x, training=True):
    dataset = tf.data.Dataset.from_tensor_slices((x, x))
    PREAMBLE
    if training:
        dataset = dataset.repeat()
    return dataset.batch(1)''', '''def make_input_fn(x, repeat):
    def _fn():
        dataset = tf.data.Dataset.from_tensor_slices((x, x))
        if repeat:
            dataset = dataset.repeat()
        return dataset.batch(1)
    return _fn''').replace("lambda: input_fn([[1.0]])", "make_input_fn([[1.0]], True)").replace(
        "lambda: PREDICT_CALL", f"make_input_fn([[1.0]], {flag})")
    assert "def make_input_fn" in source
    result = rewrite_source(source.encode(), "program.py", rules)
    refused = [f for f in result.findings if "may repeat forever" in f.message]
    assert bool(refused) is repeats, [f.format() for f in result.findings]


BATCHED = '''\
import numpy as np
import tensorflow as tf


def input_fn():
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, x)).batch(4)


def model_fn(features, labels, mode):
    logits = tf.layers.Dense(1)(features["x"])
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": logits})
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)
estimator.train(input_fn, steps=2)
shapes = [batch["y"].shape for batch in estimator.predict(input_fn, yield_single_examples=False)]
'''


def test_predictions_a_batch_at_a_time_are_predicted_a_batch_at_a_time(rules):
    # predict(yield_single_examples=False) refused the whole program (new-user test): Keras
    # predicts a batch with predict_on_batch, its labels left out as predict left them.
    result = rewrite_source(BATCHED.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert "model.predict_on_batch(tf.keras.utils.unpack_x_y_sample_weight(batch)[0])" in new
    tf = pytest.importorskip("tensorflow")
    namespace: dict = {}
    exec(compile(new, "program.py", "exec"), namespace)
    assert namespace["shapes"] == [(4, 1), (4, 1), (2, 1)]  # the Estimator's batches
    refused = rewrite_source(BATCHED.replace("yield_single_examples=False", "yield_single_examples=flag").encode(),
                             "program.py", rules)
    assert refused.status == "partial"
