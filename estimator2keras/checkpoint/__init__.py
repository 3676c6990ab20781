"""`e2k checkpoint`: carry an Estimator's trained model_dir over to the migrated Keras program.

    from estimator2keras.checkpoint import convert_checkpoint

    result = convert_checkpoint("train_estimator.py", "train_keras.py", model_dir="old_dir", out="new_dir")
    print(result.report())
    assert result.exit_code == 0

Both programs run as the parity harness runs them (estimator2keras.parity: the same bootstraps,
interpreters, devices and variable pairing), train nothing, and the legacy checkpoint's values
(weights, optimizer slots, the global step, batch-norm statistics) are written into the Keras
model and optimizer, saved in the layout the migrated program restores from its model_dir, and
proved by the restored model's predictions. See docs/checkpoints.md.
"""
from estimator2keras.checkpoint._convert import CheckpointResult, PredictionRow, convert_checkpoint

__all__ = ["CheckpointResult", "PredictionRow", "convert_checkpoint"]
