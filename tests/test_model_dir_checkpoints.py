"""The ModelDirCheckpoints callback e2k writes for an Estimator's model_dir: pointed at a
model_dir that still holds the Estimator's own (name-based) checkpoint, it must say so and
stop, not restore nothing and count the steps from the checkpoint's number (a user's
migrated program would then train fewer steps from scratch, silently)."""
from __future__ import annotations

import tempfile
import time

import pytest

from estimator2keras._training import MODEL_DIR_CHECKPOINTS

tf = pytest.importorskip("tensorflow")


def _callback_class():
    namespace = {"tf": tf, "tempfile": tempfile, "time": time}
    exec(MODEL_DIR_CHECKPOINTS.format(name="ModelDirCheckpoints", tf="tf"), namespace)
    return namespace["ModelDirCheckpoints"]


def _model():
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    return model


def test_an_estimator_checkpoint_in_the_model_dir_is_refused_naming_e2k_checkpoint(tmp_path):
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("dense/kernel", [2, 1])
        step = tf.compat.v1.train.get_or_create_global_step()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver().save(session, str(tmp_path / "model.ckpt"), global_step=step)
    with pytest.raises(ValueError, match="e2k checkpoint"):
        _callback_class()(_model(), str(tmp_path))
    # Told not to restore (a CheckpointSaverHook's own directory), it does not look.
    _callback_class()(_model(), str(tmp_path), restore=False)


def test_a_keras_checkpoint_in_the_model_dir_is_restored(tmp_path):
    model = _model()
    model.fit(tf.zeros((4, 2)), tf.ones((4, 1)), verbose=0)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=model.optimizer), str(tmp_path), 1).save(7)
    callback = _callback_class()(_model(), str(tmp_path))
    assert callback.global_step() == 7
