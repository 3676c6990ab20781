"""TF1Adam (E2K101): Keras's Adam given TF1's float32 betas updates as TF1's AdamOptimizer did
(to the bit in a step; after it, the powers of beta round apart by an ulp: TF1 multiplies a
variable by beta at each step, Keras raises beta to t), on Keras 2 and Keras 3; Keras's Adam as
it is does not (it takes `1 - beta` from the Python float: each update about 6.5e-6 of itself off)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from estimator2keras.rewrites.tf1_optimizer_to_keras import TF1_ADAM

tf = pytest.importorskip("tensorflow")

STEPS = r"""
import json, sys
import numpy as np
import tensorflow as tf

exec(sys.argv[1], globals())
rng = np.random.RandomState(0)
gradients = [rng.randn(6).astype(np.float32) * scale for scale in (1.0, 0.1, 0.01, 1.0, 0.3, 2.0)]
out = {}
for name, optimizer in (("helper", TF1Adam(0.005)), ("keras", tf.keras.optimizers.Adam(0.005, epsilon=1e-08))):
    variable = tf.Variable(np.ones(6, np.float32))
    for gradient in gradients:
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
    out[name] = variable.numpy().tolist()
print(json.dumps(out))
"""


def _gradients():
    rng = np.random.RandomState(0)
    return [rng.randn(6).astype(np.float32) * scale for scale in (1.0, 0.1, 0.01, 1.0, 0.3, 2.0)]


def _legacy_keras_adam_steps() -> list[float]:
    """Keras's legacy Adam (TF 2.15): the fused kernel TF1's AdamOptimizer runs, its beta powers
    computed as Keras computes them."""
    optimizer = tf.keras.optimizers.legacy.Adam(0.005, epsilon=1e-08)
    variable = tf.Variable(np.ones(6, np.float32))
    for gradient in _gradients():
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
    return variable.numpy().tolist()


def _tf1_adam_steps() -> np.ndarray:
    with tf.Graph().as_default():
        variable = tf.compat.v1.Variable(np.ones(6, np.float32))
        given = tf.compat.v1.placeholder(tf.float32, [6])
        step = tf.compat.v1.train.AdamOptimizer(0.005).apply_gradients([(given, variable)])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for gradient in _gradients():
                session.run(step, {given: gradient})
            return session.run(variable)


@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_tf1adam_updates_as_tf1s_adam_and_kerass_adam_does_not(target):
    from parity_programs import support

    python = sys.executable if target == "tf215" else support.target_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON to an interpreter with the newest TensorFlow")
    helper = TF1_ADAM.format(name="TF1Adam", tf="tf")
    done = subprocess.run([python, "-c", STEPS, helper], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    legacy = _legacy_keras_adam_steps()
    assert found["helper"] == legacy  # to the bit
    assert found["keras"] != legacy
    # TF1 keeps beta ** t as a variable it multiplies by beta at each step, Keras raises beta
    # to t: after the first step they round apart by an ulp or so, no more.
    assert np.max(np.abs(np.array(found["helper"]) - _tf1_adam_steps())) <= 2.5e-7
