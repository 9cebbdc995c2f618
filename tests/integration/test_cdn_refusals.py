"""A refusal from the host a redirect or a next page points at is that host's, against
real HTTP servers on 127.0.0.1 (a FAKE Hub, a FAKE CDN, a FAKE GitHub API): the token
goes to the Hub's (the API's) own origin alone, so the other host's 401 or 403 is not
"no token was sent", "the repository is gated" or "set GITHUB_TOKEN"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import LockpipeError
from lockpipe.payloads.download import fetch_into
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.settings import Context, Tuning
from lockpipe.payloads.sources import candidates
from lockpipe.refresh.api import Api
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
FILE = "/org/model/resolve/" + "a" * 40 + "/model.gguf"


class Cdn(FakeServer):
    """FAKE storage or CDN: answers every GET with ``status``; records the Authorization
    headers it got."""

    def __init__(self) -> None:
        super().__init__(_Cdn)
        self.status = 403
        self.auth: list[str | None] = []


class _Cdn(FakeHandler):
    server: Cdn

    def do_GET(self) -> None:
        self.server.auth.append(self.headers.get("Authorization"))
        self.send_bytes(self.server.status, b"AccessDenied: Request has expired")


class Hub(FakeServer):
    """FAKE Hub: redirects every GET to ``to`` (a signed CDN URL), or answers ``status``
    itself when ``to`` is empty; records the Authorization headers it got. As a FAKE
    GitHub API it answers a JSON list with a ``Link: rel="next"`` to ``to``."""

    def __init__(self) -> None:
        super().__init__(_Hub)
        self.to = ""
        self.status = 401
        self.auth: list[str | None] = []


class _Hub(FakeHandler):
    server: Hub

    def do_GET(self) -> None:
        self.server.auth.append(self.headers.get("Authorization"))
        to = self.server.to
        if self.path.startswith("/repos/"):
            return self.send_json(200, [1], {"Link": f'<{to}>; rel="next"'})
        if not to:
            return self.send_bytes(self.server.status, b"")
        self.send_bytes(302, b"", {"Location": f"{to}/blob?X-Amz-Signature=abc&Expires=1"})


@pytest.fixture
def hub() -> Iterator[Hub]:
    server = Hub()
    yield server
    server.stop()


@pytest.fixture
def cdn() -> Iterator[Cdn]:
    server = Cdn()
    yield server
    server.stop()


def _fetch(tmp: Path, hub: Hub, token: str | None) -> str:
    partial = Partial(tmp / "x.lockpipe-partial", "0" * 64, 100)
    ctx = Context(tuning=Tuning(connections=1, retries=0, backoff=0.01))
    with pytest.raises(LockpipeError) as err:
        fetch_into("payloads.m", candidates(hub.url + FILE, None, token), partial, "0" * 64, ctx)
    return str(err.value)


@pytest.mark.parametrize("status", [401, 403])
def test_a_cdn_refusing_the_hubs_redirect_is_named_not_the_token_or_the_gate(
    tmp_path: Path, hub: Hub, cdn: Cdn, status: int
) -> None:
    """Before: with HF_TOKEN sent to the Hub, the CDN's 401 said 'no token was sent: set
    HF_TOKEN', its 403 'the repository is gated or private'."""
    hub.to, cdn.status = cdn.url, status
    message = _fetch(tmp_path, hub, "hf_secret")
    assert hub.auth == ["Bearer hf_secret"] and cdn.auth == [None]
    assert f"HTTP {status}" in message
    assert f"the storage or CDN the Hub redirected to ({cdn.host}) refused" in message
    assert f"the token went to {hub.host} alone" in message
    assert "expired" in message and "try again" in message
    assert "no token was sent" not in message and "gated" not in message
    assert "hf_secret" not in message and "X-Amz-Signature=abc" not in message


def test_the_hubs_own_refusals_keep_their_words(tmp_path: Path, hub: Hub) -> None:
    hub.status = 401
    assert "the Hub refused the token" in _fetch(tmp_path, hub, "hf_secret")
    assert "no token was sent: set HF_TOKEN" in _fetch(tmp_path, hub, None)
    hub.status = 403
    assert "the repository is gated or private" in _fetch(tmp_path, hub, "hf_secret")


def test_a_next_page_refused_on_another_host_names_it_not_the_token(hub: Hub, cdn: Cdn) -> None:
    """Before: 'GitHub's API refused http://127.0.0.1:…/page2 (401); set GITHUB_TOKEN to a
    token that can read the repository', though the token was set and sent to the API."""
    hub.to, cdn.status = cdn.url + "/page2", 401
    api = Api(base=hub.url, name="GitHub's API", token="ghp_secret",
              refused="set GITHUB_TOKEN to a token that can read the repository")  # fmt: skip
    with pytest.raises(LockpipeError) as err:
        api.get_all("repos/o/r/tags", "sources.x")
    message = str(err.value)
    assert hub.auth == ["Bearer ghp_secret"] and cdn.auth == [None]
    assert message.startswith(f"sources.x: {cdn.url}/page2 refused the request (401)")
    assert f"{cdn.host} is another host than GitHub's API at {hub.url}" in message
    assert f"the token set for {hub.url} was not sent to {cdn.host}" in message
    assert "set GITHUB_TOKEN" not in message and "ghp_secret" not in message


def test_the_apis_own_refusal_still_says_set_the_token(hub: Hub) -> None:
    api = Api(base=hub.url, name="GitHub's API", token="ghp_secret",
              refused="set GITHUB_TOKEN to a token that can read the repository")  # fmt: skip
    with pytest.raises(LockpipeError, match=r"refused .* set GITHUB_TOKEN"):
        api.get("orgs/o", "sources.x")
