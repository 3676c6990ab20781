"""What parity alone does not show about the Estimator surface fixtures: a SavedModel that
serves the same predictions as the Estimator's export, and a model_dir that a second run
resumes from. These run the programs themselves (TensorFlow): slow."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES
from estimator2keras.parity import run_parity_many
from parity_programs import support

pytestmark = [pytest.mark.slow, support.requires_legacy]

#: Loads SavedModels and calls their serving_default on the inputs given as JSON (a list of
#: floats or, under "examples", serialized tf.train.Examples of such features): {path: {signatures, inputs, outputs}}.
LOAD_EXPORTS = r"""
import json, sys
import numpy as np
import tensorflow as tf
given = json.loads(sys.argv[1])
if "examples" in given:
    def example(values):
        features = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v)) for k, v in values.items()}
        return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
    inputs = {given["name"]: tf.constant([example(e) for e in given["examples"]])}
else:
    inputs = {k: tf.constant(v) for k, v in given.items()}
out = {}
for path in sys.argv[2:]:
    loaded = tf.saved_model.load(path)
    serving = loaded.signatures["serving_default"]
    results = serving(**inputs)
    out[path] = {
        "signatures": sorted(loaded.signatures.keys()),
        "inputs": sorted(serving.structured_input_signature[1]),
        "outputs": {k: np.asarray(v).tolist() for k, v in results.items()},
    }
print(json.dumps(out))
"""


def _load(paths: list[Path], inputs: dict) -> list[dict]:
    loader = support.target_python() or support.legacy_python()
    done = subprocess.run([loader, "-c", LOAD_EXPORTS, json.dumps(inputs), *map(str, paths)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return [loaded[str(p)] for p in paths]


def _parity(case: str, export_dir: Path, workdir: Path | None = None):
    after = FIXTURES / case / "after.py"
    targets = [after] + ([(after, support.target_python())] if support.target_python() else [])
    export_dir.mkdir(parents=True, exist_ok=True)
    os.environ["EXPORT_DIR"] = str(export_dir)  # the programs read it; both sides get the harness's environment
    try:
        return run_parity_many(FIXTURES / case / "before.py", targets, replicas=2,
                               legacy_python=support.legacy_python(), workdir=workdir)
    finally:
        del os.environ["EXPORT_DIR"]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """One parity run of export_reload (and on the newest TF when set); the exports each side wrote."""
    base = tmp_path_factory.mktemp("exports")
    results = _parity("export_reload", base)
    # Timestamped directories, in the order the programs ran: the Estimator's first.
    written = sorted(base.iterdir(), key=lambda p: int(p.name))
    return results, _load(written, {"x": [[1.5, 2.0], [2.5, 3.0], [9.0, 9.5]]})


def test_export_reload_trains_like_the_estimator(exports):
    results, _ = exports
    for result in results:
        assert result.passed, result.report()
        assert result.legacy.replicas == result.migrated.replicas == 2


def test_keras_export_serves_what_the_estimator_export_served(exports):
    results, loaded = exports
    assert len(loaded) == 1 + len(results), "one export per program run"
    estimator, *migrations = loaded
    assert estimator["signatures"] == ["predict", "serving_default"]
    assert estimator["inputs"] == ["x"]
    for migrated in migrations:
        assert migrated["signatures"] == estimator["signatures"]
        assert migrated["inputs"] == estimator["inputs"]
        assert sorted(migrated["outputs"]) == sorted(estimator["outputs"]) == ["above_one", "value"]
        assert migrated["outputs"]["above_one"] == estimator["outputs"]["above_one"]
        for mine, theirs in zip(migrated["outputs"]["value"], estimator["outputs"]["value"]):
            assert mine == pytest.approx(theirs, abs=1e-5)


#: Fixtures whose serving_input_receiver_fn is hand-written (E2K007, E2K002): what a client
#: sends to serving_default, the Estimator export's signatures, inputs and outputs.
HANDWRITTEN = {
    "serving_example_proto": (
        {"name": "example_proto", "examples": [{"x": [1.5, 2.0]}, {"x": [2.5, 3.0]}, {"x": [9.0, 9.5]}]},
        ["serving_default"], ["example_proto"], ["output"]),
    "serving_functions_table": (
        {"age": [0.3, 0.5, 0.9], "hours_per_week": [0.4, 0.2, 0.6]},
        ["serving_default"], ["age", "hours_per_week"], ["logits", "probabilities"]),
    "serving_raw_receiver_hidden": (
        {"f0": [0.3, -1.0, 2.0], "f1": [0.4, 0.2, -0.6], "f2": [1.0, 0.0, 0.5]},
        ["serving_default"], ["f0", "f1", "f2"], ["hidden", "value"]),
    "serving_input_fn_exporter": (
        {"rawdata": [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [2.0, 1.0, 0.5, 0.25]]},
        ["predict_export_outputs", "serving_default"], ["rawdata"], ["predicted"]),
}


def _exported(root: Path) -> list[Path]:
    """SavedModel directories under ``root`` (``<base>/<timestamp>``), oldest first."""
    found = [p.parent for p in root.rglob("saved_model.pb")]
    return sorted(found, key=lambda p: int(p.name))


@pytest.mark.parametrize("case", sorted(HANDWRITTEN))
def test_handwritten_serving_fn_serves_what_the_estimator_export_served(case, tmp_path):
    """Parity of the training, then both exports loaded and called: the same signature names,
    input names, output names and predictions (the Keras model starts from the Estimator's
    weights under the harness, so its predictions match)."""
    inputs, signatures, names, outputs = HANDWRITTEN[case]
    results = _parity(case, tmp_path / "exports", tmp_path / "work")
    for result in results:
        assert result.passed, result.report()
    # The Estimator's export: under the model_dir the harness gave it (an exporter's), else the
    # first where the programs export (export_saved_model; the legacy program runs first). The
    # envelope run's went to its own directory.
    exported = _exported(tmp_path / "exports")
    estimator = _exported(tmp_path / "work" / "legacy") or exported[:1]
    migrated = [p for p in exported if p not in estimator]
    assert len(estimator) == 1 and len(migrated) == len(results), (estimator, migrated)
    theirs, *mine = _load(estimator + migrated, inputs)
    assert theirs["signatures"] == signatures
    assert theirs["inputs"] == names
    assert sorted(theirs["outputs"]) == outputs
    for migration in mine:
        assert migration["signatures"] == theirs["signatures"]
        assert migration["inputs"] == theirs["inputs"]
        assert sorted(migration["outputs"]) == sorted(theirs["outputs"])
        for key in outputs:
            mine, expected = (np.ravel(o["outputs"][key]) for o in (migration, theirs))
            assert mine.tolist() == pytest.approx(expected.tolist(), rel=1e-5, abs=1e-5)


def _run(python: str, program: Path, model_dir: Path) -> str:
    done = subprocess.run([python, str(program)], capture_output=True, text=True, timeout=300, cwd=program.parent,
                          env={**os.environ, "MODEL_DIR": str(model_dir), "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    return next(line for line in done.stdout.splitlines() if line.startswith("eval loss"))


@pytest.mark.parametrize("side", ["before.py", "after.py", "after.py on the newest TF"])
def test_a_second_run_resumes_from_model_dir(side, tmp_path):
    """Both programs: the second run restores step 6 from MODEL_DIR, trains nothing (max_steps is
    reached) and evaluates the same weights; two checkpoints are kept."""
    python = support.legacy_python()
    if side.endswith("newest TF"):
        if support.target_python() is None:
            pytest.skip("set E2K_TARGET_PYTHON for the newest TensorFlow")
        python = support.target_python()
    program = FIXTURES / "checkpoint_resume" / side.split()[0]
    first = _run(python, program, tmp_path)
    second = _run(python, program, tmp_path)
    assert first == second
    index = [n for n in os.listdir(tmp_path) if n.endswith(".index")]
    steps = sorted(int(n.split("-")[-1].split(".")[0]) for n in index)
    assert steps == [4, 6], index  # keep_checkpoint_max=2: the checkpoints of steps 4 and 6


#: Runs a multi_gpu_model program without GPUs: MirroredStrategy on N logical CPUs, and
#: multi_gpu_model (gone since TF 2.4) as what it computed, the template on the whole batch.
MULTI_GPU_RUNNER = r"""
import runpy, sys
import tensorflow as tf
program, replicas = sys.argv[1], int(sys.argv[2])
if replicas > 1:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    original = tf.distribute.MirroredStrategy.__init__
    def __init__(self, devices=None, *args, **kwargs):
        original(self, [f"/cpu:{i}" for i in range(replicas)], *args, **kwargs)
    tf.distribute.MirroredStrategy.__init__ = __init__
