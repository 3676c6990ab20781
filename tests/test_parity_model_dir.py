"""`e2k parity` runs both programs with their model_dir in fresh temporary directories.

tests/parity_programs/model_dir: an Estimator trained into a model_dir given by a flag and
passed through RunConfig(model_dir=...), and its migration (e2k's ModelDirCheckpoints callback,
plus a ModelCheckpoint saving into the model_dir and a BackupAndRestore under it). The user's
model_dir ($E2K_TEST_MODEL_DIR) holds the checkpoint of an earlier plain run of the migrated
program, whose weights are not the Estimator's initial ones: restoring it made the migrated
side start from them (broken at step 1), and the parity run wrote its own checkpoints there.

Now the correct migration holds parity (TF 2.15 and newest), a wrong one is still caught, and
the directory is byte for byte what it was.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from estimator2keras.parity import run_parity_many
from parity_programs import support

HERE = support.PROGRAMS / "model_dir"
LEGACY, MIGRATED, WRONG = HERE / "legacy.py", HERE / "migrated.py", HERE / "wrong" / "learning_rate.py"
STEPS = 12
pytestmark = [pytest.mark.slow, support.requires_legacy]


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (relative path -> sha256), and every directory."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), directory) + "/"] = "dir"
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


@pytest.fixture(scope="module")
def stale_dir(tmp_path_factory):
    """A model_dir holding the checkpoints of a plain run of the migrated program."""
    directory = tmp_path_factory.mktemp("user_model_dir")
    env = {**os.environ, "E2K_TEST_MODEL_DIR": str(directory), "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([support.legacy_python(), str(MIGRATED)], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert any(name.startswith("ckpt-12.") for name in os.listdir(directory)), os.listdir(directory)
    return directory


@pytest.fixture(scope="module")
def runs(stale_dir, tmp_path_factory):
    before = snapshot(stale_dir)
    os.environ["E2K_TEST_MODEL_DIR"] = str(stale_dir)  # both programs' model_dir flag default
    try:
        candidates = [MIGRATED, WRONG]
        if support.target_python():
            candidates.append((MIGRATED, support.target_python()))
        results = run_parity_many(LEGACY, candidates, replicas=2, legacy_python=support.legacy_python(),
                                  workdir=tmp_path_factory.mktemp("workdir"))
    finally:
        del os.environ["E2K_TEST_MODEL_DIR"]
    return {"before": before, "after": snapshot(stale_dir), "correct": results[0], "wrong": results[1],
            "newest": results[2] if len(results) > 2 else None}


def test_a_stale_checkpoint_in_the_model_dir_is_not_restored(runs):
    result = runs["correct"]
    support.assert_parity(result, STEPS)
    # the losses agree from the first step: both sides started from the legacy initial weights
    assert result.steps[0].abs_diff <= 1e-5, result.report()


def test_the_users_model_dir_is_left_as_it_was(runs):
    assert runs["before"] and runs["after"] == runs["before"]


def test_where_each_side_ran_is_reported(runs, stale_dir):
    result = runs["correct"]
    legacy = [note for note in result.legacy.notes if "fresh temporary director" in note]
    migrated = [note for note in result.migrated.notes if "fresh temporary director" in note]
    assert any(str(stale_dir) in note and "model_dir" in note for note in legacy), result.report()
    assert any(str(stale_dir) in note for note in migrated), result.report()
    for what in ("CheckpointManager", "ModelCheckpoint", "BackupAndRestore"):
        assert any(what in note for note in migrated), (what, result.report())


def test_a_wrong_migration_is_still_caught_with_the_stale_checkpoint_there(runs):
    result = runs["wrong"]
    assert result.verdict == "broken" and result.first_divergent_step == 2, result.report()


@support.requires_target
def test_the_migration_holds_parity_on_newest_tensorflow(runs):
    support.assert_parity(runs["newest"], STEPS)
    assert runs["after"] == runs["before"]


PROBE = r'''
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("keras_side", sys.argv[1])
side = importlib.util.module_from_spec(spec); spec.loader.exec_module(side)
import tensorflow as tf
out, user, notes = sys.argv[2], sys.argv[3], []
side.patch_model_dirs(tf, out, notes)
board, named = tf.keras.callbacks.TensorBoard(), tf.keras.callbacks.TensorBoard(log_dir=user)
saver = tf.keras.callbacks.ModelCheckpoint(os.path.join(user, "w-{epoch}.weights.h5"), save_weights_only=True)
manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), user, 1)
again = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), os.path.join(user, "."), 1)
inner = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), os.path.join(out, "mine"), 1)
print(json.dumps({"board": board.log_dir, "named": named.log_dir, "saver": saver.filepath,
                  "manager": manager.directory, "again": again.directory, "inner": inner.directory, "notes": notes}))
'''


@pytest.mark.parametrize("python", ["legacy", pytest.param("newest", marks=support.requires_target)])
def test_each_directory_holder_is_redirected_once_per_directory(tmp_path, python):
    """TensorBoard (its default log_dir too), ModelCheckpoint (the file name kept) and
    CheckpointManager (the same directory however spelled: one fresh directory) go under the
    run's directory; a directory already under it is left alone."""
    import json

    out, user = tmp_path / "out", tmp_path / "user"
    out.mkdir()
    interpreter = os.path.abspath(support.legacy_python() if python == "legacy" else support.target_python())
    done = subprocess.run([interpreter, "-c", PROBE, str(support.REPO / "estimator2keras" / "parity" / "_keras_side.py"),
                           str(out), str(user)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("board", "named", "manager"):
        assert Path(got[key]).parent == out, got
    assert Path(got["saver"]).parent.parent == out and Path(got["saver"]).name == "w-{epoch}.weights.h5", got
    assert got["again"] == got["manager"] and got["inner"] == str(out / "mine"), got
    assert any(str(tmp_path / "logs") in note and "TensorBoard" in note for note in got["notes"]), got
    assert not user.exists() and not (tmp_path / "logs").exists()
