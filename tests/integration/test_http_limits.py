"""An answer without end is read to a limit, then one error: a registry's manifest past
containers/image's 4 MiB, an API's JSON past the transport's limit. The FAKE servers are
real HTTP servers on 127.0.0.1 that send zeros for as long as the client reads (a
registry or an API gone wrong); before the limit, lockpipe read them into memory until
the machine ran out (issue 18)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockpipe.errors import FetchError, RegistryError
from lockpipe.refresh.api import Api
from lockpipe.registry.client import resolve
from lockpipe.registry.transport import MAX_MANIFEST, Registry
from tests.httpfake import FakeHandler, FakeServer

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
