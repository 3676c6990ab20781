"""The bootstrap's TensorFlow patches, in each interpreter the harness supports (TF 2.15 /
Keras 2, and the newest TF / Keras 3 when E2K_TARGET_PYTHON is set)."""
from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

import estimator2keras.parity as parity
from parity_programs import support

SIDE_COMMON = Path(parity.__file__).resolve().parent / "_side_common.py"

PROBE = textwrap.dedent("""
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("side_common", sys.argv[1])
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    import numpy as np
    import tensorflow as tf

    out, record = {}, {}
    devices, kind = common.harness_devices(tf, 2)
    out["devices"], out["kind"] = devices, kind
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    common.patch_logical_device_configuration(tf, record)
    common.patch_mirrored_strategy(tf, devices, record)
    common.patch_shuffle(tf)
    common.patch_dropout(tf)

    # the program's own CPU split is ignored: the harness already set N logical CPUs
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 3)
    out["logical_cpus"] = len(tf.config.list_logical_devices("CPU"))
    out["strategy_replicas"] = tf.distribute.MirroredStrategy(devices=["/cpu:0"]).num_replicas_in_sync
    out["default_strategy_replicas"] = tf.distribute.MirroredStrategy().num_replicas_in_sync
    out["user_devices"] = record["user_strategy_devices"]
    out["notes"] = record["notes"]
    out["shuffled"] = [int(x) for x in tf.data.Dataset.range(6).shuffle(6, seed=3)]
    out["shuffled_v1"] = [int(x) for x in tf.compat.v1.data.Dataset.range(6).shuffle(6)]
    ones = tf.ones((4, 8))
    out["dropout_layer"] = float(tf.reduce_sum(tf.keras.layers.Dropout(0.9)(ones, training=True)))
    out["nn_dropout"] = float(tf.reduce_sum(tf.nn.dropout(ones, rate=0.5)))
    print("RESULT " + json.dumps(out))
""")


def _probe(python: str) -> dict:
    done = subprocess.run([python, "-c", PROBE, str(SIDE_COMMON)], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _check(out: dict) -> None:
    assert out["kind"] == "CPU" and out["devices"] == ["/cpu:0", "/cpu:1"]
    assert out["logical_cpus"] == 2
    assert out["strategy_replicas"] == out["default_strategy_replicas"] == 2
    assert out["user_devices"] == [["/cpu:0"], None]
    assert any("(3 devices) was ignored" in note for note in out["notes"])
    assert out["shuffled"] == out["shuffled_v1"] == [0, 1, 2, 3, 4, 5]
    assert out["dropout_layer"] == out["nn_dropout"] == 32.0


@pytest.mark.slow
@support.requires_legacy
def test_patches_on_the_legacy_interpreter():
    _check(_probe(support.legacy_python()))


@pytest.mark.slow
@support.requires_target
def test_patches_on_the_newest_tensorflow():
    _check(_probe(support.target_python()))
