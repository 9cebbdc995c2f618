"""The smoke client against a server that redirects its API: a redirect is a status like
any other, never followed, and no ``~/.netrc`` entry is sent (issue 18).

requests followed a redirect by reading its whole body first, unbounded: an endless one
grew past 4 GB in 20 s in a thread that outlived the failed check. A model server's API
never redirects; something else (a login page, a proxy) answered. The server here is a
FAKE (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import CheckFailed
from lockpipe.smoke import checks
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration


class _Moved(FakeServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.seen: list[tuple[str, str | None]] = []


class _Handler(FakeHandler):
    server: _Moved

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/v1/models":
            self.send_bytes(302, b"moved", {"Location": "/elsewhere"})
        else:
            self.send_bytes(200, b'{"data": [{"id": "m"}]}', {"Content-Type": "application/json"})


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Moved]:
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login netrcuser password netrcpass\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    srv = _Moved()
    yield srv
    srv.stop()


def test_a_redirect_is_the_answer_not_followed(server: _Moved) -> None:
    with pytest.raises(CheckFailed) as caught:
        checks.model_ids(f"http://127.0.0.1:{server.server_address[1]}")
    assert str(caught.value).startswith("/v1/models answered 302: 'moved'")
    assert server.seen == [("/v1/models", None)]  # not followed, and no netrc credentials
