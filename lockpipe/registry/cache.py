"""A content-addressed cache of manifests and config blobs, so a refresh costs one HEAD a base.

What a digest names never changes, so bytes fetched by digest are kept under
``<cache>/registry/sha256/<hex>`` (``--cache``; default ``~/.cache/lockpipe``) and
checked against their name again on every read: a damaged file is a miss,
never an answer. A tag is still asked of the registry every time (HEAD); only
what its digest points at comes from here. Docker Hub counts GETs of
manifests, not HEADs, so a warm cache also spares the pull limit.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from lockpipe.fs import cache_home, write_atomic
from lockpipe.lock.refs import DIGEST_RE

MAX_BYTES = 4 << 20  # manifests and configs are small; anything bigger is not kept


def default_root(env: Mapping[str, str] = os.environ) -> Path:
    """Where a caller that was given no cache keeps manifests (the CLI passes ``--cache``)."""
    return cache_home(env) / "lockpipe" / "registry"


class BlobCache:
    """Bytes by sha256 digest; every failure to read or write is a miss, never an error."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, digest: str) -> Path | None:
        if not DIGEST_RE.match(digest):
            return None
        return self.root / "sha256" / digest.removeprefix("sha256:")

    def get(self, digest: str) -> bytes | None:
        path = self._path(digest)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            path.unlink(missing_ok=True)
            return None
        return data

    def put(self, digest: str, data: bytes) -> None:
        path = self._path(digest)
        if path is None or len(data) > MAX_BYTES or path.exists():
            return
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return  # manifests and configs are JSON; anything else is not kept
        if text.encode("utf-8") != data:
            return
        try:
            write_atomic(path, text)
        except OSError:
            return  # a read-only or full cache only costs requests
