"""Shared by tests/test_parity_*.py: the programs, their expected outcomes, the interpreters.

Each program directory holds legacy.py (an Estimator program), migrated.py (its correct
Keras migration) and wrong/*.py (deliberately wrong migrations) with wrong/expected.toml;
the canonical fixture keeps the same layout under fixtures/seed_mirrored_linear.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = REPO / "tests" / "parity_programs"
CANONICAL = REPO / "fixtures" / "seed_mirrored_linear"


@dataclass(frozen=True)
class WrongCase:
    """One deliberately wrong migration and what the harness must say about it."""

    path: Path
    mistake: str
    verdict: str
    exit_code: int
    first_divergent_step: int | None = None
    migrated_steps: int | None = None
    hint: str | None = None
    reason: str | None = None
    # a hyper-parameter read at run time that must be reported as differing (its row's name
    # starts with this), and the step its row names
    hyper: str | None = None
    hyper_step: int | None = None

    @property
    def id(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class Program:
    """An Estimator program, its correct migration and its wrong ones (from expected.toml)."""

    name: str
    legacy: Path
    correct: Path
    correct_steps: dict[int, int]
    cases: list[WrongCase] = field(default_factory=list)

    @classmethod
    def load(cls, expected: Path) -> Program:
        data = tomllib.loads(expected.read_text(encoding="utf-8"))
        base = expected.parent
        cases = [
            WrongCase(
                path=(base / case["file"]).resolve(), mistake=case["mistake"], verdict=case["verdict"],
                exit_code=case["exit_code"], first_divergent_step=case.get("first_divergent_step"),
                migrated_steps=case.get("migrated_steps"), hint=case.get("hint"), reason=case.get("reason"),
                hyper=case.get("hyper"), hyper_step=case.get("hyper_step"))
            for case in data["case"]
        ]
        return cls(
            name=base.parent.name,
            legacy=(base / data["legacy"]).resolve(),
            correct=(base / data["correct"]).resolve(),
            correct_steps={int(k): v for k, v in data["correct_steps"].items()},
            cases=cases,
        )


def program(name: str) -> Program:
    if name == "canonical":
        return Program.load(CANONICAL / "wrong" / "expected.toml")
    return Program.load(PROGRAMS / name / "wrong" / "expected.toml")


def legacy_python() -> str:
    """TF 2.15 + tensorflow-estimator: $E2K_LEGACY_PYTHON, else the interpreter running the tests."""
    return os.environ.get("E2K_LEGACY_PYTHON") or sys.executable


def target_python() -> str | None:
    """The newest TensorFlow (Keras 3), for the cross-version tests: $E2K_TARGET_PYTHON."""
    return os.environ.get("E2K_TARGET_PYTHON") or None


def jax_python() -> str | None:
    """The newest TensorFlow's interpreter where it has JAX too (`make test` installs it): the
    programs converted with --target jax run there."""
    python = target_python()
    return python if python and has_module(python, "jax") and has_module(python, "keras") else None


def jax_program(after: Path) -> Path | None:
    """The fixture's program converted with --target jax (its jax/after.py), if it has one."""
    path = Path(after).parent / "jax" / "after.py"
    return path if path.is_file() else None


def jax_candidates(after: Path) -> list[tuple[Path, str]]:
    """[(jax/after.py, the interpreter with JAX)] beside ``after`` where both exist, else []:
    a candidate of run_parity_many sharing the legacy run with the TensorFlow ones."""
    program, python = jax_program(after), jax_python()
    return [(program, python)] if program and python else []


def assert_jax_parity(result, replicas: int) -> None:
    """A program converted for JAX: parity, on keras.distribution.DataParallel over as many
    devices as the Estimator's replicas (one device: no distribution)."""
    assert result.passed, result.report()
    assert str(result.migrated.versions.get("backend", "")).startswith("JAX "), result.report()
    if replicas > 1:
        assert result.migrated.strategy == "keras.distribution.DataParallel", result.report()
    assert result.migrated.replicas == replicas, result.report()


