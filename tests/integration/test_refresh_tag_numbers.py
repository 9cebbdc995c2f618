"""``refresh --propose`` for llama.cpp sources, against a FAKE of GitHub's tags API (a
real HTTP server on 127.0.0.1) that lists a tag of ``b`` and 5,000 digits.

Python will not turn a string of more than 4,300 digits into an int, so reading that tag
as a build number was a ValueError's traceback (issue 18). A name too long to be a build
is no build: the proposal is the newer real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.lock.model import load_lock
from lockpipe.refresh.api import Api
from lockpipe.refresh.propose import Upstreams, source_proposals
from lockpipe.refresh.rules import build_number
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
HUGE = "b" + "1" * 5000


class _Tags(FakeHandler):
    def do_GET(self) -> None:
        self.send_json(200, [{"name": "b99999"}, {"name": HUGE}, {"name": "b1"}])


def test_a_tag_too_long_to_be_a_build_is_skipped() -> None:
    server = FakeServer(_Tags)
    try:
        github = Api(base=server.url, name="GitHub's API (FAKE)", refused="set GITHUB_TOKEN")
        lock = load_lock(REPO / "locks" / "digests.json")
        up = Upstreams(tags=lambda ref: [], github=github, pypi=github)
        (proposal,) = source_proposals(lock, ["llama.cpp"], up)
    finally:
        server.stop()
    assert (proposal.name, proposal.pinned, proposal.version) == ("llama.cpp", "b10069", "b99999")
    assert build_number(HUGE) is None and build_number("b10069") == 10069
