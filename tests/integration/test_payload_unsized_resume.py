"""A source archive pins no size: bytes a 200 wrote before it broke off, then a ranged server.

A 200 that breaks off journals ``[0, n)`` with no size. The next try (the next
candidate, or the next run) hashed ``[0, n)`` from disk and waited for a piece at
byte ``n``, while the 206 that told the size had the file fetched again from byte 0:
no piece ever started at ``n``, and the run hung for ever in the hasher.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.payloads.download import download_url
from lockpipe.payloads.hasher import OrderedHasher, Unfed
from lockpipe.payloads.ranges import RangeSet
from tests.httpfake import FakeHandler, FakeServer
from tests.policy import within

pytestmark = pytest.mark.integration
DATA = os.urandom(300_000)
BROKEN = 6010  # what the 200 sends, in two writes, before it hangs up


class _Server(FakeServer):
    def __init__(self, data: bytes) -> None:
        super().__init__(_Handler)
        self.data, self.whole = data, data  # whole: what a 200 streams (and claims)
        self.breaks, self.ranged = True, True
        self.seen: list[str] = []


class _Handler(FakeHandler):
    server: _Server

    def do_GET(self) -> None:
        srv, data = self.server, self.server.data
        srv.seen.append(self.path)
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if self.path.startswith(f"/{srv.host}/") or not srv.ranged or not match:
            if not srv.breaks:
                return self.send_bytes(200, data)
            self.send_response(200)  # a mirror, or a server ignoring Range, that breaks off
            self.send_header("Content-Length", str(len(srv.whole)))
            self.end_headers()
            self.wfile.write(srv.whole[:4000])
            self.wfile.flush()
            time.sleep(0.3)  # past body()'s GATHER: the bytes are handed on, and written
            self.wfile.write(srv.whole[4000:BROKEN])
            self.wfile.flush()
            self.close_connection = True
            return
        start = int(match[1])
        end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
        self.send_bytes(206, data[start:end],
                        {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"})  # fmt: skip


@pytest.fixture
def server() -> _Server:
    return _Server(DATA)


def test_a_mirror_200_that_broke_off_then_upstream_206_completes(
    server: _Server, tmp_path: Path
) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    dest = tmp_path / "cache" / sha
    try:
        got = within(
            120, lambda: download_url(f"{server.url}/x", sha, dest, mirror=f"{server.url}/",
                                      connections=2)
        )  # fmt: skip
    finally:
        server.stop()
    assert got.read_bytes() == DATA
    assert server.seen[0] == f"/{server.host}/x"  # the mirror was tried first, and broke off
    assert len(server.seen) > 1
    assert not dest.with_name(dest.name + ".lockpipe-journal").exists()


def test_a_stream_that_broke_off_resumes_on_the_next_run_from_a_ranged_server(
    server: _Server, tmp_path: Path
) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    dest = tmp_path / "cache" / sha
    journal = dest.with_name(dest.name + ".lockpipe-journal")
    try:
        server.ranged = False
        with pytest.raises(FetchError, match="connection broken"):
            download_url(f"{server.url}/x", sha, dest, connections=2)
        assert '"size": null' in journal.read_text() and "6010" in journal.read_text()
        server.ranged = True
        got = within(120, lambda: download_url(f"{server.url}/x", sha, dest, connections=2))
        assert got.read_bytes() == DATA
    finally:
        server.stop()
    assert not journal.exists()


def test_bytes_of_a_longer_file_that_do_not_fit_the_size_start_the_file_again(
    tmp_path: Path,
) -> None:
    """The broken 200 sent bytes of another, longer file (past the 206's size): they
    are dropped, the partial file truncated, and the file fetched whole."""
    small = os.urandom(5000)
    server = _Server(small)
    server.whole = os.urandom(20_000)
    sha = hashlib.sha256(small).hexdigest()
    dest = tmp_path / "cache" / sha
    try:
        got = download_url(f"{server.url}/x", sha, dest, mirror=f"{server.url}/", connections=2)
    finally:
        server.stop()
    assert got.read_bytes() == small


def test_the_hasher_raises_for_a_byte_that_will_never_come() -> None:
    """Before, a piece that never came was a wait for ever; once every byte is fed, it is
    an error naming where the sha256 stopped."""
    data = os.urandom(100)
    hasher = OrderedHasher(lambda n, at: data[at : at + n], 100, RangeSet([(0, 40)]), 1 << 20)
    hasher.feed(0, data[:40])  # fed at 0 again, as the re-fetch from byte 0 was
    hasher.finish()
    with pytest.raises(Unfed, match="stopped at byte 40 of 100"):
        hasher.result()
    hasher.stop()
