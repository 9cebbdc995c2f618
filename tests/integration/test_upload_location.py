"""An upload ``Location`` is a URI reference, resolved against the request that answered
it (RFC 3986 section 5, as distribution's clients read it), against real HTTP servers on
127.0.0.1: a FAKE registry that asks for Basic credentials and hands out each shape of
Location, and a FAKE storage front on another port (another origin) that takes the PUT.
The registry's credentials go to its own origin alone, whatever the Location's shape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockpipe.registry.creds import Credential
from lockpipe.registry.platforms import sha256_digest
from lockpipe.registry.push import upload_blob
from lockpipe.registry.transport import Registry
from lockpipe.urls import basic_auth
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
AUTH = basic_auth("user", "pw")
DATA = b"layer bytes"
DIGEST = sha256_digest(DATA)


class Fake(FakeServer):
    """FAKE registry (``registry``: asks for Basic ``AUTH``, answers the upload POST with
    ``location``) or FAKE storage front; records (method, path, Authorization) of each
    request, and takes a PUT whose path starts with ``put_at``."""

    def __init__(self, registry: bool) -> None:
        super().__init__(_Fake)
        self.registry = registry
        self.location = ""
        self.put_at = "/none"
        self.seen: list[tuple[str, str, str | None]] = []


class _Fake(FakeHandler):
    server: Fake

    def _answer(self) -> None:
        self.read_body()
        auth = self.headers.get("Authorization")
        self.server.seen.append((self.command, self.path, auth))
        if self.server.registry and auth != AUTH:
            return self.send_bytes(401, b"", {"WWW-Authenticate": 'Basic realm="fake"'})
        if self.command == "HEAD":
            return self.send_bytes(404, b"")
        if self.command == "POST":
            return self.send_bytes(202, b"", {"Location": self.server.location})
        ok = self.command == "PUT" and self.path.startswith(self.server.put_at)
        self.send_bytes(201 if ok else 404, b"")

    do_HEAD = do_POST = do_PUT = _answer


@pytest.fixture
def servers() -> Iterator[tuple[Fake, Fake]]:
    registry, storage = Fake(registry=True), Fake(registry=False)
    yield registry, storage
    registry.stop()
    storage.stop()


def _upload(registry: Fake) -> None:
    cred = Credential(username="user", secret="pw", source="test")
    reg = Registry(registry.host, scheme="http", credential=cred, retries=0)
    upload_blob(reg, "org/r", DATA, DIGEST)


def _put(server: Fake) -> tuple[str, str | None]:
    puts = [(path, auth) for method, path, auth in server.seen if method == "PUT"]
    assert len(puts) == 1, server.seen
    return puts[0]


def test_a_relative_location_is_read_against_the_upload_url(
    servers: tuple[Fake, Fake],
) -> None:
    """Before: 'abc-uuid?_state=x' was PUT to /v2/org/r/abc-uuid, which answered 404."""
    registry, _ = servers
    registry.location, registry.put_at = "abc-uuid?_state=x", "/v2/org/r/blobs/uploads/abc-uuid"
    _upload(registry)
    path, auth = _put(registry)
    assert path == f"/v2/org/r/blobs/uploads/abc-uuid?_state=x&digest={DIGEST}"
    assert auth == AUTH


@pytest.mark.parametrize("shape", ["//{host}/up/u?_state=x", "HTTP://{host}/up/u?_state=x"])
def test_a_location_naming_another_host_goes_there_without_credentials(
    servers: tuple[Fake, Fake], shape: str
) -> None:
    """Before: '//127.0.0.1:PORT/up/…' was sent to the registry as the path
    '//127.0.0.1:PORT/up/…', and 'HTTP://…' appended to /v2/org/r/; both answered 404."""
    registry, storage = servers
    registry.location, storage.put_at = shape.format(host=storage.host), "/up/u?_state=x&digest="
    _upload(registry)
    assert _put(storage)[1] is None
    assert not [s for s in registry.seen if s[0] == "PUT"]


def test_an_upper_case_location_on_the_registry_itself_keeps_its_credentials(
    servers: tuple[Fake, Fake],
) -> None:
    registry, _ = servers
    registry.location = f"HTTP://{registry.host}/v2/org/r/blobs/uploads/u2?_state=y"
    registry.put_at = "/v2/org/r/blobs/uploads/u2?_state=y&digest="
    _upload(registry)
    assert _put(registry)[1] == AUTH
