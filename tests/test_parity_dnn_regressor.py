"""e2k parity on a DNN regressor Estimator (Adam with epsilon 0.1, staircase decay, dropout).

Its correct Keras migrations (Sequential, and a subclassed model without an input shape)
must hold parity on 2 and 1 replicas and on the newest TensorFlow; each wrong migration
must be caught at the step wrong/expected.toml states.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity import run_parity
from parity_programs import support

PROGRAM = support.program("dnn_regressor")
pytestmark = [pytest.mark.slow, support.requires_legacy]


SUBCLASSED = PROGRAM.correct.with_name("migrated_subclassed.py")


@pytest.fixture(scope="module")
def two_replicas():
    return support.run_program(PROGRAM, replicas=2, extra={"subclassed": SUBCLASSED})


def test_correct_migration_holds_parity_on_2_replicas(two_replicas):
    result = two_replicas["correct"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    rates = next(row for row in result.hyperparameters if row.name == "learning rate at every step")
    assert rates.passed is True and rates.note == "12 steps agree"
    shuffles = next(row for row in result.hyperparameters if row.name.startswith("shuffle"))
    assert (shuffles.legacy, shuffles.passed) == ("buffer 64, seed 1", True)
    assert result.legacy.replicas == result.migrated.replicas == 2
    # dropout is in both programs: neutralised on both sides, so the run is step-exact
    assert "neutralised" in result.settings["dropout"]
    assert {row.name: row.passed for row in result.metrics} == {"loss": True, "mae": True}


def test_subclassed_model_built_on_the_first_batch_is_paired_by_creation_order(two_replicas):
    # its layers are declared head first but called (and created) input first, like the model_fn's
    result = two_replicas["subclassed"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert [row.shape for row in result.weights] == [(4, 16), (16,), (16, 8), (8,), (8, 1), (1,)]


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught(two_replicas, case):
    support.assert_caught(two_replicas[case.id], case)


@support.requires_target
def test_correct_migration_holds_parity_on_newest_tensorflow(two_replicas):
    result = two_replicas["newest"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.migrated.versions["keras"].startswith("3."), result.migrated.versions
    # Keras 3's schedule is read at every step too, and agrees with TF1's staircase decay
    rates = next(row for row in result.hyperparameters if row.name == "learning rate at every step")
    assert rates.passed is True and (rates.legacy, rates.migrated) == ("0.01 .. 0.0025", "0.01 .. 0.0025")


def test_correct_migration_holds_parity_on_1_replica_stopped_mid_epoch():
    # 8 steps per epoch on 1 replica: --steps 10 stops both inside the second of fit(epochs=3)
    result = run_parity(PROGRAM.legacy, PROGRAM.correct, replicas=1, steps=10,
                        legacy_python=support.legacy_python())
    support.assert_parity(result, 10)
    assert PROGRAM.correct_steps[1] > 10
    assert result.legacy.replicas == result.migrated.replicas == 1
    assert [row.name for row in result.metrics if row.passed] == ["loss", "mae"]  # evaluation still ran
