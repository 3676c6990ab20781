"""e2k parity on a chaotic program: a small CNN trained with Adam for 300 steps on 2 replicas.

Its correct Keras migration drifts away from the Estimator by rounding alone (Adam turns
rounding differences in tiny gradients into full-size steps): the fixed tolerance calls it
broken, the program's own noise envelope must not. Subtly wrong migrations (Adam's epsilon,
the learning rate +10 %, beta_2) must still be caught at the first step their mistake
touches, with the envelope in the reason; a wrong dropout rate, which the run neutralises,
by the rates read from both models at run time.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity import Tolerance
from estimator2keras.parity._compare import compare_steps
from parity_programs import support

PROGRAM = support.program("adam_cnn")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def two_replicas():
    return support.run_program(PROGRAM, replicas=2)


def _fixed_schedule_failures(result) -> list[int]:
    """The steps today's fixed tolerance (no envelope) would fail, from the same two runs."""
    legacy = [row.legacy_loss for row in result.steps]
    migrated = [row.migrated_loss for row in result.steps]
    return [row.step for row in compare_steps(legacy, migrated, Tolerance()) if not row.passed]


def _assert_within_noise(result) -> None:
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert result.envelope["measured"] and result.envelope["ulps"] == Tolerance().envelope_ulps
    assert result.reason.startswith("agrees within the program's own numerical noise"), result.reason
    # chaotic indeed: the fixed schedule fails this correct pair, and the envelope is what passes it
    assert _fixed_schedule_failures(result), result.report()
    noisy = [row for row in result.steps if row.within_noise_only]
    assert noisy and noisy[0].step > Tolerance().strict_steps
    assert all(row.abs_diff <= row.allowed for row in result.steps)


def test_correct_chaotic_migration_agrees_within_the_programs_own_noise(two_replicas):
    result = two_replicas["correct"]
    _assert_within_noise(result)
    assert result.legacy.replicas == result.migrated.replicas == 2
    assert {row.name for row in result.metrics if row.passed} == {"loss", "accuracy"}
    # the report and the plot show the envelope next to the difference
    report = result.report(max_rows=400)
    assert "envelope" in report and "ok (within noise)" in report
    # what the run neutralises or cannot see is compared from both programs at run time
    rows = {row.name: (row.legacy, row.migrated, row.passed) for row in result.hyperparameters}
    assert rows["dropout #1 (Dropout) rate"] == (0.5, 0.5, True)
    assert rows["optimizer"] == ("AdamOptimizer", "Adam", True)
    assert rows["Adam epsilon"] == (1e-8, 1e-8, True)  # TF1's default, written out by the migration
    assert rows["Adam beta_2"][2] and rows["Adam learning_rate"][2]


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_subtly_wrong_migration_is_caught_at_its_first_step(two_replicas, case):
    result = two_replicas[case.id]
    support.assert_caught(result, case)
    if case.first_divergent_step is not None:
        row = result.steps[case.first_divergent_step - 1]
        # caught with room: beyond k x the envelope too, not only by the strict first steps
        assert row.abs_diff > Tolerance().envelope_k * row.envelope, result.report()
    else:  # a difference the run neutralises: the losses agree, the rates read at run time do not
        assert all(row.passed for row in result.steps) and all(row.passed for row in result.weights)
        assert [row.passed for row in result.hyperparameters].count(False) == 1, result.report()


@support.requires_target
def test_correct_chaotic_migration_agrees_within_noise_on_newest_tensorflow(two_replicas):
    result = two_replicas["newest"]
    _assert_within_noise(result)
    assert result.migrated.versions["keras"].startswith("3."), result.migrated.versions
