"""E2K101: the Keras optimizers e2k writes for TF1's RMSProp, Adadelta and Adagrad update as
TF1's kernels did, to the bit, on Keras 2 (TF 2.15, this interpreter) and Keras 3 (the newest
TF, E2K_TARGET_PYTHON), eager and in a tf.function; what e2k wrote before did not.

- `TF1RMSprop`: TF1's `ms += (g^2 - ms) * (1 - decay)` in float32 (Keras: `rho * ms + (1 -
  rho) * g^2`, `1 - rho` from the Python float), from accumulators at 1.0. The old helper
  (accumulators at 1.0, Keras's update) drifted by a few 1e-8; a canned tf.compat.v1
  Estimator's `optimizer="RMSProp"` was written as plain `RMSprop`, accumulators at 0: its
  first step six times TF1's.
- `TF1Adadelta`: `1 - rho` in float32 and TF1's `sqrt(u + eps) * rsqrt(a + eps) * g`.
- Keras's Adagrad with `epsilon=0.0`: TF1's had no epsilon (Keras adds 1e-7 under the root:
  5e-5 of the step with a small initial accumulator). Exact in a tf.function; eager Keras
  rounds a step apart by an ulp or two, Grappler's rewrite of TF1's graph.

The trajectories are compared with TF1's optimizer run in a graph on TF 2.15, from weights that
are not 1 and gradients of scales from 2 down to 1e-5.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from estimator2keras import _helpers

tf = pytest.importorskip("tensorflow")

STEPS, SIZE = 20, 24
SCALES = [1.0, 0.5, 0.1, 2.0, 1e-3, 0.02, 1e-4, 1.0, 1e-5, 0.3] * 2
#: Late training's gradients, where an epsilon's place shows most.
SMALL_SCALES = [1e-3, 3e-4, 1e-4, 2e-3, 1e-5] * 4

#: (id, TF1 optimizer, what e2k writes now, what it wrote before)
CASES = [
    ("rmsprop", "RMSPropOptimizer(0.01)", "TF1RMSprop(0.01, epsilon=1e-10)", "OldTF1RMSprop(0.01, epsilon=1e-10)"),
    ("rmsprop-momentum", "RMSPropOptimizer(0.001, decay=0.99, momentum=0.9)",
     "TF1RMSprop(0.001, rho=0.99, momentum=0.9, epsilon=1e-10)",
     "OldTF1RMSprop(0.001, rho=0.99, momentum=0.9, epsilon=1e-10)"),
    ("rmsprop-centered", "RMSPropOptimizer(0.01, momentum=0.5, centered=True)",
     "TF1RMSprop(0.01, momentum=0.5, epsilon=1e-10, centered=True)",
     "OldTF1RMSprop(0.01, momentum=0.5, epsilon=1e-10, centered=True)"),
    # A canned tf.compat.v1 Estimator's optimizer="RMSProp": RMSPropOptimizer(learning_rate=0.05).
    ("canned-v1-rmsprop", "RMSPropOptimizer(learning_rate=0.05)", "TF1RMSprop(0.05, epsilon=1e-10)",
     "tf.keras.optimizers.RMSprop(0.05, epsilon=1e-10)"),
    ("adadelta", "AdadeltaOptimizer(1.0)", "TF1Adadelta(1.0)", "tf.keras.optimizers.Adadelta(1.0, epsilon=1e-08)"),
    ("adadelta-rho", "AdadeltaOptimizer(0.5, rho=0.99, epsilon=1e-06)", "TF1Adadelta(0.5, rho=0.99, epsilon=1e-06)",
     "tf.keras.optimizers.Adadelta(0.5, rho=0.99, epsilon=1e-06)"),
    ("adagrad", "AdagradOptimizer(0.05)", "tf.keras.optimizers.Adagrad(0.05, epsilon=0.0)",
     "tf.keras.optimizers.Adagrad(0.05)"),
    ("adagrad-small-accumulator", "AdagradOptimizer(0.01, initial_accumulator_value=0.001)",
     "tf.keras.optimizers.Adagrad(0.01, initial_accumulator_value=0.001, epsilon=0.0)",
     "tf.keras.optimizers.Adagrad(0.01, initial_accumulator_value=0.001)"),
]
#: Eager Keras Adagrad rounds a step apart from TF1's graph (whose division Grappler rewrites)
#: by an ulp or two: relative to the largest displacement, at most this much off (the old
#: emission is as close here: the comparison to the bit in a tf.function tells them apart).
ADAGRAD_EAGER = 1e-6

KERAS_SIDE = r"""
import json, sys
import numpy as np
import tensorflow as tf

