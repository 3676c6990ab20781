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
