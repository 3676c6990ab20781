"""The `e2k rewrite` / `rules` / `explain` command lines, as a user runs them."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from estimator2keras.cli import main

CANONICAL = FIXTURES / "seed_mirrored_linear" / "before.py"
CONVERTED = FIXTURES / "seed_mirrored_linear" / "after.py"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small project: one Estimator program, one Keras program, one other module."""
    (tmp_path / "pkg").mkdir()
    shutil.copy(CANONICAL, tmp_path / "pkg" / "train.py")
    shutil.copy(CONVERTED, tmp_path / "pkg" / "keras_train.py")
    (tmp_path / "pkg" / "util.py").write_text("def helper():\n    return 1\n")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_check_exits_1_on_estimator_code_and_0_on_keras_code(tree, capsys):
    before = snapshot(tree)
    assert main(["rewrite", "--check", str(tree / "pkg" / "train.py")]) == 1
    assert main(["rewrite", "--check", str(tree / "pkg" / "keras_train.py")]) == 0
    assert snapshot(tree) == before
    out = capsys.readouterr()
    assert "train.py: would be converted" in out.out


def test_diff_shows_the_keras_program_and_writes_nothing(tree, capsys):
    before = snapshot(tree)
    assert main(["rewrite", "--diff", str(tree)]) == 1
    out = capsys.readouterr().out
    assert "+  model = _build_model()" in out and "-estimator = tf1.estimator.Estimator" in out
    assert snapshot(tree) == before


def test_rewrite_in_place_converts_and_keeps_the_rest(tree, capsys):
    util = (tree / "pkg" / "util.py").read_bytes()
    os.chmod(tree / "pkg" / "train.py", 0o640)
    assert main(["rewrite", str(tree)]) == 1
    assert (tree / "pkg" / "train.py").read_bytes() == CONVERTED.read_bytes()
    assert (tree / "pkg" / "util.py").read_bytes() == util
    assert (tree / "pkg" / "train.py").stat().st_mode & 0o777 == 0o640
    assert not list(tree.rglob("*.e2k-tmp"))
    err = capsys.readouterr().err
    assert "1 converted" in err and "2 unchanged" in err
    assert main(["rewrite", "--check", str(tree)]) == 0


def test_out_mirrors_the_tree_and_leaves_the_input_alone(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    before = snapshot(tree)
    assert main(["rewrite", str(tree), "--out", str(out)]) == 1
    assert snapshot(tree) == before
    assert (out / "pkg" / "train.py").read_bytes() == CONVERTED.read_bytes()
    assert (out / "pkg" / "util.py").read_bytes() == before["pkg/util.py"]


def test_out_refuses_two_inputs_that_would_write_the_same_file(tree, tmp_path_factory, capsys):
    """`e2k rewrite pkg_a pkg_b --out DIR` with trainer/train.py in both: the second would
    overwrite the first in DIR, so nothing is written and the error names both."""
    other = tmp_path_factory.mktemp("other")
    (other / "pkg").mkdir()
    (other / "pkg" / "train.py").write_bytes((tree / "pkg" / "train.py").read_bytes())
    out = tmp_path_factory.mktemp("out")
    assert main(["rewrite", str(tree), str(other), "--out", str(out)]) == 2
    assert "would get pkg/train.py from both" in capsys.readouterr().err
    assert not any(out.iterdir())


def test_report_lists_every_file_and_finding(tree, tmp_path_factory):
    (tree / "pkg" / "broken.py").write_text("estimator = (\n")
    report = tmp_path_factory.mktemp("r") / "report.json"
    assert main(["rewrite", "--check", str(tree), "--report", str(report)]) == 2
    data = json.loads(report.read_text())
    statuses = {Path(f["path"]).name: f["status"] for f in data["files"]}
    assert statuses == {"train.py": "converted", "keras_train.py": "unchanged", "util.py": "unchanged", "broken.py": "error"}
    assert data["summary"]["error"] == 1
    train = next(f for f in data["files"] if f["path"].endswith("/train.py"))
    assert {"E2K001", "E2K002", "E2K601", "E2K602"} <= {f["code"] for f in train["findings"]}
    assert all({"line", "col", "code", "message", "kind"} <= set(f) for f in train["findings"])


def test_syntax_error_file_is_reported_others_still_converted(tree, capsys):
    broken = tree / "pkg" / "broken.py"
    broken.write_bytes(b"import tensorflow as tf\nestimator = tf.estimator.Estimator(\n")
    assert main(["rewrite", str(tree)]) == 2
    assert broken.read_bytes() == b"import tensorflow as tf\nestimator = tf.estimator.Estimator(\n"
    assert (tree / "pkg" / "train.py").read_bytes() == CONVERTED.read_bytes()
    assert f"{broken}:2:" in capsys.readouterr().out


def test_parallel_and_serial_runs_agree(tree, tmp_path_factory):
    for i in range(6):
        shutil.copy(CANONICAL, tree / "pkg" / f"copy{i}.py")
    serial, parallel = tmp_path_factory.mktemp("serial"), tmp_path_factory.mktemp("parallel")
    assert main(["rewrite", str(tree), "--out", str(serial), "-j", "1"]) == 1
    assert main(["rewrite", str(tree), "--out", str(parallel), "-j", "2"]) == 1
    assert snapshot(serial) == snapshot(parallel)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["rewrite", "no/such/path.py"], "no/such/path.py: no such file or directory"),
        (["rewrite", "-j", "0", "."], "-j/--jobs must be at least 1"),
        (["rewrite", "--select", "E2K8", "."], "no rule has a code matching 'E2K8'"),
        (["rewrite", "--rules", "no_such_module", "."], "cannot import rule module 'no_such_module'"),
        (["rewrite", "--out", "x", "--check", "."], "cannot be combined"),
        (["explain", "E2K777"], "no rule 'E2K777'"),
    ],
)
def test_user_mistakes_get_one_clear_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_tree_without_python_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("estimator")
    assert main(["rewrite", str(tmp_path)]) == 2
    assert "no Python files found" in capsys.readouterr().err


