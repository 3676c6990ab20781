"""Bad input and faults: each is reported in one line, the file concerned is left exactly as it
was, and the run goes on with the other files. (What tests/test_engine.py and
tests/test_cli.py already cover is not repeated here.)"""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras import _files
from estimator2keras._engine import rewrite_source
from estimator2keras.cli import main

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_bytes()
CONVERTED = (FIXTURES / "seed_mirrored_linear" / "after.py").read_bytes()


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def e2k(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """The real command line, in its own process (a process pool, signals, exit code)."""
    return subprocess.run([sys.executable, "-m", "estimator2keras", *args], capture_output=True, text=True, env=env, timeout=timeout)


# -- bad input, one file at a time -------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\n\n   \n", id="blank-lines"),
        pytest.param(b"\xef\xbb\xbf", id="bom-only"),
        pytest.param(b"\xef\xbb\xbf# estimator\nx = 1\n", id="bom"),
        pytest.param(b"# estimator\r\nx = 1\r\n\r\ndef f():\r\n    return x\r\n", id="crlf"),
        pytest.param(b"# estimator\nif True:\n\tx = 1\n", id="tabs"),
        pytest.param(b"# estimator\nx = 1", id="no-final-newline"),
        pytest.param(b"# estimator\n\x0c\nx = 1\n", id="form-feed"),
    ],
)
def test_file_with_nothing_to_convert_stays_byte_identical(source, rules):
    result = rewrite_source(source, "a.py", rules)
    assert result.status == "unchanged" and result.new == source


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"import tensorflow as tf  # estimator\nexec 'x = 1'\n", id="exec-statement"),
        pytest.param(b"# estimator\nraise ValueError, \"message\"\n", id="raise-comma"),
        pytest.param(b"# estimator\nx = `1`\n", id="backticks"),
        pytest.param(b"# estimator\nx = 0777\n", id="octal"),
    ],
)
def test_python2_code_is_reported(source, rules):
    result = rewrite_source(source, "py2.py", rules)
    assert result.status == "error" and result.new == source
    assert [f.code for f in result.findings] == ["E2K900"]


def test_nul_bytes_are_reported(rules):
    source = CANONICAL + b"x = 1\x00\n"
    result = rewrite_source(source, "nul.py", rules)
    assert result.status == "error" and result.new == source
    assert result.findings[0].code == "E2K900" and "null bytes" in result.findings[0].message


MODERN = {
    "f-string": 'label = f"{features[0]!r:>{10}} and {\'nested\'}"\n',
    "f-string-3.12-quotes": "label = f\"{eval_labels[0]} {f'{1}'}\"\n",
    "match": "match features:\n    case [first, *rest]:\n        pass\n    case {'k': v}:\n        pass\n    case _:\n        pass\n",
    "walrus": "if (count := len(features)) > 2:\n    print(count)\n",
    "pep695-alias": "type Batch = list[list[float]]\n",
    "pep695-generic-def": "def first[T](items: list[T]) -> T:\n    return items[0]\n",
    "pep695-generic-class": "class Box[T: (int, float)]:\n    value: T\n",
    "except-star": "try:\n    pass\nexcept* ValueError as group:\n    pass\n",
    "positional-only": "def scale(x, /, factor=2, *, bias=0):\n    return x * factor + bias\n",
    "async": "async def stream():\n    async with lock:\n        return [x async for x in source() if await x]\n",
}


@pytest.mark.parametrize("name", MODERN)
def test_modern_syntax_is_converted_around_and_kept_verbatim(name, rules):
    snippet = MODERN[name].encode()
    result = rewrite_source(CANONICAL + b"\n\n" + snippet, "modern.py", rules)
    # libcst 1.9 parses all of these; if one ever cannot, it must be E2K900, never a crash.
    assert result.status == "converted", result.findings
    assert result.new.endswith(snippet)
    cst.parse_module(result.new)
    assert rewrite_source(result.new, "modern.py", rules).new == result.new


# -- symlinks ------------------------------------------------------------------------------
def test_symlinks_are_never_followed_out_of_the_root_nor_processed_twice(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "pkg").mkdir(parents=True)
    outside.mkdir()
    (tree / "pkg" / "train.py").write_bytes(CANONICAL)
    (outside / "theirs.py").write_bytes(CANONICAL)
    os.symlink(outside, tree / "pkg" / "linked_dir")  # a directory outside the root
    os.symlink(outside / "theirs.py", tree / "pkg" / "linked_out.py")  # a file outside
    os.symlink("train.py", tree / "pkg" / "alias.py")  # the same file again, relative
    os.symlink(tree / "pkg", tree / "pkg" / "again")  # the package inside itself
    os.symlink("loop.py", tree / "pkg" / "loop.py")  # a loop
    os.symlink(tree / "pkg" / "missing.py", tree / "pkg" / "dangling.py")
    report = tmp_path / "report.json"

    assert main(["rewrite", str(tree), str(tree / "pkg"), "--report", str(report)]) == 1

    files = [f["path"] for f in json.loads(report.read_text())["files"]]
    assert files == [str(tree / "pkg" / "train.py")]
    assert (tree / "pkg" / "train.py").read_bytes() == CONVERTED
    assert (outside / "theirs.py").read_bytes() == CANONICAL
    assert os.path.islink(tree / "pkg" / "alias.py")  # still a link, to the converted file


