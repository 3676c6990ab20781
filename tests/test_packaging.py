"""A plain `pip install .` (not editable) into a fresh venv: the core needs only libcst,
carries the rule catalogue under estimator2keras.rewrites, and rewrites a program."""
from __future__ import annotations

import shutil
import subprocess
import venv

import pytest

from conftest import FIXTURES, REPO


@pytest.mark.slow
def test_plain_install_has_the_catalogue_and_no_tensorflow(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__", "build"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(source)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True).stdout
    names = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert "libcst" in names and not any(n.startswith("tensorflow") for n in names)

    probe = "import estimator2keras.rewrites as r, estimator2keras, sys; print(r.__file__); print(estimator2keras.__file__)"
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path).stdout.split()
    assert all("site-packages" in path for path in out), out

    target = tmp_path / "work" / "train.py"
    target.parent.mkdir()
    shutil.copy(FIXTURES / "seed_mirrored_linear" / "before.py", target)
    run = subprocess.run([str(env_dir / "bin" / "e2k"), "rewrite", str(target)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert target.read_bytes() == (FIXTURES / "seed_mirrored_linear" / "after.py").read_bytes()
    rules = subprocess.run([str(env_dir / "bin" / "e2k"), "rules"], capture_output=True, text=True).stdout
    assert "E2K001" in rules and "E2K602" in rules


def test_every_subpackage_is_in_the_distribution():
    # pyproject.toml lists the packages (rewrites/ is mapped into estimator2keras.rewrites):
    # a new subpackage left out works in the editable checkout and fails installed.
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        "estimator2keras." + ".".join(p.parent.relative_to(REPO / "estimator2keras").parts)
        for p in (REPO / "estimator2keras").rglob("__init__.py")
        if p.parent != REPO / "estimator2keras" and "__pycache__" not in p.parts
    }
    assert found <= listed, sorted(found - listed)
