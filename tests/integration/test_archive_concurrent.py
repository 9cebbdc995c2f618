"""Two refreshes of one archive URL at once (CI jobs sharing a cache) each get the bytes they
hashed: the partial file's name is the URL's, and a second run's start unlinked the one a
first still wrote, which then placed the second's bytes under its own digest (issue 18).
The server is a FAKE (a real HTTP server on 127.0.0.1) sending each answer slowly, and a
different archive each time."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import pytest

from lockpipe.refresh.archive import Fetched, fetch_unpinned
from tests.httpfake import FakeHandler, FakeServer
from tests.policy import within

pytestmark = pytest.mark.integration


class _Changing(FakeServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.served = 0


class _Handler(FakeHandler):
    server: _Changing

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.served += 1
            body = bytes([self.server.served]) * 200_000  # another archive each answer
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for at in range(0, len(body), 20_000):  # 2 s in all
            self.wfile.write(body[at : at + 20_000])
            self.wfile.flush()
            time.sleep(0.2)


def test_two_fetches_of_one_url_place_what_each_hashed(tmp_path: Path) -> None:
    server = _Changing()
    url = f"http://127.0.0.1:{server.server_address[1]}/llama.cpp-b1.tar.gz"
    got: list[Fetched] = []
    try:
        first = threading.Thread(target=lambda: got.append(fetch_unpinned(url, tmp_path)))
        first.start()
        time.sleep(0.5)  # the first is writing its partial file
        got.append(within(60, lambda: fetch_unpinned(url, tmp_path)))
        first.join(60)
    finally:
        server.stop()
    assert len(got) == 2
    for fetched in got:
        assert hashlib.sha256(fetched.path.read_bytes()).hexdigest() == fetched.sha256
