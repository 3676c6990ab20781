"""e2k parity on the canned-Estimator fixtures: each after.py (the exact output of
`e2k rewrite`) trains like its before.py on 2 replicas, on TF 2.15 and, with
E2K_TARGET_PYTHON, on the newest TensorFlow; wrong migrations of the DNN classifier are caught.

One legacy run per fixture serves every candidate (run_parity_many), with
envelope="when-needed": the nudged legacy run happens where a candidate's verdict may depend
on it (the DNN classifier's wrong migrations), as envelope=True would have run it, and is
skipped where every candidate agrees within the tolerances an envelope only widens (the same
verdicts: tests/test_parity_lazy_envelope.py).
"""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from estimator2keras._engine import rewrite_source
from estimator2keras.parity._runner import WHEN_NEEDED, run_parity_many
from parity_programs import support
from estimator2keras.testing import write_converted

pytestmark = [pytest.mark.slow, support.requires_legacy]

CASES = ["canned_dnn_classifier", "canned_dnn_regressor", "canned_linear_classifier", "canned_linear_regressor",
         "canned_wide_deep", "canned_linear_tutorial_data_vocabularies", "canned_premade_tutorial_data_keys"]
#: Training steps on 2 replicas: 64 examples, per-replica batches of 8; the tutorials' own
#: counts (two epochs of 96 examples in batches of 8; steps=10).
STEPS = {"canned_linear_tutorial_data_vocabularies": 12, "canned_premade_tutorial_data_keys": 10}
#: Eval metrics each fixture must have compared (the Estimator's names; `loss` on Keras's scale).
#: The binary head's metrics besides (tf.compat.v1 heads: without auc_precision_recall, whose
#: trapezoidal PR summation Keras has not), and the regression head's.
BINARY = {"precision", "recall", "auc", "label/mean", "prediction/mean", "accuracy_baseline"}
MEANS = {"label/mean", "prediction/mean"}
METRICS = {
    "canned_dnn_classifier": {"accuracy", "average_loss", "loss"},
    "canned_dnn_regressor": {"average_loss", "loss", *MEANS},
    "canned_linear_classifier": {"accuracy", "average_loss", "loss", *BINARY},
    "canned_linear_regressor": {"average_loss", "loss", *MEANS},
    "canned_wide_deep": {"accuracy", "average_loss", "loss", *BINARY},
    "canned_linear_tutorial_data_vocabularies": {"accuracy", "average_loss", "loss", "auc_precision_recall", *BINARY},
    "canned_premade_tutorial_data_keys": {"accuracy", "average_loss", "loss"},
}
WRONG = support.Program.load(FIXTURES / "canned_dnn_classifier" / "wrong" / "expected.toml")


@pytest.fixture(scope="module")
def results():
    """{(case, "legacy"|"newest"|wrong file): ParityResult}: one legacy run per fixture."""
    out = {}
    newest = support.target_python()
    for case in CASES:
        after = FIXTURES / case / "after.py"
        candidates = [after]
        if newest is not None:
            candidates.append((after, newest))
        candidates += support.jax_candidates(after)  # jax/after.py (--target jax), on JAX
        if case == "canned_dnn_classifier":
            candidates += [wrong.path for wrong in WRONG.cases]
        found = run_parity_many(FIXTURES / case / "before.py", candidates, replicas=2,
                                legacy_python=support.legacy_python(), envelope=WHEN_NEEDED)
        for candidate, result in zip(candidates, found):
            key = ("jax" if candidate[0] != after else "newest") if isinstance(candidate, tuple) else \
                ("tf215" if candidate == after else candidate.name)
            out[(case, key)] = result
    return out


def _check_parity(result, case):
    support.assert_parity(result, STEPS.get(case, 4))
    assert result.legacy.replicas == result.migrated.replicas == 2
    compared = {row.name for row in result.metrics if row.passed is not None}
    expected = set(METRICS[case])
    if any("is compared instead" in note for note in result.notes):
        # a canned head's eval loss depends on the batching; average_loss is compared
        assert "average_loss" in expected
        expected.discard("loss")
    assert compared == expected and all(row.passed for row in result.metrics if row.passed is not None)
    # every variable paired: feature-column weights, hidden layers, logits, linear weights
    assert not any("not paired" in note for note in result.notes + result.migrated.notes), result.report()
    # the default, tight tolerance: nothing was loosened for canned Estimators
    assert result.settings["tolerance_values"]["tight_rtol"] == 1e-6


@pytest.mark.parametrize("case", CASES)
def test_after_py_trains_like_the_estimator(results, case):
    result = results[(case, "tf215")]
    _check_parity(result, case)
    assert max(row.abs_diff for row in result.steps) <= 1e-5 * max(1.0, max(r.legacy_loss for r in result.steps))


@support.requires_target
@pytest.mark.parametrize("case", CASES)
def test_after_py_trains_like_the_estimator_on_newest_tensorflow(results, case):
    result = results[(case, "newest")]
    _check_parity(result, case)
    assert result.migrated.versions["keras"].startswith("3.")


@pytest.mark.parametrize("case", [case for case in CASES if support.jax_program(FIXTURES / case / "after.py")])
def test_the_jax_conversion_trains_like_the_estimator(results, case):
    """jax/after.py (e2k rewrite --target jax) on JAX, DataParallel over 2 devices."""
    if (case, "jax") not in results:
        pytest.skip("E2K_TARGET_PYTHON (the newest TensorFlow, with JAX) not set")
    support.assert_jax_parity(results[(case, "jax")], replicas=2)


def test_tf1_heads_sum_and_tf2_heads_average(results):
    summed = results[("canned_dnn_classifier", "tf215")]
    assert summed.legacy.loss_reduction == "sum"
    # its summed eval loss depends on the batching: the mean over the same examples is compared
    assert any("its average_loss, the mean over the same examples, is compared instead" in note for note in summed.notes)
    assert summed.legacy.loss_scale == 1.0
    # a TF2 head divides by the replicas before applying, and the Estimator reports the sum
    averaged = results[("canned_dnn_regressor", "tf215")]
    assert averaged.legacy.loss_scale == 0.5
    assert any("legacy losses are shown divided by 2" in note for note in averaged.notes)
    # its eval loss is never rescaled: average_loss is compared instead
    assert not any("legacy eval loss compared" in note for note in averaged.notes)


@pytest.mark.parametrize("wrong", WRONG.cases, ids=lambda case: case.id)
def test_wrong_canned_migration_is_caught(results, wrong):
    support.assert_caught(results[("canned_dnn_classifier", wrong.path.name)], wrong)


def test_batch_norm_dropout_and_activation_convert_faithfully(tmp_path, rules):
    legacy = support.REPO / "tests" / "canned_programs" / "dnn_batch_norm.py"
    converted = rewrite_source(legacy.read_bytes(), "dnn_batch_norm.py", rules)
    assert converted.status == "converted", [f.format() for f in converted.findings]
    migrated = tmp_path / "dnn_batch_norm_keras.py"
    write_converted(converted, migrated)  # and the helpers module it imports
    result = run_parity_many(legacy, [migrated], replicas=1, legacy_python=support.legacy_python(),
                             envelope=WHEN_NEEDED)[0]
    support.assert_parity(result, 8)
    # gamma, beta and the moving statistics of both batch normalizations are paired and agree
    state = [row for row in result.weights if not row.trainable]
    assert len(state) == 4 and all(row.passed for row in state), result.report()
