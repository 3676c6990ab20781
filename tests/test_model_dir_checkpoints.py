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
    # Said where the migrated program first reads the model_dir, as the Estimator did.
    callback = _callback_class()(_model(), str(tmp_path))
    with pytest.raises(ValueError, match="e2k checkpoint"):
        callback.global_step()
    with pytest.raises(ValueError, match="e2k checkpoint"):
        callback.restore()
    # Told not to restore (a CheckpointSaverHook's own directory), it does not look.
    _callback_class()(_model(), str(tmp_path), restore=False)


def test_a_keras_checkpoint_in_the_model_dir_is_restored(tmp_path):
    model = _model()
    model.fit(tf.zeros((4, 2)), tf.ones((4, 1)), verbose=0)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=model.optimizer), str(tmp_path), 1).save(7)
    callback = _callback_class()(_model(), str(tmp_path))
    assert callback.global_step() == 7


def test_the_model_dir_is_read_when_the_program_runs_not_when_the_callback_is_made(tmp_path):
    # A tutorial builds its Estimator, then `shutil.rmtree(model_dir)`, then trains: the
    # Estimator read the model_dir in train(). The callback read it when it was made: on the
    # migrated program's second run it counted the first run's steps as done and trained
    # none (or failed to restore the deleted checkpoint).
    import shutil

    model = _model()
    model.fit(tf.zeros((4, 2)), tf.ones((4, 1)), verbose=0)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=model.optimizer), str(tmp_path), 1).save(7)
    fresh = _model()
    callback = _callback_class()(fresh, str(tmp_path), save_steps=2)
    shutil.rmtree(tmp_path)
    assert callback.global_step() == 0
    fresh.fit(tf.zeros((4, 2)), tf.ones((4, 1)), batch_size=1, epochs=1, verbose=0, callbacks=[callback])
    assert int(fresh.optimizer.iterations.numpy()) == 4
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")


def test_estimator_eval_dir_becomes_the_path_it_named(rules):
    from estimator2keras._engine import rewrite_source

    source = '''\
import os
import tensorflow as tf


def model_fn(features, labels, mode):
    out = tf.compat.v1.layers.dense(features, 1)
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


est = tf.estimator.Estimator(model_fn, model_dir="/tmp/m")
os.makedirs(est.eval_dir(), exist_ok=True)
print(est.eval_dir("holdout"))
est.train(lambda: tf.data.Dataset.from_tensor_slices(([[1.0]], [[1.0]])).batch(1), steps=1)
'''
    result = rewrite_source(source.encode(), "program.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    new = result.new.decode()
    assert 'os.makedirs(os.path.join("/tmp/m", "eval"), exist_ok=True)' in new
    assert 'print(os.path.join("/tmp/m", "eval_" + "holdout"))' in new
