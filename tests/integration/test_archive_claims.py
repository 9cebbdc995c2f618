"""An unpinned source archive (refresh-digests, upgrade) whose server claims an absurd size:
a FAKE server on 127.0.0.1 that honours Range with zeros and says, in each 206's
Content-Range, that the file has 9,999,999,999,999,999,999 bytes (20 digits: a number the
header reader takes). Before, the claim was believed: the fetch planned ten quintillion
bytes, budgeted retries for them and went on writing zeros until the server stopped (or the
disk was full); now a claim past 4 GiB (MAX_ARCHIVE), or bytes past it, end the fetch at
once with one error naming the URL and the fix."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.refresh.archive import fetch_unpinned
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
CLAIM = 10**19 - 1
STOP_AFTER = 64 << 20  # the server stops serving (404) after this many bytes
MAX_ARCHIVE = 4 << 30


class Claiming(FakeServer):
    """FAKE: 206s of zeros claiming CLAIM bytes (``stream``: a 200 of ``stream`` zeros with
    no length); ``served`` counts the bytes it sent, ``seen`` the requests."""

    def __init__(self, stream: int = 0) -> None:
        super().__init__(_Handler)
        self.stream, self.served, self.seen = stream, 0, 0
        self.lock = threading.Lock()


class _Handler(FakeHandler):
    server: Claiming

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.seen += 1
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client stopped
            self._answer(srv)  # reading: what the tests want

    def _answer(self, srv: Claiming) -> None:
        if srv.stream:
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(bytes(srv.stream))
            return
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(m[1]) if m else 0
        end = int(m[2]) if m and m[2] else CLAIM - 1
        n = min(end - start + 1, 8 << 20)
        with srv.lock:
            over = srv.served + n > STOP_AFTER
            srv.served += 0 if over else n
        if over:
            self.send_bytes(404, b"")
            return
        self.send_bytes(206, bytes(n), {"Content-Range": f"bytes {start}-{start + n - 1}/{CLAIM}"})


def test_a_claimed_size_past_any_archive_is_refused_before_its_bytes(tmp_path: Path) -> None:
    server = Claiming()
    url = f"{server.url}/o/r/archive/refs/tags/b1.tar.gz"
    try:
        with pytest.raises(FetchError) as err:
            fetch_unpinned(url, tmp_path / "cache")
    finally:
        server.stop()
    said = str(err.value)
    assert f"{url} says the file has {CLAIM:,} bytes, more than the " in said
    assert f"{MAX_ARCHIVE:,} bytes a file whose size the lock does not pin may have" in said
    assert "check the url" in said
    assert server.seen == 1  # the probe only: no piece of the claimed file was asked for
    assert not list((tmp_path / "cache").rglob("*.lockpipe-partial"))


def test_a_stream_past_the_bound_is_cut_off_there(tmp_path: Path) -> None:
    server = Claiming(stream=3 << 20)
    url = f"{server.url}/o/r/archive/refs/tags/b1.tar.gz"
    try:
        with pytest.raises(FetchError) as err:
            fetch_unpinned(url, tmp_path / "cache", most=1 << 20)
    finally:
        server.stop()
    assert f"{url} sends more than the 1,048,576 bytes a file whose size" in str(err.value)
    assert not list((tmp_path / "cache").rglob("*.lockpipe-partial"))
