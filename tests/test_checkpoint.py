"""`e2k checkpoint`: bad input is one clear line, exit 2, nothing written (fast: no program runs
TensorFlow here, except the interpreter-without-TensorFlow case, which fails at the import);
the prediction comparison that proves a conversion."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from estimator2keras.checkpoint import convert_checkpoint
from estimator2keras.checkpoint._convert import compare_predictions, latest_checkpoint
from estimator2keras.cli import main

REPO = Path(__file__).resolve().parents[1]
LEGACY = REPO / "fixtures" / "checkpoint_resume" / "before.py"
MIGRATED = REPO / "fixtures" / "checkpoint_resume" / "after.py"


def fake_model_dir(path: Path, step: int = 6) -> Path:
    """A model_dir whose `checkpoint` file names an existing index (its contents are never read
    by the checks below)."""
    path.mkdir()
    (path / f"model.ckpt-{step}.index").write_bytes(b"")
    (path / f"model.ckpt-{step}.data-00000-of-00001").write_bytes(b"")
    (path / "checkpoint").write_text(f'model_checkpoint_path: "model.ckpt-{step}"\n'
                                     f'all_model_checkpoint_paths: "model.ckpt-{step}"\n')
    return path


def run_cli(capsys, *args) -> tuple[int, str]:
    code = main(["checkpoint", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_latest_checkpoint_reads_the_state_file(tmp_path):
    model_dir = fake_model_dir(tmp_path / "old", step=12)
    assert latest_checkpoint(model_dir) == str(model_dir / "model.ckpt-12")
    (model_dir / "model.ckpt-12.index").unlink()
    assert latest_checkpoint(model_dir) is None  # named but gone: no checkpoint
    assert latest_checkpoint(tmp_path) is None


def test_a_model_dir_without_checkpoint_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    code, text = run_cli(capsys, LEGACY, MIGRATED, "--model-dir", tmp_path / "old", "--out", tmp_path / "new")
    assert code == 2
    assert text.strip().count("\n") == 0 and "holds no checkpoint" in text, text
    assert not (tmp_path / "new").exists()


def test_an_out_holding_a_checkpoint_is_refused_without_force(tmp_path, capsys):
    old = fake_model_dir(tmp_path / "old")
    out = tmp_path / "new"
    out.mkdir()
    (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
    before = sorted(p.name for p in out.iterdir())
    code, text = run_cli(capsys, LEGACY, MIGRATED, "--model-dir", old, "--out", out)
    assert code == 2 and "already holds a checkpoint; pass --force" in text, text
    assert text.strip().count("\n") == 0
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize("which", ["legacy", "migrated"])
def test_a_missing_program_is_one_line_exit_2(tmp_path, capsys, which):
    old = fake_model_dir(tmp_path / "old")
    legacy, migrated = (tmp_path / "nope.py", MIGRATED) if which == "legacy" else (LEGACY, tmp_path / "nope.py")
    code, text = run_cli(capsys, legacy, migrated, "--model-dir", old, "--out", tmp_path / "new")
    assert code == 2 and "no such file" in text and "nope.py" in text, text
    assert not (tmp_path / "new").exists()


def test_out_cannot_be_the_model_dir(tmp_path, capsys):
    old = fake_model_dir(tmp_path / "old")
    code, text = run_cli(capsys, LEGACY, MIGRATED, "--model-dir", old, "--out", old, "--force")
    assert code == 2 and "another directory" in text, text


def test_an_interpreter_without_tensorflow_is_one_line_exit_2(tmp_path, capsys):
    bare = Path("/usr/bin/python3")
    if not bare.exists() or bare.resolve() == Path(sys.executable).resolve():
        pytest.skip("no interpreter without TensorFlow at /usr/bin/python3")
    import subprocess

    if subprocess.run([str(bare), "-c", "import tensorflow"], capture_output=True).returncode == 0:
        pytest.skip("/usr/bin/python3 has TensorFlow")
    old = fake_model_dir(tmp_path / "old")
    code, text = run_cli(capsys, LEGACY, MIGRATED, "--model-dir", old, "--out", tmp_path / "new",
                         "--legacy-python", bare)
    assert code == 2 and "cannot import tensorflow" in text, text
    assert not (tmp_path / "new").exists()


def test_no_such_interpreter_is_one_line_exit_2(tmp_path, capsys):
    old = fake_model_dir(tmp_path / "old")
    code, text = run_cli(capsys, LEGACY, MIGRATED, "--model-dir", old, "--out", tmp_path / "new",
                         "--target-python", tmp_path / "python9")
    assert code == 2 and "no such Python interpreter" in text, text


def test_the_library_never_raises_for_bad_input(tmp_path):
    result = convert_checkpoint(LEGACY, MIGRATED, tmp_path / "missing", tmp_path / "new")
    assert result.verdict == "error" and result.exit_code == 2 and "no such directory" in result.reason


def test_predictions_pair_by_key_and_fail_beyond_rtol():
    logits = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    rows, problem = compare_predictions({"logits": logits, "classes": np.array(["0", "1"])},
                                        {"logits": logits * (1 + 5e-7), "classes": np.array(["0", "1"])}, 1e-6)
    assert problem is None and {r.legacy_key for r in rows} == {"logits", "classes"} and all(r.ok for r in rows)
    rows, problem = compare_predictions({"logits": logits}, {"logits": logits * (1 + 1e-5)}, 1e-6)
    assert problem and "logits" in problem and not rows[0].ok
    rows, problem = compare_predictions({"classes": np.array(["0", "1"])}, {"classes": np.array(["0", "0"])}, 1e-6)
    assert problem and not rows[0].ok


def test_a_lone_output_pairs_with_the_estimators_output_of_its_shape():
    logits = np.arange(6, dtype=np.float32).reshape(3, 2)
    rows, problem = compare_predictions({"class": np.array([1, 1, 1]), "logits": logits}, {"": logits}, 1e-6)
    assert problem is None and [(r.legacy_key, r.migrated_key) for r in rows] == [("logits", "")]
    rows, problem = compare_predictions({"value": logits}, {"other": logits[:, :1]}, 1e-6)
    assert problem and "no prediction output pairs up" in problem


def test_partitioned_variables_are_named_with_their_parts_in_order():
    from estimator2keras.checkpoint._unmapped import is_part_key, partitioned

    variables = [{"name": f"dnn/input_layer/city_embedding/embedding_weights/part_{i}", "shape": [2, 3]}
                 for i in (10, 2, 0, 1, 3, 4, 5, 6, 7, 8, 9)]
    variables += [{"name": "dnn/hiddenlayer_0/kernel", "shape": [4, 8]},
                  {"name": "linear/linear_model/job/weights/part_0", "shape": [3, 1]},
                  {"name": "linear/linear_model/job/weights/part_1", "shape": [2, 1]}]
    keys = [["dnn/input_layer/city_embedding/embedding_weights", [22, 3]], ["dnn/hiddenlayer_0/kernel", [4, 8]]]
    parts, refusals = partitioned(variables, keys)
    assert list(parts) == ["dnn/input_layer/city_embedding/embedding_weights", "linear/linear_model/job/weights"]
    assert [v["name"].rsplit("_", 1)[1] for v in parts["dnn/input_layer/city_embedding/embedding_weights"]] == [
        str(i) for i in range(11)]
    [refusal] = refusals
    assert refusal.startswith("2 partitioned variable(s) cannot be carried over: "
                              "dnn/input_layer/city_embedding/embedding_weights [22, 3] in 11 parts (part_0 [2, 3], "
                              "part_1 [2, 3], part_2 [2, 3]")
    # no whole-variable key saved: the shape the parts make along the axis where they differ
    assert "linear/linear_model/job/weights [5, 1] in 2 parts (part_0 [3, 1], part_1 [2, 1])" in refusal
    assert "hiddenlayer" not in refusal
    assert is_part_key("linear/linear_model/job/weights/part_1/Ftrl_1", set(parts))
    assert is_part_key("linear/linear_model/job/weights", set(parts))
    assert not is_part_key("linear/linear_model/job/weights_2", set(parts))
    assert partitioned([{"name": "dense/kernel", "shape": [2, 1]}], []) == ({}, [])


def test_hashed_ids_are_traced_to_the_weights_whose_rows_they_select():
    """Ops as a canned wide & deep model's graph names them (two replicas)."""
    from estimator2keras.checkpoint._unmapped import hashed_weights

    ops = []
    for replica in ("", "replica_1/"):
        ops += [
            ["StringToHashBucketFast", f"{replica}dnn/input_from_feature_columns/input_layer/city_embedding/"
                                       "hash_table_Lookup/hash_bucket", 1],  # one out-of-vocabulary bucket
            ["StringToHashBucketFast", f"{replica}dnn/input_from_feature_columns/input_layer/job_embedding/lookup", 8],
            ["SparseCross", f"{replica}linear/linear_model/linear_model/linear_model/age_X_city/SparseCross", 16],
            ["StringToHashBucketFast", f"{replica}linear/linear_model/linear_model/linear_model/job/lookup", 8],
        ]
    variables = [{"name": n, "shape": s} for n, s in [
        ("dnn/hiddenlayer_0/kernel", [7, 8]),
        ("dnn/input_from_feature_columns/input_layer/city_embedding/embedding_weights", [4, 3]),
        ("dnn/input_from_feature_columns/input_layer/job_embedding/embedding_weights", [8, 2]),
        ("linear/linear_model/age_X_city/weights", [16, 1]),
        ("linear/linear_model/city/weights", [4, 1]),
        ("linear/linear_model/job/weights", [8, 1]),
        ("linear/linear_model/bias_weights", [1]),  # in linear_model/, a scope of every column's op
    ]]
    assert hashed_weights(ops, variables) == [
        "age_X_city: FingerprintCat64 of the crossed values (crossed_column) into 16 buckets -> rows of "
        "linear/linear_model/age_X_city/weights [16, 1]",
        "job: FarmHash64 (tf.strings.to_hash_bucket_fast) into 8 buckets -> rows of "
        "linear/linear_model/job/weights [8, 1]",
        "job_embedding: FarmHash64 (tf.strings.to_hash_bucket_fast) into 8 buckets -> rows of "
        "dnn/input_from_feature_columns/input_layer/job_embedding/embedding_weights [8, 2]",
    ]
    assert hashed_weights([], variables) == []


