"""Real engines, a real loopback registry, and a busybox base pinned by digest.

The base is ``FROM scratch`` plus Debian's static busybox, built with buildah
and pushed to the registry at LOCKPIPE_TEST_REGISTRY (default 127.0.0.1:5000,
started by .ci/start-services). Tests then pin it by the digest the registry
returned, exactly as a lock pins a public base.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from lockpipe.engines import get_engine
from lockpipe.engines.base import Engine
from lockpipe.errors import EngineMissing
from tests.bases import BUSYBOX, push_busybox_base
from tests.policy import unavailable


@pytest.fixture(scope="session")
def busybox_base(registry: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(ref, digest) of a busybox base image in the loopback registry."""
    if shutil.which("buildah") is None or not BUSYBOX.is_file():
        unavailable("buildah and busybox-static are needed to make the test base")
    return push_busybox_base(registry, tmp_path_factory.mktemp("busybox"))


@pytest.fixture(params=["buildah", "podman", "docker"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    try:
        yield get_engine(request.param)
    except EngineMissing as exc:
        unavailable(f"engine {request.param} is not usable: {exc}")