import tensorflow.keras.utils as keras_utils
keras_utils.multi_gpu_model = lambda model, gpus=None, **kwargs: model
sys.argv = [program]
runpy.run_path(program, run_name="__main__")
"""
COMPARE_SAVED = r"""
import sys
import numpy as np
import tensorflow as tf
a, b = (tf.keras.models.load_model(p, compile=False).get_weights() for p in sys.argv[1:3])
print(max(float(np.max(np.abs(x - y))) for x, y in zip(a, b)), len(a))
"""


@pytest.mark.parametrize("newest", [False, True], ids=["tf2.15", "newest-tf"])
def test_multi_gpu_model_migration_trains_the_template_like_multi_gpu_model(newest, tmp_path):
    """after.py on 2 replicas saves the template model that before.py saves when multi_gpu_model
    computes what it did (the template trained on the whole batch, on one device)."""
    python = support.target_python() if newest else support.legacy_python()
    if python is None:
        pytest.skip("set E2K_TARGET_PYTHON for the newest TensorFlow")
    case = FIXTURES / "multi_gpu_model"
    runner = tmp_path / "runner.py"
    runner.write_text(MULTI_GPU_RUNNER)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    for program, replicas in (("before.py", 1), ("after.py", 2)):
        cwd = tmp_path / program
        cwd.mkdir()
        done = subprocess.run([python, str(runner), str(case / program), str(replicas)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([python, "-c", COMPARE_SAVED, str(tmp_path / "before.py" / "fited_model.h5"),
                           str(tmp_path / "after.py" / "fited_model.h5")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    max_diff, count = done.stdout.split()[-2:]
    assert int(count) == 8 and float(max_diff) < 1e-6
