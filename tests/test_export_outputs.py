"""A model_fn's regression and classification export outputs (rule E2K007): TF1 made their
signatures on a single string input (serialized tf.Examples) only, and left them out of the
export with any other receiver. The Keras export leaves them out alike; a receiver on which
the Estimator did export them is refused (TF2 saves predict signatures only)."""
from __future__ import annotations

import pytest

from estimator2keras._engine import rewrite_source

PROGRAM = '''\
import tempfile

import tensorflow as tf


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": [[1.0, 2.0]] * 4}, [[1.0]] * 4)).batch(2)


def model_fn(features, labels, mode):
    pred = tf.compat.v1.layers.dense(features["x"], 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"p": pred}, export_outputs={
            OUTPUTS})
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


RECEIVER

estimator = tf.estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
estimator.train(input_fn, steps=1)
export_path = estimator.export_saved_model(tempfile.mkdtemp(), serving_input_fn)
'''
BOTH = ('tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: tf.estimator.export.RegressionOutput(pred),\n'
        '            "pred": tf.estimator.export.PredictOutput({"p": pred})')
RAW = 'serving_input_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.zeros([1, 2])})'
PARSING = 'serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(\n' \
          '    {"x": tf.io.FixedLenFeature([2], tf.float32)})'


def program(outputs: str, receiver: str) -> str:
    return PROGRAM.replace("OUTPUTS", outputs).replace("RECEIVER", receiver)


def convert(rules, source: str):
    return rewrite_source(source.encode(), "program.py", rules)


def manual(result) -> list[str]:
    return [f"{f.code} {f.message}" for f in result.findings if f.kind == "manual"]


def test_outputs_the_estimator_left_out_are_left_out(rules):
    result = convert(rules, program(BOTH, RAW))
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert 'signatures={"pred": ' in new, new  # no serving_default: the Estimator had none either
    assert "RegressionOutput" not in new
    assert any(f.code == "E2K007" and "left out" in f.message for f in result.findings)


def test_a_receiver_of_serialized_examples_exported_them_and_is_reported(rules):
    """The Estimator exported the regression signature there; Keras cannot: the rest converts,
    the predict signature is exported, and the receiver is marked for a human."""
    result = convert(rules, program(BOTH, PARSING))
    assert result.status == "partial"
    assert any("single string input" in m for m in manual(result)), manual(result)
    new = result.new.decode()
    assert "tf.estimator." not in new and 'signatures={"pred": ' in new, new
    assert "# e2k: E2K" in new


def test_an_export_left_without_any_signature_is_refused(rules):
    outputs = "tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: tf.estimator.export.RegressionOutput(pred)"
    result = convert(rules, program(outputs, RAW))
    assert result.status == "partial"
    assert any("held no signature" in m for m in manual(result)), manual(result)


@pytest.mark.slow
def test_the_estimator_leaves_them_out_indeed(tmp_path):
    """What the conversion rests on, run on TF 2.15: the Estimator's export of BOTH on a raw
    receiver holds the predict signature only."""
    import subprocess
    import sys

    pytest.importorskip("tensorflow_estimator")
    script = program(BOTH, RAW) + "print('SIGNATURES', sorted(tf.saved_model.load(export_path.decode()).signatures.keys()))\n"
    (tmp_path / "program.py").write_text(script)
    done = subprocess.run([sys.executable, "program.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "SIGNATURES ['pred']" in done.stdout, done.stdout + done.stderr[-3000:]
