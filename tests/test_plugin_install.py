"""The example rule pack installed into a venv next to e2k (plain `pip install`, no
--rules, no config): e2k finds its rule through the entry point and applies it."""
from __future__ import annotations

import shutil
import subprocess
import venv

import pytest

from conftest import REPO

EXAMPLE = REPO / "examples" / "team-e2k-rules"


@pytest.mark.slow
def test_installed_plugin_is_discovered_through_its_entry_point(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__", "build"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    # One current setuptools in the venv builds both packages (no isolated build env per package: faster).
    setup = subprocess.run([*pip, "--upgrade", "setuptools>=64"], capture_output=True, text=True)
    assert setup.returncode == 0, setup.stderr
    packages = [str(source), str(source / "examples" / "team-e2k-rules")]
    install = subprocess.run([*pip, "--no-build-isolation", *packages], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    e2k = str(env_dir / "bin" / "e2k")
    work = tmp_path / "work"  # no pyproject.toml here or above: only the entry point brings the rule
    work.mkdir()

    def run(*argv):
        return subprocess.run([e2k, *argv], capture_output=True, text=True, cwd=work)

    rules = run("rules")
    assert rules.returncode == 0, rules.stderr
    assert "E2K801" in rules.stdout and "[team_e2k_rules.make_estimator_to_estimator:MakeEstimatorToEstimator]" in rules.stdout
    explain = run("explain", "E2K801")
    assert explain.returncode == 0 and "## What it does" in explain.stdout and "make_estimator" in explain.stdout
    tested = run("test", "team_e2k_rules")
    assert tested.returncode == 0 and "3 passed, 0 failed" in tested.stdout, tested.stdout + tested.stderr

    shutil.copy(EXAMPLE / "demo" / "train.py", work / "train.py")
    rewrite = run("rewrite", "train.py")
    assert rewrite.returncode == 1, rewrite.stderr
    assert (work / "train.py").read_text() == (EXAMPLE / "demo" / "train_keras.py").read_text()
    assert run("rewrite", "--check", "train.py").returncode == 0
