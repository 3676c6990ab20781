"""`e2k parity` on a program that trains two models (a tester's fine-tuning program: a
pretrained Estimator, then one warm-started from it): every model is compared, the k-th the
legacy program trains with the k-th the migrated one trains. A migration that breaks only
the second model (its warm start lost, as e2k leaves it, or its learning rate) is broken,
naming model 2; before, only the first was compared and such a migration passed.
"""
from __future__ import annotations

import pytest

from estimator2keras.parity import run_parity_many
from estimator2keras.parity._result import ParityResult, SideInfo
from estimator2keras.parity._runner import merge_models, models_to_compare
from parity_programs import support

TWO_MODELS = support.program("two_models")


def _result(verdict: str, reason: str, step: int | None = None, models: int = 2) -> ParityResult:
    return ParityResult(verdict=verdict, reason=reason, first_divergent_step=step,
                        legacy=SideInfo(program="l", python="p", models_trained=models),
                        migrated=SideInfo(program="m", python="p", models_trained=models))


def test_a_later_model_that_differs_breaks_parity_and_is_named():
    merged = merge_models([_result("parity", "agrees"), _result("broken", "diverges at step 2", 2)])
    assert merged.verdict == "broken" and merged.exit_code == 1
    assert merged.reason == "model 2 of 2: diverges at step 2"
    assert merged.failing_model == 2 and merged.first_divergent_step == 2
    assert [each.model for each in merged.models] == [1, 2]
    assert merged.to_dict()["models"][1]["verdict"] == "broken"


def test_parity_only_when_every_model_agrees():
    merged = merge_models([_result("parity", "agrees"), _result("parity", "agrees too")])
    assert merged.passed and merged.failing_model is None
    assert merged.reason.startswith("all 2 models agree: model 1: agrees; model 2: agrees too")
    # model 1 of a program with one model: nothing more to run; differing counts are broken already
    assert models_to_compare(_result("parity", "x", models=1)) == 1
    assert models_to_compare(_result("parity", "x", models=3)) == 3
    differing = _result("broken", "counts")
    differing.migrated.models_trained = 1
    assert models_to_compare(differing) == 1


def test_each_models_tables_are_labelled():
    pytest.importorskip("rich")
    merged = merge_models([_result("parity", "agrees"), _result("broken", "diverges", 1)])
    text = merged.report()
    assert "model 1 of 2: PARITY: agrees" in text and "model 2 of 2: BROKEN: diverges" in text
    assert text.rstrip().endswith("BROKEN: model 2 of 2: diverges")


@pytest.fixture(scope="module")
def two_models():
    """One legacy run per model serves the correct and both wrong migrations."""
    paths = [TWO_MODELS.correct] + [case.path for case in TWO_MODELS.cases]
    results = run_parity_many(TWO_MODELS.legacy, paths, replicas=1, legacy_python=support.legacy_python())
    return dict(zip(["correct"] + [case.id for case in TWO_MODELS.cases], results))


@pytest.mark.slow
@support.requires_legacy
def test_a_correct_two_model_migration_holds_parity_for_each_model(two_models):
    result = two_models["correct"]
    assert result.passed, result.report()
    assert [each.model for each in result.models] == [1, 2]
    assert [len(each.steps) for each in result.models] == [6, 4]
    assert all(each.passed and each.metrics and all(row.passed for row in each.metrics) for each in result.models)
    # the second model's warm start is the program's to migrate: its values were not copied
    assert any("model 2: the Estimator warm-started 4 variables from /tmp/e2k_parity_two_models/pre" in note
               for note in result.notes), result.notes


@pytest.mark.slow
@support.requires_legacy
@pytest.mark.parametrize("case", TWO_MODELS.cases, ids=lambda case: case.id)
def test_a_migration_breaking_only_the_second_model_is_not_parity(two_models, case):
    result = two_models[case.id]
    assert result.verdict == case.verdict and result.exit_code == case.exit_code, result.report()
    assert result.failing_model == 2 and result.reason.startswith(case.reason), result.reason
    assert result.first_divergent_step == case.first_divergent_step, result.report()
    assert result.models[0].passed, result.models[0].report()  # the first model is migrated right
