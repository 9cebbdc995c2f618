"""The demo's registry probes (is a registry there, which digest does it serve) against
real HTTP servers on 127.0.0.1 that answer badly: a body that never ends, a body a byte
at a time, and a ``~/.netrc`` entry for the host. They go through lockpipe's HTTP rules:
bounded, the body left unread, no credentials the demo did not choose (issue 18)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.demo.bases import registry_digest
from lockpipe.demo.registry import answers
from tests.httpfake import FakeHandler, FakeServer
from tests.policy import within

pytestmark = pytest.mark.integration
DIGEST = "sha256:" + "ab" * 32


class Odd(FakeServer):
    """FAKE registry: 200 with ``Docker-Content-Digest`` on every GET and HEAD; ``body``:
    ``endless`` (a GET's body never ends) or ``trickle`` (a byte per second);
    ``auth`` holds each request's Authorization header."""

    def __init__(self, body: str) -> None:
        super().__init__(_Odd)
        self.body = body
        self.auth: list[str | None] = []
        self.stopping = threading.Event()


class _Odd(FakeHandler):
    server: Odd

    def _answer(self) -> None:
        with self.server.lock:
            self.server.auth.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Docker-Content-Digest", DIGEST)
        self.send_header("Content-Length", str(1 << 40))
        self.end_headers()
        if self.command == "HEAD":
            return
        try:
            while not self.server.stopping.is_set():
                self.wfile.write(b"x" * (1 << 16) if self.server.body == "endless" else b"x")
                self.wfile.flush()
                if self.server.body == "trickle":
                    time.sleep(1)
        except OSError:
            pass

    do_GET = do_HEAD = _answer


@pytest.fixture(params=["endless", "trickle"])
def odd(request: pytest.FixtureRequest) -> Iterator[Odd]:
    server = Odd(request.param)
    yield server
    server.stopping.set()
    server.stop()


def test_a_registry_whose_body_never_ends_is_probed_without_reading_it(
    odd: Odd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: requests read the whole body of /v2/ (an endless one grew past 1.6 GB in
    4 s; one a byte per second held `lockpipe demo --registry` past 15 s), and took
    ~/.netrc's login for 127.0.0.1, any port, over http."""
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login mirroruser password s3cret\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert within(20, lambda: answers(odd.host)) is True
    ref = f"{odd.host}/lockpipe-demo/base:1"
    assert within(20, lambda: registry_digest(ref)) == DIGEST
    assert odd.auth == [None, None]
