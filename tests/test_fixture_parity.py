"""Every whole-program fixture passes `e2k parity`: after.py trains like before.py, under
MirroredStrategy with 2 replicas, on TF 2.15 and (when E2K_TARGET_PYTHON points at one)
on the newest TensorFlow. Settings a fixture needs live in its parity.toml."""
from __future__ import annotations

import os
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

import pytest

from conftest import FIXTURES
from parity_programs import support
from estimator2keras.parity import run_parity_many
from estimator2keras.parity._runner import WHEN_NEEDED

#: Covered by tests/test_parity_fixture.py (with its wrong migrations),
#: tests/test_surface_fixtures.py (export_reload with its exports; multi_gpu_model is a Keras
#: program, compared with what multi_gpu_model computed) and tests/test_parity_canned.py (the
#: canned Estimators' fixtures it lists; a canned_* fixture it does not list is compared here).
COVERED_ELSEWHERE = {"seed_mirrored_linear", "export_reload", "multi_gpu_model"}
def _canned_cases() -> set[str]:
    from test_parity_canned import CASES as canned

    return set(canned)


ALL_CASES = sorted(
    p.name for p in FIXTURES.iterdir()
    if (p / "before.py").is_file() and p.name not in COVERED_ELSEWHERE and p.name not in _canned_cases()
)
#: Every other case: tests/test_fixture_parity_second_half.py runs the rest, so that the two
#: halves go to different workers under `pytest -n 2 --dist loadfile` (one file, one worker).
CASES = ALL_CASES[0::2]


def _settings(case: str) -> dict:
    path = FIXTURES / case / "parity.toml"
    return tomllib.loads(path.read_text()) if path.is_file() else {}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_fixture_trains_like_its_estimator(case):
    check_fixture(case)


def check_fixture(case: str) -> None:
    settings = _settings(case)
    after = FIXTURES / case / "after.py"
    targets = [after]
    newest = os.environ.get("E2K_TARGET_PYTHON")
    if newest and settings.get("newest", True):  # parity.toml says why a fixture cannot run there
        targets.append((after, newest))
    targets += support.jax_candidates(after)  # jax/after.py (--target jax), on JAX: the same legacy run
    results = run_parity_many(
        FIXTURES / case / "before.py",
        targets,
        replicas=settings.get("replicas", 2),
        steps=settings.get("steps"),
        rtol=settings.get("rtol"),
        atol=settings.get("atol"),
        workers=settings.get("workers", 1),
        # The nudged legacy run only when the verdict may depend on it: the same verdicts as
        # envelope=True (tests/test_parity_lazy_envelope.py), one program run fewer when the
        # migration agrees within the tolerances the envelope only widens.
        envelope=WHEN_NEEDED,
    )
    replicas = settings.get("replicas", 2) * settings.get("workers", 1)
    for target, result in zip(targets, results):
        if isinstance(target, tuple) and target[0] != after:
            support.assert_jax_parity(result, replicas)
        assert result.passed, result.report()
        assert result.legacy.replicas == result.migrated.replicas == replicas, result.report()
