from __future__ import annotations

from pathlib import Path

import pytest

from estimator2keras._registry import RuleSet

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@pytest.fixture(scope="session")
def rules() -> RuleSet:
    return RuleSet.load()
