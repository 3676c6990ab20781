"""``estimator = tf.contrib.estimator.forward_features(estimator, keys)`` (Google's courses:
a key column passed through batch prediction): the canned Keras model's predictions carry
those raw features where it is served, as the Estimator's predictions and export did.

forward_features existed in tf.contrib only (TensorFlow 1), so no parity run can execute the
original; what it did is read from TensorFlow 1.15's extenders.forward_features: in PREDICT
mode, ``predictions[key] = features[key]`` for each key (every feature when keys is None),
and the same outputs in the ``predict`` / ``serving_default`` PredictOutput signatures. The
slow test serves the converted model on TF 2.15 and the newest TF and checks exactly that."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras.testing import write_helpers

PROGRAM = '''\
import tempfile

import numpy as np
import tensorflow as tf

KEY = "key"
rng = np.random.RandomState(0)
x = rng.rand(64).astype(np.float32)
data = {"x": x, KEY: np.array([f"id{i}" for i in range(64)])}
y = (2.0 * x + 1.0).astype(np.float32)


def input_fn():
    return tf.data.Dataset.from_tensor_slices((data, y)).repeat().batch(8)


def serving_input_fn():
    inputs = {"x": tf.compat.v1.placeholder(tf.float32, [None]),
              KEY: tf.compat.v1.placeholder(tf.string, [None])}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


columns = [tf.feature_column.numeric_column("x")]
estimator = tf.estimator.DNNRegressor(hidden_units=[4], feature_columns=columns, model_dir=tempfile.mkdtemp())
estimator = tf.contrib.estimator.forward_features(estimator, KEY)
estimator.train(input_fn, steps=5)
export_dir = estimator.export_saved_model(tempfile.mkdtemp(), serving_input_fn)
'''
SERVE = '''
loaded = tf.saved_model.load(export_dir)
out = loaded.signatures["predict"](x=tf.constant([0.5, 0.25]), key=tf.constant(["a", "b"]))
expected = model(model.preprocess({"x": tf.constant([0.5, 0.25])}), training=False).numpy()
assert sorted(out) == ["key", "predictions"], sorted(out)
assert out["key"].numpy().tolist() == [b"a", b"b"]
assert np.allclose(out["predictions"].numpy(), expected, rtol=1e-5, atol=1e-6)
print("SERVED OK")
'''


def convert(rules, source: str):
    return rewrite_source(source.encode(), "program.py", rules)


def test_the_served_predictions_carry_the_key(rules):
    result = convert(rules, PROGRAM)
    assert result.status == "converted", [f.message for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "forward_features" not in new.replace("# forward_features(estimator, ...)", "")
    assert ("        predictions = {\"predictions\": logits}\n"
            "        if isinstance(data, dict):\n") in new, new
    assert "            predictions[KEY] = data[KEY]\n        return predictions\n" in new
    assert any(f.code == "E2K205" and "forward_features" in f.message for f in result.findings)


def test_keys_as_a_list_and_all_features(rules):
    listed = convert(rules, PROGRAM.replace("forward_features(estimator, KEY)", 'forward_features(estimator, [KEY, "x"])'))
    assert listed.status == "converted"
    assert 'predictions["key"] = data["key"]' not in listed.new.decode()  # written as the program wrote them
    assert 'predictions["x"] = data["x"]' in listed.new.decode()
    every = convert(rules, PROGRAM.replace("forward_features(estimator, KEY)", "forward_features(estimator)"))
    assert every.status == "converted" and "predictions.update(data)" in every.new.decode()


def test_predict_of_the_wrapped_estimator_is_refused(rules):
    result = convert(rules, PROGRAM + "print(list(estimator.predict(input_fn)))\n")
    assert result.status == "partial"
    assert any("forward_features: predict() of the Keras model reads its preprocessed inputs" in f.message
               for f in result.findings), [f.message for f in result.findings]


def test_a_model_fn_estimator_is_refused_with_the_reason(rules):
    source = PROGRAM.replace(
        'estimator = tf.estimator.DNNRegressor(hidden_units=[4], feature_columns=columns, model_dir=tempfile.mkdtemp())',
        '''def model_fn(features, labels, mode):
    predictions = tf.compat.v1.layers.dense(tf.reshape(features["x"], [-1, 1]), 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"predictions": predictions})
    loss = tf.compat.v1.losses.mean_squared_error(tf.reshape(labels, [-1, 1]), predictions)
    train_op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


estimator = tf.estimator.Estimator(model_fn)''')
    result = convert(rules, source)
    assert result.status == "partial"
    assert any("forward_features on an Estimator of a model_fn is not converted yet" in f.message
               for f in result.findings), [f.message for f in result.findings]


@pytest.mark.slow
@pytest.mark.parametrize("python", ["legacy", "newest"])
def test_the_exported_model_serves_the_key_it_is_given(rules, tmp_path, python):
    executable = sys.executable if python == "legacy" else os.environ.get("E2K_TARGET_PYTHON")
    if not executable:
        pytest.skip("E2K_TARGET_PYTHON (newest TF) not set")
    result = convert(rules, PROGRAM)
    program = tmp_path / "program.py"
    program.write_text(result.new.decode() + SERVE)
    write_helpers(result, tmp_path)  # the module it imports its helpers from
    done = subprocess.run([executable, str(program)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0 and "SERVED OK" in done.stdout, done.stderr[-3000:]
