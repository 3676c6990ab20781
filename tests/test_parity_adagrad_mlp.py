"""e2k parity on a second chaotic program: an MLP trained with Adagrad at a large rate (0.5),
200 steps on 2 replicas.

Its correct Keras migration (which keeps Keras Adagrad's epsilon 1e-7, where TF1's has none)
separates from the Estimator by rounding and that epsilon alone: the fixed tolerance calls it
broken, the program's own noise envelope must not. A learning rate 10 % too high and an
initial accumulator of 0.01 instead of 0.1 must be caught at step 2.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity import Tolerance
from estimator2keras.parity._compare import compare_steps
from parity_programs import support

PROGRAM = support.program("adagrad_mlp")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    return support.run_program(PROGRAM, replicas=2)


def _assert_within_noise(result) -> None:
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.reason.startswith("agrees within the program's own numerical noise"), result.reason
    legacy = [row.legacy_loss for row in result.steps]
    migrated = [row.migrated_loss for row in result.steps]
    assert any(not row.passed for row in compare_steps(legacy, migrated, Tolerance())), result.report()
    assert any(row.within_noise_only for row in result.steps)


def test_correct_chaotic_migration_agrees_within_the_programs_own_noise(two_replicas):
    result = two_replicas["correct"]
    _assert_within_noise(result)
    rows = {row.name: (row.legacy, row.migrated, row.passed) for row in result.hyperparameters}
    assert rows["optimizer"] == ("AdagradOptimizer", "Adagrad", True)
    assert rows["Adagrad initial_accumulator_value"] == (0.1, 0.1, True)


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught_at_step_2(two_replicas, case):
    result = two_replicas[case.id]
    support.assert_caught(result, case)
    row = result.steps[case.first_divergent_step - 1]
    assert row.abs_diff > Tolerance().envelope_k * row.envelope, result.report()


@support.requires_target
def test_correct_chaotic_migration_agrees_within_noise_on_newest_tensorflow(two_replicas):
    result = two_replicas["newest"]
    _assert_within_noise(result)
    assert result.migrated.versions["keras"].startswith("3."), result.migrated.versions
