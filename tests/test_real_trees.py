"""e2k on large real trees: the installed tensorflow_estimator and keras packages (the
benchmark's trees), with Estimator programs dropped in so that something converts.

No crash; every output parses; files with nothing to convert are byte-identical; a second run
changes nothing; --out never touches the input tree; and the syntactic pre-filter gives the
same result as running every pass."""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import shutil
from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES
from estimator2keras import _engine
from estimator2keras._engine import rewrite_source
from estimator2keras._prefilter import Screening
from estimator2keras._registry import RuleSet
from estimator2keras.cli import main

pytestmark = pytest.mark.slow

CANONICAL = (FIXTURES / "seed_mirrored_linear" / "before.py").read_bytes()
CONVERTED = (FIXTURES / "seed_mirrored_linear" / "after.py").read_bytes()
# An Estimator e2k leaves for a human (a model_fn it does not convert): marked, reported.
PARTIAL = CANONICAL.replace(b"tf1.layers.Dense(1)(features)", b"tf1.while_loop(lambda i: i < 3, lambda i: i + 1, [features])")


def _package(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return Path(list(spec.submodule_search_locations)[0])


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("trees")
    for name in ("tensorflow_estimator", "keras"):
        shutil.copytree(_package(name), root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "tensorflow_estimator" / "e2k_train.py").write_bytes(CANONICAL)
    (root / "keras" / "src" / "e2k_train.py").write_bytes(CANONICAL)
    (root / "keras" / "e2k_partial.py").write_bytes(PARTIAL)
    return root


def test_out_converts_into_a_mirror_and_never_touches_the_input(tree, tmp_path):
    before = _digest(tree)
    out = tmp_path / "out"

    assert main(["rewrite", str(tree), "--out", str(out)]) == 1

    assert _digest(tree) == before
    sources = sorted(p.relative_to(tree) for p in tree.rglob("*.py"))
    assert sorted(p.relative_to(out) for p in out.rglob("*.py")) == sources
    expected = {
        Path("tensorflow_estimator/e2k_train.py"): CONVERTED,
        Path("keras/src/e2k_train.py"): CONVERTED,
    }
    for relative in sources:
        new = (out / relative).read_bytes()
        if relative in expected:
            assert new == expected[relative], relative
        elif relative == Path("keras/e2k_partial.py"):
            assert b"# e2k: E2K901" in new
        elif new != (tree / relative).read_bytes():
            # The only change a library's own code may get: its ModeKeys written as the strings
            # they are (E2K009, safe anywhere). Without that rule, nothing changes.
            original = (tree / relative).read_bytes()
            alone = rewrite_source(original, str(tree / relative), RuleSet.load(ignore=["E2K009"]))
            assert alone.new == original, f"{relative} changed but has nothing to convert"
        ast.parse(new, str(relative))  # every output parses (CPython 3.11 runs these packages)
    for relative in [*expected, Path("keras/e2k_partial.py")]:
        cst.parse_module((out / relative).read_bytes())

    # A second run over the output changes nothing.
    converted_once = _digest(out)
    assert main(["rewrite", str(out)]) == 1  # the partial file still needs a human
    assert _digest(out) == converted_once


def test_the_prefilter_gives_the_same_result_as_every_pass(tree, rules, monkeypatch):
    # The files where the pre-filter has the most to decide: those that spell "Estimator".
    files = [p for p in sorted(tree.rglob("*.py")) if b"Estimator" in p.read_bytes()]
    assert len(files) > 50
    for path in files:
        source = path.read_bytes()
        fast = rewrite_source(source, str(path), rules)
        with monkeypatch.context() as patch:
            patch.setattr(_engine, "screen", lambda *args: Screening(parse=True, units=True))
            full = rewrite_source(source, str(path), rules)
        assert (fast.status, fast.new, fast.findings) == (full.status, full.new, full.findings), path
