"""A custom model_fn's eval loss over batches of different sizes (a partial last batch).

The Estimator's eval loss is the mean of its evaluation batches' losses, each batch counting
the same; Keras weighs each batch by its examples. With 60 examples in batches of 32 the two
differ although the migration is right. The legacy side records each evaluation batch's loss
and size; the harness passes a migrated loss that matches the Estimator's batch losses weighed
by their examples, with a note saying why the numbers differ, and fails one that matches
neither (tests/parity_programs/eval_batches: correct, and evaluating with drop_remainder).

The first tests need no TensorFlow: they hold compare() to that rule on recorded results.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity._compare import compare, example_weighted_eval_loss
from estimator2keras.parity._result import SideInfo, Tolerance
from parity_programs import support

# Two evaluation batches: 32 examples with loss 0.8, 28 with loss 0.6.
LOSSES, EXAMPLES = [0.8, 0.6], [32, 28]
ESTIMATOR_LOSS = 0.7  # (0.8 + 0.6) / 2
KERAS_LOSS = (0.8 * 32 + 0.6 * 28) / 60  # 0.70666...


def _sides(migrated_loss, batches=True, reported=ESTIMATOR_LOSS):
    legacy = {"losses": [1.0, 0.9], "loss_reduction": "mean", "replicas": 1, "eval_replicas": 1,
              "evaluations": [{"loss": reported, "global_step": 2.0}],
              "evaluation_batches": [{"losses": LOSSES, "examples": EXAMPLES}] if batches else [],
              "variables": []}
    migrated = {"losses": [1.0, 0.9], "replicas": 1, "evaluations": [{"loss": migrated_loss}], "variables": []}
    return legacy, migrated


def _compare(legacy, migrated, nudged=None):
    return compare(legacy, migrated, {}, {}, Tolerance(), legacy_info=SideInfo(program="l", python="p"),
                   migrated_info=SideInfo(program="m", python="p"), settings={"replicas": 1},
                   nudged=nudged, nudged_weights={} if nudged else None)


def test_the_example_weighted_loss_is_computed_from_the_recorded_batches():
    legacy, _ = _sides(KERAS_LOSS)
    weighted, examples = example_weighted_eval_loss(legacy)
    assert weighted == pytest.approx(KERAS_LOSS) and examples == EXAMPLES
    # batches that do not make the reported loss are not the evaluation's: no explanation offered
    assert example_weighted_eval_loss(_sides(KERAS_LOSS, reported=0.75)[0]) is None


def test_a_migrated_loss_weighed_by_examples_passes_with_a_note():
    result = _compare(*_sides(KERAS_LOSS))
    row = {row.name: row for row in result.metrics}["loss"]
    assert result.verdict == "parity", result.report()
    assert row.passed and row.explained and row.example_weighted == pytest.approx(KERAS_LOSS)
    note = next(note for note in result.notes if note.startswith("eval loss:"))
    assert "each batch counting the same (0.7;" in note and "32, 28" in note and "0.70666667" in note
    assert "as Keras weighs the Estimator's batches" in result.report()


def test_a_loss_that_matches_neither_fails_naming_both():
    result = _compare(*_sides(0.72))
    row = {row.name: row for row in result.metrics}["loss"]
    assert result.verdict == "broken" and not row.passed and not row.explained
    assert "weighed by their examples" in result.reason and "0.70666667" in result.reason, result.reason


def test_the_estimators_own_number_still_passes_without_a_note():
    result = _compare(*_sides(ESTIMATOR_LOSS))
    row = {row.name: row for row in result.metrics}["loss"]
    assert result.verdict == "parity" and row.passed and not row.explained
    assert not any(note.startswith("eval loss:") for note in result.notes)


def test_without_recorded_batches_the_difference_fails_as_before():
    result = _compare(*_sides(KERAS_LOSS, batches=False))
    assert result.verdict == "broken" and "eval metric 'loss'" in result.reason


def test_with_the_envelope_the_weighted_loss_is_judged_at_the_metric_tolerance():
    legacy, migrated = _sides(KERAS_LOSS * (1 + 5e-5))
    nudged = {**legacy, "perturbation": {"seed": 0, "ulps": 16}}
    assert _compare(legacy, migrated, nudged).verdict == "parity"
    legacy, migrated = _sides(KERAS_LOSS * (1 + 5e-3))
    assert _compare(legacy, migrated, {**legacy, "perturbation": {}}).verdict == "broken"


EVAL = support.PROGRAMS / "eval_batches"


@pytest.fixture(scope="module")
def runs():
    from estimator2keras.parity import run_parity_many

    candidates = [EVAL / "migrated.py", EVAL / "wrong" / "drop_remainder.py"]
    if support.target_python():
        candidates += [(EVAL / "migrated.py", support.target_python()),
                       (EVAL / "wrong" / "drop_remainder.py", support.target_python())]
    results = run_parity_many(EVAL / "legacy.py", candidates, replicas=2, legacy_python=support.legacy_python())
    return {"correct": results[0], "wrong": results[1], "newest": results[2:]}


def _loss(result):
    return {row.name: row for row in result.metrics}["loss"]


def _assert_explained(result):
    support.assert_parity(result, 8)  # 256 examples / (16 per replica x 2 replicas)
    row = _loss(result)
    # the difference is real: beyond the metric tolerance against the Estimator's own number
    assert row.abs_diff > 1e-4 * abs(row.legacy), result.report()
    assert row.passed and row.explained, result.report()
    assert row.example_weighted == pytest.approx(row.migrated, rel=1e-4)
    assert any(note.startswith("eval loss:") and "32, 28" in note for note in result.notes), result.report()


def _assert_wrong_loss(result):
    row = _loss(result)
    assert result.verdict == "broken" and result.first_divergent_step is None, result.report()
    assert all(step.passed for step in result.steps) and all(w.passed for w in result.weights)
    assert not row.passed and not row.explained and row.example_weighted is not None, result.report()
    assert "weighed by their examples" in result.reason


@pytest.mark.slow
@support.requires_legacy
def test_the_partial_last_batch_passes_with_the_note(runs):
    _assert_explained(runs["correct"])


@pytest.mark.slow
@support.requires_legacy
def test_an_eval_over_other_examples_still_fails(runs):
    _assert_wrong_loss(runs["wrong"])


@pytest.mark.slow
@support.requires_legacy
@support.requires_target
def test_both_on_newest_tensorflow(runs):
    correct, wrong = runs["newest"]
    _assert_explained(correct)
    _assert_wrong_loss(wrong)