@functools.lru_cache(maxsize=None)
def has_module(python: str, module: str) -> bool:
    """Whether ``python`` can import ``module`` (found without importing it: fast)."""
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


requires_legacy = pytest.mark.skipif(
    not has_module(legacy_python(), "tensorflow_estimator"),
    reason=f"{legacy_python()} has no tensorflow_estimator (install '.[legacy]' or set E2K_LEGACY_PYTHON)")

requires_target = pytest.mark.skipif(
    target_python() is None,
    reason="cross-version test: set E2K_TARGET_PYTHON to an interpreter with the newest tensorflow-cpu "
           "(e.g. /tmp/tfnew/bin/python; `make test` does)")


def assert_parity(result, steps: int) -> None:
    """A correct pair: parity, the expected number of steps on both sides, everything compared."""
    assert result.verdict == "parity", result.report()
    assert result.exit_code == 0
    assert result.first_divergent_step is None
    assert result.legacy.steps == result.migrated.steps == steps, result.report()
    assert all(row.passed for row in result.steps)
    assert result.weights and all(row.passed for row in result.weights), result.report()


def assert_caught(result, case: WrongCase) -> None:
    """A wrong migration: the verdict, exit code and first divergent step expected.toml states."""
    context = f"{case.mistake}\n{result.report()}"
    assert result.verdict == case.verdict, context
    assert result.exit_code == case.exit_code, context
    assert result.first_divergent_step == case.first_divergent_step, context
    if case.first_divergent_step is not None:
        row = result.steps[case.first_divergent_step - 1]
        assert not row.passed
        assert all(r.passed for r in result.steps[: case.first_divergent_step - 1]), context
    if case.migrated_steps is not None:
        assert result.migrated.steps == case.migrated_steps, context
    if case.hint is not None:
        assert any(case.hint in hint for hint in result.hints), context
    if case.reason is not None:
        assert case.reason in result.reason, context
    if case.hyper is not None:
        rows = [row for row in result.hyperparameters if row.name.startswith(case.hyper) and row.passed is False]
        assert rows, context
        if case.hyper_step is not None:
            assert rows[0].step == case.hyper_step, context
        # reported: as the reason when nothing else differs, else as a hint
        assert case.hyper in result.reason or any(case.hyper in hint for hint in result.hints), context
    if case.verdict == "error" and "variables do not match" in result.reason:
        assert result.variable_tables["legacy"] and result.variable_tables["migrated"]
        assert "first mismatch" in result.detail


def run_program(prog: Program, replicas: int, *, wrong: bool = True, newest: bool = True,
                extra: dict[str, Path] | None = None) -> dict:
    """One legacy run of ``prog`` compared with its correct migration ("correct"), every wrong
    one (by file stem), ``extra`` migrations (by key) and, when E2K_TARGET_PYTHON is set, the
    correct one on the newest TensorFlow ("newest") and its conversion for JAX ("jax", where
    the fixture has one). Sharing the legacy run keeps the suite fast.

    The noise envelope (the nudged legacy run) runs alongside the legacy run where wrong
    migrations are compared (their verdicts and first divergent steps depend on it); without
    them it runs only where a verdict may depend on it (envelope="when-needed": the same
    verdicts, one program run fewer where every migration agrees within the tolerances an
    envelope only widens)."""
    from estimator2keras.parity._runner import WHEN_NEEDED, run_parity_many

    keys, candidates = ["correct"], [prog.correct]
    for key, path in (extra or {}).items():
        keys.append(key)
        candidates.append(path)
    if wrong:
        keys += [case.id for case in prog.cases]
        candidates += [case.path for case in prog.cases]
    if newest and target_python():
        keys.append("newest")
        candidates.append((prog.correct, target_python()))
        keys += ["jax"] * len(jax_candidates(prog.correct))  # the --target jax conversion, on JAX
        candidates += jax_candidates(prog.correct)
    envelope = True if wrong and prog.cases else WHEN_NEEDED
    results = run_parity_many(prog.legacy, candidates, replicas=replicas, legacy_python=legacy_python(),
                              envelope=envelope)
    return dict(zip(keys, results))
