"""e2k parity on a softmax classifier Estimator (dict features, BatchNorm, momentum, accuracy).

Its correct Keras migration must hold parity on 2 and 1 replicas; each wrong migration
must be caught at the step wrong/expected.toml states. On the newest TensorFlow (Keras 3)
BatchNorm's moving statistics are kept per replica under MirroredStrategy: with 2 replicas
the harness compares their mean and must warn about exactly those variables (docs/parity.md).
"""
from __future__ import annotations

import pytest

from parity_programs import support

PROGRAM = support.program("softmax_classifier")
BATCHNORM_STATE = {"batch_normalization/moving_mean", "batch_normalization/moving_variance"}
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    return support.run_program(PROGRAM, replicas=2)


@pytest.fixture(scope="module")
def one_replica():
    return support.run_program(PROGRAM, replicas=1, wrong=False)


def test_correct_migration_holds_parity_on_2_replicas(two_replicas):
    result = two_replicas["correct"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    # BatchNorm's moving statistics are non-trainable model state: paired and compared too
    assert {row.legacy_name for row in result.weights if not row.trainable} == BATCHNORM_STATE
    assert {row.name for row in result.metrics if row.passed} == {"loss", "accuracy"}


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught(two_replicas, case):
    support.assert_caught(two_replicas[case.id], case)


def test_correct_migration_holds_parity_on_1_replica(one_replica):
    support.assert_parity(one_replica["correct"], PROGRAM.correct_steps[1])


@support.requires_target
def test_newest_tensorflow_on_1_replica_holds_parity(one_replica):
    support.assert_parity(one_replica["newest"], PROGRAM.correct_steps[1])


@support.requires_target
def test_newest_tensorflow_on_2_replicas_warns_of_per_replica_batchnorm_statistics(two_replicas):
    # Keras 3 keeps BatchNorm's moving statistics per replica: compared as their mean (what the
    # Estimator checkpoints), and the report warns that the model Keras 3 saves holds replica 0's
    result = two_replicas["newest"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    warned = {warning.split(":")[0].rsplit("/", 1)[-1] for warning in result.warnings}
    assert warned == {"moving_mean", "moving_variance"}, result.warnings
    assert all("replica 0's copy" in warning for warning in result.warnings)
