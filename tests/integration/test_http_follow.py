"""lockpipe.http's redirects against two real servers on loopback (127.0.0.1 and
127.0.0.2 are two hosts to a client): credentials stay on their origin, an upload
follows only 307 and 308, a loop and a hop without an answer are reported."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from lockpipe.http import NoAnswer, Session, follow
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
AUTH = "Bearer only-for-its-origin"


class _Seen(FakeServer):
    def __init__(self, address: str) -> None:
        super().__init__(_Handler, address=address)
        self.seen: list[tuple[str, str, str | None, bytes | None]] = []
        self.location = ""  # where /go sends a request on
        self.status = 302


class _Handler(FakeHandler):
    server: _Seen

    def _answer(self) -> None:
        body = self.read_body()
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
        if self.path == "/endless":  # a redirect whose body never ends
            self.send_response(302)
            self.send_header("Location", "/final")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 65536
            with contextlib.suppress(OSError):  # the client closes it
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        elif self.path.startswith("/go"):
            self.send_bytes(self.server.status, b"", {"Location": self.server.location})
        elif self.path == "/loop":
            self.send_bytes(302, b"", {"Location": "/loop"})
        else:
            self.send_bytes(200, b"ok")

    do_GET = do_PUT = _answer


@pytest.fixture
def hosts() -> Iterator[tuple[_Seen, _Seen]]:
    here, there = _Seen("127.0.0.1"), _Seen("127.0.0.2")
    yield here, there
    here.stop()
    there.stop()


def test_credentials_go_to_their_origin_and_never_to_a_redirect_elsewhere(
    hosts: tuple[_Seen, _Seen],
) -> None:
    here, there = hosts
    here.location = f"{there.url}/blob?X-Amz-Signature=abc"
    with requests.Session() as session:
        answer = follow(session, "GET", f"{here.url}/go", origin=here.url, auth=AUTH,
                        params={"n": "1"}, timeout=5)  # fmt: skip
    assert answer.response.status_code == 200 and answer.url == here.location
    assert not answer.authorized and not answer.looped
    assert here.seen == [("GET", "/go?n=1", AUTH, None)]
    assert there.seen == [("GET", "/blob?X-Amz-Signature=abc", None, None)]  # params: 1st hop


def test_a_redirect_back_to_the_origin_carries_them_again(hosts: tuple[_Seen, _Seen]) -> None:
    here, _ = hosts
    here.location = "/final"
    with requests.Session() as session:
        answer = follow(session, "GET", f"{here.url}/go", origin=here.url, auth=AUTH, timeout=5)
    assert answer.authorized and [s[2] for s in here.seen] == [AUTH, AUTH]


def test_an_upload_follows_only_307_and_308_with_its_body(hosts: tuple[_Seen, _Seen]) -> None:
    here, _ = hosts
    here.location = "/final"
    with requests.Session() as session:
        kept = follow(session, "PUT", f"{here.url}/go", origin=here.url, auth=None,
                      data=b"body", timeout=5)  # fmt: skip
        assert kept.response.status_code == 302 and len(here.seen) == 1  # not turned into a GET
        here.status = 307
        moved = follow(session, "PUT", f"{here.url}/go", origin=here.url, auth=None,
                       data=io.BytesIO(b"body"), timeout=5)  # fmt: skip
    assert moved.response.status_code == 200
    assert here.seen[-1] == ("PUT", "/final", None, b"body")  # the stream rewound for the hop


def test_a_loop_is_reported_and_no_answer_names_its_hop(hosts: tuple[_Seen, _Seen]) -> None:
    here, _ = hosts
    with requests.Session() as session:
        loop = follow(session, "GET", f"{here.url}/loop", origin=here.url, auth=None, timeout=5)
        assert loop.looped and loop.response.status_code == 302
        here.location = "http://127.0.0.1:1/nothing-listens"
        with pytest.raises(NoAnswer) as info:
            follow(session, "GET", f"{here.url}/go", origin=here.url, auth=None, timeout=5)
    assert info.value.url == here.location
    assert isinstance(info.value.cause, requests.ConnectionError)


def test_netrc_credentials_are_never_sent(
    hosts: tuple[_Seen, _Seen], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """requests took ~/.netrc's entry for the host (any scheme or port) in place of
    lockpipe's Authorization, on hops where lockpipe sent none too (issue 18)."""
    here, there = hosts
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login netrcuser password netrcpass\n"
                     "machine 127.0.0.2 login netrcuser password netrcpass\n")  # fmt: skip
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("HOME", str(tmp_path))
    here.location = f"{there.url}/blob"
    with requests.Session() as session:
        follow(session, "GET", f"{here.url}/go", origin=here.url, auth=AUTH, timeout=5)
        follow(session, "GET", f"{here.url}/plain", origin=here.url, auth=None, timeout=5)
    assert [s[2] for s in here.seen] == [AUTH, None]  # lockpipe's, then none
    assert there.seen[0][2] is None  # another origin: nothing, not the netrc entry


def test_a_redirect_whose_body_never_ends_is_followed_unread(hosts: tuple[_Seen, _Seen]) -> None:
    """requests read a redirect's whole body to build Response.next, even with
    allow_redirects=False: an endless one held the hop until its deadline (NoAnswer) and
    grew without bound in a thread that outlived it (issue 18)."""
    here, _ = hosts
    with Session() as session:  # streamed, as Transport sends every request
        answer = follow(session, "GET", f"{here.url}/endless", origin=here.url, auth=None,
                        timeout=2, stream=True)  # fmt: skip
    assert answer.response.status_code == 200 and answer.url == f"{here.url}/final"
