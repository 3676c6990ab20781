"""TF2 canned Estimators trained with Keras's OptimizerV2 optimizers (`tf.keras.optimizers.legacy`
in TF 2.11-2.15, to which they converted a new one), whose Adagrad and RMSprop add epsilon to
the root where today's Keras adds it under the root. e2k writes `KerasV2Adagrad` and
`KerasV2RMSprop` for their `"Adagrad"` (the DNN's default) and `"RMSProp"`, and for a legacy or
Keras optimizer object given to them:

- `KerasV2Adagrad` updates as the legacy Adagrad, to the bit, on Keras 2 and Keras 3, eager and
  in a tf.function, and so does its JAX form on JAX; Keras's Adagrad does not;
- `KerasV2RMSprop` as the legacy RMSprop within 1e-6 (it takes `1 - rho` from the Python
  float); the plain RMSprop e2k wrote before is 50% off.

A tf.compat.v1 canned Estimator's `"RMSProp"` is TF1's: `TF1RMSprop` (tests/test_tf1_optimizer_kernels.py).
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source
from test_tf1_optimizer_kernels import _data, _off, _python, keras_paths

tf = pytest.importorskip("tensorflow")

#: (id, the legacy optimizer the Estimator built, what e2k writes now, what it wrote before)
CASES = [
    ("adagrad-default", "Adagrad(learning_rate=0.001)", "KerasV2Adagrad(learning_rate=0.001)",
     "tf.keras.optimizers.Adagrad(learning_rate=0.001)"),
    ("adagrad", "Adagrad(0.05, initial_accumulator_value=0.01, epsilon=1e-06)",
     "KerasV2Adagrad(0.05, initial_accumulator_value=0.01, epsilon=1e-06)",
     "tf.keras.optimizers.Adagrad(0.05, initial_accumulator_value=0.01, epsilon=1e-06)"),
    ("rmsprop", "RMSprop(learning_rate=0.001)", "KerasV2RMSprop(learning_rate=0.001)",
     "tf.keras.optimizers.RMSprop(learning_rate=0.001)"),
]
#: KerasV2RMSprop takes `1 - rho` from the Python float, OptimizerV2 in float32: at most this
#: far off, relative to the largest displacement (the plain RMSprop: 0.5).
RMSPROP = 1e-6


def _legacy_path(optimizer: str) -> np.ndarray:
    """What the canned Estimator's optimizer did (TF 2.15's legacy one), in a tf.function, on
    late training's small gradients (where the epsilon's place shows)."""
    w0, gradients = _data(small=True)
    optimizer = eval(f"tf.keras.optimizers.legacy.{optimizer}")
    variable = tf.Variable(w0)

    @tf.function
    def apply(gradient):
        optimizer.apply_gradients([(gradient, variable)])

    path = []
    for gradient in gradients:
        apply(tf.constant(gradient))
        path.append(variable.numpy())
    return np.stack(path)


@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_the_helpers_update_as_the_optimizerv2_ones_and_kerass_do_not(target):
    expressions = {}
    for key, _, new, old in CASES:
        expressions[f"{key} new"], expressions[f"{key} old"] = new, old
    paths = keras_paths(_python(target), expressions, helpers=("KerasV2Adagrad", "KerasV2RMSprop"), small=True)
    failures = []
    for key, legacy, _, _ in CASES:
        reference = _legacy_path(legacy)
        for mode in ("eager", "function"):
            new, old = paths[f"{key} new {mode}"], paths[f"{key} old {mode}"]
            if key.startswith("rmsprop"):
                if not _off(new, reference, True) <= RMSPROP:
                    failures.append(f"{key} {mode}: {_off(new, reference, True):.1e} off the legacy RMSprop")
                if not _off(old, reference, True) > 0.1:
                    failures.append(f"{key} {mode}: the old emission is {_off(old, reference, True):.1e} off only")
                continue
            if not np.array_equal(new, reference):
                failures.append(f"{key} {mode}: {_off(new, reference, True):.1e} off the legacy Adagrad (not to the bit)")
            if np.array_equal(old, reference):
                failures.append(f"{key} {mode}: the old emission is the legacy Adagrad's too")
    assert not failures, failures


JAX_SIDE = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras
import numpy as np
import tensorflow as tf

exec(sys.argv[1], globals())
w0 = np.array(json.loads(sys.argv[2]), np.float32)
variable = keras.Variable(w0)
optimizer = KerasV2Adagrad(0.05, initial_accumulator_value=0.01, epsilon=1e-06)
optimizer.build([variable])
path = []
for gradient in json.loads(sys.argv[3]):
    optimizer.apply_gradients([(keras.ops.convert_to_tensor(np.array(gradient, np.float32)), variable)])
    path.append(np.array(variable).tolist())
print("RESULT " + json.dumps(path))
"""


