"""A converted canned model, exported, serves the raw features the Estimator's serving function
took: its `call` preprocesses a dict of raw features itself. On TF 2.15 (Keras 2) and, with
E2K_TARGET_PYTHON, the newest TensorFlow (Keras 3)."""
from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from conftest import FIXTURES
from parity_programs import support

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import json, sys, tempfile
    import numpy as np
    import tensorflow as tf
    source = open(sys.argv[1]).read()
    namespace = {"__name__": "fixture"}
    exec(source[:source.index("\\ndef input_fn")], namespace)  # data, columns' replacement, the model
    features = namespace["features"]
    model = namespace[sys.argv[2]]()
    raw = {k: tf.constant(v[:5]) for k, v in features.items()}
    expected = model(model.preprocess(raw)).numpy()
    signature = {k: tf.TensorSpec([None], tf.constant(v).dtype) for k, v in features.items()}
    archive = tf.keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", lambda features: model(features), input_signature=[signature])
    path = tempfile.mkdtemp() + "/served"
    archive.write_out(path)
    loaded = tf.saved_model.load(path)  # kept: its functions use its variables
    served = loaded.serve(raw).numpy()
    # As np.allclose(rtol=1e-5, atol=1e-6): eager and traced float32 kernels differ by an ulp or
    # two (1.9e-6 on logits near 10 was seen), a wrong serving function by far more.
    excess = np.max(np.abs(served - expected) - 1e-5 * np.abs(expected))
    print("RESULT " + json.dumps({"shape": list(served.shape), "excess": float(excess)}))
""")


def _serve(python: str, case: str, class_name: str) -> dict:
    done = subprocess.run([python, "-c", SCRIPT, str(FIXTURES / case / "after.py"), class_name],
                          capture_output=True, text=True, timeout=300, cwd=FIXTURES / case)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


CASES = [("canned_dnn_classifier", "DNNClassifierModel", [5, 3]), ("canned_linear_regressor", "LinearRegressorModel", [5, 1])]


@support.requires_legacy
@pytest.mark.parametrize("case,class_name,shape", CASES, ids=[c[0] for c in CASES])
def test_exported_model_takes_raw_features(case, class_name, shape):
    out = _serve(support.legacy_python(), case, class_name)
    assert out["shape"] == shape and out["excess"] <= 1e-6


@support.requires_target
@pytest.mark.parametrize("case,class_name,shape", CASES, ids=[c[0] for c in CASES])
def test_exported_model_takes_raw_features_on_newest_tensorflow(case, class_name, shape):
    out = _serve(support.target_python(), case, class_name)
    assert out["shape"] == shape and out["excess"] <= 1e-6