exec(sys.argv[1], globals())


if "TF1RMSprop" in globals():
    class OldTF1RMSprop(TF1RMSprop):  # e2k's TF1RMSprop before: accumulators at 1.0, Keras's update
        update_step = tf.keras.optimizers.RMSprop.update_step


w0 = np.array(json.loads(sys.argv[2]), np.float32)
gradients = np.array(json.loads(sys.argv[3]), np.float32)
out = {}
for key, expression in json.loads(sys.argv[4]).items():
    for mode in ("eager", "function"):
        optimizer = eval(expression)
        variable = tf.Variable(w0)
        optimizer.build([variable])
        apply = lambda g: optimizer.apply_gradients([(g, variable)])
        if mode == "function":
            apply = tf.function(apply)
        path = []
        for gradient in gradients:
            apply(tf.constant(gradient))
            path.append(variable.numpy().tolist())
        out[f"{key} {mode}"] = path
print("RESULT " + json.dumps(out))
"""


def _data(small: bool = False):
    rng = np.random.RandomState(3)
    sign = np.where(rng.rand(SIZE) < 0.5, -1.0, 1.0)  # each element keeps its sign: drifts add up
    scales = SMALL_SCALES if small else SCALES
    gradients = np.stack([sign * (0.5 + np.abs(rng.randn(SIZE))) * s for s in scales]).astype(np.float32)
    # Weights that are not 1 (where an update's last bits round away), as large as the steps move.
    return ((3e-4 if small else 0.3) * rng.randn(SIZE)).astype(np.float32), gradients


def _tf1_path(optimizer: str) -> np.ndarray:
    w0, gradients = _data()
    with tf.Graph().as_default():
        variable = tf.compat.v1.Variable(w0)
        given = tf.compat.v1.placeholder(tf.float32, [SIZE])
        step = eval(f"tf.compat.v1.train.{optimizer}").apply_gradients([(given, variable)])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            path = []
            for gradient in gradients:
                session.run(step, {given: gradient})
                path.append(session.run(variable))
    return np.stack(path)


def keras_paths(python: str, expressions: dict[str, str], helpers=("TF1RMSprop", "TF1Adadelta"),
                small: bool = False) -> dict:
    """Each expression's trajectory (eager and in a tf.function) on ``python``, the helpers
    defined as e2k writes them into e2k_helpers.py."""
    known = _helpers.catalogue()
    code = "\n\n".join(known[key].code for key in helpers)
    w0, gradients = _data(small)
    done = subprocess.run(
        [python, "-c", KERAS_SIDE, code, json.dumps(w0.tolist()), json.dumps(gradients.tolist()),
         json.dumps(expressions)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return {key: np.array(path, np.float32) for key, path in json.loads(lines[-1][len("RESULT "):]).items()}


def _off(path: np.ndarray, reference: np.ndarray, small: bool = False) -> float:
    """The largest difference from the reference, relative to its largest displacement."""
    w0, _ = _data(small)
    return float(np.max(np.abs(path - reference)) / np.max(np.abs(reference - w0)))


def _python(target: str) -> str:
    from parity_programs import support

    python = sys.executable if target == "tf215" else support.target_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON to an interpreter with the newest TensorFlow")
    return python


@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_the_emitted_optimizers_update_as_tf1s_kernels_and_the_old_ones_did_not(target):
    expressions = {}
    for key, _, new, old in CASES:
        expressions[f"{key} new"], expressions[f"{key} old"] = new, old
    paths = keras_paths(_python(target), expressions)
    failures = []
    for key, tf1, _, _ in CASES:
        reference = _tf1_path(tf1)
        for mode in ("eager", "function"):
            new, old = paths[f"{key} new {mode}"], paths[f"{key} old {mode}"]
            if key.startswith("adagrad") and mode == "eager":
                if not _off(new, reference) <= ADAGRAD_EAGER:
                    failures.append(f"{key} {mode}: {_off(new, reference):.1e} off TF1's")
                continue
            if not np.array_equal(new, reference):
                failures.append(f"{key} {mode}: {_off(new, reference):.1e} off TF1's (not to the bit)")
            if np.array_equal(old, reference):
                failures.append(f"{key} {mode}: the old emission is TF1's too")
    assert not failures, failures
    # The canned "RMSProp" e2k wrote before: accumulators at 0, a first step far larger than TF1's.
    first_old = np.abs(paths["canned-v1-rmsprop old eager"][0] - _data()[0])
    first_tf1 = np.abs(_tf1_path("RMSPropOptimizer(learning_rate=0.05)")[0] - _data()[0])
    ratio = first_old / first_tf1  # sqrt((0.9 + 0.1 g^2) / (0.1 g^2)): 1.4 for g = 2, 6 for g = 0.5
    assert np.min(ratio) > 1.3 and np.max(ratio) > 3, ratio


def test_adagrad_is_written_with_tf1s_missing_epsilon(rules):
    from estimator2keras._emit import code
    from estimator2keras.rewrites.tf1_optimizer_to_keras import Tf1OptimizerToKeras
    from estimator2keras.testing import convert_expression

    for given, expected in (
            ("tf.compat.v1.train.AdagradOptimizer(0.1)", "tf.keras.optimizers.Adagrad(0.1, epsilon=0.0)"),
            # Not a literal: TF1 refused a value <= 0 where the program ran, so the root is never 0.
            ("tf.compat.v1.train.AdagradOptimizer(lr, initial_accumulator_value=flags.iav, use_locking=True)",
             "tf.keras.optimizers.Adagrad(lr, initial_accumulator_value=flags.iav, epsilon=0.0)")):
        assert code(convert_expression(Tf1OptimizerToKeras, given, rules)) == expected


MODEL_FN = '''\
import numpy as np
import tensorflow as tf


def model_fn(features, labels, mode):
    pred = tf.squeeze(tf.compat.v1.layers.dense(features, 1), 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    train_op = tf.compat.v1.train.{optimizer}.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn)
est.train(lambda: tf.data.Dataset.from_tensor_slices((np.zeros((4, 2), np.float32), np.zeros(4, np.float32))).batch(2),
          steps=1)
'''


@pytest.mark.parametrize("optimizer, written, helper", [
    ("RMSPropOptimizer(0.01, decay=0.95)", "TF1RMSprop(0.01, rho=0.95, epsilon=1e-10)", "TF1RMSprop"),
    ("AdadeltaOptimizer(1.0, rho=0.9)", "TF1Adadelta(1.0, rho=0.9)", "TF1Adadelta"),
    ("AdadeltaOptimizer(0.5, epsilon=1e-06)", "TF1Adadelta(0.5, epsilon=1e-06)", "TF1Adadelta"),
    ("AdagradOptimizer(0.05)", "tf.keras.optimizers.Adagrad(0.05, epsilon=0.0)", None),
])
def test_a_model_fns_optimizer_is_written_as_the_tested_one(rules, optimizer, written, helper):
    from estimator2keras._engine import rewrite_source

    result = rewrite_source(MODEL_FN.format(optimizer=optimizer).encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert f"optimizer={written}" in new, new
    if helper is not None:
        assert f"from e2k_helpers import {helper}" in new
        assert result.helpers[helper] == _helpers.catalogue()[helper].code
