"""Users' rules: loaded with --rules, listed, explained, tested with `e2k test`, and a user's
rule that raises is reported against the file and that rule while the run goes on."""
from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from estimator2keras.cli import main
from estimator2keras.testing import CaseFailure, check_case

CANONICAL = FIXTURES / "seed_mirrored_linear" / "before.py"
EXAMPLE = REPO / "examples" / "team-e2k-rules"

USER_RULES = '''
from estimator2keras import Case, ModuleRule, UnitRule

DOCS = """A user's rule.

    ## What it does
    Something.

    ## Why
    Tests.

    ## Fix safety
    Safe.
    """


class Explodes(ModuleRule):
    __doc__ = DOCS
    code = "E2K851"
    summary = "raises on every file"

    def transform(self, module, ctx):
        raise RuntimeError("user rule bug")


class ExplodesInPlan(UnitRule):
    __doc__ = DOCS
    code = "E2K852"
    summary = "raises while planning a unit"

    def plan(self, unit, plan, ctx):
        raise KeyError("no such thing")


class Exits(ModuleRule):
    __doc__ = DOCS
    code = "E2K854"
    summary = "calls sys.exit"

    def transform(self, module, ctx):
        import sys

        sys.exit(3)


class RenamesX(ModuleRule):
    __doc__ = DOCS
    code = "E2K853"
    summary = "x -> y"
    keywords = ("x",)
    cases = [
        Case(id="good", before="x = 1\\n", after="y = 1\\n"),
        Case(id="bad", before="x = 2\\n", after="z = 2\\n"),
    ]

    def transform(self, module, ctx):
        import libcst as cst

        for statement in module.body:
            target = statement.body[0].targets[0].target
            ctx.edits.replace(target, cst.Name("y"))
            ctx.report(target, "x -> y")
        return module
'''


@pytest.fixture
def user_rules(tmp_path, monkeypatch):
    package = tmp_path / "site"
    package.mkdir()
    (package / "user_rules_pack.py").write_text(textwrap.dedent(USER_RULES))
    monkeypatch.syspath_prepend(str(package))
    return "user_rules_pack"


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("rule,blamed", [("E2K851", "E2K851"), ("E2K852", "E2K852"), ("E2K854", "E2K854")])
def test_a_raising_user_rule_is_reported_per_file_and_the_run_goes_on(tmp_path, user_rules, capsys, jobs, rule, blamed):
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(3):
        shutil.copy(CANONICAL, tree / f"train{i}.py")
    (tree / "plain.py").write_text("x = 1\n")
    ignored = {"E2K851", "E2K852", "E2K854"} - {rule}
    argv = ["rewrite", "--isolated", "--rules", user_rules, "--ignore", ",".join([*ignored, "E2K853"]), "-j", jobs, str(tree)]
    assert main(argv) == 2
    out = capsys.readouterr().out
    for i in range(3):
        assert (tree / f"train{i}.py").read_bytes() == CANONICAL.read_bytes()
        assert f"train{i}.py:1:1: E2K903 {blamed} raised" in out
    assert "plain.py" not in out


def test_e2k_test_runs_a_users_cases_and_shows_what_failed(user_rules, capsys):
    assert main(["test", f"{user_rules}:RenamesX"]) == 1
    out = capsys.readouterr().out
    assert "E2K853 renames-x: case bad ... FAILED" in out and "-z = 2" in out and "+y = 2" in out
    assert "2 passed, 1 failed" in out
    with pytest.raises(CaseFailure, match="the output is not the expected one"):
        from user_rules_pack import RenamesX

        check_case(RenamesX, RenamesX.cases[1])


def test_rules_and_explain_show_users_rules(user_rules, capsys):
    assert main(["rules", "--isolated", "--rules", user_rules]) == 0
    listing = capsys.readouterr().out
    assert "E2K853" in listing and "[user_rules_pack:RenamesX]" in listing
    assert main(["explain", "--isolated", "--rules", user_rules, "E2K853"]) == 0
    assert "## Why" in capsys.readouterr().out


def test_e2k_test_mistakes(capsys):
    assert main(["test", "estimator2keras._rule"]) == 2
    assert "defines no rules" in capsys.readouterr().err


def test_example_plugin_rule_passes_its_cases_and_converts_the_demo(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    assert main(["test", "team_e2k_rules"]) == 0
    assert "3 passed, 0 failed" in capsys.readouterr().out
    demo = tmp_path / "train.py"
    shutil.copy(EXAMPLE / "demo" / "train.py", demo)
    assert main(["rewrite", "--isolated", "--rules", "team_e2k_rules", str(demo)]) == 1
    assert demo.read_text() == (EXAMPLE / "demo" / "train_keras.py").read_text()