def test_saturated_probabilities_are_judged_on_their_own_scale():
    """Logits far below 0 that agree to float32 rounding give sigmoids whose largest value is
    tiny: judged against 1, not against that value. Logits are still judged relatively, and a
    probability off by more than rtol still fails."""
    logits = np.array([[-41.25], [-12.5], [-8.25]], np.float32)
    nudged = np.nextafter(logits, np.float32(0))  # one float32 ulp apart
    sigmoid = 1 / (1 + np.exp(-logits.astype(np.float64)))
    theirs = {"logits": logits, "logistic": sigmoid.astype(np.float32)}
    mine = {"logits": nudged, "logistic": (1 / (1 + np.exp(-nudged.astype(np.float64)))).astype(np.float32)}
    assert float(np.max(np.abs(mine["logistic"] - theirs["logistic"])) / np.max(theirs["logistic"])) > 1e-6
    rows, problem = compare_predictions(theirs, mine, 1e-6)
    assert problem is None and all(r.ok for r in rows), rows
    rows, problem = compare_predictions(theirs, {**mine, "logistic": theirs["logistic"] + 2e-6}, 1e-6)
    assert problem and "logistic" in problem and "logits" not in problem
    rows, problem = compare_predictions(theirs, {**mine, "logits": logits * (1 + 1e-5)}, 1e-6)
    assert problem and "logits" in problem


def test_logits_near_zero_are_judged_on_a_scale_of_at_least_one():
    """Logits of at most 0.41 that agree to float32 rounding of the sums that made them
    (5.7e-7 apart: a DNNClassifier's, its probabilities 6e-8 apart) pass; 2e-6 apart fails."""
    logits = np.array([[0.41, -0.2, 0.05], [0.1, 0.3, -0.4]], np.float32)
    rows, problem = compare_predictions({"logits": logits}, {"logits": logits + np.float32(5.7e-7)}, 1e-6)
    assert problem is None and all(r.ok for r in rows), rows
    rows, problem = compare_predictions({"logits": logits}, {"logits": logits + np.float32(2e-6)}, 1e-6)
    assert problem and "logits" in problem
