"""Whole-program fixtures: before.py rewrites exactly to after.py, with nothing left over."""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from estimator2keras import _helpers
from estimator2keras._engine import rewrite_source

CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "before.py").is_file())


@pytest.mark.parametrize("case", CASES)
def test_fixture_rewrites_exactly(case, rules):
    before = (FIXTURES / case / "before.py").read_bytes()
    expected = (FIXTURES / case / "after.py").read_bytes()
    result = rewrite_source(before, f"{case}/before.py", rules)
    assert result.status == "converted", [f.format() for f in result.findings]
    assert result.new.decode() == expected.decode()
    # The helpers it imports, in the module beside it: written once, as e2k writes it.
    module = FIXTURES / case / f"{_helpers.MODULE}.py"
    if result.helpers:
        assert _helpers.render(result.helpers, result.indent, limit=result.limit) == module.read_text()
    else:
        assert not module.exists()


JAX_CASES = [case for case in CASES if (FIXTURES / case / "jax").is_dir()]


@pytest.mark.parametrize("case", JAX_CASES)
def test_fixture_rewrites_exactly_for_jax(case, rules):
    """jax/after.py and its helpers: the fixture converted with --target jax."""
    import dataclasses

    before = (FIXTURES / case / "before.py").read_bytes()
    result = rewrite_source(before, f"{case}/before.py", dataclasses.replace(rules, target="jax"))
    assert result.status == "converted", [f.format() for f in result.findings]
    assert result.new.decode() == (FIXTURES / case / "jax" / "after.py").read_text()
    module = FIXTURES / case / "jax" / f"{_helpers.MODULE}.py"
    if result.helpers:
        assert _helpers.render(result.helpers, result.indent, limit=result.limit) == module.read_text()
    else:
        assert not module.exists()
    assert "E2K700" in {f.code for f in result.findings}


def test_three_fixtures_convert_for_jax():
    # The canonical program, a CNN classifier and a canned DNNClassifier (issue 16).
    assert {"seed_mirrored_linear", "mnist_cnn", "canned_dnn_classifier", "checkpoint_resume"} <= set(JAX_CASES)


@pytest.mark.parametrize("case", CASES)
def test_fixture_output_is_stable(case, rules):
    after = (FIXTURES / case / "after.py").read_bytes()
    result = rewrite_source(after, f"{case}/after.py", rules)
    assert result.status == "unchanged" and result.new == after
