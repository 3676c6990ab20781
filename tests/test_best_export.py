"""BestExport, the BestExporter's callback, compares with the evaluations of an earlier run
into the same export directory, as the Estimator's BestExporter read its model_dir's eval
events: a program run again exports only below the lowest loss it exported at before."""
from __future__ import annotations

import os
import shutil
import time

from estimator2keras._export import BEST_EXPORT


def _callback_class():
    import tensorflow as tf

    names = {"tf": tf, "os": os, "shutil": shutil, "time": time}
    exec(BEST_EXPORT.format(name="BestExport", tf="tf"), names)
    return names["BestExport"]


def _model():
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model(tf.zeros([1, 2]))
    serve = tf.function(lambda x: {"y": model(x)}, input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    return model, {"serving_default": serve}


def _exports(base):
    return sorted(d for d in os.listdir(base) if d.isdigit())


def test_a_second_run_exports_only_below_the_first_runs_best(tmp_path, monkeypatch):
    clock = iter(range(1_000_000, 2_000_000))
    monkeypatch.setattr(time, "time", lambda: next(clock))  # one export a second, without waiting
    BestExport = _callback_class()
    base = str(tmp_path / "export" / "best")
    model, signatures = _model()

    first = BestExport(base, signatures)
    first.set_model(model)
    for loss in (0.9, 0.5, 0.7):
        first.on_epoch_end(0, {"val_loss": loss})
    assert len(_exports(base)) == 2

    again = BestExport(base, signatures)  # the program run again into the same model_dir
    again.set_model(model)
    again.on_epoch_end(0, {"val_loss": 0.6})
    assert len(_exports(base)) == 2, "0.6 is no lower than the earlier run's 0.5"
    again.on_epoch_end(1, {"val_loss": 0.4})
    assert len(_exports(base)) == 3
    assert float(open(os.path.join(base, "best_loss")).read()) == 0.4
