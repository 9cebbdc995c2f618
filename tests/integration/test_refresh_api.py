"""The JSON API client of refresh-digests against the FAKE GitHub API (tests/fake_github.py,
a real HTTP server on 127.0.0.1): retries, rate limits, pagination, where a token goes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockpipe.errors import FetchError
from lockpipe.refresh.api import RETRIES, Api
from tests.fake_github import FakeGitHub, FakeRepo

pytestmark = pytest.mark.integration
SHA = "1" * 40
TOKEN = "ghp_fake_token_never_leaves_its_host"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    server = FakeGitHub()
    tags = {f"b{n}": SHA for n in range(1, 6)}
    server.repos["o/r"] = FakeRepo(commits=[(SHA, "2026-11-01T00:00:00Z")], tags=tags)
    yield server
    server.stop()


def _api(base: str, waits: list[float], token: str | None = None) -> Api:
    return Api(base=base, name="GitHub's API", refused="set GITHUB_TOKEN", token=token,
               no_token="set GITHUB_TOKEN (a token lifts the anonymous limit)",
               sleep=waits.append)  # fmt: skip


def test_one_bad_gateway_is_retried_and_the_run_goes_on(github: FakeGitHub) -> None:
    github.fail, github.retry_after = [502], "2"
    waits: list[float] = []
    doc = _api(github.url, waits).get(f"repos/o/r/commits/{SHA}", "sources.x")
    assert doc["sha"] == SHA and waits == [2.0]


def test_a_server_error_that_stays_fails_after_bounded_waits(github: FakeGitHub) -> None:
    github.fail, github.retry_after = [503] * 10, ""
    waits: list[float] = []
    with pytest.raises(FetchError, match=r"sources\.x: GitHub's API answered 503 .*4 tries"):
        _api(github.url, waits).get(f"repos/o/r/commits/{SHA}", "sources.x")
    assert len(waits) == 3 and waits[0] <= RETRIES.base < waits[2] <= RETRIES.cap  # doubling


def test_a_retry_after_past_the_cap_fails_at_once_naming_when(github: FakeGitHub) -> None:
    github.fail, github.retry_after = [503] * 10, "3600"
    waits: list[float] = []
    with pytest.raises(FetchError, match=r"answered 503 .* asks to wait 3600 s; try again after "):
        _api(github.url, waits).get(f"repos/o/r/commits/{SHA}", "sources.x")
    assert waits == [] and len(github.requests) == 1  # an hour is not slept, nor asked again


def test_a_spent_rate_limit_says_until_when_and_names_the_token_only_without_one(
    github: FakeGitHub,
) -> None:
    github.rate_limit_reset = 1_800_000_000  # 2027-01-15T08:00:00Z
    waits: list[float] = []
    with pytest.raises(FetchError) as anonymous:
        _api(github.url, waits).get("repos/o/r/releases/latest", "sources.x")
    text = str(anonymous.value)
    assert "rate limited until 2027-01-15T08:00:00Z" in text and "refused" not in text
    assert "set GITHUB_TOKEN" in text and waits == []  # an hour's wait is not retried
    github.token = TOKEN
    with pytest.raises(FetchError) as tokened:
        _api(github.url, waits, TOKEN).get("repos/o/r/releases/latest", "sources.x")
    assert "rate limited until" in str(tokened.value)
    assert "GITHUB_TOKEN" not in str(tokened.value) and TOKEN not in str(tokened.value)


def test_every_page_is_read(github: FakeGitHub) -> None:
    tags = _api(github.url, []).get_all("repos/o/r/tags", "sources.x")
    assert [t["name"] for t in tags] == ["b1", "b2", "b3", "b4", "b5"]
    assert sum(r.startswith("/repos/o/r/tags") for r in github.requests) == 3  # 2 + 2 + 1


def test_a_relative_next_link_is_read_against_the_page(github: FakeGitHub) -> None:
    """RFC 8288: a Link target is a URI reference, resolved against the page it came on;
    '</repos/o/r/tags?page=2>' was requested as it was, which is no URL."""
    github.next_base = ""
    tags = _api(github.url, []).get_all("repos/o/r/tags", "sources.x")
    assert [t["name"] for t in tags] == ["b1", "b2", "b3", "b4", "b5"]


def test_an_answer_that_is_not_a_list_says_what_it_is(github: FakeGitHub) -> None:
    github.tags_answer = {"message": "moved"}
    with pytest.raises(FetchError, match=r"answered an object, not a list"):
        _api(github.url, []).get_all("repos/o/r/tags", "sources.x")


def test_the_token_never_follows_a_next_link_to_another_host(github: FakeGitHub) -> None:
    elsewhere = FakeGitHub()
    try:
        elsewhere.repos["o/r"] = github.repos["o/r"]
        github.token, github.next_base = TOKEN, elsewhere.url.replace("127.0.0.1", "localhost")
        tags = _api(github.url, [], TOKEN).get_all("repos/o/r/tags", "sources.x")
        assert len(tags) == 5
        assert github.auth_seen == [f"Bearer {TOKEN}"]
        assert elsewhere.auth_seen == [None, None]  # pages 2 and 3, on another host
    finally:
        elsewhere.stop()


def test_a_next_link_that_is_no_url_is_a_fetch_error_naming_it(github: FakeGitHub) -> None:
    """``<http://[::1/repos/…>`` was urllib's ValueError out of get_all, a traceback."""
    github.next_base = "http://[::1"
    with pytest.raises(FetchError) as info:
        _api(github.url, []).get_all("repos/o/r/tags", "sources.x")
    text = str(info.value)
    assert text.startswith("sources.x: the Link header '<http://[::1/repos/o/r/tags?page=2>")
    assert f"{github.url}/repos/o/r/tags" in text and "Invalid IPv6 URL" in text
