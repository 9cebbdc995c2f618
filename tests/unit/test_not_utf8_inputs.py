"""A file lockpipe reads that is not UTF-8 is one lockpipe error naming the file, never
UnicodeDecodeError's traceback (issue 18): the lock's requirements files (refresh's
derivation checks and proposals), a target's Dockerfile (preflight's vLLM environment)
and the Hub token file.

The repository's locks/ and images/ are copied to a tmp folder, one file there is made
not UTF-8, and the lock relocked over it (its sha256 pinned), as a user's edit would be.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lockpipe.errors import FetchError, LockError
from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import Lock, dump_lock, load_lock, parse_lock
from lockpipe.payloads.sources import hf_token
from lockpipe.preflight import plan
from lockpipe.refresh import pip, propose, pypi
from lockpipe.refresh.api import Api

REPO = Path(__file__).resolve().parents[2]
BAD = b"vllm==0.29.0 \xff\xfe\n"
REQUIREMENTS = "images/frank-small/requirements-audio.txt"


def _lock(tmp_path: Path, spoil: str) -> Lock:
    """The repository's lock in ``tmp_path``, ``spoil`` (a path in it) made not UTF-8."""
    for folder in ("locks", "images"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    (tmp_path / spoil).write_bytes(BAD)
    path = tmp_path / "locks" / "digests.json"
    path.write_text(dump_lock(relock(parse_lock(json.loads(path.read_text()), path))))
    return load_lock(path)


def _names_the_file(err: pytest.ExceptionInfo[Exception], lock: Lock, spoil: str) -> None:
    assert str(err.value) == (
        f"{lock.root / spoil}: not UTF-8 text (byte 0xff at offset 13); re-save it as UTF-8"
    )


def test_refresh_s_derivation_checks(tmp_path: Path) -> None:
    lock = _lock(tmp_path, REQUIREMENTS)
    with pytest.raises(LockError) as err:
        pip.rederive(lock)
    _names_the_file(err, lock, REQUIREMENTS)
    with pytest.raises(LockError) as err:
        propose.derived_files(lock)
    _names_the_file(err, lock, REQUIREMENTS)
    index = Api(base="http://127.0.0.1:9", name="PyPI (never asked)", refused="-")
    with pytest.raises(LockError) as err:
        pypi.newer_releases(lock, ["frank-small-audio"], index)
    _names_the_file(err, lock, REQUIREMENTS)


def test_preflight_s_dockerfile_read(tmp_path: Path) -> None:
    dockerfile = "images/frank-small/Dockerfile"
    lock = _lock(tmp_path, dockerfile)
    target = lock.target("frank-small")
    with pytest.raises(LockError) as err:
        plan.read_dockerfile_env(lock, target)
    _names_the_file(err, lock, dockerfile)


def test_the_hub_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"hf_\xff")
    with pytest.raises(FetchError, match=rf"{token}: not UTF-8 text \(byte 0xff at offset 3\)"):
        hf_token({"HF_TOKEN_PATH": str(token)})
