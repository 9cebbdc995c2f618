"""Test policy: on CI a missing engine or service fails; elsewhere it skips."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

ON_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip locally, fail on CI: CI installed everything, so absence is a bug there."""
    if ON_CI:
        pytest.fail(f"CI=true but {reason}; .ci/run should have provided it")
    pytest.skip(reason)
