"""A source archive pinned by sha256 but not by size (fetch_verified: the build's and the
demo's source archive, refresh-digests --kind sources) whose server sends without end: a
FAKE server on 127.0.0.1 answering 200 with no Content-Length and zeros (it stops after
STOP_AFTER bytes, so a fetch without a bound fails here instead of filling the disk), a 206
whose Content-Range claims 10**19 bytes, or a 200 whose Content-Length does. Before, no
bound applied (only a pinned size was checked): the zeros were written until the disk was
full. Now more than ``most`` bytes (MAX_ARCHIVE, 4 GiB, by default: the bound refresh's
unpinned archives have), claimed or sent, ends the fetch with an error naming the URL and
the fix, and the partial file is gone."""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

import pytest

from lockpipe.errors import IntegrityError
from lockpipe.payloads.cache import fetch_verified
from lockpipe.refresh.archive import fetch_unpinned
from tests.integration.test_archive_claims import CLAIM, Claiming
from tests.integration.test_archive_claims import _Handler as _Claims

pytestmark = pytest.mark.integration
STOP_AFTER = 64 << 20  # the server sends no more than this per request
MOST = 8 << 20  # the bound these tests pass
SMALL = b"tarball" * 1000


class Endless(Claiming):
    """FAKE (tests/integration/test_archive_claims.py's server): ``mode`` is 'stream' (a 200
    of STOP_AFTER zeros, no length), 'claim206' (206s of zeros claiming CLAIM bytes),
    'claim200' (a 200 whose Content-Length is CLAIM, STOP_AFTER zeros) or 'small' (SMALL)."""

    def __init__(self, mode: str) -> None:
        super().__init__(STOP_AFTER if mode == "stream" else 0)
        self.mode = mode
        self.RequestHandlerClass = _Handler


class _Handler(_Claims):
    server: Endless

    def _answer(self, srv: Claiming) -> None:
        mode = self.server.mode
        if mode == "small":
            self.send_bytes(200, SMALL)
        elif mode == "claim200":
            self.send_response(200)
            self.send_header("Content-Length", str(CLAIM))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(bytes(STOP_AFTER))
        else:
            super()._answer(srv)


def _fetch(mode: str, cache: Path) -> tuple[str, Endless, str]:
    server = Endless(mode)
    url = f"{server.url}/o/r/archive/refs/tags/b1.tar.gz"
    try:
        with pytest.raises(IntegrityError) as err:
            fetch_verified(url, "a" * 64, cache, most=MOST)
    finally:
        server.stop()
    assert not list(cache.rglob("*.lockpipe-partial")), "the refused bytes were kept"
    return str(err.value), server, url


def test_an_endless_body_is_cut_off_at_the_bound(tmp_path: Path) -> None:
    said, _, url = _fetch("stream", tmp_path / "cache")
    assert f"upstream {url} sends more than the {MOST:,} bytes a file whose size" in said
    assert "check the url and the --mirror" in said
    assert "the lock may pin the wrong file" in said


def test_a_206_claiming_more_is_refused_before_its_pieces(tmp_path: Path) -> None:
    said, server, url = _fetch("claim206", tmp_path / "cache")
    assert f"{url} says the file has {CLAIM:,} bytes, more than the {MOST:,} bytes" in said
    assert server.seen == 1  # the probe only: no other piece was asked for


def test_a_content_length_claiming_more_is_refused_before_its_bytes(tmp_path: Path) -> None:
    said, server, url = _fetch("claim200", tmp_path / "cache")
    assert f"{url} says the file has {CLAIM:,} bytes, more than the {MOST:,} bytes" in said
    assert server.seen == 1


def test_a_file_under_the_bound_is_fetched(tmp_path: Path) -> None:
    server = Endless("small")
    sha = hashlib.sha256(SMALL).hexdigest()
    try:
        got = fetch_verified(f"{server.url}/a.tar.gz", sha, tmp_path / "cache", most=MOST)
    finally:
        server.stop()
    assert got.read_bytes() == SMALL


def test_the_default_bound_is_the_unpinned_archives_bound() -> None:
    verified = inspect.signature(fetch_verified).parameters["most"].default
    assert verified == inspect.signature(fetch_unpinned).parameters["most"].default == 4 << 30
