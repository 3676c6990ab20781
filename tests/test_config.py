"""[tool.e2k] in pyproject.toml: nearest config wins, CLI flags win over config, and every
mistake in a config file is one line naming the file and the key, exit 2."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from estimator2keras.cli import main

CANONICAL = FIXTURES / "seed_mirrored_linear" / "before.py"


def project(root: Path, config: str | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / "pyproject.toml").write_text(config)
    return root


def report(tmp_path: Path, *argv: str) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = main(["rewrite", "--check", "-j", "1", "--report", str(out), *argv])
    files = json.loads(out.read_text())["files"] if out.exists() else []
    return code, {Path(f["path"]).relative_to(tmp_path).as_posix(): f for f in files}


def test_nearest_config_wins_and_configs_without_the_table_are_passed_over(tmp_path):
    project(tmp_path, '[tool.e2k]\nignore = ["E2K602"]\n')
    project(tmp_path / "sub", '[tool.e2k]\nselect = ["E2K9"]\n')
    project(tmp_path / "sub" / "inner", '[project]\nname = "inner"\n')  # no [tool.e2k]: skipped
    shutil.copy(CANONICAL, tmp_path / "top.py")
    shutil.copy(CANONICAL, tmp_path / "sub" / "inner" / "deep.py")
    code, files = report(tmp_path, str(tmp_path))
    assert code == 1
    # Top: E2K602 ignored, and the unit needs it under a strategy: left unconverted, with why.
    assert files["top.py"]["status"] == "partial"
    assert [f["code"] for f in files["top.py"]["findings"]] == ["E2K602"]
    # Deep: only diagnostics selected by the sub-project's config, so nothing converts; the
    # Estimator code left is reported (E2K905), the file is not touched.
    deep = files["sub/inner/deep.py"]
    assert not deep["changed"] and {f["code"] for f in deep["findings"]} == {"E2K905"}


def test_cli_flags_replace_configured_codes(tmp_path):
    project(tmp_path, '[tool.e2k]\nignore = ["E2K602"]\n')
    shutil.copy(CANONICAL, tmp_path / "top.py")
    code, files = report(tmp_path, "--ignore", "E2K400", str(tmp_path))
    assert files["top.py"]["status"] == "converted"
    code, files = report(tmp_path, "--isolated", str(tmp_path))
    assert files["top.py"]["status"] == "converted"


def test_overrides_and_excludes(tmp_path):
    project(
        tmp_path,
        """
[tool.e2k]
exclude = ["vendored/", "*_pb2.py"]

[[tool.e2k.overrides]]
paths = ["experiments/*"]
ignore = ["E2K6"]
""",
    )
    for rel in ("main.py", "experiments/run.py", "vendored/lib.py", "gen_pb2.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CANONICAL, tmp_path / rel)
    code, files = report(tmp_path, str(tmp_path))
    assert sorted(files) == ["experiments/run.py", "main.py"]
    assert files["main.py"]["status"] == "converted"
    assert files["experiments/run.py"]["status"] == "partial"
    # A file named explicitly (as pre-commit does) is excluded too; nothing left: exit 0.
    assert main(["rewrite", "--check", "--quiet", str(tmp_path / "vendored" / "lib.py")]) == 0


@pytest.mark.parametrize(
    "config,message",
    [
        ('[tool.e2k]\nslect = ["E2K1"]\n', "[tool.e2k]: unknown key 'slect'"),
        ('[tool.e2k]\nignore = ["E2K777"]\n', "[tool.e2k] ignore: no rule has a code matching 'E2K777'"),
        ('[tool.e2k]\nselect = "E2K1, 7"\n', "no rule has a code matching 'E2K1, 7'"),
        ('[tool.e2k]\nrules = ["no_such_rules_module"]\n', "[tool.e2k] rules: cannot import rule module 'no_such_rules_module'"),
        ('[tool.e2k]\nexclude = [1]\n', "[tool.e2k] exclude: expected a list of strings"),
        ('[[tool.e2k.overrides]]\nignore = ["E2K4"]\n', "[[tool.e2k.overrides]] #1: missing key 'paths'"),
        ('[[tool.e2k.overrides]]\npaths = ["x"]\nrules = []\n', "[[tool.e2k.overrides]] #1: unknown key 'rules'"),
        ('[[tool.e2k.overrides]]\npaths = ["x"]\nselect = ["E2K8"]\n', "#1 select: no rule has a code matching 'E2K8'"),
        ("[tool.e2k\n", "invalid TOML"),
    ],
)
def test_config_mistakes_are_one_line_naming_the_key(tmp_path, capsys, config, message):
    project(tmp_path, config)
    shutil.copy(CANONICAL, tmp_path / "train.py")
    before = (tmp_path / "train.py").read_bytes()
    assert main(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(tmp_path / "pyproject.toml") in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "train.py").read_bytes() == before


def test_config_rules_may_live_next_to_the_config(tmp_path, capsys):
    project(tmp_path, '[tool.e2k]\nrules = ["local_e2k_rules"]\nignore = ["E2K850"]\n')
    (tmp_path / "local_e2k_rules.py").write_text(
        '''
from estimator2keras import Diagnostic


class LocalNote(Diagnostic):
    """A rule that lives in the project.

    ## What it does
    Nothing.

    ## Why
    To test local rule modules.

    ## Fix safety
    Nothing changes.
    """

    code = "E2K850"
    summary = "a project-local rule"
'''
    )
    shutil.copy(CANONICAL, tmp_path / "train.py")
    code, files = report(tmp_path, str(tmp_path))
    assert files["train.py"]["status"] == "converted"
