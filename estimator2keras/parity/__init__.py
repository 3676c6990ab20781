"""The parity harness: runs an Estimator program and its Keras migration and compares their training.

    from estimator2keras.parity import run_parity

    result = run_parity("train_estimator.py", "train_keras.py", replicas=2)
    assert result.passed, result.report()

See docs/parity.md for what is compared, how randomness is handled and the tolerances.
"""
from estimator2keras.parity._result import HyperRow, MetricRow, ParityResult, StepRow, Tolerance, WeightRow
from estimator2keras.parity._runner import ParityUsageError, run_parity, run_parity_many

__all__ = [
    "HyperRow",
    "MetricRow",
    "ParityResult",
    "ParityUsageError",
    "StepRow",
    "Tolerance",
    "WeightRow",
    "run_parity",
    "run_parity_many",
]
