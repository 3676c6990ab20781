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


@pytest.fixture
def hooks_repo(tmp_path_factory) -> Path:
    """This project as pre-commit sees a hook repository: a git repo at a commit."""
    repo = tmp_path_factory.mktemp("hooks") / "estimator2keras"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__", "build", ".pytest_cache"))
    git(repo, "init", "-q")
    commit_all(repo)
    return repo


def try_repo(hooks_repo: Path, project: Path) -> subprocess.CompletedProcess:
    """Both hooks, in the order of .pre-commit-hooks.yaml. (try-repo installs the hook
    environment afresh on every call, ~25 s: hence one call per state of the project.)"""
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_COLOR": "never"}
    argv = [sys.executable, "-m", "pre_commit", "try-repo", str(hooks_repo), "--all-files", "--verbose"]
    return subprocess.run(argv, cwd=project, capture_output=True, text=True, env=env)


def make_project(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir()
    git(root, "init", "-q")
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    commit_all(root)
    return root


def hook_outputs(proc: subprocess.CompletedProcess) -> dict[str, list[str]]:
    """hook id -> the lines that hook itself printed (pre-commit's own lines left out)."""
    outputs: dict[str, list[str]] = {}
    current = None
    for line in proc.stdout.splitlines():
        if line.startswith("- hook id: "):
            current = line.removeprefix("- hook id: ").strip()
            outputs[current] = []
        elif current and line.strip() and not line.startswith("- ") and not line.rstrip().endswith(("Passed", "Failed")):
            outputs[current].append(line)
    return outputs


@pytest.mark.slow
def test_hooks_on_a_repo_with_and_then_without_estimator_code(hooks_repo, tmp_path):
    project = make_project(tmp_path / "project", {"app/train.py": CANONICAL.read_bytes(), "app/util.py": b"x = 1\n"})

    with_estimator = try_repo(hooks_repo, project)
    assert with_estimator.returncode == 1, with_estimator.stdout + with_estimator.stderr
    outputs = hook_outputs(with_estimator)
    # e2k-check fails and says which file; it changes nothing (e2k-rewrite runs after it).
    assert outputs["e2k-check"] == ["app/train.py: would be converted"]
    # e2k-rewrite converts the file and fails, so that the result is reviewed and staged.
    assert outputs["e2k-rewrite"] == ["app/train.py: converted"]
    assert "files were modified by this hook" in with_estimator.stdout
    assert (project / "app" / "train.py").read_bytes() == CONVERTED.read_bytes()
    assert (project / "app" / "util.py").read_bytes() == b"x = 1\n"

    commit_all(project)
    without_estimator = try_repo(hooks_repo, project)
    assert without_estimator.returncode == 0, without_estimator.stdout + without_estimator.stderr
    assert without_estimator.stdout.count("Passed") == 2
    # Quiet on success: neither hook prints anything, not even a summary line.
    assert hook_outputs(without_estimator) == {"e2k-check": [], "e2k-rewrite": []}