def test_read_only_file_is_reported_and_not_written(tree, capsys, monkeypatch):
    target = tree / "pkg" / "train.py"
    os.chmod(target, 0o444)
    # As a user who may not write the file (root may: simulated for it).
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **kw: False if Path(p) == target and m == os.W_OK else real_access(p, m, **kw))
    assert main(["rewrite", str(tree)]) == 2
    assert target.read_bytes() == CANONICAL.read_bytes()
    assert "read-only" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may write a read-only file")
def test_read_only_file_is_written_where_the_process_may_write_it(tree):
    """As formatters do: root writes a read-only file (a copy from read-only media), mode kept."""
    target = tree / "pkg" / "train.py"
    os.chmod(target, 0o444)
    assert main(["rewrite", str(tree)]) == 1
    assert target.read_bytes() != CANONICAL.read_bytes()
    assert os.stat(target).st_mode & 0o777 == 0o444


def test_skipped_directories_and_symlinks(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    shutil.copy(CANONICAL, outside / "elsewhere.py")
    for skipped in (".hidden", "venv", "build", "__pycache__"):
        (tree / skipped).mkdir()
        shutil.copy(CANONICAL, tree / skipped / "x.py")
    (tree / "myenv").mkdir()
    (tree / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    shutil.copy(CANONICAL, tree / "myenv" / "x.py")
    (tree / "pkg" / "gen.py").write_bytes(b"# @generated\n" + CANONICAL.read_bytes())
    os.symlink(outside / "elsewhere.py", tree / "pkg" / "link_out.py")
    os.symlink(tree / "pkg" / "train.py", tree / "pkg" / "link_in.py")
    report = tmp_path_factory.mktemp("r") / "r.json"
    main(["rewrite", "--check", str(tree), "--report", str(report)])
    names = sorted(Path(f["path"]).relative_to(tree).as_posix() for f in json.loads(report.read_text())["files"])
    assert names == ["pkg/keras_train.py", "pkg/train.py", "pkg/util.py"]


def test_rules_and_explain(capsys):
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    assert "E2K001" in listing and "E2K602" in listing
    assert main(["explain", "e2k602"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("# E2K602") and "## Why" in page and "num_replicas_in_sync" in page


def test_console_script_runs(tree):
    exe = Path(sys.executable).with_name("e2k")
    proc = subprocess.run([str(exe), "rewrite", "--check", str(tree / "pkg" / "train.py")], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "estimator2keras", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("e2k ")


def test_a_written_run_does_not_keep_the_files_in_memory(tree):
    from estimator2keras._runner import RewriteOptions, run

    summary = run([tree], RewriteOptions(write=True, jobs=1))
    train = next(r for r in summary.results if r.path.endswith("/train.py"))
    assert train.changed and train.status == "converted"
    assert all(r.original == b"" and r.new == b"" for r in summary.results)
    checked = run([tree], RewriteOptions(write=False, jobs=1))
    assert all(r.original for r in checked.results), "--check / --diff keep the bytes they show"
