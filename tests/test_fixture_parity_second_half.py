"""The other half of tests/test_fixture_parity.py's cases (one file runs on one worker under
`--dist loadfile`: two files keep the suite's two workers busy)."""
from __future__ import annotations

import pytest

from test_fixture_parity import ALL_CASES, check_fixture


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL_CASES[1::2])
def test_fixture_trains_like_its_estimator(case):
    check_fixture(case)
