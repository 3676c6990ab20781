"""e2k parity when the Estimator's loss is a SUM (TF1 Reduction.SUM) on 2 replicas.

The TF1 optimizer then does not divide the loss by the number of replicas and the
Estimator reports each step's loss as the SUM over replicas; Keras with reduction="sum"
reports that same quantity. The harness must compare them as reported — rescaling by
the number of replicas would flag this correct migration — and must catch a migration
that averages instead.
"""
from __future__ import annotations

import pytest

from parity_programs import support

PROGRAM = support.program("sum_reduction")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    return support.run_program(PROGRAM, replicas=2)


def test_sum_reported_loss_is_compared_as_reported(two_replicas):
    result = two_replicas["correct"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.legacy.loss_reduction == "sum"
    assert any("SUM over its 2 replicas" in note for note in result.notes)
    # the same training, bit for bit, and the same reported numbers
    assert all(row.max_abs_diff == 0 for row in result.weights), result.report()


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migration_is_caught(two_replicas, case):
    support.assert_caught(two_replicas[case.id], case)


@support.requires_target
def test_correct_migration_holds_parity_on_newest_tensorflow(two_replicas):
    support.assert_parity(two_replicas["newest"], PROGRAM.correct_steps[2])
