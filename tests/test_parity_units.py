"""The parity harness without TensorFlow: tolerances, comparison, verdicts, report, JSON, plot,
CLI argument errors, and the bootstrap helpers that do not need TensorFlow."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import estimator2keras.parity as parity
from estimator2keras.parity import ParityResult, ParityUsageError, Tolerance, run_parity
from estimator2keras.parity._compare import (
    compare,
    compare_metrics,
    compare_steps,
    compare_weights,
    side_info,
    step_count_hints,
)
from estimator2keras.parity._report import render_text, variable_tables_text, visible_step_rows, write_json, write_plot
from estimator2keras.parity._result import allclose
from estimator2keras.parity._runner import SideRun, child_environment, failure, resolve_python

PARITY_DIR = Path(parity.__file__).resolve().parent
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "seed_mirrored_linear"


def _load(name: str) -> types.ModuleType:
    """A bootstrap module loaded by path, as the user's interpreter loads it."""
    spec = importlib.util.spec_from_file_location(f"_test_{name}", PARITY_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


side_common = _load("_side_common")
keras_side = _load("_keras_side")


# --- tolerances -------------------------------------------------------------------------

def test_public_surface_is_small():
    assert sorted(parity.__all__) == [
        "HyperRow", "MetricRow", "ParityResult", "ParityUsageError", "StepRow", "Tolerance", "WeightRow", "run_parity",
        "run_parity_many"]


def test_default_tolerance_is_tight_for_ten_steps_then_relative():
    tolerance = Tolerance()
    assert tolerance.for_step(1) == tolerance.for_step(10) == (1e-6, 1e-5)
    assert tolerance.for_step(11) == (0.05, 1e-5)
    assert "steps 1-10" in tolerance.describe()


def test_overrides_fix_a_value_for_every_step():
    tolerance = Tolerance().overridden(rtol=1e-3)
    assert tolerance.for_step(1) == (1e-3, 1e-5) and tolerance.for_step(500) == (1e-3, 1e-5)
    both = Tolerance().overridden(rtol=0.0, atol=0.5)
    assert both.for_step(3) == both.for_step(30) == (0.0, 0.5)
    assert both.describe().startswith("every step")


def test_nan_never_agrees_and_infinities_only_with_themselves():
    assert not allclose(math.nan, math.nan, 1.0, 1.0)
    assert not allclose(1.0, math.nan, 1.0, 1.0)
    assert allclose(math.inf, math.inf, 0, 0) and not allclose(math.inf, 1e300, 1, 1)


# --- per-step comparison ----------------------------------------------------------------

def test_a_tiny_difference_fails_early_and_passes_late():
    legacy = [1.0] * 12
    migrated = list(legacy)
    migrated[4] = 1.0 + 1e-3   # step 5: tight window
    migrated[11] = 1.0 + 1e-3  # step 12: 5 % window
    rows = compare_steps(legacy, migrated, Tolerance())
    assert [row.step for row in rows if not row.passed] == [5]
    assert rows[4].abs_diff == pytest.approx(1e-3) and rows[4].rel_diff == pytest.approx(1e-3)


def test_steps_missing_on_one_side_fail():
    rows = compare_steps([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Tolerance())
    assert [row.passed for row in rows] == [True, True, True, False, False, False]
    assert rows[3].legacy_loss is None and rows[3].migrated_loss == 4.0 and rows[3].abs_diff is None


@settings(max_examples=60, deadline=None)
@given(
    losses=st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=40),
    data=st.data(),
)
def test_first_divergent_step_is_the_first_step_out_of_tolerance(losses, data):
    step = data.draw(st.integers(min_value=1, max_value=len(losses)))
    rtol, atol = Tolerance().for_step(step)
    bound = atol + rtol * losses[step - 1]
    factor = data.draw(st.floats(min_value=1.5, max_value=100.0))
    migrated = list(losses)
    migrated[step - 1] = losses[step - 1] + factor * bound
    result = _compare(losses, migrated)
    assert result.verdict == "broken" and result.first_divergent_step == step
    within = list(losses)
    within[step - 1] = losses[step - 1] + 0.5 * bound
    assert _compare(losses, within).verdict == "parity"


# --- whole comparison on synthetic runs ---------------------------------------------------

def _side(losses, *, replicas=2, reduction="mean", variables=None, evaluations=None, **extra):
    return {
        "status": "ok", "losses": list(losses), "replicas": replicas, "strategy": "MirroredStrategy",
        "loss_reduction": reduction, "training_calls": 1,
        "variables": variables if variables is not None else [
            {"name": "dense/kernel", "shape": [2, 1], "trainable": True},
            {"name": "dense/bias", "shape": [1], "trainable": True}],
        "evaluations": evaluations if evaluations is not None else [{"loss": 0.5, "global_step": len(losses)}],
        **extra,
    }


def _weights(kernel=(1.0, 2.0), bias=(0.5,), final_kernel=None, final_bias=None):
    return {
        "initial_0": np.array(kernel, np.float32).reshape(2, 1), "initial_1": np.array(bias, np.float32),
        "final_0": np.array(final_kernel or kernel, np.float32).reshape(2, 1),
        "final_1": np.array(final_bias or bias, np.float32),
    }


def _compare(legacy_losses, migrated_losses, *, legacy=None, migrated=None, legacy_weights=None,
             migrated_weights=None, step_limit=None) -> ParityResult:
    legacy = legacy or _side(legacy_losses)
    migrated = migrated or _side(migrated_losses, reduction=None)
    return compare(
        legacy, migrated, legacy_weights or _weights(), migrated_weights or _weights(), Tolerance(),
        legacy_info=side_info(legacy, "legacy.py", "python", 1.0),
        migrated_info=side_info(migrated, "migrated.py", "python", 1.0),
        settings={"replicas": 2}, step_limit=step_limit)


def test_identical_runs_hold_parity():
    result = _compare([3.0, 2.0, 1.0], [3.0, 2.0, 1.0])
    assert result.passed and result.exit_code == 0 and result.first_divergent_step is None
    assert result.reason == "3 steps, 2 final weights and 1 eval metric agree within tolerance"
    assert [row.name for row in result.metrics] == ["loss"]  # global_step is bookkeeping


def test_sum_reported_losses_are_compared_as_reported_with_a_note():
    legacy = _side([4.0, 2.0], reduction="sum")
    migrated = _side([4.0, 2.0], reduction=None, evaluations=[{"loss": 1.0}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.passed
    assert any("SUM over its 2 replicas" in note for note in result.notes)
    # a mean where the Estimator summed is a real difference, never rescaled away
    assert _compare(None, [2.0, 1.0], legacy=_side([4.0, 2.0], reduction="sum")).first_divergent_step == 1


def test_sum_reduced_eval_loss_is_compared_on_the_global_batch_scale():
    # The Estimator averages its per-replica batches' summed losses; Keras sums over a global
    # batch of N of them: the legacy number is N times smaller for the same examples.
    legacy = _side([4.0, 2.0], replicas=2, reduction="sum", evaluations=[{"loss": 3.0, "accuracy": 0.5}])
    keras_sum = _side([4.0, 2.0], reduction=None, evaluations=[{"loss": 6.0, "accuracy": 0.5}])
    result = _compare(None, None, legacy=legacy, migrated=keras_sum)
    assert result.passed, result.report()
    assert {row.name: row.legacy for row in result.metrics} == {"loss": 6.0, "accuracy": 0.5}
    assert any("legacy eval loss compared x 2" in note for note in result.notes)
    # an eval loss on the Estimator's own scale is not what a faithful migration reports
    same_number = _side([4.0, 2.0], reduction=None, evaluations=[{"loss": 3.0, "accuracy": 0.5}])
    assert "eval metric 'loss' differs" in _compare(None, None, legacy=legacy, migrated=same_number).reason
    # a mean loss, or one replica, is compared unscaled and without the note
    for plain in (_side([4.0, 2.0], replicas=2, reduction="mean", evaluations=[{"loss": 3.0}]),
                  _side([4.0, 2.0], replicas=1, reduction="sum", evaluations=[{"loss": 3.0}])):
        result = _compare(None, None, legacy=plain, migrated=_side([4.0, 2.0], reduction=None,
                                                                   evaluations=[{"loss": 3.0}]))
        assert result.metrics[0].passed and not any("compared x" in note for note in result.notes)


def test_a_summed_eval_loss_with_an_average_loss_is_compared_through_the_average():
    # Without eval_distribute the Estimator evaluated batches of B on one device; the migrated
    # program evaluates the global batches of the input_fn it shares with training: the summed
    # losses differ by the batching, the mean over the same examples does not.
    legacy = _side([4.0, 2.0], replicas=2, reduction="sum",
                   evaluations=[{"loss": 3.0, "average_loss": 0.375, "accuracy": 0.5}])
    migrated = _side([4.0, 2.0], reduction=None, evaluations=[{"loss": 6.0, "average_loss": 0.375, "accuracy": 0.5}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.passed, result.report()
    assert "loss" not in {row.name for row in result.metrics if row.legacy is not None}
    assert any("average_loss, the mean over the same examples, is compared instead" in n for n in result.notes)
    wrong = _side([4.0, 2.0], reduction=None, evaluations=[{"loss": 6.0, "average_loss": 0.5, "accuracy": 0.5}])
    assert "average_loss" in _compare(None, None, legacy=legacy, migrated=wrong).reason


def test_batch_not_scaled_is_explained_by_the_step_count():
    result = _compare([1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert result.verdict == "broken" and result.first_divergent_step == 4
    assert result.reason.startswith("step counts differ (legacy 3, migrated 6)")
    assert any("not scaled by the number of replicas" in hint for hint in result.hints)


def test_one_extra_step_is_explained_by_the_dropped_last_round():
    result = _compare([1.0, 1.0], [1.0, 1.0, 1.0])
    assert any("drops a last round" in hint for hint in result.hints)


def test_a_program_without_a_strategy_is_noted():
    result = compare(_side([1.0], replicas=1), _side([1.0], replicas=1, reduction=None), _weights(), _weights(),
                     Tolerance(), legacy_info=side_info(_side([1.0], replicas=1), "l", "p", None),
                     migrated_info=side_info(_side([1.0], replicas=1), "m", "p", None), settings={"replicas": 2})
    assert result.passed
    assert sum("ran on 1 replica although 2 were asked for" in note for note in result.notes) == 2


def test_different_replica_counts_are_pointed_out():
    legacy = side_info(_side([1.0] * 4), "l", "p", None)
    migrated = side_info(_side([1.0] * 8, replicas=1), "m", "p", None)
    hints = step_count_hints(legacy, migrated, None)
    assert any("different number of replicas" in hint for hint in hints)


def test_weights_alone_can_break_parity():
    result = _compare([1.0, 1.0], [1.0, 1.0], migrated_weights=_weights(final_kernel=(1.0, 2.1)))
    assert result.verdict == "broken" and result.first_divergent_step is None
    assert "1 final weight differs (most: dense/kernel" in result.reason
    assert result.weights_by_difference()[0].legacy_name == "dense/kernel"


def test_eval_metric_alone_can_break_parity_and_migrated_only_metrics_are_listed():
    legacy = _side([1.0], evaluations=[{"loss": 0.5, "global_step": 1}])
    migrated = _side([1.0], reduction=None, evaluations=[{"loss": 0.6, "mae": 0.1}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.verdict == "broken" and "eval metric 'loss' differs" in result.reason
    assert {row.name: row.passed for row in result.metrics} == {"loss": False, "mae": None}
    assert any("incomplete last round" in hint for hint in result.hints)


# --- eval metrics on one side only -------------------------------------------------------

def _metric_line(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip("│┃ ").startswith(f"{name} "))


def test_a_metric_the_migrated_program_lost_fails_parity_naming_it():
    legacy = _side([1.0], evaluations=[{"loss": 0.5, "auc": 0.8, "accuracy": 0.75, "global_step": 1}])
    migrated = _side([1.0], reduction=None, evaluations=[{"loss": 0.5, "accuracy": 0.75}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.verdict == "broken" and result.exit_code == 1
    assert result.reason == (
        "losses and weights agree, but 1 eval metric the Estimator program reports is missing from the migrated "
        "program: 'auc' (its evaluation reports 'accuracy', 'loss'; a migration must keep every metric the "
        "Estimator program reported)")
    rows = {row.name: row for row in result.metrics}
    assert {name: row.passed for name, row in rows.items()} == {"loss": True, "auc": False, "accuracy": True}
    assert rows["auc"].legacy == 0.8 and rows["auc"].migrated is None
    assert rows["auc"].note == "missing from the migrated program"
    # the metric BatchNorm/remainder hints are about values that differ, not a metric that is not there
    assert not any("incomplete last round" in hint for hint in result.hints)
    text = render_text(result, width=400)
    assert _metric_line(text, "auc").rstrip(" │").endswith("FAIL (missing from the migrated program)")
    assert text.rstrip().splitlines()[-1] == f"BROKEN: {result.reason}"
    data = json.loads(json.dumps(result.to_dict()))
    assert {"name": "auc", "passed": False, "note": "missing from the migrated program"}.items() <= \
        next(row for row in data["metrics"] if row["name"] == "auc").items()


def test_metrics_lost_behind_an_earlier_difference_are_still_named():
    legacy = _side([1.0, 1.0], evaluations=[{"loss": 0.5, "auc": 0.8, "precision": 0.6, "global_step": 2}])
    migrated = _side([1.0, 2.0], reduction=None, evaluations=[{"loss": 0.5}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.reason.startswith("losses diverge at step 2")
    assert "2 eval metrics the Estimator program reports are missing from the migrated program: 'auc', " \
           "'precision'" in " ".join(result.hints)
    assert "hint: 2 eval metrics the Estimator program reports are missing" in render_text(result, width=400)


def test_a_migrated_program_that_never_evaluates_fails_naming_the_metrics():
    legacy = _side([1.0], evaluations=[{"loss": 0.5, "accuracy": 0.75, "global_step": 1}])
    migrated = _side([1.0], reduction=None, evaluations=[], fit_validation=None)
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.verdict == "broken"
    assert "the Estimator program evaluates and the migrated program never does" in result.reason
    assert result.reason.endswith("2 eval metrics missing from the migrated program: 'loss', 'accuracy'")
    assert {row.name: row.passed for row in result.metrics} == {"loss": False, "accuracy": False}


def test_metrics_only_the_migrated_program_reports_do_not_fail():
    legacy = _side([1.0], evaluations=[{"loss": 0.5, "global_step": 1}])
    migrated = _side([1.0], reduction=None, evaluations=[{"loss": 0.5, "mae": 0.1, "accuracy": 0.9}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.passed, result.report()
    assert result.reason == "1 step, 2 final weights and 1 eval metric agree within tolerance"
    assert {row.name: row.passed for row in result.metrics} == {"loss": True, "mae": None, "accuracy": None}
    assert {row.note for row in result.metrics if row.passed is None} == {"the migrated program only"}
    assert _metric_line(render_text(result), "mae").rstrip(" │").endswith("not compared (the migrated program only)")


def test_the_estimators_bookkeeping_keys_do_not_fail():
    # global_step: every Estimator evaluation reports it, no Keras evaluation does
    legacy = _side([1.0], evaluations=[{"loss": 0.5, "global_step": 1}])
    result = _compare(None, None, legacy=legacy, migrated=_side([1.0], reduction=None, evaluations=[{"loss": 0.5}]))
    assert result.passed and [row.name for row in result.metrics] == ["loss"]
    # a canned head's batch-dependent eval `loss`: its average_loss is compared instead (not a lost metric)
    legacy = _side([1.0], evaluations=[{"loss": 4.0, "average_loss": 0.5, "global_step": 1}])
    migrated = _side([1.0], reduction=None, evaluations=[{"loss": 0.5, "average_loss": 0.5}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.passed, result.report()
    assert {row.name: row.passed for row in result.metrics} == {"average_loss": True, "loss": None}
    assert any("is compared instead" in note for note in result.notes)


def test_a_metric_that_is_not_a_number_on_both_sides_is_listed_not_failed():
    legacy = _side([1.0], evaluations=[{"loss": 0.5, "per_class": [0.5, 0.25], "global_step": 1}])
    migrated = _side([1.0], reduction=None, evaluations=[{"loss": 0.5, "per_class": [0.5, 0.25]}])
    result = _compare(None, None, legacy=legacy, migrated=migrated)
    assert result.passed, result.report()
    assert {row.name: (row.passed, row.note) for row in result.metrics}["per_class"] == (None, "not a number")


_BINARY_HEAD = {"loss": 0.7, "accuracy": 0.5, "accuracy_baseline": 0.5, "auc": 0.6, "auc_precision_recall": 0.55,
                "average_loss": 0.7, "label/mean": 0.5, "precision": 0.4, "prediction/mean": 0.45, "recall": 0.3,
                "global_step": 1}


@pytest.mark.parametrize("optimizer, lost_fails", [
    ("FtrlOptimizer", False),  # tf.compat.v1 canned head: trapezoidal PR AUC, no Keras equivalent
    ("Ftrl", True),  # a TF2 head (Keras optimizers): its PR AUC is Keras's, a migration must keep it
])
def test_a_tf1_binary_heads_auc_precision_recall_is_the_one_head_metric_a_migration_may_lack(optimizer, lost_fails):
    optimizers = [{"kind": "Ftrl", "class": optimizer, "params": {}}]
    legacy = _side([1.0], reduction="sum", evaluations=[dict(_BINARY_HEAD)], optimizers=optimizers)
    kept = {k: v for k, v in _BINARY_HEAD.items() if k not in ("auc_precision_recall", "global_step")}
    result = _compare(None, None, legacy=legacy,
                      migrated=_side([1.0], reduction=None, evaluations=[kept], optimizers=optimizers))
    row = {row.name: row for row in result.metrics}["auc_precision_recall"]
    if lost_fails:
        assert result.verdict == "broken"
        assert "missing from the migrated program: 'auc_precision_recall'" in result.reason
        assert row.passed is False
    else:
        assert result.passed, result.report()
        assert row.passed is None and "tf.compat.v1 canned binary head" in row.note
        assert "not compared (legacy only: a tf.compat.v1 canned binary head" in render_text(result, width=300)
    # any other head metric lost fails, TF1 head or not
    lost = {k: v for k, v in kept.items() if k != "auc"}
    result = _compare(None, None, legacy=legacy,
                      migrated=_side([1.0], reduction=None, evaluations=[lost], optimizers=optimizers))
    assert result.verdict == "broken" and "missing from the migrated program: 'auc'" in result.reason


def test_e2k_checkpoint_comparison_still_lists_legacy_only_metrics():
    """compare_metrics' default (e2k checkpoint proves a checkpoint by the metrics both report)."""
    rows = compare_metrics({"loss": 1.0, "auc": 0.5}, {"loss": 1.0, "mae": 0.2}, 1e-6, 1e-5)
    assert [(row.name, row.passed, row.note) for row in rows] == [
        ("loss", True, None), ("auc", None, "the legacy program only"), ("mae", None, "the migrated program only")]


def test_keras_fit_validation_stands_in_for_a_missing_evaluate():
    migrated = _side([1.0], reduction=None, evaluations=[], fit_validation={"loss": 0.5})
    assert _compare([1.0], None, migrated=migrated).passed


def test_diverged_replica_copies_are_compared_as_their_mean_with_a_warning():
    variables = [{"name": "bn/gamma", "shape": [2], "trainable": True},
                 {"name": "bn/moving_mean", "shape": [2], "trainable": False}]
    weights = {"initial_0": np.ones(2), "initial_1": np.zeros(2), "final_0": np.ones(2), "final_1": np.zeros(2)}
    legacy = _side([1.0], variables=variables)
    migrated = _side([1.0], reduction=None, variables=variables, diverged_replica_copies=[
        {"index": 1, "name": "bn/moving_mean", "max_diff": 0.6, "saved_vs_mean": 0.3}])
    result = _compare(None, None, legacy=legacy, migrated=migrated, legacy_weights=weights, migrated_weights=weights)
    assert result.passed
    assert len(result.warnings) == 1 and "replica 0's copy, 0.3 away" in result.warnings[0]
    assert "warning: bn/moving_mean" in render_text(result)


def test_weights_are_compared_per_tensor_relative_to_its_largest_value():
    table = [{"name": "w", "shape": [3], "trainable": True}]
    legacy = {"final_0": np.array([100.0, 0.0, 1.0])}
    close = {"final_0": np.array([100.0, 1e-3, 1.0])}  # 1e-3 next to 0 is fine beside 100
    assert compare_weights(table, table, legacy, close, rtol=1e-4, atol=0.0)[0].passed
    far = {"final_0": np.array([100.0, 1.0, 1.0])}
    assert not compare_weights(table, table, legacy, far, rtol=1e-4, atol=0.0)[0].passed


def test_no_metrics_means_nothing_to_compare():
    assert compare_metrics(None, None, 0.0, 0.0) == []


# --- result, report, JSON, plot -----------------------------------------------------------

def test_result_to_dict_is_plain_json_even_with_nan():
    result = _compare([1.0, math.nan], [1.0, 2.0])
    assert result.first_divergent_step == 2
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["schema"] == "e2k-parity/1" and data["verdict"] == "broken" and data["exit_code"] == 1
    assert data["steps"][1]["legacy_loss"] == "nan"


def test_error_results_exit_2():
    result = ParityResult(verdict="error", reason="x")
    assert not result.passed and result.exit_code == 2 and str(result) == "error: x"


def test_long_runs_show_head_divergence_and_tail():
    rows = compare_steps([1.0] * 200, [1.0] * 99 + [2.0] * 101, Tolerance())
    visible = visible_step_rows(rows, 100, max_rows=40)
    steps = [row.step if row else None for row in visible]
    assert steps[:10] == list(range(1, 11)) and steps[10] is None
    assert 100 in steps and 97 in steps and 103 in steps and steps[-5:] == list(range(196, 201))
    assert visible_step_rows(rows[:20], None, max_rows=40) == rows[:20]


def test_text_report_highlights_the_first_divergent_step_and_ends_with_the_verdict():
    result = _compare([1.0, 2.0, 3.0], [1.0, 2.5, 3.5])
    text = render_text(result)
    line = next(line for line in text.splitlines() if "first divergence" in line)
    assert line.split()[1] == "2"  # the table row of step 2
    assert text.rstrip().splitlines()[-1].startswith("BROKEN: losses diverge at step 2")
    assert "Final weights, most different first" in text


def test_variable_tables_side_by_side_mark_the_first_mismatch():
    legacy = [{"name": "dense/kernel", "shape": [2, 1], "trainable": True},
              {"name": "dense/bias", "shape": [1], "trainable": True}]
    migrated = [{"name": "dense/kernel", "shape": [2, 4], "trainable": True},
                {"name": "dense/bias", "shape": [4], "trainable": True},
                {"name": "dense_1/kernel", "shape": [4, 1], "trainable": True}]
    lines = variable_tables_text(legacy, migrated).splitlines()
    assert "legacy (Estimator)" in lines[0] and "migrated (Keras)" in lines[0]
    assert lines[2].startswith("0  dense/kernel [2x1]") and lines[2].endswith("<- first mismatch")
    assert lines[4].startswith("2  -")


def test_json_and_plot_files(tmp_path):
    result = _compare([3.0, 2.0, 1.0, 0.5], [3.0, 2.0, 1.1, 0.6])
    write_json(result, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["first_divergent_step"] == 3
    write_plot(result, tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- runner without running TensorFlow ----------------------------------------------------

def test_missing_program_is_an_error_result_not_an_exception(tmp_path):
    result = run_parity(tmp_path / "nope.py", FIXTURE / "after.py")
    assert result.verdict == "error" and result.reason.startswith("legacy program not found")


def test_arguments_that_cannot_work_raise():
    with pytest.raises(ParityUsageError, match="--replicas must be at least 1"):
        run_parity(FIXTURE / "before.py", FIXTURE / "after.py", replicas=0)
    with pytest.raises(ParityUsageError, match="no such Python interpreter"):
        run_parity(FIXTURE / "before.py", FIXTURE / "after.py", target_python="/nonexistent/python")
    with pytest.raises(ParityUsageError, match="--rtol"):
        run_parity(FIXTURE / "before.py", FIXTURE / "after.py", rtol=-1)


def test_interpreters_resolve_by_path_or_name():
    assert resolve_python(None) == sys.executable
    assert resolve_python(sys.executable) == sys.executable
    assert Path(resolve_python(Path(sys.executable).name)).name == Path(sys.executable).name


def test_a_relative_interpreter_path_still_works_from_the_programs_directory(tmp_path, monkeypatch):
    # The programs run from their own directories: `--target-python .venv-newest/bin/python`
    # given from the project root must not be looked up there.
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)  # as a virtualenv's python is
    monkeypatch.chdir(tmp_path)
    resolved = resolve_python(os.path.join("venv", "bin", "python"))
    assert resolved == str(venv / "python")  # absolute, and the venv's own link, not its target


def test_child_environment_is_repeatable_and_single_worker(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {}}')
    env = child_environment(7)
    assert env["PYTHONHASHSEED"] == "7" and "TF_CONFIG" not in env


@pytest.mark.parametrize(("status", "result", "expected"), [
    ("crashed", {"error": {"type": "ValueError", "message": "bad", "traceback": "TB"}},
     ("the legacy program crashed: ValueError: bad", "TB")),
    ("no_training", {"error": {"message": "never trained"}},
     ("no training call found in the legacy program: never trained", None)),
    ("environment", {"error": {"message": "no estimator"}}, ("cannot run the legacy program: no estimator", None)),
    ("unsupported", {"error": {"message": "two models"}}, ("cannot compare the legacy program: two models", None)),
    ("harness_error", {"error": {"type": "KeyError", "message": "x", "traceback": "TB"}},
     ("the parity harness failed while running the legacy program (KeyError: x); please report this", "TB")),
])
def test_side_failures_become_one_reason(tmp_path, status, result, expected):
    run = SideRun("legacy", tmp_path / "p.py", "python", tmp_path, returncode=2, result={"status": status, **result})
    assert failure(run, 600) == expected


def test_a_side_that_died_without_a_result_shows_its_stderr(tmp_path):
    (tmp_path / "stderr.txt").write_text("line\nSegmentation fault\n")
    run = SideRun("migrated", tmp_path / "p.py", "python", tmp_path, returncode=-11)
    reason, detail = failure(run, 600)
    assert reason == "the migrated interpreter (python) exited with status -11 without a result"
    assert detail.endswith("Segmentation fault")


# --- CLI argument errors: one line, exit 2, no traceback ----------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "estimator2keras", "parity", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_notebook_is_refused_saying_how_to_compare_it(tmp_path):
    notebook = tmp_path / "train.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    done = _cli(str(notebook), str(FIXTURE / "after.py"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"e2k parity: LEGACY.py: {notebook} is a notebook; parity runs Python programs")
    assert "nbconvert" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("missing.py", str(FIXTURE / "after.py")), "e2k parity: LEGACY.py: no such file: missing.py"),
    ((str(FIXTURE / "before.py"), "gone.py"), "e2k parity: MIGRATED.py: no such file: gone.py"),
    ((str(FIXTURE / "before.py"), str(FIXTURE / "after.py"), "--legacy-python", "/no/python"),
     "e2k parity: no such Python interpreter: /no/python"),
    ((str(FIXTURE / "before.py"), str(FIXTURE / "after.py"), "--steps", "0"),
     "e2k parity: --steps must be at least 1, got 0"),
])
def test_cli_user_mistakes_are_one_line_and_exit_2(args, message):
    done = _cli(*args)
    assert done.returncode == 2
    assert done.stderr.strip() == message and done.stdout == ""


# --- bootstrap helpers (plain Python, loaded by path like in the user's interpreter) -------

def _raise_from(filename: str, function: str):
    """Raise ValueError from a frame whose code claims to live in ``filename``."""
    namespace: dict = {}
    exec(compile(f"def {function}():\n    raise ValueError('boom')\n", filename, "exec"), namespace)
    return namespace[function]


def test_traceback_tail_keeps_the_program_and_drops_the_harness(tmp_path):
    program = str(tmp_path / "prog.py")
    harness = str(PARITY_DIR / "_keras_side.py")
    user_fn = _raise_from(program, "model_fn")
    wrapper = _raise_from(harness, "fit")
    try:
        try:
            user_fn()
        except ValueError:
            wrapper()
    except ValueError as exc:
        tail = side_common.traceback_tail(exc, str(tmp_path))
        assert "_keras_side.py" not in tail and tail.endswith("ValueError: boom")
    try:
        user_fn()
    except ValueError as exc:
        tail = side_common.traceback_tail(exc, str(tmp_path))
        assert f'File "{program}", line 2, in model_fn' in tail
        assert not side_common.crashed_in_harness(exc, str(tmp_path))
    try:
        _raise_from(harness, "after_run")()
    except ValueError as exc:
        assert side_common.crashed_in_harness(exc, str(tmp_path))


def test_exception_summary_takes_the_real_error_of_tensorflow_messages():
    wrapped = ValueError("in user code:\n\n    File x\n\n    ValueError: Input 0 is incompatible\n")
    assert side_common.exception_summary(wrapped) == "ValueError: Input 0 is incompatible"
    assert side_common.exception_summary(KeyError("k")) == "'k'"
    assert side_common.exception_summary(RuntimeError()) == ""


def test_to_float_handles_numpy_and_nesting():
    assert side_common.to_float(np.float32(0.5)) == 0.5
    assert side_common.to_float(np.array([1, 2])) == [1.0, 2.0]
    assert side_common.to_float(b"ok") == "ok" and side_common.to_float(None) is None


class _FakeVariable:
    def __init__(self, uid):
        self._unique_id = uid


def test_keras_weights_are_ordered_by_creation_when_tensorflow_numbers_them():
    late, early = _FakeVariable("dense_1/kernel_30"), _FakeVariable("dense/kernel_12")
    assert keras_side._creation_order([late, early]) == [early, late]
    unnumbered = types.SimpleNamespace()
    assert keras_side._creation_order([late, unnumbered]) == [late, unnumbered]  # model order kept


def test_first_batch_of_fit_data_without_losing_it():
    x = np.arange(100, dtype=np.float32).reshape(50, 2)
    features, same = keras_side._first_batch_features(x, 8)
    assert features.shape == (8, 2) and same is x
    features, _ = keras_side._first_batch_features({"a": x}, None)
    assert features["a"].shape == (32, 2)

    def batches():
        yield (x[:4], x[:4, :1])
        yield (x[4:8], x[4:8, :1])

    features, replaced = keras_side._first_batch_features(batches(), None)
    assert features.shape == (4, 2)
    assert [b[0][0, 0] for b in replaced] == [0.0, 8.0]  # the peeked batch is put back


# --- CLI wiring: exit codes, report, JSON, plot (run_parity replaced: no TensorFlow) -------

@pytest.mark.parametrize(("legacy", "migrated", "code", "verdict_line"), [
    ([3.0, 2.0], [3.0, 2.0], 0, "PARITY: 2 steps"),
    ([3.0, 2.0], [3.0, 2.5], 1, "BROKEN: losses diverge at step 2"),
    (None, None, 2, "ERROR: variables do not match"),
])
def test_cli_exit_codes_follow_the_verdict(monkeypatch, capsys, tmp_path, legacy, migrated, code, verdict_line):
    from estimator2keras import cli
    from estimator2keras.parity import cli as parity_cli

    if legacy is None:
        result = ParityResult(verdict="error", reason="variables do not match: 4 vs 2",
                              detail=variable_tables_text([], [{"name": "w", "shape": [1]}]))
    else:
        result = _compare(legacy, migrated)
    seen = {}

    def fake_run_parity(legacy_path, migrated_path, **kwargs):
        seen.update(kwargs, legacy=legacy_path, migrated=migrated_path)
        return result

    monkeypatch.setattr(parity_cli, "run_parity", fake_run_parity)
    json_path, plot_path = tmp_path / "r.json", tmp_path / "r.png"
    argv = ["parity", str(FIXTURE / "before.py"), str(FIXTURE / "after.py"), "--replicas", "3", "--steps", "7",
            "--rtol", "0.01", "--keep-shuffle", "--json", str(json_path), "--plot", str(plot_path)]
    assert cli.main(argv) == code
    out, err = capsys.readouterr()
    assert verdict_line in " ".join(out.split())
    assert "Traceback" not in out + err
    assert seen["replicas"] == 3 and seen["steps"] == 7 and seen["rtol"] == 0.01 and seen["atol"] is None
    assert seen["keep_shuffle"] is True and seen["keep_dropout"] is False and seen["op_determinism"] is True
    assert json.loads(json_path.read_text())["exit_code"] == code
    assert plot_path.exists() == (legacy is not None)
    if legacy is None:
        assert "no training step to plot" in err


#: Stands in for an interpreter running a bootstrap: writes the result.json a side would,
#: from its TF_CONFIG task; worker `FAIL` (if set) fails at once, the others may hang.
FAKE_WORKER = """#!{python}
import json, os, sys, time
request = json.load(open(sys.argv[2]))
task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"]
status = "crashed" if str(task) == os.environ.get("FAIL") else "ok"
json.dump({{"status": status, "task": task, "cluster": cluster, "error": {{"message": "worker %d" % task}}}},
          open(os.path.join(request["out_dir"], "result.json"), "w"))
if status == "crashed":
    sys.exit(2)
time.sleep(float(os.environ.get("HANG", "0")))
"""


def _fake_interpreter(tmp_path):
    path = tmp_path / "python"
    path.write_text(FAKE_WORKER.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def test_workers_each_get_their_task_on_loopback_and_the_chief_is_compared(tmp_path):
    from estimator2keras.parity._runner import SideRun, run_workers

    program = tmp_path / "program.py"
    program.write_text("")
    run = SideRun("legacy", program, _fake_interpreter(tmp_path), tmp_path / "legacy")
    chief = run_workers(run, {}, timeout=60, env=dict(os.environ), workers=2)
    assert chief.ok and chief.result["task"] == 0 and chief.out_dir.name == "worker_0"
    other = json.loads((tmp_path / "legacy" / "worker_1" / "result.json").read_text())
    assert other["task"] == 1 and other["cluster"] == chief.result["cluster"]
    assert len(set(chief.result["cluster"])) == 2 and all(a.startswith("127.0.0.1:") for a in chief.result["cluster"])


def test_a_failing_worker_is_reported_and_the_others_do_not_wait_for_the_time_limit(tmp_path, monkeypatch):
    from estimator2keras.parity import _runner

    monkeypatch.setattr(_runner, "WORKER_GRACE", 0.5)
    program = tmp_path / "program.py"
    program.write_text("")
    run = _runner.SideRun("migrated", program, _fake_interpreter(tmp_path), tmp_path / "migrated")
    started = time.perf_counter()
    failed = _runner.run_workers(run, {}, timeout=120, env={**os.environ, "FAIL": "1", "HANG": "60"}, workers=2)
    assert time.perf_counter() - started < 30
    assert failed.status == "crashed" and failed.result["task"] == 1


def test_a_module_of_a_package_runs_as_python_m_would_and_a_script_as_python_path(tmp_path):
    # A trainer package's task.py says `from trainer import model` (and `from . import
    # util`): run as a file from its own directory, it crashed with "No module named trainer".
    import os
    import subprocess
    import sys

    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("UNITS = 3\n")
    (package / "util.py").write_text("NAME = 'util'\n")
    (package / "task.py").write_text(
        "import os\nfrom trainer import model\nfrom . import util\nimport util as sibling\n"
        "if __name__ == '__main__':\n"
        "    print(model.UNITS, util.NAME, sibling.NAME, __package__, os.getcwd() == os.environ['ROOT'])\n")
    (tmp_path / "script.py").write_text("import os\nprint(__name__, os.getcwd() == os.environ['ROOT'])\n")
    assert side_common.program_entry(str(package / "task.py")) == (str(tmp_path), "trainer.task")
    assert side_common.program_entry(str(tmp_path / "script.py")) == (str(tmp_path), None)
    run = ("import importlib.util, sys\n"
           "spec = importlib.util.spec_from_file_location('common', sys.argv[1])\n"
           "common = importlib.util.module_from_spec(spec)\n"
           "spec.loader.exec_module(common)\n"
           "print(*common.run_program(sys.argv[2]))\n")
    for program, printed in ((package / "task.py", "3 util util trainer True"), (tmp_path / "script.py", "__main__ True")):
        done = subprocess.run([sys.executable, "-c", run, side_common.__file__, str(program)], capture_output=True,
                              text=True, timeout=60, cwd="/", env={**os.environ, "ROOT": str(tmp_path)})
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [printed, "ok None"], done.stdout


def test_the_programs_get_the_arguments_given_with_args(tmp_path):
    # A trainer with a required --job-dir crashed under e2k parity: no way to give it flags.
    import subprocess
    import sys

    (tmp_path / "task.py").write_text(
        "import argparse, sys\nparser = argparse.ArgumentParser()\nparser.add_argument('--job-dir', required=True)\n"
        "print(parser.parse_args().job_dir, sys.argv[0].endswith('task.py'))\n")
    run = ("import importlib.util, sys\n"
           "spec = importlib.util.spec_from_file_location('common', sys.argv[1])\n"
           "common = importlib.util.module_from_spec(spec)\n"
           "spec.loader.exec_module(common)\n"
           "print(*common.run_program(sys.argv[2], sys.argv[3:]))\n")
    done = subprocess.run([sys.executable, "-c", run, side_common.__file__, str(tmp_path / "task.py"),
                           "--job-dir", "/tmp/a b"], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["/tmp/a b True", "ok None"], done.stdout + done.stderr
    from estimator2keras.cli import main

    assert main(["parity", str(tmp_path / "task.py"), str(tmp_path / "task.py"), "--args", "'unclosed"]) == 2


def test_a_crash_writing_into_a_redirected_model_dir_says_why():
    """A program that writes its own file into its model_dir (`eval_results.json`) crashed under
    parity with a bare FileNotFoundError: parity had run that model_dir elsewhere (a tester)."""
    from types import SimpleNamespace

    from estimator2keras.parity._legacy_side import _model_dir_hint

    rec = SimpleNamespace(model_dirs={"/tmp/runs/m1": "/tmp/parity/model_dir_x"})
    message = "[Errno 2] No such file or directory: '/tmp/runs/m1/eval_results.json'"
    hinted = _model_dir_hint(rec, "FileNotFoundError", message)
    assert hinted.startswith(message) and "ran the Estimator's model_dir /tmp/runs/m1 in a temporary" in hinted
    assert _model_dir_hint(rec, "ValueError", message) == message
    assert _model_dir_hint(rec, "FileNotFoundError", "[Errno 2] No such file: '/data/x.csv'") == \
        "[Errno 2] No such file: '/data/x.csv'"
