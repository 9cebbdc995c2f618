"""A redirect to ``http://127.0.0.1:B\\@127.0.0.1:A/x`` against two real servers on
127.0.0.1: urllib.parse reads host A in it, urllib3 and requests connect to B. The
credentials of A never reach B, and what is shown names B, the host contacted."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from lockpipe.http import Retries, Session, follow
from lockpipe.http.transport import Policy, Transport
from lockpipe.payloads.http import open_range
from lockpipe.payloads.sources import candidate
from lockpipe.refresh.api import Api
from lockpipe.registry.creds import Credential
from lockpipe.registry.push import upload_blob
from lockpipe.registry.transport import Registry
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
TOKEN = "hf_only_for_A"


class _Seen(FakeServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.seen: list[tuple[str, str | None]] = []
        self.location = ""  # where /go sends a request on


class _Handler(FakeHandler):
    server: _Seen

    def _answer(self) -> None:
        self.read_body()
        auth = self.headers.get("Authorization")
        self.server.seen.append((self.path, auth))
        if self.path.startswith("/go"):
            self.send_bytes(302, b"", {"Location": self.server.location})
        elif self.command == "PUT":  # the upload, wherever it lands
            self.send_bytes(201, b"")
        elif not self.path.startswith("/v2/"):
            self.send_json(200, {})
        elif auth is None:  # a registry that takes Basic
            self.send_bytes(401, b"", {"WWW-Authenticate": 'Basic realm="r"'})
        elif self.command == "HEAD":
            self.send_bytes(404, b"")
        else:  # POST blobs/uploads/: upload there
            self.send_bytes(202, b"", {"Location": self.server.location})

    do_GET = do_HEAD = do_POST = do_PUT = _answer


@pytest.fixture
def a_and_b() -> Iterator[tuple[_Seen, _Seen]]:
    a, b = _Seen(), _Seen()
    a.location = f"http://{b.host}\\@{a.host}/x"  # A's own origin, to urllib.parse
    yield a, b
    a.stop()
    b.stop()


def _b_saw_no_credentials(b: _Seen) -> None:
    assert b.seen, "the redirect went to B, where requests connects"
    assert [auth for _, auth in b.seen] == [None] * len(b.seen)


def test_follow_keeps_the_credentials_of_a_from_b(a_and_b: tuple[_Seen, _Seen]) -> None:
    a, b = a_and_b
    answer = follow(Session(), "GET", f"{a.url}/go", origin=f"{a.url}/",
                    auth=f"Bearer {TOKEN}", timeout=5)  # fmt: skip
    assert answer.status == 200 and not answer.authorized
    assert a.seen == [("/go", f"Bearer {TOKEN}")]
    _b_saw_no_credentials(b)
    assert answer.url.startswith(f"{b.url}/"), answer.url  # the host it went to


def test_a_download_shows_the_host_it_opened(a_and_b: tuple[_Seen, _Seen]) -> None:
    a, b = a_and_b
    transport = Transport(Policy(retries=Retries(attempts=0), timeout=5))
    opened = open_range(transport, candidate(f"{a.url}/go", "upstream", token=TOKEN), 0, None)
    opened.response.close()
    _b_saw_no_credentials(b)
    assert opened.url.startswith(f"{b.url}/") and "***" not in opened.url, opened.url


def test_an_api_token_stays_with_its_api(a_and_b: tuple[_Seen, _Seen]) -> None:
    a, b = a_and_b
    api = Api(base=a.url, name="GitHub's API", refused="set GITHUB_TOKEN", token=TOKEN)
    assert api.get("go", "sources.x") == {}
    assert a.seen[0][1] is not None and TOKEN in a.seen[0][1]
    _b_saw_no_credentials(b)


def test_an_upload_location_gets_no_registry_login(a_and_b: tuple[_Seen, _Seen]) -> None:
    a, b = a_and_b
    cred = Credential(username="bob", secret=TOKEN, source="test")
    reg = Registry(a.host, scheme="http", credential=cred, retries=0, timeout=5)
    data = b"x"
    upload_blob(reg, "r", data, f"sha256:{hashlib.sha256(data).hexdigest()}")
    assert any(auth and auth.startswith("Basic ") for _, auth in a.seen)
    _b_saw_no_credentials(b)
