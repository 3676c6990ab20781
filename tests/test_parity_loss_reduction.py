"""How the Estimator reports a distributed loss, and how the harness compares it with Keras.

Keras reports the loss it differentiates. The Estimator reports the replicas' losses reduced
with MEAN when a TF1 optimizer divided the loss by the N replicas, else with SUM:

* sum_reduction: a custom model_fn with a SUM loss and a TF1 optimizer. The reported SUM is
  the differentiated loss, as Keras reports for reduction="sum": compared as reported
  (dividing by N would flag this correct migration).
* canned_linear: a TF2 canned LinearRegressor. Its head divides the mean loss by N itself
  before a Keras optimizer, and the Estimator reports the SUM of the undivided losses: the
  harness sees the division in the graph and divides the report by N.

Each correct migration trains bit-identically; each wrong one (sum where the Estimator
averaged, or mean where it summed) is caught at step 1.
"""
from __future__ import annotations

import pytest

from parity_programs import support

SUM = support.program("sum_reduction")
CANNED = support.program("canned_linear")
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def sum_runs():
    return support.run_program(SUM, replicas=2)


@pytest.fixture(scope="module")
def canned_runs():
    return support.run_program(CANNED, replicas=2)


def test_sum_reported_by_a_tf1_optimizer_is_compared_as_reported(sum_runs):
    result = sum_runs["correct"]
    support.assert_parity(result, SUM.correct_steps[2])
    assert result.legacy.loss_reduction == "sum" and result.legacy.loss_scale == 1.0
    assert any("SUM over its 2 replicas" in note and "compared as reported" in note for note in result.notes)
    assert all(row.max_abs_diff == 0 for row in result.weights), result.report()


def test_sum_reported_after_a_canned_head_divided_the_loss_is_divided_by_the_replicas(canned_runs):
    result = canned_runs["correct"]
    support.assert_parity(result, CANNED.correct_steps[2])
    assert result.legacy.loss_reduction == "sum" and result.legacy.loss_scale == 0.5
    assert any("divided the loss it differentiates by the 2 replicas" in note for note in result.notes)
    assert all(row.max_abs_diff == 0 for row in result.weights), result.report()
    # the head's eval metrics, compiled as Keras metrics, agree; the eval loss, which depends on
    # how the examples were batched, gives way to average_loss
    passed = {row.name: row.passed for row in result.metrics}
    assert passed == {"loss": None, "average_loss": True, "label/mean": True, "prediction/mean": True}, passed


@pytest.mark.parametrize("case", SUM.cases, ids=lambda case: case.id)
def test_mean_where_the_estimator_summed_is_caught(sum_runs, case):
    support.assert_caught(sum_runs[case.id], case)


@pytest.mark.parametrize("case", CANNED.cases, ids=lambda case: case.id)
def test_sum_where_the_canned_head_averaged_is_caught(canned_runs, case):
    support.assert_caught(canned_runs[case.id], case)


@support.requires_target
def test_both_hold_parity_on_newest_tensorflow(sum_runs, canned_runs):
    support.assert_parity(sum_runs["newest"], SUM.correct_steps[2])
    support.assert_parity(canned_runs["newest"], CANNED.correct_steps[2])
