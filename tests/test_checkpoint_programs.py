"""`e2k checkpoint` end to end (slow): each Estimator program trains into a model_dir on TF 2.15,
the model_dir is converted for its Keras migration on TF 2.15 and on the newest TF, and the
proof (predictions and evaluation of both restored models) holds within 1e-6 relative; the
migrated program restores the written checkpoint from its model_dir. A migration with one
layer wider, or a checkpoint of another program, is refused and nothing is written.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from estimator2keras.checkpoint import convert_checkpoint
from parity_programs import support

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "tests" / "checkpoint_programs"
TRAIN_INTO = PROGRAMS / "train_into.py"

pytestmark = [pytest.mark.slow, support.requires_legacy]

# name: (legacy, migrated, {what the mapping must hold besides the weights: how many rows})
CASES = {
    "canonical": (REPO / "fixtures" / "checkpoint_resume" / "before.py",
                  REPO / "fixtures" / "checkpoint_resume" / "after.py", {"AdagradOptimizer slot accumulator": 2}),
    "cnn_adam": (PROGRAMS / "cnn_adam" / "legacy.py", PROGRAMS / "cnn_adam" / "migrated.py",
                 {"AdamOptimizer slot m": 8, "AdamOptimizer slot v": 8}),
    "batchnorm_momentum": (REPO / "fixtures" / "batchnorm_momentum" / "before.py",
                           REPO / "fixtures" / "batchnorm_momentum" / "after.py",
                           {"MomentumOptimizer slot momentum": 5, "model state (non-trainable)": 2}),
    "dnn_classifier": (REPO / "fixtures" / "canned_dnn_classifier" / "before.py",
                       REPO / "fixtures" / "canned_dnn_classifier" / "after.py",
                       {"AdagradOptimizer slot accumulator": 8}),
    # with a model_dir and MAX_STEPS, for the resumed parity below
    "batchnorm_momentum_dir": (PROGRAMS / "batchnorm_momentum" / "legacy.py",
                               PROGRAMS / "batchnorm_momentum" / "migrated.py",
                               {"MomentumOptimizer slot momentum": 5, "model state (non-trainable)": 2}),
    # a canned DNNClassifier with a model_dir and MAX_STEPS, for the resumed parity below
    "dnn_classifier_dir": (PROGRAMS / "dnn_classifier_dir" / "legacy.py",
                           PROGRAMS / "dnn_classifier_dir" / "migrated.py",
                           {"AdagradOptimizer slot accumulator": 6}),
    # a canned LinearRegressor (TF1) with a model_dir and MAX_STEPS: per-column weights, FtrlOptimizer
    "linear_regressor_dir": (PROGRAMS / "linear_regressor_dir" / "legacy.py",
                             PROGRAMS / "linear_regressor_dir" / "migrated.py",
                             {"FtrlOptimizer slot accum": 6, "FtrlOptimizer slot linear": 6}),
    # wide & deep (TF1) with a model_dir and MAX_STEPS: a vocabulary list and a hash-bucket column,
    # linear (Ftrl) and embedded (Adagrad)
    "wide_deep_dir": (PROGRAMS / "wide_deep_dir" / "legacy.py", PROGRAMS / "wide_deep_dir" / "migrated.py",
                      {"AdagradOptimizer slot accumulator": 8, "FtrlOptimizer slot accum": 4,
                       "FtrlOptimizer slot linear": 4, "global step": 2}),
    # a TF2 canned Estimator: a Keras legacy Ftrl, its slots saved per replica too
    "linear_regressor": (REPO / "fixtures" / "canned_linear_regressor" / "before.py",
                         REPO / "fixtures" / "canned_linear_regressor" / "after.py",
                         {"Ftrl slot accumulator": 5, "Ftrl slot linear": 5}),
    # two optimizers: Adagrad for the DNN, Ftrl for the linear part (the model's linear_optimizer)
    "wide_deep": (REPO / "fixtures" / "canned_wide_deep" / "before.py",
                  REPO / "fixtures" / "canned_wide_deep" / "after.py",
                  {"AdagradOptimizer slot accumulator": 8, "FtrlOptimizer slot accum": 5,
                   "FtrlOptimizer slot linear": 5, "global step": 2}),
}
# Estimator programs whose model_dirs are refused (they are not converted above)
REFUSED = {"partitioned_linear": PROGRAMS / "partitioned_linear" / "legacy.py"}
TARGETS = ["tf215", pytest.param("newest", marks=support.requires_target)]


def python_for(target: str) -> str:
    return support.legacy_python() if target == "tf215" else support.target_python()


def train(legacy: Path, model_dir: Path) -> str:
    """Train the Estimator program into ``model_dir``; its output (the evaluation it prints)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONHASHSEED": "0"}
    env.pop("MAX_STEPS", None)  # each program's own number of steps
    done = subprocess.run([support.legacy_python(), str(TRAIN_INTO), str(legacy), str(model_dir)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("model_dirs")
    made = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = root / name
            get.printed[name] = train(CASES[name][0] if name in CASES else REFUSED[name], made[name])
        return made[name]

    get.printed = {}  # what each training run printed: its evaluation of the model_dir
    return get


@pytest.fixture(scope="module")
def conversions(model_dirs, tmp_path_factory):
    """``conversions(name, target)``: (CheckpointResult, out) of `e2k checkpoint` on the case's
    trained model_dir for ``target``, converted once per module. Each test that runs a program
    in the converted directory runs it in a copy: ``out`` stays as the conversion wrote it."""
    root = tmp_path_factory.mktemp("converted")
    made = {}

    def get(name: str, target: str):
        if (name, target) not in made:
            legacy, migrated, _ = CASES[name]
            out = root / f"{name}-{target}" / "new"
            made[name, target] = convert_checkpoint(
                legacy, migrated, model_dirs(name), out, legacy_python=support.legacy_python(),
                target_python=python_for(target)), out
        return made[name, target]

    return get


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(CASES))
def test_a_trained_model_dir_converts_and_the_restored_models_agree(conversions, name, target):
    expected = CASES[name][2]
    result, out = conversions(name, target)
    report = result.report()
    assert result.verdict == "written" and result.exit_code == 0, report
    step = int(Path(result.checkpoint).name.rsplit("-", 1)[1])
    assert result.global_step == step > 0
    files = ["checkpoint", f"ckpt-{step}.index", f"ckpt-{step}.data-00000-of-00001"]
    if "model.weights.h5" in result.written:
        files.append("model.weights.h5")
    else:  # Keras 2 cannot load back the metrics a model holds as attributes: said, not written
        assert name.startswith("wide_deep") and target == "tf215", report
        assert "no model.weights.h5 written" in report
    assert sorted(p.name for p in out.iterdir()) == sorted(files)
    whats = [m["what"].split(" (x ")[0] for m in result.mapping]  # less the momentum's scale
    if "MomentumOptimizer slot momentum" in expected:  # Keras's SGD keeps -lr * TF1's accumulation
        assert all(m["what"].endswith(": minus the learning rate)") for m in result.mapping
                   if m["what"].startswith("MomentumOptimizer")), report
    assert whats.count("weight") >= 2, report
    for what, count in {"global step": 1, **expected}.items():
        assert whats.count(what) == count, (what, report)
    # every mapped value has a row, and nothing else is there
    assert len(whats) == whats.count("weight") + sum({"global step": 1, **expected}.values()) + sum(
        w.startswith("checked: ") for w in whats), report
    # the proof: predictions (or, for a model_fn without PREDICT mode, the evaluation) within 1e-6
    assert result.predictions or name == "canonical", report
    assert all(row.ok and row.relative <= 1e-6 for row in result.predictions), report
    assert result.metrics and all(m.passed is not False for m in result.metrics), report
    # the loss, or where a summed eval loss depends on the batching, the mean over the examples
    assert any(m.name in ("loss", "average_loss") and m.passed for m in result.metrics), report
    if name == "cnn_adam":  # beta1_power and beta2_power checked against the global step
        assert sum(w.startswith("checked: 0.9^") or w.startswith("checked: 0.999^") for w in whats) == 2, report


@pytest.mark.parametrize("target", TARGETS)
def test_the_migrated_program_restores_the_checkpoint_from_its_model_dir(model_dirs, conversions, tmp_path, target):
    """The canonical fixture reads MODEL_DIR: pointed at the converted directory, it trains no
    step (max_steps is reached at the Estimator's global step) and evaluates the Estimator's model."""
    migrated = CASES["canonical"][1]
    result, converted = conversions("canonical", target)
    assert result.exit_code == 0, result.report()
    out = tmp_path / "new"
    shutil.copytree(converted, out)  # the conversion's own directory, as written, for the other tests
    expected = model_dirs.printed["canonical"]  # the Estimator program's evaluation of its model_dir
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "MODEL_DIR": str(out)}
    done = subprocess.run([python_for(target), str(migrated)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    legacy_loss = float(expected.strip().splitlines()[-1].split()[-1])
    migrated_loss = float(done.stdout.strip().splitlines()[-1].split()[-1])
    assert abs(migrated_loss - legacy_loss) <= 1e-6 * abs(legacy_loss)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("ckpt-")) == [
        "ckpt-6.data-00000-of-00001", "ckpt-6.index"]  # no step trained, nothing saved


def run_printing_loss(python: str, program: Path, model_dir: Path, max_steps: int) -> float:
    """Run a program with MODEL_DIR and MAX_STEPS; the eval loss it prints last."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONHASHSEED": "0", "MODEL_DIR": str(model_dir),
           "MAX_STEPS": str(max_steps)}
    done = subprocess.run([python, str(program)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return float(re.findall(r"'loss': (?:np\.float32\()?([-0-9.e]+)", done.stdout)[-1])


@pytest.fixture(scope="module")
def estimator_resumed(model_dirs, tmp_path_factory):
    """The Estimator's side of the test below, the same for every target: (its eval loss at
    step 6, resumed from a copy of its model_dir with nothing left to train; its eval loss after
    resuming to step 9; that copy, now at step 9)."""
    legacy = CASES["cnn_adam"][0]
    old = tmp_path_factory.mktemp("estimator_resumed") / "old"
    shutil.copytree(model_dirs("cnn_adam"), old)
    at_step_6 = run_printing_loss(support.legacy_python(), legacy, old, 6)  # nothing left to train
    estimator = run_printing_loss(support.legacy_python(), legacy, old, 9)
    return at_step_6, estimator, old


@pytest.mark.parametrize("target", TARGETS)
def test_training_resumed_from_the_converted_dir_goes_on_as_the_estimator(conversions, estimator_resumed, tmp_path,
                                                                          target):
    """Done-when (b), by hand: the Estimator resumed from its model_dir (step 6) and the migrated
    program resumed from the converted one both train steps 7..9 (Adam: the slots and the step
    count matter) and evaluate the same."""
    migrated = CASES["cnn_adam"][1]
    result, converted = conversions("cnn_adam", target)  # converted from the model_dir at step 6
    assert result.exit_code == 0, result.report()
    out = tmp_path / "new"
    shutil.copytree(converted, out)
    at_step_6, estimator, old = estimator_resumed
    keras = run_printing_loss(python_for(target), migrated, out, 9)
    assert abs(keras - estimator) <= 1e-5 * abs(estimator), (keras, estimator)
    assert abs(estimator - at_step_6) > 1e-3  # three steps did train
    assert (out / "ckpt-9.index").exists() and (old / "model.ckpt-9.index").exists()


#: The programs resumed in parity below: (the step their model_dir was trained to, the step they resume to).
RESUMED = {"cnn_adam": (6, 9), "batchnorm_momentum_dir": (8, 12), "dnn_classifier_dir": (6, 9),
           "linear_regressor_dir": (6, 9), "wide_deep_dir": (6, 9)}
#: Those with a migration that restores the weights alone (PROGRAMS/<name>/wrong/weights_only_restore.py).
WEIGHTS_ONLY = ["cnn_adam", "linear_regressor_dir"]


def _conversion_key(legacy, migrated, model_dir, options: dict):
    """What a conversion's output depends on, or None for a call with options the key does not
    know (it is then run, not reused): the programs, the model_dir, both interpreters, the
    replicas, the seed and the tolerance. ``timeout`` only decides whether it finishes;
    ``force`` only whether an existing ``out`` may be replaced (a call into one never reuses)."""
    from estimator2keras.checkpoint._convert import DEFAULT_RTOL
    from estimator2keras.parity._runner import resolve_python

    options = dict(options)
    options.pop("timeout", None)
    options.pop("force", None)
    key = (Path(legacy).resolve(), Path(migrated).resolve(), Path(model_dir).resolve(),
           resolve_python(options.pop("legacy_python", None)), resolve_python(options.pop("target_python", None)),
           options.pop("replicas", 2), options.pop("seed", 0), options.pop("rtol", DEFAULT_RTOL))
    return None if options else key


@pytest.fixture(scope="module")
def resumed_parity(model_dirs, conversions):
    """``resumed_parity(name)``: {"tf215" | "newest" | "weights_only": ParityResult} of `e2k parity
    --from-checkpoint`, one legacy run per program for its migration on TF 2.15, on the newest TF
    (with E2K_TARGET_PYTHON) and, where it has one, its weights-only migration (on TF 2.15).

    envelope="when-needed": a run with a wrong migration (broken) measures the envelope, as
    envelope=True does, and so gives the same results; one where every migration agrees within
    the tolerances an envelope only widens skips it (the verdict is the same either way:
    estimator2keras.parity._runner.envelope_cannot_change_verdict).

    Parity converts the model_dir for each migration with convert_checkpoint; where that call is
    one ``conversions`` made (the same programs, model_dir, interpreters, replicas, seed and
    tolerance: the case's own migration, on either TF), its output is copied into the directory
    parity asked for instead of being made a second time. Any other call (the weights-only
    migration, other options, an ``out`` that exists) runs convert_checkpoint itself."""
    import dataclasses

    import estimator2keras.checkpoint as checkpoint_api
    from estimator2keras.parity._runner import WHEN_NEEDED, run_parity_many

    convert = checkpoint_api.convert_checkpoint
    made, known = {}, {}

    def convert_once(legacy, migrated, model_dir, out, **options):
        name_target = known.get(_conversion_key(legacy, migrated, model_dir, options))
        if name_target is None or Path(out).exists():
            return convert(legacy, migrated, model_dir, out, **options)
        result, converted = conversions(*name_target)
        if converted.exists():
            shutil.copytree(converted, out)
        return dataclasses.replace(result, out=os.fspath(out))

    def get(name: str) -> dict:
        if name not in made:
            legacy, migrated, _ = CASES[name]
            keys, candidates = ["tf215"], [(migrated, python_for("tf215"))]
            if support.target_python() is not None:
                keys.append("newest")
                candidates.append((migrated, python_for("newest")))
            if name in WEIGHTS_ONLY:
                keys.append("weights_only")
                candidates.append(PROGRAMS / name / "wrong" / "weights_only_restore.py")
            old = model_dirs(name)  # trained to step RESUMED[name][0]
            for target in (key for key in keys if key in ("tf215", "newest")):
                known[_conversion_key(legacy, migrated, old, {"legacy_python": support.legacy_python(),
                                                              "target_python": python_for(target)})] = name, target
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("MAX_STEPS", str(RESUMED[name][1]))
                patch.setattr(checkpoint_api, "convert_checkpoint", convert_once)
                made[name] = dict(zip(keys, run_parity_many(legacy, candidates, from_checkpoint=old,
                                                            envelope=WHEN_NEEDED)))
        return made[name]

    return get


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, trained, resumed", [(name, *steps) for name, steps in RESUMED.items()])
def test_parity_from_checkpoint_resumes_both_programs(resumed_parity, target, name, trained, resumed):
    """`e2k parity --from-checkpoint`: the Estimator resumes from a copy of its model_dir, the
    migrated program from it converted (its ModelDirCheckpoints restores it), both train the
    steps left (Adam's moments; batch norm's moving statistics and Momentum's accumulators;
    Ftrl's accumulators and linear terms; wide & deep's two optimizers), and parity holds step
    by step."""
    result = resumed_parity(name)[target]
    report = result.report()
    assert len(result.steps) == resumed - trained, report  # the steps left, on both sides
    assert all(row.passed for row in result.steps) and all(row.passed for row in result.weights), report
    assert "from_checkpoint" in result.settings
    if name == "batchnorm_momentum_dir":
        # parity's known difference (docs/parity.md): right after training Keras evaluates each
        # replica with its own moving statistics, the Estimator with their mean from a checkpoint
        assert result.verdict == "parity" or any("evaluates each replica with its own copy" in h for h in result.hints), \
            report
    else:
        assert result.verdict == "parity", report


@pytest.mark.parametrize("name", WEIGHTS_ONLY)
def test_parity_from_checkpoint_catches_a_program_that_restores_the_weights_only(resumed_parity, name):
    """Its model_dir callback loads the weights file, not the optimizer's slots and step count
    (Adam's moments; Ftrl's accumulators and linear terms): the first resumed step agrees (same
    weights), the second does not."""
    result = resumed_parity(name)["weights_only"]  # resumed from step 6 to 9
    assert result.verdict == "broken", result.report()
    assert result.steps[0].passed and not result.steps[1].passed, result.report()


def test_one_layer_wider_is_refused_with_both_tables_and_nothing_written(model_dirs, tmp_path, capsys):
    from estimator2keras.cli import main

    legacy = CASES["cnn_adam"][0]
    out = tmp_path / "new"
    code = main(["checkpoint", str(legacy), str(PROGRAMS / "cnn_adam" / "wrong" / "wider_dense.py"),
                 "--model-dir", str(model_dirs("cnn_adam")), "--out", str(out)])
    text = capsys.readouterr().err
    assert code == 1, text
    assert "checkpoint refused" in text and "trainable variables do not match" in text
    assert "dense/kernel [32x16]" in text and "model/dense/kernel [32x24]" in text  # both tables, side by side
    assert "<- first mismatch" in text
    assert not out.exists()


def test_partitioned_variables_are_refused_each_named_with_its_parts(model_dirs, tmp_path):
    """A LinearRegressor(partitioner=fixed_size_partitioner(2)) saved each column's weights in
    slices; the migrated model has one variable per column: refused before the migrated
    program runs, each partitioned variable named with its full shape and its parts."""
    legacy, migrated = REFUSED["partitioned_linear"], CASES["linear_regressor_dir"][1]
    out = tmp_path / "new"
    result = convert_checkpoint(legacy, migrated, model_dirs("partitioned_linear"), out)
    assert result.verdict == "refused" and result.exit_code == 1, result.report()
    assert "6 partitioned variable(s) cannot be carried over" in result.reason, result.reason
    # 4 color ids (3 words, 1 out-of-vocabulary bucket) in two slices of 2; 3 length buckets in 2 + 1
    assert "linear/linear_model/color/weights [4, 1] in 2 parts (part_0 [2, 1], part_1 [2, 1])" in result.reason
    assert "linear/linear_model/length_bucketized/weights [3, 1] in 2 parts (part_0 [2, 1], part_1 [1, 1])" \
        in result.reason
    assert "no counterpart" not in result.reason  # the parts' own keys (slots) are not listed again
    assert not result.mapping and not result.predictions  # the migrated program never ran
    assert not out.exists()


def test_a_migration_that_hashes_ids_otherwise_is_refused_naming_the_hashed_columns(model_dirs, tmp_path):
    """Its hash-bucket column hashes with a salt: the weights pair and are copied row for row, but
    the same jobs select other rows. The proof catches it, and the report names the Estimator's
    hashed columns and the weights whose rows they select (not the vocabulary list's single
    out-of-vocabulary bucket, which any hash selects alike)."""
    legacy = CASES["wide_deep_dir"][0]
    out = tmp_path / "new"
    result = convert_checkpoint(legacy, PROGRAMS / "wide_deep_dir" / "wrong" / "salted_hashing.py",
                                model_dirs("wide_deep_dir"), out)
    report = result.report()
    assert result.verdict == "refused" and result.exit_code == 1, report
    assert "the restored models predict differently" in result.reason, report
    assert "the Estimator hashed the ids of job, job_embedding into weight rows" in result.reason, report
    hashed = [line.strip() for line in (result.detail or "").splitlines() if line.startswith("  ")]
    assert hashed == [
        "job: FarmHash64 (tf.strings.to_hash_bucket_fast) into 8 buckets -> rows of linear/linear_model/job/weights "
        "[8, 1]",
        "job_embedding: FarmHash64 (tf.strings.to_hash_bucket_fast) into 8 buckets -> rows of "
        "dnn/input_from_feature_columns/input_layer/job_embedding/embedding_weights [8, 2]"], report
    assert not out.exists()


def test_a_checkpoint_of_another_program_is_exit_2_naming_a_variable(model_dirs, tmp_path):
    legacy, migrated, _ = CASES["canonical"]
    result = convert_checkpoint(legacy, migrated, model_dirs("cnn_adam"), tmp_path / "new")
    assert result.exit_code == 2, result.report()
    assert "was not written by before.py" in result.reason and "not found in checkpoint" in result.reason
    assert not (tmp_path / "new").exists()


def test_force_replaces_an_earlier_checkpoint(model_dirs, tmp_path):
    legacy, migrated, _ = CASES["canonical"]
    out = tmp_path / "new"
    out.mkdir()
    (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
    (out / "ckpt-2.index").write_bytes(b"")
    (out / "notes.txt").write_text("mine")
    result = convert_checkpoint(legacy, migrated, model_dirs("canonical"), out, force=True)
    assert result.exit_code == 0, result.report()
    assert not (out / "ckpt-2.index").exists() and (out / "notes.txt").read_text() == "mine"
    assert 'model_checkpoint_path: "ckpt-6"' in (out / "checkpoint").read_text()