def test_out_dir_is_never_written_through_a_symlink_out_of_it(tmp_path, capsys):
    tree, out, outside = tmp_path / "tree", tmp_path / "out", tmp_path / "outside"
    (tree / "sub").mkdir(parents=True)
    outside.mkdir()
    (tree / "train.py").write_bytes(CANONICAL)
    (tree / "sub" / "train.py").write_bytes(CANONICAL)
    (outside / "train.py").write_bytes(b"# not yours\n")
    out.mkdir()
    # Traps left in the output tree: a file and a directory that lead out of it.
    os.symlink(outside / "train.py", out / "train.py")
    os.symlink(outside, out / "sub")

    assert main(["rewrite", str(tree), "--out", str(out)]) == 2

    assert snapshot(outside) == {"train.py": b"# not yours\n"}
    assert (out / "train.py").read_bytes() == CONVERTED and not (out / "train.py").is_symlink()
    umask = os.umask(0)
    os.umask(umask)
    assert (out / "train.py").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0o600
    assert f"cannot write {out / 'sub' / 'train.py'}: {out / 'sub'} leads out of {out} through a symlink" in capsys.readouterr().out


# -- files and directories e2k may not write -----------------------------------------------
def _deny_writes_under(monkeypatch, directory: Path) -> None:
    """Make ``directory`` unwritable the way the OS says it (EACCES on creating a file in it).

    Permission bits do not stop root, and tests may run as root; creating the temporary file
    is the one place atomic_write needs the directory to be writable.
    """
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).resolve() == directory.resolve():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(_files.tempfile, "mkstemp", mkstemp)


def _tree_with_a_locked_directory(root: Path) -> tuple[Path, Path]:
    (root / "locked").mkdir(parents=True)
    (root / "open").mkdir()
    (root / "locked" / "train.py").write_bytes(CANONICAL)
    (root / "open" / "train.py").write_bytes(CANONICAL)
    return root / "locked", root / "open"


def test_unwritable_directory_is_reported_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    locked, opened = _tree_with_a_locked_directory(tmp_path / "tree")
    _deny_writes_under(monkeypatch, locked)

    assert main(["rewrite", str(tmp_path / "tree"), "-j", "2"]) == 2

    assert (locked / "train.py").read_bytes() == CANONICAL
    assert (opened / "train.py").read_bytes() == CONVERTED
    assert sorted(p.name for p in locked.iterdir()) == ["train.py"]  # no temporary file left
    out, err = capsys.readouterr()
    (line,) = [line for line in out.splitlines() if "E2K900" in line]
    assert line == f"{locked / 'train.py'}:1:1: E2K900 cannot write {locked / 'train.py'}: Permission denied"
    assert "1 converted" in err and "1 error" in err and "Traceback" not in out + err


def test_unwritable_out_dir_is_reported_and_the_input_is_untouched(tmp_path, monkeypatch, capsys):
    locked, opened = _tree_with_a_locked_directory(tmp_path / "tree")
    out = tmp_path / "out"
    (out / "locked").mkdir(parents=True)
    _deny_writes_under(monkeypatch, out / "locked")
    before = snapshot(tmp_path / "tree")

    assert main(["rewrite", str(tmp_path / "tree"), "--out", str(out)]) == 2

    assert snapshot(tmp_path / "tree") == before
    assert snapshot(out) == {"open/train.py": CONVERTED}
    assert "cannot write" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not stop root (the test above simulates it)")
def test_unwritable_directory_for_real(tmp_path, capsys):
    locked, opened = _tree_with_a_locked_directory(tmp_path / "tree")
    os.chmod(locked, 0o555)
    try:
        assert main(["rewrite", str(tmp_path / "tree")]) == 2
        assert (locked / "train.py").read_bytes() == CANONICAL
        assert (opened / "train.py").read_bytes() == CONVERTED
    finally:
        os.chmod(locked, 0o755)


def test_unreadable_file_is_reported_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    locked, opened = _tree_with_a_locked_directory(tmp_path / "tree")
    real_read_bytes = Path.read_bytes

    def read_bytes(self):
        if self.parent == locked:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert main(["rewrite", str(tmp_path / "tree"), "-j", "1"]) == 2
    monkeypatch.undo()
    assert (locked / "train.py").read_bytes() == CANONICAL
    assert (opened / "train.py").read_bytes() == CONVERTED
    assert f"{locked / 'train.py'}:1:1: E2K900 cannot read: Permission denied" in capsys.readouterr().out


