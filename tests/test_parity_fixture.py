"""e2k parity on the canonical fixture (TensorFlow's multi-GPU Estimator example) and its
deliberately wrong migrations, through the library and through the command line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from parity_programs import support

PROGRAM = support.program("canonical")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    return support.run_program(PROGRAM, replicas=2)


def test_after_py_holds_parity_bit_for_bit_on_2_replicas(two_replicas):
    result = two_replicas["correct"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.legacy.strategy == "MirroredStrategyV1" and result.legacy.replicas == 2
    assert result.migrated.replicas == 2
    assert result.legacy.loss_reduction == "mean"
    # DESIGN.md §5: from the same initial weights the two end bit-identical
    assert all(row.max_abs_diff == 0 for row in result.weights), result.report()
    assert all(row.abs_diff == 0 for row in result.steps)
    assert [(row.name, row.passed) for row in result.metrics] == [("loss", True)]


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught(two_replicas, case):
    support.assert_caught(two_replicas[case.id], case)


def test_after_py_holds_parity_on_1_replica():
    # after.py asks for 2 logical CPUs and a 2-device strategy: the harness's N wins
    result = support.run_program(PROGRAM, replicas=1, wrong=False, newest=False)["correct"]
    support.assert_parity(result, PROGRAM.correct_steps[1])
    assert result.legacy.replicas == result.migrated.replicas == 1
    assert any("set_logical_device_configuration" in note for note in result.migrated.notes)


@support.requires_target
def test_after_py_holds_parity_bit_for_bit_on_newest_tensorflow(two_replicas):
    result = two_replicas["newest"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.migrated.versions["keras"].startswith("3.")
    assert all(row.max_abs_diff == 0 for row in result.weights), result.report()


def test_the_jax_conversion_holds_parity_on_2_devices(two_replicas):
    """fixtures/seed_mirrored_linear/jax/after.py (e2k rewrite --target jax) on JAX with
    keras.distribution.DataParallel over 2 devices, against the Estimator on TF 2.15."""
    if "jax" not in two_replicas:
        pytest.skip("E2K_TARGET_PYTHON (the newest TensorFlow, with JAX) not set")
    support.assert_jax_parity(two_replicas["jax"], replicas=2)
    support.assert_parity(two_replicas["jax"], PROGRAM.correct_steps[2])


def _e2k(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "estimator2keras", "parity", *args,
         "--legacy-python", support.legacy_python()],
        capture_output=True, text=True, timeout=600)


def test_cli_parity_exit_0_with_step_limit_json_and_plot(tmp_path):
    json_path, plot_path = tmp_path / "parity.json", tmp_path / "parity.png"
    done = _e2k(str(PROGRAM.legacy), str(PROGRAM.correct), "--steps", "2",
                "--json", str(json_path), "--plot", str(plot_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PARITY:" in done.stdout and "Training loss per step" in done.stdout
    assert "Traceback" not in done.stderr
    data = json.loads(json_path.read_text())
    assert data["schema"] == "e2k-parity/1" and data["verdict"] == "parity" and data["exit_code"] == 0
    assert [row["step"] for row in data["steps"]] == [1, 2]
    assert data["settings"]["replicas"] == 2 and data["settings"]["steps"] == 2
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_variable_mismatch_exit_2_prints_both_tables():
    wrong = next(case for case in PROGRAM.cases if case.id == "extra_layer")
    done = _e2k(str(PROGRAM.legacy), str(wrong.path))
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout
    assert "legacy (Estimator)" in out and "migrated (Keras)" in out and "first mismatch" in out
    assert "dense/kernel [2x1]" in out and "dense/kernel [2x4]" in out
    assert "ERROR: variables do not match" in out
