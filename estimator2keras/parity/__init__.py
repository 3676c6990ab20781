"""The parity harness: runs an Estimator program and its Keras migration and compares their training."""
