"""Source archives: the cache is re-checked, and a damaged copy is fetched again; a size a
server claims takes no disk before its bytes come."""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.payloads.cache import fetch_verified
from tests.httpfake import FakeHandler, FakeServer

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


class _Claims(FakeServer):
    """FAKE archive server: its first answer is a 206 of 1 KiB claiming ``total`` bytes,
    every later one a 404 (so the fetch fails with that partial file in place)."""

    def __init__(self, total: int) -> None:
        super().__init__(_ClaimsHandler)
        self.total, self.answered = total, 0


class _ClaimsHandler(FakeHandler):
    server: _Claims

    def do_GET(self) -> None:
        with self.server.lock:
            first, self.server.answered = not self.server.answered, self.server.answered + 1
        if first:
            range_ = {"Content-Range": f"bytes 0-1023/{self.server.total}"}
            self.send_bytes(206, b"x" * 1024, range_)
        else:
            self.send_json(404, {})


@pytest.fixture
def claims() -> Iterator[_Claims]:
    server = _Claims(1 << 30)
    yield server
    server.stop()


def test_a_size_a_server_claims_is_not_reserved(claims: _Claims, tmp_path: Path) -> None:
    """The lock pins no size for an archive: a 206 claiming 1 GiB reserved 1 GiB before a
    second byte came, and the failed fetch kept it (a server claiming more than the disk
    holds filled it: 44 GB left behind here)."""
    cache = tmp_path / "cache"
    with pytest.raises(FetchError, match="404"):
        fetch_verified(f"{claims.url}/a.tar.gz", "0" * 64, cache)
    (partial,) = cache.rglob("*.lockpipe-partial")
    assert partial.stat().st_blocks * 512 < 1 << 20
