"""e2k parity when a program cannot be run: exit 2 with a reason a person can act on."""
from __future__ import annotations

import pytest

from estimator2keras.parity import run_parity
from estimator2keras.parity._runner import run_parity_many
from parity_programs import support

ERRORS = support.PROGRAMS / "errors"
pytestmark = [pytest.mark.slow, support.requires_legacy]


@pytest.fixture(scope="module")
def broken_migrations():
    """The canonical legacy run, compared with migrated programs that cannot be compared."""
    migrated = [ERRORS / "keras_no_fit.py", ERRORS / "keras_crash.py"]
    results = run_parity_many(support.CANONICAL / "before.py", migrated, legacy_python=support.legacy_python())
    return dict(zip([m.name for m in migrated], results))


def test_legacy_crash_reports_the_programs_traceback():
    result = run_parity(ERRORS / "legacy_crash.py", support.CANONICAL / "after.py",
                        legacy_python=support.legacy_python())
    assert result.verdict == "error" and result.exit_code == 2
    assert result.reason == "the legacy program crashed: ValueError: model_fn cannot build this model"
    assert 'legacy_crash.py", line 10, in model_fn' in result.detail
    assert "_legacy_side.py" not in result.detail  # the harness's own frames are left out


def test_legacy_without_training_call():
    result = run_parity(ERRORS / "legacy_no_training.py", support.CANONICAL / "after.py",
                        legacy_python=support.legacy_python())
    assert result.exit_code == 2
    assert result.reason.startswith("no training call found in the legacy program")


def test_migrated_without_fit(broken_migrations):
    result = broken_migrations["keras_no_fit.py"]
    assert result.exit_code == 2
    assert result.reason == "no training call found in the migrated program: the program never called Model.fit"


def test_migrated_crash_in_fit_is_the_programs_not_the_harness(broken_migrations):
    result = broken_migrations["keras_crash.py"]
    assert result.exit_code == 2
    assert result.reason.startswith("the migrated program crashed: ValueError: "), result.reason
    assert "incompatible" in result.reason
    assert 'keras_crash.py", line 11' in result.detail


def test_time_limit_stops_the_program():
    result = run_parity(ERRORS / "sleeps.py", ERRORS / "sleeps.py", timeout=5,
                        legacy_python=support.legacy_python())
    assert result.exit_code == 2
    assert result.reason == "the legacy program did not finish within 5 s (raise it with --timeout)"
    assert result.legacy.seconds < 30
