"""A loss written by hand in the model_fn (TensorFlow's multi-worker tutorial: Keras per-example
cross-entropies with reduction NONE, summed, times 1/BATCH_SIZE), converted by E2K204 into a
``tf.keras.losses.Loss`` with reduction "sum" divided by the replicas, trains as the Estimator
did on 2 replicas, partial batches included, on TF 2.15 and the newest TF.

The wrong migrations are caught: no division by the replicas, the 1/BATCH_SIZE forgotten, the
Keras mean loss (right on full batches only), and the plain loss function returning the scalar,
which Keras 2.15 divides by the replicas (parity there) and Keras 3 does not.
"""
from __future__ import annotations

import pytest

from parity_programs import support

PROGRAM = support.program("hand_written_loss")
SCALAR_FUNCTION = PROGRAM.correct.parents[2] / "tests" / "parity_programs" / "hand_written_loss" / "wrong" / "loss_function_scalar.py"
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def runs():
    extra = {"scalar_function": SCALAR_FUNCTION}
    if support.target_python():
        extra["scalar_function_newest"] = (SCALAR_FUNCTION, support.target_python())
    return support.run_program(PROGRAM, replicas=2, extra=extra)


def test_the_converted_loss_trains_as_the_estimator(runs):
    result = runs["correct"]
    support.assert_parity(result, PROGRAM.correct_steps[2])
    assert {row.name: row.passed for row in result.metrics}["loss"] is True, result.report()


@pytest.mark.parametrize("case", PROGRAM.cases, ids=lambda case: case.id)
def test_wrong_migrations_are_caught(runs, case):
    support.assert_caught(runs[case.id], case)


def test_a_scalar_loss_function_is_divided_by_keras_2(runs):
    support.assert_parity(runs["scalar_function"], PROGRAM.correct_steps[2])


@support.requires_target
def test_the_converted_loss_holds_on_newest_tensorflow(runs):
    support.assert_parity(runs["newest"], PROGRAM.correct_steps[2])


@support.requires_target
def test_a_scalar_loss_function_is_not_divided_by_keras_3(runs):
    result = runs["scalar_function_newest"]
    assert result.verdict == "broken" and result.first_divergent_step == 1, result.report()
