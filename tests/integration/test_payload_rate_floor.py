"""The rate floor holds across reconnects: a server hanging up after a few bytes of
every request no longer beats it.

Each connection's floor (``slowest`` bytes/s over ``slow_for`` s) starts again with
each request, and a drop that brought bytes was retried at once for free: a server
sending 128 bytes per request, then hanging up, made hundreds of requests a minute
and never failed (4 MiB: about 90 minutes). Now the piece is judged across its
reconnects; a server that drops now and then but moves fast still succeeds.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.payloads.download import fetch_and_place
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.settings import Context, Tuning
from lockpipe.payloads.sources import candidates
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
DATA = os.urandom(256 * 1024)
# A floor of 1 KiB/s judged over one second: a few seconds for the run, not minutes.
SMALL_FLOOR = Tuning(connections=2, slowest=1024, slow_for=1.0, backoff=0.05, backoff_cap=0.2,
                     timeout=(2.0, 5.0), journal_every=0.1)  # fmt: skip


class _Server(FakeServer):
    def __init__(self, mode: str, healthy_after: int = 10**9) -> None:
        super().__init__(_Handler)
        self.mode, self.healthy_after = mode, healthy_after
        self.requests = 0


class _Handler(FakeHandler):
    server: _Server

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.requests += 1
            count = srv.requests
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(match[1]) if match else 0
        end = min(len(DATA), int(match[2]) + 1) if match and match[2] else len(DATA)
        part = DATA[start:end]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(DATA)}")
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        if count > srv.healthy_after:  # the old code, still retrying: let it finish
            self.wfile.write(part)
        elif srv.mode == "trickle":  # 64 bytes, a pause, 64 more, then hang up
            self.wfile.write(part[:64])
            self.wfile.flush()
            time.sleep(0.3)
            self.wfile.write(part[64:128])
            self.wfile.flush()
            self.close_connection = True
        else:  # 32 KiB, then hang up: many drops, but fast
            self.wfile.write(part[:16384])
            self.wfile.flush()
            time.sleep(0.3)  # past body()'s GATHER: the bytes are handed on before the drop
            self.wfile.write(part[16384:32768])
            self.wfile.flush()
            self.close_connection = True


def fetch(url: str, tmp: Path) -> Path:
    sha = hashlib.sha256(DATA).hexdigest()
    dest = tmp / "cache" / sha
    dest.parent.mkdir(parents=True)
    partial = Partial(dest.with_name(dest.name + ".lockpipe-partial"), sha, len(DATA))
    ctx = Context(tuning=SMALL_FLOOR, stop=threading.Event())
    fetch_and_place(url, candidates(url, None), partial, sha, dest, ctx)
    return dest


def test_a_server_hanging_up_after_a_few_bytes_each_time_fails_as_too_slow(
    tmp_path: Path,
) -> None:
    # Before, the run went on for ever; after 60 requests the server serves the file
    # whole, so the old code ends in a success this test refuses, not in a hang.
    server = _Server("trickle", healthy_after=60)
    url = f"{server.url}/x.tgz"
    try:
        with pytest.raises(FetchError) as err:
            fetch(url, tmp_path)
    finally:
        server.stop()
    message = str(err.value)
    assert err.value.return_code == 8 and url in message, message
    assert "too slow across reconnects" in message and "under 1,024 bytes/s" in message
    assert "--mirror" in message and "again later" in message
    assert server.requests < 60
    assert not (tmp_path / "cache" / hashlib.sha256(DATA).hexdigest()).exists()


def test_a_server_dropping_now_and_then_but_fast_still_gives_the_file(tmp_path: Path) -> None:
    server = _Server("drops")
    try:
        assert fetch(f"{server.url}/x.tgz", tmp_path).read_bytes() == DATA
    finally:
        server.stop()
    assert server.requests >= len(DATA) // 32768  # it hung up on every request
