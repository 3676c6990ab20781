"""What parity mode neutralises or the losses may hide, compared from what both programs
recorded at run time (issue 13): learning rates at every step, TF1 Momentum against Keras SGD
under a changing rate, shuffle buffers and seeds, and eval metrics judged by the envelope.
No TensorFlow: the sides' records are written out here."""
from __future__ import annotations

import pytest

from estimator2keras.parity._compare import (
    METRIC_RTOL,
    compare_learning_rates,
    compare_metrics,
    compare_shuffles,
)


def side(losses=4, rates=None, optimizer=None, shuffles=None):
    data = {"losses": [1.0] * losses, "learning_rates": rates or []}
    if optimizer is not None:
        data["optimizers"] = [optimizer]
    if shuffles is not None:
        data["shuffles"] = shuffles
    return data


ADAM = {"kind": "Adam", "class": "AdamOptimizer", "params": {"learning_rate": None}}
KERAS_ADAM = {"kind": "Adam", "class": "Adam", "params": {"learning_rate": None}}


def staircase(steps, shift=0):
    return [0.01 * 0.5 ** ((k + shift) // 5) for k in range(steps)]


def test_identical_schedules_agree_and_say_so():
    rows = compare_learning_rates(side(12, staircase(12), ADAM), side(12, staircase(12), KERAS_ADAM))
    assert [(row.name, row.passed) for row in rows] == [("learning rate at every step", True)]


def test_schedule_shifted_by_one_step_is_caught_at_the_update_it_changes():
    rows = compare_learning_rates(side(12, staircase(12), ADAM), side(12, staircase(12, shift=1), KERAS_ADAM))
    assert rows[0].passed is False and rows[0].step == 5
    assert "0.01 at step 5" == rows[0].legacy and "0.005 at step 5" == rows[0].migrated


def test_staircase_lost_is_caught_at_step_2():
    smooth = [0.01 * 0.5 ** (k / 5) for k in range(12)]
    rows = compare_learning_rates(side(12, staircase(12), ADAM), side(12, smooth, KERAS_ADAM))
    assert rows[0].passed is False and rows[0].step == 2


def test_decay_dropped_against_a_constant_keras_rate():
    keras_constant = {"kind": "Adam", "class": "Adam", "params": {"learning_rate": 0.01}}
    rows = compare_learning_rates(side(12, staircase(12), ADAM), side(12, [0.01] * 12, keras_constant))
    assert rows[0].step == 6


def test_rates_within_float32_rounding_agree():
    rates = staircase(12)
    rows = compare_learning_rates(side(12, rates, ADAM), side(12, [r * (1 + 3e-7) for r in rates], KERAS_ADAM))
    assert rows[0].passed is True


def test_constant_rates_on_both_sides_add_no_row():
    constant = {"kind": "SGD", "class": "SGD", "params": {"learning_rate": 0.1, "momentum": 0.9}}
    tf1 = {"kind": "SGD", "class": "MomentumOptimizer", "params": {"learning_rate": 0.1, "momentum": 0.9}}
    assert compare_learning_rates(side(8, None, tf1), side(8, [0.1] * 8, constant)) == []


def test_tf1_momentum_against_keras_sgd_under_a_changing_rate_is_explained():
    rates = [0.1 * 0.5 ** (k // 3) for k in range(8)]
    tf1 = {"kind": "SGD", "class": "MomentumOptimizer", "params": {"learning_rate": None, "momentum": 0.9}}
    keras = {"kind": "SGD", "class": "SGD", "params": {"learning_rate": None, "momentum": 0.9}}
    rows = compare_learning_rates(side(8, rates, tf1), side(8, rates, keras))
    assert [row.passed for row in rows] == [True, False]
    assert rows[1].name == "momentum under a changing learning rate" and rows[1].step == 4
    assert "multiplies its whole accumulator by the current rate" in rows[1].note
    # without momentum (plain SGD on both sides) the formulas are the same
    plain = {"kind": "SGD", "class": "SGD", "params": {"learning_rate": None, "momentum": 0.0}}
    tf1_plain = {"kind": "SGD", "class": "MomentumOptimizer", "params": {"learning_rate": None, "momentum": 0.0}}
    assert [row.passed for row in compare_learning_rates(side(8, rates, tf1_plain), side(8, rates, plain))] == [True]


def shuffle(buffer, seed=None, reshuffle=None):
    return {"kind": "Dataset.shuffle", "buffer_size": buffer, "seed": seed, "reshuffle": reshuffle}


def test_shuffle_lost_is_broken_with_both_values():
    [row] = compare_shuffles(side(shuffles=[shuffle(64.0, 1.0)]), side(shuffles=[]))
    assert row.passed is False
    assert (row.legacy, row.migrated) == ("buffer 64, seed 1", "no shuffle")
    assert "lost" in row.note


@pytest.mark.parametrize("migrated, passed", [
    ([shuffle(64.0, 1.0)], True),
    ([shuffle(64.0, 1.0, True)], True),  # the default, said out loud
    ([shuffle(64.0, 1.0), shuffle(64.0, 1.0)], True),  # an input_fn called twice is one shuffle
    ([shuffle(32.0, 1.0)], False),
    ([shuffle(64.0, None)], False),
    ([shuffle(64.0, 1.0, False)], False),
])
def test_shuffle_buffer_seed_and_reshuffle_are_compared(migrated, passed):
    [row] = compare_shuffles(side(shuffles=[shuffle(64.0, 1.0)]), side(shuffles=migrated))
    assert row.passed is passed


def test_no_shuffle_anywhere_adds_no_row_and_old_records_are_not_compared():
    assert compare_shuffles(side(shuffles=[]), side(shuffles=[])) == []
    assert compare_shuffles(side(), side(shuffles=[shuffle(8.0)])) == []


def test_eval_metric_3_percent_off_is_broken_with_the_envelope():
    # the fixed schedule's tolerance after step 10 is 5 %: a 3 % average_loss passed that way
    legacy, migrated, nudged = {"average_loss": 0.50}, {"average_loss": 0.515}, {"average_loss": 0.5000001}
    [fixed] = compare_metrics(legacy, migrated, 0.05, 1e-5)
    assert fixed.passed is True
    [row] = compare_metrics(legacy, migrated, 0.05, 1e-5, nudged, 4.0)
    assert row.passed is False and row.allowed == pytest.approx(1e-5 + METRIC_RTOL * 0.5)


def test_eval_metric_within_its_own_noise_or_float_accumulation_passes():
    legacy, nudged = {"loss": 0.5}, {"loss": 0.51}
    assert compare_metrics(legacy, {"loss": 0.53}, 0.05, 1e-5, nudged, 4.0)[0].passed is True  # 4 x 0.01
    assert compare_metrics(legacy, {"loss": 0.55}, 0.05, 1e-5, nudged, 4.0)[0].passed is False
    quiet = {"loss": 0.5}
    assert compare_metrics(legacy, {"loss": 0.5 * (1 + 5e-5)}, 0.05, 1e-5, quiet, 4.0)[0].passed is True


def test_known_evaluation_difference_keeps_the_fixed_tolerance_and_says_why():
    [row] = compare_metrics({"loss": 0.5}, {"loss": 0.51}, 0.05, 1e-5, {"loss": 0.5}, 4.0,
                            known_difference="BatchNorm statistics per replica")
    assert row.passed is True and row.note == "BatchNorm statistics per replica"
