"""`e2k parity` reads a warm start from a model_dir of the program where that model_dir ran.

The harness runs every Estimator's model_dir in a fresh temporary directory (nothing read from
or written to the user's). An Estimator that warm-starts from another's model_dir
(`warm_start_from=first_dir`, `WarmStartSettings(ckpt_to_initialize_from=first_dir)`) read the
user's directory, empty under the harness: `latest_checkpoint` gave None and the legacy program
crashed under parity only. Now such a path names the fresh directory (the directory itself or a
checkpoint in it); any other path is read as it is.
"""
from __future__ import annotations

import collections
import importlib.util
import os
import types

import pytest

from estimator2keras.parity import _legacy_side as path_holder
from parity_programs import support


def _legacy_side():
    """_legacy_side.py as the legacy interpreter loads it (by path, standalone)."""
    spec = importlib.util.spec_from_file_location("_e2k_legacy_side_warm_start", path_holder.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorder(**overrides):
    fields = {"model_dirs": {}, "checkpoint": None, "resume_from": None, "info": {"notes": []}, **overrides}
    return types.SimpleNamespace(**fields)


#: Stands for tf.estimator.WarmStartSettings (a namedtuple), without TensorFlow.
Settings = collections.namedtuple("Settings", ["ckpt_to_initialize_from", "vars_to_warm_start"])


def test_a_warm_start_from_a_model_dir_reads_where_it_ran(tmp_path):
    side = _legacy_side()
    out_dir, user = tmp_path / "out", tmp_path / "user"
    out_dir.mkdir()
    rec = _recorder()
    first = side._fresh_model_dir(rec, str(out_dir), str(user / "first"))
    assert side._inside(first, str(out_dir))
    open(os.path.join(first, "model.ckpt-10.index"), "w").close()  # what the first Estimator wrote there
    # The directory, spelled otherwise too, and a checkpoint in it.
    assert side._warm_start_from(rec, str(out_dir), str(user / "first")) == first
    assert side._warm_start_from(rec, str(out_dir), str(user / "first") + os.sep) == first
    assert side._warm_start_from(rec, str(out_dir), user / "first") == first
    assert side._warm_start_from(rec, str(out_dir), str(user / "first" / "model.ckpt-10")) == \
        os.path.join(first, "model.ckpt-10")
    settings = side._warm_start_from(rec, str(out_dir), Settings(str(user / "first"), "dense.*"))
    assert settings == Settings(first, "dense.*")
    assert any(note.startswith(f"warm_start_from {user / 'first'} read the temporary directory")
               for note in rec.info["notes"]), rec.info["notes"]


def test_other_warm_starts_are_read_as_they_are(tmp_path):
    side = _legacy_side()
    out_dir, user = tmp_path / "out", tmp_path / "user"
    out_dir.mkdir()
    rec = _recorder()
    assert side._warm_start_from(rec, str(out_dir), str(user / "pretrained")) == str(user / "pretrained")
    side._fresh_model_dir(rec, str(out_dir), str(user / "first"))
    for warm in (str(user / "pretrained"), str(user / "first2"), "gs://bucket/first",
                 str(out_dir / "keras" / "keras_model.ckpt"), Settings(str(user / "pretrained"), ".*")):
        assert side._warm_start_from(rec, str(out_dir), warm) == warm
    # The innermost model_dir holding the path names it.
    inner = side._fresh_model_dir(rec, str(out_dir), str(user / "first" / "inner"))
    open(os.path.join(inner, "ckpt.index"), "w").close()
    assert side._warm_start_from(rec, str(out_dir), str(user / "first" / "inner" / "ckpt")) == \
        os.path.join(inner, "ckpt")
    # A checkpoint the program wrote into the directory it named, not where its model_dir ran
    # (model_to_estimator saves the Keras model's weights into the model_dir it is given).
    keras = str(user / "first" / "keras" / "keras_model.ckpt")
    assert side._warm_start_from(rec, str(out_dir), keras) == keras


def test_under_e2k_checkpoint_a_warm_start_reads_the_copy(tmp_path):
    side = _legacy_side()
    out_dir = tmp_path / "out"
    copy = out_dir / "restored"
    copy.mkdir(parents=True)
    rec = _recorder(checkpoint={"model_dir": str(copy)})
    assert side._fresh_model_dir(rec, str(out_dir), str(tmp_path / "first")) == str(copy)
    assert side._warm_start_from(rec, str(out_dir), str(tmp_path / "first")) == str(copy)


LEGACY = '''\
import os

import tensorflow as tf

X = [[1.0], [2.0], [3.0], [4.0]]
Y = [[2.0], [4.0], [6.0], [8.0]]
ROOT = os.environ["E2K_TEST_WARM_START_DIR"]


def input_fn():
    return tf.data.Dataset.from_tensor_slices((X, Y)).repeat(5).batch(2)


def model_fn(features, labels, mode):
    out = tf.compat.v1.layers.dense(features, 1, name="dense")
    loss = tf.compat.v1.losses.mean_squared_error(labels, out)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


first_dir = os.path.join(ROOT, "first")
first = tf.estimator.Estimator(model_fn=model_fn, model_dir=first_dir)
first.train(input_fn)
second = tf.estimator.Estimator(model_fn=model_fn, model_dir=os.path.join(ROOT, "second"),
                                warm_start_from=first_dir)
second.train(input_fn)
settings = tf.estimator.WarmStartSettings(ckpt_to_initialize_from=first_dir, vars_to_warm_start="dense.*")
third = tf.estimator.Estimator(model_fn=model_fn, model_dir=os.path.join(ROOT, "third"),
                               warm_start_from=settings)
third.train(input_fn)
'''

MIGRATED = '''\
import tensorflow as tf

X = [[1.0], [2.0], [3.0], [4.0]]
Y = [[2.0], [4.0], [6.0], [8.0]]


def input_fn():
    return tf.data.Dataset.from_tensor_slices((X, Y)).repeat(5).batch(2)


def build_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, name="dense")])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss=tf.keras.losses.MeanSquaredError())
    return model


first = build_model()
first.fit(input_fn())
for _ in range(2):
    model = build_model()
    model(tf.constant(X))
    model.set_weights(first.get_weights())
    model.fit(input_fn())
'''


@pytest.mark.slow
@support.requires_legacy
def test_parity_runs_a_program_that_warm_starts_from_its_own_model_dir(tmp_path, monkeypatch):
    root = tmp_path / "user_dirs"
    root.mkdir()
    monkeypatch.setenv("E2K_TEST_WARM_START_DIR", str(root))
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "migrated.py").write_text(MIGRATED)
    from estimator2keras.parity import run_parity

    result = run_parity(tmp_path / "legacy.py", tmp_path / "migrated.py", replicas=1,
                        legacy_python=support.legacy_python(), workdir=tmp_path / "work")
    assert result.verdict == "parity", result.report()
    assert result.legacy.steps == result.migrated.steps == 10, result.report()
    notes = [*result.notes, *result.legacy.notes]
    assert any(n.startswith(f"warm_start_from {root / 'first'} read the temporary directory") for n in notes), notes
    assert not any(root.iterdir()), list(root.iterdir())  # nothing written into the user's directories
