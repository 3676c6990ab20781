"""A custom model_fn's input_layer of categorical columns, exported: the served function gets
raw features (parsed tf.Examples: SparseTensors for the categorical ones), which the model's
`serve` makes dense and preprocesses as `dataset.map(model.preprocess)` did in training. The
converted program's export, called on serialized examples of the training features, gives
what the model predicts on them (TF 2.15 and the newest TF)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import FIXTURES
from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source

EXPORT = """
serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(
    tf.feature_column.make_parse_example_spec(build_columns()))
export_dir = classifier.export_saved_model(tempfile.mkdtemp(), serving_input_fn)
"""
CHECK = """
served = tf.saved_model.load(export_dir).signatures["serving_default"]


def _example(i):
    feature = {}
    for key, values in features.items():
        value = values[i]
        if isinstance(value, (str, np.str_)):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(value).encode()]))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


out = served(examples=tf.constant([_example(i) for i in range(N)]))
expected = model.predict(input_fn(repeat=False).map(model.preprocess))
np.testing.assert_allclose(out["probabilities"].numpy(), expected["probabilities"], atol=1e-5)
assert (out["class_ids"].numpy() == expected["class_ids"]).all()
print("SERVED AS PREDICTED", N)
"""


def _program() -> str:
    source = (FIXTURES / "custom_estimator_census_columns" / "before.py").read_text()
    return source.replace("import numpy as np", "import tempfile\n\nimport numpy as np", 1) + EXPORT


def test_the_export_serves_the_model_through_preprocess(rules):
    result = rewrite_source(_program().encode(), "trainer.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = result.new.decode()
    assert "return self.predict_step(self.preprocess(dense_features(features)))" in new, new
    assert "return model.serve(tf.io.parse_example(" in new, new


@pytest.mark.slow
@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_the_exported_model_serves_what_it_predicts(rules, tmp_path, target):
    from parity_programs import support

    python = sys.executable if target == "tf215" else support.target_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON to an interpreter with the newest TensorFlow")
    result = rewrite_source(_program().encode(), "trainer.py", rules)
    (tmp_path / "trainer.py").write_text(result.new.decode() + CHECK)
    (tmp_path / f"{_helpers.MODULE}.py").write_text(_helpers.render(result.helpers, result.indent, None, result.limit))
    done = subprocess.run([python, "trainer.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SERVED AS PREDICTED 64" in done.stdout
