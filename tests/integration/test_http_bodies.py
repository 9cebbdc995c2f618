"""What the HTTP layer does with a request's body and an answer's encoding, against real
HTTP servers on 127.0.0.1 (issue 18):

- an upload whose body the registry reads slowly (a slow uplink) is not cut off by the
  deadline for the status and headers, and is sent once;
- a try left late while its body may still be sent is never sent again beside it;
- a redirect whose Location is not a URL is one line of error, not a traceback;
- an answer whose body does not decode as its Content-Encoding says is one error, not
  retried as a network failure.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import lockpipe.http
from lockpipe.errors import FetchError, RegistryError
from lockpipe.refresh.api import Api
from lockpipe.registry.transport import Registry
from lockpipe.registry.upload import upload_file
from tests.httpfake import FakeHandler, FakeServer
from tests.policy import within

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


class SlowRegistry(FakeServer):
    """FAKE registry: no blob is there; an upload starts at POST; a PUT's body is read
    ``step`` bytes every ``pause`` s (a slow uplink: no single stall near the read
    timeout), then answered 201; ``trickle``: its status line a byte every ``pause`` s
    instead (an answer that never comes in time); ``silent``: no answer at all, until
    ``stopping`` is set. ``puts`` holds each PUT's body's sha256 as it ended."""

    def __init__(
        self, step: int, pause: float, *, trickle: bool = False, silent: bool = False
    ) -> None:
        super().__init__(_Registry)
        self.step, self.pause, self.trickle, self.silent = step, pause, trickle, silent
        self.stopping = threading.Event()
        self.puts: list[str] = []
        self.started = 0  # PUTs begun


class _Registry(FakeHandler):
    server: SlowRegistry

    def setup(self) -> None:
        self.request.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        super().setup()

    def do_GET(self) -> None:
        self.send_json(200, {})

    def do_HEAD(self) -> None:
        self.send_bytes(404, b"")

    def do_POST(self) -> None:
        self.read_body()
        self.send_bytes(202, b"", {"Location": "/v2/x/y/blobs/uploads/u1"})

    def do_PUT(self) -> None:
        with self.server.lock:
            self.server.started += 1
        left, digest = int(self.headers.get("Content-Length") or 0), hashlib.sha256()
        try:
            while left > 0:
                got = self.rfile.read(min(self.server.step, left))
                if not got:
                    return
                digest.update(got)
                left -= len(got)
                time.sleep(self.server.pause)
        except OSError:
            return
        with self.server.lock:
            self.server.puts.append(digest.hexdigest())
        if self.server.silent:
            self.server.stopping.wait(120)
            return
        if not self.server.trickle:
            return self.send_bytes(201, b"")
        try:
            for byte in b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n":
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(self.server.pause)
        except OSError:
            pass


@pytest.fixture
def uplink() -> Iterator[SlowRegistry]:
    server = SlowRegistry(step=32 << 10, pause=0.1)  # about 320 KB/s
    yield server
    server.stop()


@pytest.fixture
def stalled() -> Iterator[SlowRegistry]:
    server = SlowRegistry(step=1 << 16, pause=0.3, trickle=True)
    yield server
    server.stop()


def test_a_body_sent_slower_than_the_status_deadline_is_sent_once_and_whole(
    uplink: SlowRegistry, tmp_path: Path
) -> None:
    """3 MB at about 320 KB/s: about 10 s, past 4 read timeouts of 1 s (before: the PUT
    was 'unreachable (ReadTimeout)' after 3 tries, each sending the file again)."""
    blob = tmp_path / "blob"
    blob.write_bytes(bytes(range(256)) * (3_000_000 // 256))
    size = blob.stat().st_size
    digest = "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    reg = Registry(uplink.host, scheme="http", credential=None, timeout=1.0, retries=2)
    done = within(60, lambda: upload_file(reg, "x/y", blob, digest, size, chunk=1 << 30))
    assert done.mode == "single"
    assert uplink.puts == [digest.removeprefix("sha256:")]
    assert uplink.started == 1


def test_an_upload_left_late_fails_once_and_is_not_sent_again_beside_itself(
    stalled: SlowRegistry, tmp_path: Path
) -> None:
    """1 KiB read, then a status line a byte per 0.3 s: late after 4 read timeouts and
    1 KiB at 1 KiB/s (3 s); its thread may still be sending, so no second PUT starts
    beside it (before: late after 2 s, and 3 PUTs at once)."""
    blob = tmp_path / "blob"
    blob.write_bytes(b"z" * 1024)
    digest = "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    reg = Registry(stalled.host, scheme="http", credential=None, timeout=0.5, retries=2)
    late = r"body \(1,024 bytes\) was not sent and answered"
    with pytest.raises(RegistryError, match=late) as caught:
        within(30, lambda: upload_file(reg, "x/y", blob, digest, 1024, chunk=1 << 30))
    assert "after 1 try" in str(caught.value)
    time.sleep(1.0)  # a retry, had there been one, would have begun by now
    assert stalled.started == 1


def test_a_registry_silent_after_a_big_body_is_given_up_on_in_the_send_buffers_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """8 MiB read at once, then no answer. The answer's read waited for the whole body at
    1 KiB/s on top of the read timeout (8,192 s; 18 hours for a 64 MiB chunk), where only
    what the kernel's send buffer may still hold can be going out: here 2 KiB, so 2.5 s a
    try."""
    monkeypatch.setattr(lockpipe.http, "SEND_BUFFER", 2048, raising=False)
    blob = tmp_path / "blob"
    blob.write_bytes(b"s" * (8 << 20))
    digest = "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    server = SlowRegistry(step=8 << 20, pause=0, silent=True)
    try:
        reg = Registry(server.host, scheme="http", credential=None, timeout=0.5, retries=1)
        with pytest.raises(RegistryError, match="ReadTimeout") as caught:
            within(60, lambda: upload_file(reg, "x/y", blob, digest, 8 << 20, chunk=1 << 30))
        assert "after 2 tries" in str(caught.value), caught.value
        assert server.puts == [digest.removeprefix("sha256:")] * 2
    finally:
        server.stopping.set()
        server.stop()


class _BadLocation(FakeHandler):
    def do_GET(self) -> None:
        self.send_bytes(302, b"", {"Location": "http://[::1/x"})


def test_a_location_that_is_not_a_url_is_one_line_of_error_through_the_cli() -> None:
    server = FakeServer(_BadLocation)
    try:
        cmd = [sys.executable, "-m", "lockpipe", "refresh-digests", "--kind", "pip",
               "--dry-run", "--pypi", server.url]  # fmt: skip
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip
    finally:
        server.stop()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode != 0
    assert f"{server.url}/pypi/" in done.stderr
    assert "its Location 'http://[::1/x' is not a URL" in done.stderr


class Misencoded(FakeServer):
    """FAKE API: every GET answers 200 with ``Content-Encoding: gzip`` and a body that is
    plain JSON (a proxy that labels what it did not compress); ``gets`` counts them."""

    def __init__(self) -> None:
        super().__init__(_Misencoded)
        self.gets = 0


class _Misencoded(FakeHandler):
    server: Misencoded

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.gets += 1
        self.send_bytes(
            200,
            b'{"not": "gzip"}' * 64,
            {"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )


def test_a_body_that_does_not_decode_as_its_content_encoding_is_one_error_not_retried() -> None:
    server = Misencoded()
    try:
        api = Api(base=server.url, name="GitHub's API", refused="set GITHUB_TOKEN", token=None,
                  no_token="set GITHUB_TOKEN", sleep=lambda _: None)  # fmt: skip
        with pytest.raises(FetchError) as caught:
            within(30, lambda: api.get("repos/o/r", "sources.x"))
    finally:
        server.stop()
    message = str(caught.value)
    assert "Content-Encoding 'gzip'" in message
    assert f"{server.url}/repos/o/r" in message
    assert "unreachable" not in message
    assert server.gets == 1
