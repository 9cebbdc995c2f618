"""An answer without end is read to a limit, then one error: a registry's manifest past
containers/image's 4 MiB, an API's JSON past the transport's limit. The FAKE servers are
real HTTP servers on 127.0.0.1 that send zeros for as long as the client reads (a
registry or an API gone wrong); before the limit, lockpipe read them into memory until
the machine ran out (issue 18)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from lockpipe.errors import FetchError, RegistryError
from lockpipe.refresh.api import Api
from lockpipe.registry.client import resolve
from lockpipe.registry.transport import MAX_MANIFEST, Registry
from tests.httpfake import FakeHandler, FakeServer
from tests.policy import within

pytestmark = pytest.mark.integration
DIGEST = "sha256:" + "ab" * 32


class Endless(FakeServer):
    """FAKE: /v2/ answers 200 {}; a HEAD says the digest is there; any other GET 200 with
    zeros, chunked, until the client hangs up; ``sent`` counts the bytes that went out."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self.sent = 0


class _Handler(FakeHandler):
    server: Endless

    def do_HEAD(self) -> None:  # the digest asked for is there
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Docker-Content-Digest", DIGEST)
        self.send_header("Content-Length", "1000")
        self.end_headers()

    def do_GET(self) -> None:
        if self.path == "/v2/":
            return self.send_json(200, {})
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"0" * (1 << 16)
        try:
            while self.server.sent < 1 << 30:  # 1 GiB at most, should the client not stop
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.server.sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def endless() -> Iterator[Endless]:
    server = Endless()
    yield server
    server.stop()


def test_a_manifest_without_end_is_read_to_containers_images_limit(endless: Endless) -> None:
    reg = Registry(endless.host, scheme="http", credential=None)
    with pytest.raises(RegistryError, match=f"answered more than {MAX_MANIFEST:,} bytes"):
        resolve(f"{endless.host}/x/y@{DIGEST}", registry=reg)
    assert endless.sent < 64 * MAX_MANIFEST  # stopped near the limit, not at 1 GiB


def test_an_api_answer_without_end_is_read_to_the_transports_limit(endless: Endless) -> None:
    api = Api(base=endless.url, name="GitHub's API", refused="set GITHUB_TOKEN", token=None,
              no_token="set GITHUB_TOKEN", sleep=lambda _: None)  # fmt: skip
    limit = api.transport.policy.max_body
    with pytest.raises(FetchError, match=f"answered more than {limit:,} bytes"):
        api.get("repos/o/r", "sources.x")
    assert endless.sent < 4 * limit


class Bomb(FakeServer):
    """FAKE API: every GET answers 1,827 bytes, ``Content-Encoding: gzip, gzip``, that
    decode to 1 GiB of zeros."""

    def __init__(self) -> None:
        super().__init__(_Bomb)
        inner = zlib.compressobj(9, zlib.DEFLATED, 31)
        once = b"".join(inner.compress(bytes(1 << 20)) for _ in range(1024)) + inner.flush()
        outer = zlib.compressobj(9, zlib.DEFLATED, 31)
        self.body = outer.compress(once) + outer.flush()


class _Bomb(FakeHandler):
    server: Bomb

    def do_GET(self) -> None:
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip, gzip"}
        self.send_bytes(200, self.server.body, headers)


def test_an_answer_that_decodes_to_a_gibibyte_is_read_to_the_limit_as_it_decodes() -> None:
    """urllib3 before 2.6 decoded a whole gzip-in-gzip body before the cap saw a byte
    (2.5.0: 1.8 GB of memory, and still decoding after 40 s): pyproject asks for 2.6 or
    later, and this holds the pinned one to it."""
    server = Bomb()
    try:
        api = Api(base=server.url, name="the Hub", refused="x", token=None, no_token="x",
                  sleep=lambda _: None)  # fmt: skip
        limit = api.transport.policy.max_body
        with pytest.raises(FetchError, match=f"answered more than {limit:,} bytes"):
            within(60, lambda: api.get("api/models/x", "payloads.x"))
        assert len(server.body) < 4096
    finally:
        server.stop()
