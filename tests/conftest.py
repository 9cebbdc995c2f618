"""Fixtures every test folder shares: the loopback registry and the real Gemma GGUF.

Unit tests use neither: they need no network, no download and no service.
"""

from __future__ import annotations

import os
import signal

import pytest
import requests

from tests.fixtures_gemma import gemma3_270m_gguf  # noqa: F401  (a shared fixture)
from tests.policy import unavailable

# A run started in the background by a non-interactive shell (`pytest … &`, nohup) has
# SIGINT ignored, and every child inherits that: the Ctrl-C tests' builds and downloads
# then never saw their SIGINT and ran on (buildah's sleep for days). Ctrl-C is put back
# as a terminal gives it, so what the tests send reaches what they start.
signal.signal(signal.SIGINT, signal.default_int_handler)

REGISTRY = os.environ.get("LOCKPIPE_TEST_REGISTRY", "127.0.0.1:5000")


@pytest.fixture(scope="session")
def registry() -> str:
    try:
        requests.get(f"http://{REGISTRY}/v2/", timeout=5).raise_for_status()
    except requests.RequestException as exc:
        unavailable(f"no OCI registry at {REGISTRY} ({type(exc).__name__}); run .ci/start-services")
    return REGISTRY
