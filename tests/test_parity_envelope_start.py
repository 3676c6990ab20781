"""The envelope run measures the legacy program's noise only from the legacy run's own start: a
program whose initialisation is not repeatable (a numpy_input_fn's queue threads create ops in
another order) is judged by the fixed tolerance, not by an envelope two initialisations wide
that let a wrong migration (Adagrad's epsilon changed) pass."""
from __future__ import annotations

import numpy as np

from estimator2keras.parity._runner import other_start


def test_a_start_nudged_by_the_envelopes_ulps_is_the_same_start():
    rng = np.random.RandomState(0)
    legacy = {"initial_0": rng.randn(4, 3).astype(np.float32), "final_0": np.zeros((4, 3), np.float32),
              "initial_1": np.arange(3, dtype=np.int64)}
    ulps = 16
    value = legacy["initial_0"]
    nudged = dict(legacy, initial_0=(value + ulps * np.spacing(np.abs(value)) * np.sign(rng.randn(4, 3)))
                  .astype(np.float32))
    assert other_start(legacy, nudged, ulps) is None
    assert other_start(legacy, legacy, ulps) is None


def test_another_initialisation_is_no_envelope():
    rng = np.random.RandomState(0)
    legacy = {"initial_0": rng.randn(4, 3).astype(np.float32)}
    other = {"initial_0": rng.randn(4, 3).astype(np.float32)}
    why = other_start(legacy, other, 16)
    assert why is not None and "not repeatable" in why and "max |diff|" in why
    assert "other variables" in other_start(legacy, {"initial_0": np.zeros((2, 2), np.float32)}, 16)
