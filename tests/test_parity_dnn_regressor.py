"""e2k parity on a DNN regressor Estimator (Adam with epsilon 0.1, staircase decay, dropout).

Its correct Keras migration must hold parity on 2 and 1 replicas and on the newest
TensorFlow; each wrong migration must be caught at the step wrong/expected.toml states.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity import run_parity
from estimator2keras.parity._runner import run_parity_many
from parity_programs import support

PROGRAM = support.program("dnn_regressor")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    """One legacy run on 2 replicas, compared with the correct and every wrong migration."""
    migrated = [PROGRAM.correct] + [case.path for case in PROGRAM.cases]
    results = run_parity_many(PROGRAM.legacy, migrated, replicas=2, legacy_python=support.legacy_python())
    return dict(zip(migrated, results))


def test_correct_migration_holds_parity_on_2_replicas(two_replicas):
    result = two_replicas[PROGRAM.correct]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.legacy.replicas == result.migrated.replicas == 2
    # dropout is in both programs: neutralised on both sides, so the run is step-exact
    assert "neutralised" in result.settings["dropout"]
    assert {row.name: row.passed for row in result.metrics} == {"loss": True, "mae": True}


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught(two_replicas, case):
    support.assert_caught(two_replicas[case.path], case)


def test_correct_migration_holds_parity_on_1_replica():
    result = run_parity(PROGRAM.legacy, PROGRAM.correct, replicas=1, legacy_python=support.legacy_python())
    support.assert_parity(result, PROGRAM.correct_steps[1])
    assert result.legacy.replicas == result.migrated.replicas == 1


def test_step_limit_stops_both_sides_and_still_compares_evaluation():
    result = run_parity(PROGRAM.legacy, PROGRAM.correct, steps=5, legacy_python=support.legacy_python())
    support.assert_parity(result, 5)
    assert [row.name for row in result.metrics if row.passed] == ["loss", "mae"]


@support.requires_target
def test_correct_migration_holds_parity_on_newest_tensorflow():
    result = run_parity(PROGRAM.legacy, PROGRAM.correct, legacy_python=support.legacy_python(),
                        target_python=support.target_python())
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.migrated.versions["keras"].startswith("3."), result.migrated.versions
