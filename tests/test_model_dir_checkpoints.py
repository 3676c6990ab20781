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
        callback.restore("train")
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


# Trains a subclassed model (built in its first step: no distribution strategy; its hidden
# layers in a list, as e2k writes a loop's layers) into a model_dir, then, in fresh processes,
# evaluates it with the callback only, and reruns `fit` with nothing left to train before
# evaluating: both must see the trained weights.
PROGRAM = """
import json, sys, tempfile, time
import numpy as np
import tensorflow as tf

exec(sys.argv[1], globals())
model_dir, run = sys.argv[2], sys.argv[3]


class Model(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden_layers = [tf.keras.layers.Dense(8, activation="relu") for _ in range(2)]
        self.logits = tf.keras.layers.Dense(3, name="logits")

    def call(self, features, training=False):
        net = features["x"]
        for layer in self.hidden_layers:
            net = layer(net)
        return self.logits(net)


rng = np.random.RandomState(0)
x = rng.randn(64, 4).astype("float32")
data = tf.data.Dataset.from_tensor_slices(({"x": x}, np.argmax(x[:, :3], 1))).batch(16)
model = Model()
model.compile(optimizer=tf.keras.optimizers.Adam(0.05),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
checkpoints = ModelDirCheckpoints(model, model_dir, save_steps=4)
try:
    if run == "train":
        model.fit(data.repeat(), epochs=2, steps_per_epoch=4, callbacks=[checkpoints], verbose=0)
    elif run == "rerun":
        model.fit(data.repeat(), epochs=2, initial_epoch=checkpoints.global_step() // 4, steps_per_epoch=4,
                  callbacks=[checkpoints], verbose=0)
    if run == "predict":
        loss = float(np.sum(model.predict(data, callbacks=[checkpoints], verbose=0)))
    else:
        loss = model.evaluate(data, callbacks=[checkpoints], verbose=0)
except ValueError as error:
    print(json.dumps({"error": str(error)}))
    sys.exit(0)
print(json.dumps({"loss": loss, "weights": [float(np.sum(w.numpy())) for w in model.weights],
                  "step": int(model.optimizer.iterations.numpy())}))
"""


def _runs(python, helper, model_dir, *runs):
    import json
    import os
    import subprocess

    found = {}
    for run in runs:
        done = subprocess.run([python, "-c", PROGRAM, helper, str(model_dir), run], capture_output=True,
                              text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        assert done.returncode == 0, done.stderr[-3000:]
        found[run] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _python(target):
    import sys

    from parity_programs import support

    python = sys.executable if target == "tf215" else support.target_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON to an interpreter with the newest TensorFlow")
    return python


@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_a_model_built_in_its_first_step_is_restored_for_evaluate_alone_and_a_finished_rerun(tmp_path, target):
    # On Keras 3 a model without a distribution strategy is built in its first step, and a
    # checkpoint read into it before loses values: the first layer's kernel was left at its
    # initial value (and listed twice in model.weights), evaluate off by half its accuracy.
    # And tf.train.Checkpoint does not see a Keras 3 layer's list of layers: the hidden layers
    # came back at their initial values (new-user tests).
    helper = MODEL_DIR_CHECKPOINTS.format(name="ModelDirCheckpoints", tf="tf")
    runs = _runs(_python(target), helper, tmp_path, "train", "evaluate", "rerun")
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-8")
    trained = runs["train"]
    assert len(trained["weights"]) == 6 and trained["step"] == 8
    for run in ("evaluate", "rerun"):
        assert runs[run]["weights"] == pytest.approx(trained["weights"], rel=1e-6), run
        assert runs[run]["loss"] == pytest.approx(trained["loss"], rel=1e-5), run
    assert runs["rerun"]["step"] == 8


@pytest.mark.parametrize("target", ["tf215", "newest"])
def test_a_model_restored_to_predict_first_predicts_with_the_trained_weights(tmp_path, target):
    # Keras 3's predict hands its step function a list of batches, not an iterator: the
    # helper's first step (which builds the model, then restores it) failed with "'list'
    # object has no attribute 'element_spec'" (a tester's inference step after training).
    helper = MODEL_DIR_CHECKPOINTS.format(name="ModelDirCheckpoints", tf="tf")
    runs = _runs(_python(target), helper, tmp_path, "train", "predict")
    assert runs["predict"]["weights"] == pytest.approx(runs["train"]["weights"], rel=1e-6)


def test_a_model_dir_another_keras_wrote_is_refused_not_half_restored(tmp_path):
    # Keras 2 and 3 name a layer's kernel otherwise: a model_dir of TF 2.15 restored on the
    # newest TF gave back the biases and the step, not the kernels, and trained on from there.
    helper = MODEL_DIR_CHECKPOINTS.format(name="ModelDirCheckpoints", tf="tf")
    newest = _python("newest")
    _runs(_python("tf215"), helper, tmp_path, "train")
    refused = _runs(newest, helper, tmp_path, "evaluate")["evaluate"]
    assert "does not hold every weight of this model" in refused["error"]
