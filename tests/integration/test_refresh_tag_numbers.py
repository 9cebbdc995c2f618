"""``refresh --propose`` for llama.cpp sources, against a FAKE of GitHub's API (a real
HTTP server on 127.0.0.1, not GitHub).

The proposal is the repository's latest release (GitHub's ``/releases/latest``: "the most
recent non-prerelease, non-draft release, sorted by the created_at attribute",
docs.github.com/rest/releases/releases#get-the-latest-release). Every page of its
``/tags`` was read before, and llama.cpp has more than 5,000 tags: more than MAX_PAGES
pages of 100, a FetchError with no fix (issue 18). A tag of ``b`` and 5,000 digits, which
Python will not turn into an int, is no build: one line naming it, no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.lock.model import load_lock
from lockpipe.refresh.api import MAX_PAGES, Api
from lockpipe.refresh.proposal import Proposal
from lockpipe.refresh.propose import Upstreams, source_proposals
from lockpipe.refresh.rules import build_number
from tests.fake_github import FakeGitHub, FakeRepo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
HUGE = "b" + "1" * 5000


def _propose(github: FakeGitHub) -> list[Proposal]:
    api = Api(base=github.url, name="GitHub's API (FAKE)", refused="set GITHUB_TOKEN")
    lock = load_lock(REPO / "locks" / "digests.json")
    up = Upstreams(tags=lambda ref: [], github=api, pypi=api)
    return list(source_proposals(lock, ["llama.cpp"], up))


def test_a_repository_of_more_tag_pages_than_read_gets_its_latest_build_proposed() -> None:
    """More tags than MAX_PAGES pages hold (llama.cpp's thousands): the latest release is
    asked for, one request, and no tags page is read."""
    github = FakeGitHub()
    github.per_page = 1
    tags = {f"b{n}": "0" * 40 for n in range(10000, 10000 + MAX_PAGES + 30)}
    github.repos["ggml-org/llama.cpp"] = FakeRepo(tags=tags, latest_release="b10079")
    try:
        (proposal,) = _propose(github)
    finally:
        github.stop()
    assert (proposal.pinned, proposal.version) == ("b10069", "b10079")
    assert proposal.also == ("up to 9 build number(s) between them (GitHub's latest "
                             "release is read, not every tag)",)  # fmt: skip
    assert not any("/tags" in r for r in github.requests)


@pytest.mark.parametrize("latest", ["b10069", "b10001"])
def test_no_proposal_when_the_latest_build_is_not_newer(latest: str) -> None:
    github = FakeGitHub()
    github.repos["ggml-org/llama.cpp"] = FakeRepo(latest_release=latest)
    try:
        assert _propose(github) == []
    finally:
        github.stop()


def test_a_tag_too_long_to_be_a_build_is_one_line_naming_the_fix() -> None:
    github = FakeGitHub()
    github.repos["ggml-org/llama.cpp"] = FakeRepo(latest_release=HUGE)
    try:
        with pytest.raises(FetchError) as err:
            _propose(github)
    finally:
        github.stop()
    text = str(err.value)
    assert text.startswith(f"sources.llama.cpp: {github.url}/repos/ggml-org/llama.cpp/releases/")
    assert "is no build tag (bNNNN)" in text and "set the source's url" in text
    assert len(text) < 500
    assert build_number(HUGE) is None and build_number("b10069") == 10069
