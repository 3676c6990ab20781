"""Write the rules' program cases' expected output again from the current code: each
``Case(before=..., after=...)`` in rewrites/ whose output changed gets the new text as its
``after`` (a case that must stay unchanged, ``after=None``, is left for the test to judge).

    python tools/regen_cases.py [CODE ...]

The example rule pack (examples/team-e2k-rules) is written again too: its rule's cases and
its demo's converted program (demo/train_keras.py), as tests/test_custom_rules.py reads them,
and docs/custom-rules.md, which shows those files.
Read the diff (git diff rewrites/) before committing it: the cases are the rules' docs
(docs/rules is generated from them: `make docs`).
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path

import libcst as cst

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from estimator2keras._engine import rewrite_source  # noqa: E402
from estimator2keras._registry import RuleSet  # noqa: E402
from estimator2keras.testing import _rules_with, is_program_case  # noqa: E402


def _literal(text: str) -> str:
    body = text.replace("\\", "\\\\").replace("'''", "\\'\\'\\'")
    return "'''\\\n" + body + "'''"


class _Replace(cst.CSTTransformer):
    def __init__(self, outputs: dict[str, str]):
        super().__init__()
        self.outputs = outputs  # the case's before text -> its new after text

    def leave_Call(self, original, updated):
        if not (isinstance(updated.func, cst.Name) and updated.func.value == "Case"):
            return updated
        args = {a.keyword.value: a for a in updated.args if a.keyword is not None}
        before, after = args.get("before"), args.get("after")
        if before is None or after is None or not isinstance(before.value, (cst.SimpleString, cst.ConcatenatedString)):
            return updated
        try:
            key = before.value.evaluated_value
        except Exception:
            return updated
        if key not in self.outputs or not isinstance(after.value, cst.SimpleString):
            return updated
        new_after = after.with_changes(value=cst.SimpleString(_literal(self.outputs[key])))
        return updated.with_changes(args=[new_after if a is after else a for a in updated.args])


EXAMPLE = REPO / "examples" / "team-e2k-rules"


EXAMPLE_FILES = ("team_e2k_rules/make_estimator_to_estimator.py", "demo/train.py", "demo/train_keras.py")


def run(codes: list[str]) -> None:
    shown = {name: (EXAMPLE / name).read_text().rstrip() for name in EXAMPLE_FILES}
    sys.path.insert(0, str(EXAMPLE))
    rules = RuleSet.load(extra=["team_e2k_rules"])
    by_file: dict[str, dict[str, str]] = {}
    for rule in rules.rules.values():
        if codes and rule.code not in codes:
            continue
        for case in rule.cases:
            if case.after is None or not is_program_case(rule, case):
                continue
            run = _rules_with(rule, rules)
            if case.target != run.target:
                run = dataclasses.replace(run, target=case.target)
            result = rewrite_source(case.before.encode(), "case.py", run)
            new = result.new.decode()
            if result.status != "error" and new != case.after:
                by_file.setdefault(inspect.getsourcefile(rule), {})[case.before] = new
                print(f"{rule.code} {case.id}: written again")
    for path, outputs in by_file.items():
        module = cst.parse_module(Path(path).read_text())
        Path(path).write_text(module.visit(_Replace(outputs)).code)
    demo = EXAMPLE / "demo" / "train.py"
    result = rewrite_source(demo.read_bytes(), str(demo), RuleSet.load(extra=["team_e2k_rules"]))
    (EXAMPLE / "demo" / "train_keras.py").write_bytes(result.new)
    page = REPO / "docs" / "custom-rules.md"
    text = page.read_text()
    for name, old in shown.items():
        text = text.replace(old, (EXAMPLE / name).read_text().rstrip())
    page.write_text(text)


if __name__ == "__main__":
    run(sys.argv[1:])
