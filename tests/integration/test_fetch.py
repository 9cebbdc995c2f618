"""Source archives: the cache is re-checked, and a damaged copy is fetched again."""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lockpipe.payloads.cache import fetch_verified

pytestmark = pytest.mark.integration


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(url, sha256) of a small archive on a loopback HTTP server."""
    root = tmp_path / "www"
    root.mkdir()
    data = b"llama.cpp archive bytes\n" * 1000
    (root / "a.tar.gz").write_bytes(data)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/a.tar.gz", hashlib.sha256(data).hexdigest()
    server.shutdown()


def test_a_damaged_cached_archive_is_fetched_again(served: tuple[str, str], tmp_path: Path) -> None:
    url, sha = served
    cache = tmp_path / "cache"
    first = fetch_verified(url, sha, cache)
    first.chmod(0o644)
    first.write_bytes(b"damaged")
    again = fetch_verified(url, sha, cache)
    assert again == first
    assert hashlib.sha256(again.read_bytes()).hexdigest() == sha
