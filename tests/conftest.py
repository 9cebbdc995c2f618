"""Shared test policy: on CI a missing engine or service fails; elsewhere it skips."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest
import requests

ON_CI = os.environ.get("CI", "").lower() == "true"
REGISTRY = os.environ.get("PIPELINE_TEST_REGISTRY", "127.0.0.1:5000")


def unavailable(reason: str) -> NoReturn:
    """Skip locally, fail on CI: CI installed everything, so absence is a bug there."""
    if ON_CI:
        pytest.fail(f"CI=true but {reason}; .ci/run should have provided it")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def registry() -> str:
    try:
        requests.get(f"http://{REGISTRY}/v2/", timeout=5).raise_for_status()
    except requests.RequestException as exc:
        unavailable(f"no OCI registry at {REGISTRY} ({type(exc).__name__}); run .ci/start-services")
    return REGISTRY
