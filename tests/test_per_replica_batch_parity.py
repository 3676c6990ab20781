"""Per-replica batches the Keras program joins where fit reads them (issue 12): the fixture
main_strategy_computed_batch trains like its Estimator (tests/test_fixture_parity.py, on TF
2.15 and the newest TF); the tempting alternative, the batch-size argument scaled where the
input_fn is called, is caught at the first step: the input_fn divides the flag by four, and
(10 * 2) // 4 = 5 examples per replica is not the Estimator's 10 // 4 = 2 per replica."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, helpers_beside
from estimator2keras.parity import run_parity

JOINED = "global_batches(train_input_fn(FLAGS.batch_size), strategy.num_replicas_in_sync)"


@pytest.mark.slow
def test_scaling_the_argument_of_a_computed_batch_is_caught(tmp_path):
    case = FIXTURES / "main_strategy_computed_batch"
    after = (case / "after.py").read_text()
    assert after.count(JOINED) == 1, "the fixture's shape changed: update this test"
    path = tmp_path / "after_scaled_argument.py"
    path.write_text(after.replace(JOINED, "train_input_fn(FLAGS.batch_size * strategy.num_replicas_in_sync)"))
    helpers_beside(case, tmp_path)
    result = run_parity(case / "before.py", path, replicas=2)
    assert not result.passed, result.report()
    assert not result.steps[0].passed, result.report()  # the first step already differs
