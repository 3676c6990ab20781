"""Parity on fixtures in the styles of real programs, against a wrong migration of each.

Estimators that share a definition convert together, and parity tells a right group
conversion from one that evaluates each Estimator's part on its own: the fixture
rerun_cell_shared_model_fn trains one Estimator and evaluates a second one built from the same
model_fn and RunConfig (one temporary model_dir). Converted with the model_dir computed once,
the evaluation reads what was trained; computed per Estimator (a fresh temporary directory
each), it evaluates an untrained model, and parity must say so."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, helpers_beside
from estimator2keras.parity import run_parity
from parity_programs import support

CASE = FIXTURES / "rerun_cell_shared_model_fn"
pytestmark = [pytest.mark.slow, support.requires_legacy]


def test_model_dir_computed_per_estimator_is_caught(tmp_path):
    after = (CASE / "after.py").read_text()
    second = "tf.keras.utils.set_random_seed(3)\nwith strategy.scope():\n    model = build_model(params)\n"
    assert after.count(second) == 2, "the fixture's shape changed: update this test"
    head, tail = after.rsplit(second, 1)
    wrong = head + second + "model_dir = tempfile.mkdtemp()\n" + tail
    path = tmp_path / "after_wrong.py"
    path.write_text(wrong)
    helpers_beside(CASE, tmp_path)
    result = run_parity(CASE / "before.py", path, replicas=2)
    assert not result.passed, result.report()
    # Training agrees step for step: only the evaluation of the second model shows the error.
    assert all(row.passed for row in result.steps), result.report()
    assert any(not row.passed for row in result.metrics), result.report()


def test_batch_size_left_per_replica_is_caught(tmp_path):
    """main_strategy_module_inputs: the strategy is local to main() and the input_fns batch by
    a module constant; the conversion gives them a batch_size parameter and passes the global
    size. Passing the per-replica size instead trains on half the examples per step."""
    case = FIXTURES / "main_strategy_module_inputs"
    after = (case / "after.py").read_text()
    scaled = "batch_size=BATCH_SIZE * strategy.num_replicas_in_sync"
    assert after.count(scaled) == 2, "the fixture's shape changed: update this test"
    path = tmp_path / "after_wrong.py"
    path.write_text(after.replace(scaled, "batch_size=BATCH_SIZE"))
    helpers_beside(case, tmp_path)
    result = run_parity(case / "before.py", path, replicas=2)
    assert not result.passed, result.report()
    assert not result.steps[0].passed, result.report()  # the first step already differs


def test_input_fn_by_flag_the_other_branch_trains_alike_and_a_wrong_one_is_caught(tmp_path):
    """input_fn_by_flag: the fixture runs the tf.data branch; the numpy_input_fn branch,
    converted to functions of the same names, must train alike too; with its training batch
    doubled (a per-replica batch taken for a global one, say) parity must say it does not."""
    case = FIXTURES / "input_fn_by_flag"
    flag = "USE_DATASET = True"
    before, after = (case / "before.py").read_text(), (case / "after.py").read_text()
    assert before.count(flag) == after.count(flag) == 1, "the fixture's shape changed: update this test"
    (tmp_path / "before.py").write_text(before.replace(flag, "USE_DATASET = False"))
    (tmp_path / "after.py").write_text(after.replace(flag, "USE_DATASET = False"))
    helpers_beside(case, tmp_path)
    result = run_parity(tmp_path / "before.py", tmp_path / "after.py", replicas=1)
    assert result.passed, result.report()
    shuffled = after.replace(flag, "USE_DATASET = False").replace(
        ".repeat(2)\n                .batch(batch_size)", ".repeat(2)\n                .batch(batch_size * 2)")
    assert shuffled != after.replace(flag, "USE_DATASET = False")
    (tmp_path / "wrong.py").write_text(shuffled)
    result = run_parity(tmp_path / "before.py", tmp_path / "wrong.py", replicas=1)
    assert not result.passed, result.report()
