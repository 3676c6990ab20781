"""Write every fixture's expected output again from the current code: after.py and the
helpers module beside it (single files), after/ (program trees).

    python tools/regen_fixtures.py [CASE ...]

A fixture with a jax/ directory gets its conversion for Keras 3 on JAX there (--target jax).
tests/test_fixtures.py and tests/test_program_conversion.py then hold the code to what was
written: read the diff (git diff fixtures/) before committing it, and run the fixtures'
parity tests (-m slow) on what changed. docs/side-by-side.md quotes three fixtures' output:
its e2k blocks are written again too (tests/test_docs.py checks them), its prose is not.
"""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from estimator2keras import _helpers  # noqa: E402
from estimator2keras._engine import rewrite_source  # noqa: E402
from estimator2keras._registry import RuleSet  # noqa: E402
from estimator2keras.cli import main  # noqa: E402

FIXTURES = REPO / "fixtures"


def single(case: Path, rules, out: Path | None = None) -> None:
    """The fixture's after.py (and its helpers module), or in ``out`` another target's."""
    out = out or case
    result = rewrite_source((case / "before.py").read_bytes(), f"{case.name}/before.py", rules)
    if result.status != "converted":
        print(f"{case.name}: {result.status}", *(f.format() for f in result.findings), sep="\n  ")
        return
    (out / "after.py").write_bytes(result.new)
    module = out / f"{_helpers.MODULE}.py"
    if result.helpers:
        module.write_text(_helpers.render(result.helpers, result.indent, limit=result.limit))
    elif module.exists():
        module.unlink()


def package(case: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        code = main(["rewrite", str(case / "before"), "--out", str(out), "-q"])
        if code != 1:
            print(f"{case.name}: e2k exit {code}")
            return
        for old in (case / "after").rglob("*.py"):
            old.unlink()
        for new in out.rglob("*.py"):
            target = case / "after" / new.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(new, target)


def side_by_side(page: Path) -> None:
    """The page's "e2k's output" blocks, each its section's fixture's after.py (its docstring
    left out, as the page shows it)."""
    sections = re.split(r"(?m)^(?=## )", page.read_text())
    for index, section in enumerate(sections):
        case = re.search(r"^## .*\(`fixtures/(\w+)`\)", section)
        if not case:
            continue
        text = (FIXTURES / case.group(1) / "after.py").read_text()
        if text.startswith('"""'):
            text = text[text.index('"""', 3) + 3:].lstrip("\n")
        sections[index] = re.sub(r"(\*\*e2k's output\*\* \(`after.py`\):\n\n```python\n).*?(\n```)",
                                 lambda m: m.group(1) + text.rstrip("\n") + m.group(2), section, flags=re.S)
    page.write_text("".join(sections))


def run(names: list[str]) -> None:
    rules = RuleSet.load()
    jax = RuleSet.load(target="jax")
    for case in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        if names and case.name not in names:
            continue
        if (case / "before.py").is_file():
            single(case, rules)
            if (case / "jax").is_dir():  # the fixture's conversion for JAX too (--target jax)
                single(case, jax, case / "jax")
        elif (case / "before").is_dir():
            package(case)
    side_by_side(REPO / "docs" / "side-by-side.md")


if __name__ == "__main__":
    run(sys.argv[1:])
