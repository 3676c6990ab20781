from __future__ import annotations

from pathlib import Path

import pytest

from estimator2keras._registry import RuleSet

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@pytest.fixture(scope="session")
def rules() -> RuleSet:
    return RuleSet.load()


def pytest_collection_modifyitems(config, items):
    """Under `pytest -n 2 --dist loadfile --no-loadscope-reorder` (`make test`), the files that
    run TensorFlow go to the workers first, the quick files last.

    xdist hands a worker its next file, in the order collected, when it is nearly done with the
    last one. Its default order (--loadscope-reorder: most tests first) sends the files with few
    but slow tests last (test_real_trees.py, test_packaging.py, test_precommit.py, the parity
    programs' files...), so one worker can sit idle while the other finishes one of them. Here the
    files with slow tests come first, most slow tests first, and the hundreds of quick tests fill
    the end of both workers' time. The tests of a file keep their order; nothing is deselected."""
    if config.getoption("dist", default="no") not in ("loadfile", "loadscope"):
        return
    if config.getoption("loadscopereorder", default=True):
        return  # xdist reorders by the number of tests per file itself
    slow, count = {}, {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: (-slow[item.path], -count[item.path]))


def flat(code: str) -> str:
    """``code`` with the statements wrapped over several lines inside brackets joined back on
    one line (as e2k writes them before wrapping them to the file's line length): a test
    looks for the code it expects whatever the wrapping. Black's trailing commas go too."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position):
        row, col = position
        return starts[row - 1] + col

    cuts = []  # (start, end, replacement)
    depth = 0
    for i, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        if token.type != tokenize.NL or depth <= 0 or i == 0 or i + 1 >= len(tokens):
            continue
        before, after = tokens[i - 1], tokens[i + 1]
        j = i + 1
        while tokens[j].type in (tokenize.NL, tokenize.COMMENT) and j + 1 < len(tokens):
            j += 1
        after = tokens[j]
        if before.type == tokenize.COMMENT or after.type == tokenize.COMMENT or before.type == tokenize.NEWLINE:
            continue
        if after.type == tokenize.DEDENT or after.type == tokenize.INDENT:
            continue
        start, end = offset(before.end), offset(after.start)
        opening = before.string in "([{" and before.type == tokenize.OP
        closing = after.string in ")]}" and after.type == tokenize.OP
        if closing and before.string == ",":
            start = offset(before.start)
        cuts.append((start, end, "" if opening or closing or after.string == "." else " "))
    out, last = [], 0
    for start, end, text in sorted(cuts):
        if start < last:
            continue
        out.append(code[last:start])
        out.append(text)
        last = end
    out.append(code[last:])
    return "".join(out)


def helpers_beside(case: Path, directory: Path) -> None:
    """Copy the helpers module a fixture's after.py imports (if it has one) into ``directory``,
    where a test writes a changed copy of after.py to run."""
    import shutil

    module = Path(case) / "e2k_helpers.py"
    if module.is_file():
        shutil.copy(module, Path(directory) / module.name)
