"""e2k parity when the Estimator's loss is a SUM (TF1 Reduction.SUM) on 2 replicas.

The TF1 optimizer then does not divide the loss by the number of replicas and the
Estimator reports each step's loss as the SUM over replicas; Keras with reduction="sum"
reports that same quantity. The harness must compare them as reported — rescaling by
the number of replicas would flag this correct migration — and must catch a migration
that averages instead.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity import run_parity
from estimator2keras.parity._runner import run_parity_many
from parity_programs import support

PROGRAM = support.program("sum_reduction")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    migrated = [PROGRAM.correct] + [case.path for case in PROGRAM.cases]
    results = run_parity_many(PROGRAM.legacy, migrated, replicas=2, legacy_python=support.legacy_python())
    return dict(zip(migrated, results))


def test_sum_reported_loss_is_compared_as_reported(two_replicas):
    result = two_replicas[PROGRAM.correct]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.legacy.loss_reduction == "sum"
    assert any("SUM over its 2 replicas" in note for note in result.notes)
    # the same training, bit for bit, and the same reported numbers
    assert all(row.max_abs_diff == 0 for row in result.weights), result.report()


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught(two_replicas, case):
    support.assert_caught(two_replicas[case.path], case)


@support.requires_target
def test_correct_migration_holds_parity_on_newest_tensorflow():
    result = run_parity(PROGRAM.legacy, PROGRAM.correct, legacy_python=support.legacy_python(),
                        target_python=support.target_python())
    support.assert_parity(result, PROGRAM.correct_steps[2])