def test_the_jax_form_updates_as_the_optimizerv2_adagrad():
    import json

    from estimator2keras.targets import jax
    from parity_programs import support

    python = support.jax_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON to the newest TensorFlow's interpreter with JAX")
    written, refused = jax.helpers({"KerasV2Adagrad": _helpers.catalogue()["KerasV2Adagrad"].code})
    assert not refused and "tf.sqrt" not in written["KerasV2Adagrad"]
    w0, gradients = _data(small=True)
    done = subprocess.run([python, "-c", JAX_SIDE, written["KerasV2Adagrad"], json.dumps(w0.tolist()),
                           json.dumps(gradients.tolist())], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    path = np.array(json.loads(lines[-1][len("RESULT "):]), np.float32)
    # (to the bit on the JAX of this project's newest venv; XLA may round an op apart elsewhere)
    assert _off(path, _legacy_path("Adagrad(0.05, initial_accumulator_value=0.01, epsilon=1e-06)"), True) <= 1e-7


CANNED = '''\
import numpy as np
import tensorflow as tf

x = np.random.RandomState(0).rand(64, 3).astype(np.float32)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({{"x": x}}, x.sum(1))).batch(8)


regressor = tf.{module}.DNNRegressor(
    hidden_units=[4], feature_columns=[tf.feature_column.numeric_column("x", shape=(3,))]{optimizer})
regressor.train(input_fn, steps=10)
'''


@pytest.mark.parametrize("module, optimizer, written, helper", [
    # TF1 classes: TF1's optimizers at the Estimator's learning rate, 0.05.
    ("compat.v1.estimator", "", "tf.keras.optimizers.Adagrad(0.05, epsilon=0.0)", None),
    ("compat.v1.estimator", '"Adagrad"', "tf.keras.optimizers.Adagrad(0.05, epsilon=0.0)", None),
    ("compat.v1.estimator", '"RMSProp"', "TF1RMSprop(0.05, epsilon=1e-10)", "TF1RMSprop"),
    ("compat.v1.estimator", "tf.compat.v1.train.RMSPropOptimizer(0.01, momentum=0.9)",
     "TF1RMSprop(0.01, momentum=0.9, epsilon=1e-10)", "TF1RMSprop"),
    ("compat.v1.estimator", "tf.compat.v1.train.AdadeltaOptimizer(0.5)", "TF1Adadelta(0.5)", "TF1Adadelta"),
    # TF2 classes: Keras's OptimizerV2 ones at their own default rate, 0.001.
    ("estimator", "", "KerasV2Adagrad(learning_rate=0.001)", "KerasV2Adagrad"),
    ("estimator", '"Adagrad"', "KerasV2Adagrad(learning_rate=0.001)", "KerasV2Adagrad"),
    ("estimator", '"RMSProp"', "KerasV2RMSprop(learning_rate=0.001)", "KerasV2RMSprop"),
    ("estimator", "tf.keras.optimizers.legacy.RMSprop(0.01, rho=0.8)", "KerasV2RMSprop(0.01, rho=0.8)",
     "KerasV2RMSprop"),
    ("estimator", "tf.keras.optimizers.legacy.Adagrad(learning_rate=0.1)", "KerasV2Adagrad(learning_rate=0.1)",
     "KerasV2Adagrad"),
    ("estimator", "tf.keras.optimizers.Adagrad(0.1)", "KerasV2Adagrad(0.1)", "KerasV2Adagrad"),
    ("estimator", '"SGD"', "tf.keras.optimizers.SGD(learning_rate=0.001)", None),
])
def test_a_canned_estimators_optimizer_is_written_as_the_tested_one(rules, module, optimizer, written, helper):
    source = CANNED.format(module=module, optimizer=f",\n    optimizer={optimizer}" if optimizer else "")
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert f"    optimizer={written}," in new, new
    if helper is not None:
        assert helper in new.split("from e2k_helpers import ", 1)[1].split("\n", 1)[0]
        assert result.helpers[helper] == _helpers.catalogue()[helper].code
