"""Write the rule documentation pages: ``python -m estimator2keras.docs DIR``.

One page per rule (``DIR/E2K001.md``...) and an index (``DIR/README.md``), all generated from
the rules' docstrings and cases; ``tests/test_docs.py`` fails when the checked-in pages are
out of date.
"""
from __future__ import annotations

import sys
from pathlib import Path

from estimator2keras._docs import render_index, render_markdown
from estimator2keras._registry import RuleSet


def pages(rules: RuleSet | None = None) -> dict[str, str]:
    """File name -> content of every generated page."""
    rules = rules or RuleSet.load()
    out = {f"{code}.md": render_markdown(rule) for code, rule in rules.rules.items()}
    out["README.md"] = render_index(list(rules.rules.values()))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m estimator2keras.docs DIR", file=sys.stderr)
        return 2
    directory = Path(argv[0])
    directory.mkdir(parents=True, exist_ok=True)
    wanted = pages()
    for stale in directory.glob("E2K*.md"):
        if stale.name not in wanted:
            stale.unlink()
    for name, text in wanted.items():
        (directory / name).write_text(text)
    print(f"wrote {len(wanted)} pages to {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
