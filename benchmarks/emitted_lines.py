"""How much code e2k writes, over every fixture: the after/before line ratio per fixture and
in total, with and without the helpers modules (e2k_helpers.py), and the lines e2k wrote over
their file's line length.

    python benchmarks/emitted_lines.py [--fixtures DIR] [--top N]

The fixtures' after.py are e2k's exact output (tests/test_fixtures.py checks it), so the
figures are those of the current code. docs/emitted-code.md quotes them; tests/
test_emitted_style.py holds the ceilings.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from estimator2keras import _helpers, _wrap  # noqa: E402


@dataclass
class Pair:
    before: Path | None  # None: a module e2k wrote (the helpers module)
    after: Path
    limit: int


@dataclass
class Tree:
    name: str
    pairs: list[Pair] = field(default_factory=list)

    @property
    def before_lines(self) -> int:
        return sum(_lines(p.before) for p in self.pairs if p.before is not None)

    def after_lines(self, helpers: bool) -> int:
        return sum(_lines(p.after) for p in self.pairs if helpers or p.before is not None)


def _lines(path: Path | None) -> int:
    return len(path.read_text().splitlines()) if path is not None and path.is_file() else 0


def _limit(before: Path | None) -> int:
    text = before.read_text() if before is not None and before.is_file() else ""
    return _wrap.line_limit("", text)


def trees(fixtures: Path) -> list[Tree]:
    """Each fixture as the program tree e2k converted: its files before and after, and the
    helpers module beside them (no before; its limit, that of the files importing it)."""
    found = []
    for case in sorted(p for p in fixtures.iterdir() if p.is_dir()):
        tree = Tree(case.name)
        if (case / "after.py").is_file():
            tree.pairs.append(Pair(case / "before.py", case / "after.py", _limit(case / "before.py")))
            helpers_dir, after_root = case, None
        elif (case / "after").is_dir():
            after_root = case / "after"
            for after in sorted(after_root.rglob("*.py")):
                if after.name == f"{_helpers.MODULE}.py":
                    continue
                before = case / "before" / after.relative_to(after_root)
                tree.pairs.append(Pair(before, after, _limit(before)))
        else:
            continue
        modules = [case / f"{_helpers.MODULE}.py"] if after_root is None else \
            sorted(after_root.rglob(f"{_helpers.MODULE}.py"))
        for module in modules:
            if module.is_file():
                beside = [p.limit for p in tree.pairs if p.after.parent == module.parent]
                tree.pairs.append(Pair(None, module, max(beside or [_wrap.PEP8])))
        found.append(tree)
    return found


def over_limit(pair: Pair) -> list[str]:
    """The lines of ``pair.after`` that e2k wrote (not the program's) over the file's limit."""
    own = set(pair.before.read_text().splitlines()) if pair.before is not None and pair.before.is_file() else set()
    return [line for line in pair.after.read_text().splitlines() if len(line) > pair.limit and line not in own]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=REPO / "fixtures")
    parser.add_argument("--top", type=int, default=10, help="the fixtures with the highest ratio to list")
    args = parser.parse_args(argv)
    found = trees(args.fixtures)
    before = sum(t.before_lines for t in found)
    after = sum(t.after_lines(helpers=False) for t in found)
    with_helpers = sum(t.after_lines(helpers=True) for t in found)
    over = sum(len(over_limit(p)) for t in found for p in t.pairs)
    print(f"{len(found)} fixtures: before {before} lines")
    print(f"  converted files (after.py):          {after} lines, ratio {after / before:.2f}")
    print(f"  with the helpers modules:            {with_helpers} lines, ratio {with_helpers / before:.2f}")
    print(f"  lines e2k wrote over the file's limit: {over}")
    print(f"highest ratios (converted files only):")
    ranked = sorted(found, key=lambda t: -t.after_lines(False) / max(t.before_lines, 1))
    for tree in ranked[:args.top]:
        print(f"  {tree.after_lines(False) / max(tree.before_lines, 1):5.2f}  {tree.name} "
              f"({tree.before_lines} -> {tree.after_lines(False)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