# -- rules that fail, workers that die ------------------------------------------------------
FAULTY_RULES = '''
import os, signal
import libcst as cst
from estimator2keras import ModuleRule

class Faulty(ModuleRule):
    """Fails on some files, on purpose.

    ## What it does
    Raises on files named raise*.py; kills its own process on files named crash*.py; on
    files named *swallow*.py, sends itself SIGTERM and turns the interruption into another
    error, as libcst's metadata resolution can.

    ## Why
    To test that one bad file costs one file.

    ## Fix safety
    Nothing is changed.
    """

    code = "E2K990"
    summary = "test rule"

    def transform(self, module, ctx):
        name = os.path.basename(ctx.path)
        if name.startswith("raise"):
            raise RuntimeError("boom on " + name)
        if name.startswith("crash"):
            os.kill(os.getpid(), signal.SIGKILL)  # as a segfault in native code would
        if "swallow" in name:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.pause()
            except KeyboardInterrupt:
                raise KeyError("swallowed")
        return module
'''


@pytest.fixture
def faulty_pack(tmp_path) -> dict:
    pack = tmp_path / "packs"
    pack.mkdir()
    (pack / "faulty_rules.py").write_text(textwrap.dedent(FAULTY_RULES))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(pack), os.environ.get("PYTHONPATH", "")])}


def _many(tree: Path, special: str, copies: int = 3) -> None:
    tree.mkdir()
    for i in range(copies):
        (tree / f"train{i}.py").write_bytes(CANONICAL)
    (tree / special).write_bytes(CANONICAL)


@pytest.mark.slow
def test_a_rule_that_raises_costs_one_file_in_the_process_pool(tmp_path, faulty_pack):
    _many(tmp_path / "tree", "raise_here.py")
    proc = e2k("rewrite", str(tmp_path / "tree"), "-j", "2", "--rules", "faulty_rules", env=faulty_pack)
    assert proc.returncode == 2, proc.stderr
    assert (tmp_path / "tree" / "raise_here.py").read_bytes() == CANONICAL
    assert all((tmp_path / "tree" / f"train{i}.py").read_bytes() == CONVERTED for i in range(3))
    assert f"{tmp_path / 'tree' / 'raise_here.py'}:1:1: E2K903 E2K990 raised RuntimeError: boom on raise_here.py" in proc.stdout
    assert "3 converted" in proc.stderr and "1 error" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_an_interruption_that_a_rule_swallows_still_stops_the_run(tmp_path, faulty_pack):
    # Files are done in order: three convert, then the signal arrives inside the fourth.
    _many(tmp_path / "tree", "zz_swallow.py")
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "estimator2keras", "rewrite", str(tmp_path / "tree"), "-j", "1", "--rules", "faulty_rules", "--report", str(report)],
        capture_output=True, text=True, env=faulty_pack, timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )
    assert proc.returncode == 2, proc.stderr
    assert (tmp_path / "tree" / "zz_swallow.py").read_bytes() == CANONICAL
    assert proc.stderr.strip().splitlines()[-1].startswith("e2k: 3 converted, 0 partial (0 left for a human), 0 unchanged, 0 errors")
    assert "(interrupted: the files not listed were not touched)" in proc.stderr
    data = json.loads(report.read_text())
    assert data["summary"]["interrupted"] is True
    assert sorted(Path(f["path"]).name for f in data["files"]) == ["train0.py", "train1.py", "train2.py"]


@pytest.mark.slow
def test_a_worker_that_dies_costs_one_file_and_the_run_goes_on(tmp_path, faulty_pack):
    _many(tmp_path / "tree", "crash_here.py")
    report = tmp_path / "report.json"
    proc = e2k("rewrite", str(tmp_path / "tree"), "-j", "2", "--rules", "faulty_rules", "--report", str(report), env=faulty_pack)
    assert proc.returncode == 2, proc.stderr
    assert (tmp_path / "tree" / "crash_here.py").read_bytes() == CANONICAL
    # The files in flight with it when the worker died were tried again, alone, and converted.
    assert all((tmp_path / "tree" / f"train{i}.py").read_bytes() == CONVERTED for i in range(3))
    statuses = {Path(f["path"]).name: f["status"] for f in json.loads(report.read_text())["files"]}
    assert statuses == {**{f"train{i}.py": "converted" for i in range(3)}, "crash_here.py": "error"}
    assert "crash_here.py:1:1: E2K903 e2k's worker process died" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_a_module_e2k_cannot_convert_still_holds_estimator_code_for_its_callers(tmp_path, faulty_pack, monkeypatch, capsys):
    """model.py fails (a rule raises): it stays as it was, so task.py, which calls its
    train_and_evaluate and has no Estimator API of its own, is not "unchanged" but partial,
    naming the call (it was reported unchanged: a silent miss)."""
    from estimator2keras.cli import main

    monkeypatch.syspath_prepend(str(tmp_path / "packs"))
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "raise_model.py").write_text(textwrap.dedent('''\
        import tensorflow as tf


        def train_and_evaluate(model_dir):
            estimator = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=model_dir)
            estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": [1.0]}, [2.0])).batch(1))
    '''))
    (tree / "task.py").write_text("import raise_model\n\nraise_model.train_and_evaluate('/tmp/out')\n")
    assert main(["rewrite", "--check", str(tree), "--rules", "faulty_rules"]) == 2
    out = capsys.readouterr().out
    assert "E2K903 E2K990 raised RuntimeError" in out
    assert "task.py:3:1: E2K905 calls raise_model.train_and_evaluate" in out, out
