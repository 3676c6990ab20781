"""A model_fn's regression and classification export outputs (rule E2K007): TF1 made their
signatures on a single string input (serialized tf.Examples) only, and left them out of the
export with any other receiver. The Keras export leaves them out alike; a receiver on which
the Estimator did export them is refused (TF2 saves predict signatures only)."""
from __future__ import annotations

from pathlib import Path

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras.testing import write_helpers

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


OTHER_OUTPUT = (Path(__file__).parent / "data" / "export_output_other_than_predictions.py")
SERVE = '''
loaded = tf.saved_model.load(export_dir)
out = loaded.signatures["serving_default"](x=tf.constant(x[:3]))
assert sorted(loaded.signatures) == ["classes", "serving_default"], sorted(loaded.signatures)
assert sorted(out) == ["classes", "probabilities"] and out["classes"].dtype == tf.uint8, sorted(out)
assert (out["classes"].numpy() == np.argmax(out["probabilities"].numpy(), 1)).all()
print("SERVED", json.dumps({k: v.shape.as_list() for k, v in out.items()}))
'''


def test_a_predict_output_other_than_the_predictions_is_a_method_of_the_model(rules):
    """kubeflow's mnist: `predictions={"class": ..., "prob": ...}` but the export's
    `PredictOutput({"probabilities": ..., "classes": tf.cast(..., tf.uint8)})`: the Estimator
    served the latter. The model gets a `serving_outputs` method the serving function calls."""
    result = rewrite_source(OTHER_OUTPUT.read_bytes(), "program.py", rules)
    assert result.status == "converted", manual(result)
    new = result.new.decode()
    assert ("    def serving_outputs(self, features):\n"
            "        logits = self(features, training=False)\n"
            "        probabilities = tf.nn.softmax(logits)\n"
            "        classes = tf.cast(tf.argmax(probabilities, 1), tf.uint8)\n"
            '        return {"probabilities": probabilities, "classes": classes}\n') in new, new
    assert "return model.serving_outputs(inputs)" in new
    assert 'return {"class": tf.argmax(logits, 1), "prob": probabilities}' in new  # predict() as before


def test_a_predict_output_of_one_tensor_is_named_output(rules):
    source = OTHER_OUTPUT.read_text().replace(
        'tf.estimator.export.PredictOutput({"probabilities": probabilities, "classes": classes})',
        "tf.estimator.export.PredictOutput(probabilities)")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    assert 'probabilities = tf.nn.softmax(logits)\n        return {"output": probabilities}' in result.new.decode()


def test_a_predict_output_of_the_model_output_itself_serves_it(rules):
    """``PredictOutput(outputs=predictions)``, the model's own output, beside a PREDICT dict:
    served as "output" from the model's pass, not followed into the layers that made it."""
    source = OTHER_OUTPUT.read_text().replace(
        'tf.estimator.export.PredictOutput({"probabilities": probabilities, "classes": classes})',
        "tf.estimator.export.PredictOutput(outputs=logits)")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", manual(result)
    assert 'logits = self(features, training=False)\n        return {"output": logits}' in result.new.decode()


def test_predict_outputs_of_the_predictions_and_of_something_else_are_refused(rules):
    source = OTHER_OUTPUT.read_text().replace(
        '"classes": tf.estimator.export.PredictOutput(',
        '"predict": tf.estimator.export.PredictOutput(predictions),\n            "classes": tf.estimator.export.PredictOutput(')
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "partial"
    assert any("the export outputs give different dicts" in m for m in manual(result)), manual(result)


@pytest.mark.slow
@pytest.mark.parametrize("python", ["legacy", "newest"])
def test_the_export_serves_what_the_estimator_served(rules, tmp_path, python):
    """The Estimator's export (run here on TF 2.15) and the converted model's, on TF 2.15 and
    the newest TF: the same signatures, output names, dtypes and shapes."""
    import json
    import os
    import subprocess
    import sys

    executable = sys.executable if python == "legacy" else os.environ.get("E2K_TARGET_PYTHON")
    if not executable:
        pytest.skip("E2K_TARGET_PYTHON (newest TF) not set")
    result = rewrite_source(OTHER_OUTPUT.read_bytes(), "program.py", rules)
    converted = result.new.decode()
    write_helpers(result, tmp_path)  # the module it imports its helpers from
    shapes = {}
    for name, source, runner in (("estimator", OTHER_OUTPUT.read_text(), sys.executable),
                                 ("migrated", converted, executable)):
        program = tmp_path / f"{name}_program.py"  # not keras.py, which would shadow Keras
        program.write_text("import json\n" + source + SERVE)
        done = subprocess.run([runner, str(program)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
        lines = [line for line in done.stdout.splitlines() if line.startswith("SERVED ")]
        assert done.returncode == 0 and lines, done.stderr[-3000:]
        shapes[name] = json.loads(lines[-1][len("SERVED "):])
    assert shapes["estimator"] == shapes["migrated"] == {"classes": [3], "probabilities": [3, 2]}
