"""model_to_estimator trained a Keras model compiled with Keras's RMSprop as Keras's
OptimizerV2 RMSprop (`tf.keras.optimizers.legacy.RMSprop` on TF 2.11+), which without momentum
divides by sqrt(ms) + epsilon; today's Keras RMSprop divides by sqrt(ms + epsilon), and a
tester's converted program diverged at step 2 (parity BROKEN). The emitted KerasV2RMSprop
takes the first form: checked here against the legacy optimizer on TF 2.15, and against the
formula on the newest TF (E2K_TARGET_PYTHON), with and without momentum."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from estimator2keras.rewrites.keras_model_to_estimator_unwrap import KERAS_V2_RMSPROP
from conftest import flat

HELPER = KERAS_V2_RMSPROP.format(name="KerasV2RMSprop", tf="tf")

CHECK = '''
import numpy as np
import tensorflow as tf
''' + HELPER + '''

rng = np.random.RandomState(0)
grads = [rng.normal(scale=s, size=(3,)).astype(np.float32) for s in (1e-3, 0.5, 2e-4)]


def run(optimizer):
    variable = tf.Variable(np.ones(3, np.float32))
    for g in grads:
        optimizer.apply_gradients([(tf.constant(g), variable)])
    return variable.numpy()


def formula(lr, rho, eps):
    x, ms = np.ones(3, np.float64), np.zeros(3, np.float64)
    for g in grads:
        ms = rho * ms + (1 - rho) * g.astype(np.float64) ** 2
        x = x - lr * g / (np.sqrt(ms) + eps)
    return x


# An embedding's sparse gradient: only the rows looked up change (a duplicate row summed).
def sparse(optimizer):
    rng = np.random.RandomState(1)
    table = tf.Variable(np.ones((5, 2), np.float32))
    for scale in (1e-3, 0.5):
        values = tf.constant(rng.normal(scale=scale, size=(3, 2)).astype(np.float32))
        optimizer.apply_gradients([(tf.IndexedSlices(values, tf.constant([0, 3, 3]), tf.constant([5, 2])), table)])
    return table.numpy()


rows = sparse(KerasV2RMSprop(0.01))
assert (rows[[1, 2, 4]] == 1).all() and (rows[[0, 3]] != 1).all(), rows
mine = run(KerasV2RMSprop(0.01, rho=0.8))
np.testing.assert_allclose(mine, formula(0.01, 0.8, 1e-7), rtol=1e-5)
if tf.__version__.startswith("2.15"):  # Keras 2, with its OptimizerV2 optimizers
    np.testing.assert_allclose(mine, run(tf.keras.optimizers.legacy.RMSprop(0.01, rho=0.8)), rtol=1e-6)
    # With momentum both apply the same kernel (epsilon under the root).
    np.testing.assert_allclose(run(KerasV2RMSprop(0.01, momentum=0.5)),
                               run(tf.keras.optimizers.legacy.RMSprop(0.01, momentum=0.5)), rtol=1e-6)
    np.testing.assert_allclose(rows, sparse(tf.keras.optimizers.legacy.RMSprop(0.01)), rtol=1e-6)
    print("LEGACY-CHECKED")
print("OK")
'''


@pytest.mark.parametrize("python", ["legacy", "newest"])
def test_the_helper_is_the_optimizerv2_rmsprop_update(tmp_path, python):
    executable = sys.executable if python == "legacy" else os.environ.get("E2K_TARGET_PYTHON")
    if not executable:
        pytest.skip("E2K_TARGET_PYTHON (newest TF) not set")
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    done = subprocess.run([executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
    if python == "legacy":
        assert "LEGACY-CHECKED" in done.stdout


def test_model_to_estimator_of_an_rmsprop_model_compiles_the_helper(rules):
    from estimator2keras._engine import rewrite_source
    from conftest import FIXTURES

    source = (FIXTURES / "keras_model_rmsprop_to_estimator" / "before.py").read_bytes()
    result = rewrite_source(source, "program.py", rules)
    new = result.new.decode()
    assert "model.compile(optimizer=KerasV2RMSprop(learning_rate=0.005)," in new, new
    assert "from e2k_helpers import KerasV2RMSprop" in new
    assert "class KerasV2RMSprop(tf.keras.optimizers.RMSprop):" in result.helpers["KerasV2RMSprop"]


def test_a_keras_model_built_by_a_call_in_model_to_estimator_is_built_there(rules):
    # `model_to_estimator(keras_model=build_model(), config=config)`, the tutorials' form:
    # it was refused ("the Keras model is not a variable e2k can use").
    from estimator2keras._engine import rewrite_source
    from conftest import FIXTURES

    source = (FIXTURES / "keras_model_rmsprop_to_estimator" / "before.py").read_text().replace(
        "    keras_model = build_model()\n    estimator = tf.keras.estimator.model_to_estimator(keras_model=keras_model, ",
        "    estimator = tf.keras.estimator.model_to_estimator(keras_model=build_model(), ")
    assert "keras_model=build_model()" in source
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings if f.kind == "manual"]
    new = flat(result.new.decode())
    assert "    with strategy.scope():\n        model = build_model()\n" in new, new
    assert "model.fit(input_fn(x, y, 16 * strategy.num_replicas_in_sync, True), steps_per_epoch=40)" in new, new
    assert "KerasV2RMSprop(learning_rate=0.005)" in new
