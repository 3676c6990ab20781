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
