"""``manifest_digest`` (the old entry point) against a token server that misbehaves.

``Registry`` below is a fake: a hand-written HTTP server on 127.0.0.1 that is
both registry and token server, because the failures tested here (a token
answer without a token, a token server that refuses or is gone) are what a
real registry never does on request. The real-registry tests are in
test_registry_auth.py, test_registry_resolve.py and test_registry_push.py.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.client import manifest_digest

pytestmark = pytest.mark.integration

DIGEST = "sha256:" + "3" * 64


class Registry(ThreadingHTTPServer):
    """A registry that asks for a Bearer token from ``realm``; it is also that token server.

    ``token_status`` and ``token_body`` are what the token endpoint answers;
    ``authorizations`` records every Authorization header the registry saw.
    """

    token_status = 200
    token_body: dict[str, object] = {}  # noqa: RUF012  (set per test)
    realm = ""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.authorizations: list[str] = []
        self.realm = f"http://127.0.0.1:{self.server_address[1]}/token"


class Handler(BaseHTTPRequestHandler):
    server: Registry

    def do_HEAD(self) -> None:
        auth = self.headers.get("Authorization")
        if auth:
            self.server.authorizations.append(auth)
        if auth == "Bearer good-token":
            self.send_response(200)
            self.send_header("Docker-Content-Digest", DIGEST)
        else:
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate",
                f'Bearer realm="{self.server.realm}",service="test",scope="repository:lib/x:pull"',
            )
        self.end_headers()

    def do_GET(self) -> None:
        body = json.dumps(self.server.token_body).encode()
        self.send_response(self.server.token_status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[Registry]:
    server = Registry()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _ref(server: Registry) -> str:
    return f"127.0.0.1:{server.server_address[1]}/lib/x:1"


def test_a_token_answer_resolves_the_digest(registry: Registry) -> None:
    registry.token_body = {"token": "good-token"}
    assert manifest_digest(_ref(registry), insecure=True, timeout=5) == DIGEST


def test_access_token_is_accepted_too(registry: Registry) -> None:
    registry.token_body = {"access_token": "good-token"}
    assert manifest_digest(_ref(registry), insecure=True, timeout=5) == DIGEST


def test_a_token_answer_without_a_token_is_named_and_never_sent(registry: Registry) -> None:
    registry.token_body = {}
    with pytest.raises(RegistryError) as info:
        manifest_digest(_ref(registry), insecure=True, timeout=5)
    assert f"the token server at {registry.realm} answered without a token" in str(info.value)
    assert registry.authorizations == [], "a token that is not there was sent"


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusing_token_server_reads_as_refused_credentials(
    registry: Registry, status: int
) -> None:
    registry.token_status = status
    registry.token_body = {"errors": [{"code": "UNAUTHORIZED"}]}
    with pytest.raises(RegistryError) as info:
        manifest_digest(_ref(registry), insecure=True, timeout=5)
    message = str(info.value)
    assert "refused credentials" in message and str(status) in message
    assert "unreachable" not in message


def test_an_unreachable_token_server_is_named(registry: Registry) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    registry.realm = f"http://{dead}/token"
    with pytest.raises(RegistryError) as info:
        manifest_digest(_ref(registry), insecure=True, timeout=5)
    message = str(info.value)
    assert f"token server {dead} unreachable" in message and "ConnectionError" in message


def test_an_unreachable_registry_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(RegistryError, match=f"registry {dead} unreachable .* after 5 tries"):
        manifest_digest(f"{dead}/lib/x:1", insecure=True, timeout=5)
