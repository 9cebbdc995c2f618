"""A cookie a server sets goes nowhere: lockpipe's HTTP layer keeps no cookie jar, as
podman's client keeps none. requests' jar sent one to every port of the host, to sibling
hosts (Domain=) and over http, past the rule that credentials go to their origin alone
(issue 18). Real HTTP servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockpipe.http import Retries
from lockpipe.http.transport import Header, Policy, Req, Transport
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration


class Jar(FakeServer):
    """Sets ``session=SECRET`` on every answer; ``/hop`` redirects to ``target``. ``seen``:
    each request's (path, Cookie header)."""

    def __init__(self) -> None:
        super().__init__(_Jar)
        self.target = ""
        self.seen: list[tuple[str, str | None]] = []


class _Jar(FakeHandler):
    server: Jar

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.seen.append((self.path, self.headers.get("Cookie")))
        cookie = {"Set-Cookie": "session=SECRET; Path=/"}
        if self.path == "/hop":
            return self.send_bytes(302, b"", {**cookie, "Location": self.server.target})
        self.send_bytes(200, b"ok", cookie)


@pytest.fixture
def servers() -> Iterator[tuple[Jar, Jar]]:
    a, b = Jar(), Jar()
    yield a, b
    a.stop()
    b.stop()


def test_a_cookie_is_sent_neither_back_nor_to_another_port(servers: tuple[Jar, Jar]) -> None:
    """Before: the second request to A and the redirect to B (another port, no token)
    each carried 'session=SECRET'."""
    a, b = servers
    a.target = f"{b.url}/file"
    transport = Transport(Policy(retries=Retries(attempts=0), timeout=5))
    transport.login(f"{a.url}/", Header("Bearer hf_secret"))
    for path in ("/first", "/hop"):
        assert transport.send(Req(method="GET", url=f"{a.url}{path}")).status == 200
    assert a.seen == [("/first", None), ("/hop", None)]
    assert b.seen == [("/file", None)]
