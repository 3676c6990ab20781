"""The hooks of .pre-commit-hooks.yaml, run by the real pre-commit (`pre-commit try-repo`)
in a temporary git repository, with and without Estimator code."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

CANONICAL = FIXTURES / "seed_mirrored_linear" / "before.py"
CONVERTED = FIXTURES / "seed_mirrored_linear" / "after.py"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "e2k tests",
    "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "e2k tests",
    "GIT_COMMITTER_EMAIL": "tests@example.invalid",
}


def git(cwd: Path, *argv: str) -> None:
    subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def commit_all(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "snapshot")


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory) -> Path:
    """This project as pre-commit sees a hook repository: a git repo at a commit."""
    repo = tmp_path_factory.mktemp("hooks") / "estimator2keras"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__", "build", ".pytest_cache"))
    git(repo, "init", "-q")
    commit_all(repo)
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")  # one hook environment for every test here


def try_repo(hooks_repo: Path, home: Path, project: Path, hook: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    argv = [sys.executable, "-m", "pre_commit", "try-repo", str(hooks_repo), hook, "--all-files", "--verbose"]
    return subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env)


def make_project(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir()
    git(root, "init", "-q")
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    commit_all(root)
    return root


def hook_output(proc: subprocess.CompletedProcess) -> list[str]:
    """The lines the hook itself printed (pre-commit's own lines left out)."""
    lines = proc.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("- duration")), len(lines))
    return [line for line in lines[start + 1 :] if line.strip() and not line.startswith("- ")]


@pytest.mark.slow
def test_check_hook_passes_quietly_without_estimator_code(hooks_repo, pre_commit_home, tmp_path):
    project = make_project(tmp_path / "clean", {"app/keras_train.py": CONVERTED.read_bytes(), "app/util.py": b"x = 1\n"})
    proc = try_repo(hooks_repo, pre_commit_home, project, "e2k-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout
    assert hook_output(proc) == []  # quiet on success: not even a summary line


@pytest.mark.slow
def test_check_hook_fails_while_estimator_code_remains(hooks_repo, pre_commit_home, tmp_path):
    project = make_project(tmp_path / "legacy", {"train.py": CANONICAL.read_bytes(), "util.py": b"x = 1\n"})
    proc = try_repo(hooks_repo, pre_commit_home, project, "e2k-check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failed" in proc.stdout
    assert hook_output(proc) == ["train.py: would be converted"]  # findings fixed by e2k are listed with -v only
    assert (project / "train.py").read_bytes() == CANONICAL.read_bytes()


@pytest.mark.slow
def test_rewrite_hook_converts_then_passes(hooks_repo, pre_commit_home, tmp_path):
    project = make_project(tmp_path / "migrating", {"train.py": CANONICAL.read_bytes(), "util.py": b"x = 1\n"})
    first = try_repo(hooks_repo, pre_commit_home, project, "e2k-rewrite")
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    assert (project / "train.py").read_bytes() == CONVERTED.read_bytes()
    commit_all(project)
    second = try_repo(hooks_repo, pre_commit_home, project, "e2k-rewrite")
    assert second.returncode == 0, second.stdout + second.stderr
    assert hook_output(second) == []
