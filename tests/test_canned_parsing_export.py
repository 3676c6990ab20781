"""A canned Estimator exported on tf.Examples parsed with its columns' spec: the categorical
feature comes as a SparseTensor (VarLenFeature), which the converted model's `preprocess`
takes as the feature columns did — it crashed reshaping it (a tester's census program); and
its classify / regress signatures (serving_default the classify one) are exported too, marked
with the methods TensorFlow Serving's Classify and Regress APIs require."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from estimator2keras._engine import rewrite_source
from estimator2keras.testing import write_helpers

PROGRAM = Path(__file__).parent / "data" / "canned_parsing_export.py"
SERVE = '''
def example(age, workclass=None):
    feature = {"age": tf.train.Feature(float_list=tf.train.FloatList(value=[age]))}
    if workclass is not None:
        feature["workclass"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[workclass.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


loaded = tf.saved_model.load(export_dir.decode())  # bytes, from both
# A known value, one outside the vocabulary, and a missing one.
examples = tf.constant([example(30.0, "gov"), example(50.0, "unknown"), example(45.0)])
out = loaded.signatures["predict"](examples=examples)
served = {key: value.shape.as_list() for key, value in sorted(out.items())}
classified = loaded.signatures["serving_default"](inputs=examples)
served["serving_default"] = {key: [value.shape.as_list(), value.dtype.name] for key, value in classified.items()}
# As TensorFlow Serving reads the export: each signature's method, inputs and outputs.
from tensorflow.core.protobuf import saved_model_pb2
saved_model = saved_model_pb2.SavedModel()
with open(os.path.join(export_dir.decode(), "saved_model.pb"), "rb") as f:
    saved_model.ParseFromString(f.read())
served["signatures"] = {key: [signature.method_name, sorted(signature.inputs), sorted(signature.outputs)]
                        for key, signature in saved_model.meta_graphs[0].signature_def.items()
                        if not key.startswith("__")}
print("SERVED", json.dumps(served))
'''


def test_the_converted_model_preprocesses_sparse_categorical_features(rules):
    result = rewrite_source(PROGRAM.read_bytes(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    # SparseTensors made dense by the helper the model's base class calls first.
    assert "(CannedModel):" in new and "features = dense_features(features)" in result.helpers["CannedModel"]
    assert "tf.sparse.to_dense(value" in result.helpers["dense_features"]
    assert "def serving_input_fn_classify(inputs):" in new and "def serving_input_fn_regress(inputs):" in new, new


@pytest.mark.slow
@pytest.mark.parametrize("python", ["legacy", "newest"])
def test_the_export_serves_parsed_examples_as_the_estimator_did(rules, tmp_path, python):
    executable = sys.executable if python == "legacy" else os.environ.get("E2K_TARGET_PYTHON")
    if not executable:
        pytest.skip("E2K_TARGET_PYTHON (newest TF) not set")
    result = rewrite_source(PROGRAM.read_bytes(), "program.py", rules)
    converted = result.new.decode()
    write_helpers(result, tmp_path)  # the module it imports its helpers from
    shapes = {}
    for name, source, runner in (("estimator", PROGRAM.read_text(), sys.executable),
                                 ("migrated", converted, executable)):
        program = tmp_path / f"{name}_program.py"
        program.write_text("import json\n" + source + SERVE)
        done = subprocess.run([runner, str(program)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
        lines = [line for line in done.stdout.splitlines() if line.startswith("SERVED ")]
        assert done.returncode == 0 and lines, done.stderr[-3000:]
        shapes[name] = json.loads(lines[-1][len("SERVED "):])
    # The Estimator's predictions dict, per example, for the three examples; its classify
    # signature as serving_default, its regress one: methods, input and output names alike.
    assert shapes["migrated"] == shapes["estimator"], shapes
    assert shapes["estimator"]["probabilities"] == [3, 2], shapes
    assert shapes["estimator"]["signatures"]["serving_default"][0] == "tensorflow/serving/classify", shapes
    assert shapes["estimator"]["signatures"]["regression"] == ["tensorflow/serving/regress", ["inputs"], ["outputs"]]

