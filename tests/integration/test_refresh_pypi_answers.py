"""The package index's JSON, as refresh --propose and upgrade read a package's releases,
from a FAKE index (a real HTTP server on 127.0.0.1): another shape is one line naming the
URL and the key (issue 18 review)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from lockpipe.errors import FetchError
from lockpipe.refresh.api import Api
from lockpipe.refresh.propose import releases
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration


class _Index(FakeServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.answer: Any = {}
        self.raw: bytes | None = None  # sent as it is instead of the answer


class _Handler(FakeHandler):
    server: _Index

    def do_GET(self) -> None:
        if self.server.raw is not None:
            self.send_bytes(200, self.server.raw, {"Content-Type": "application/json"})
        else:
            self.send_json(200, self.server.answer)


@pytest.fixture
def index() -> Iterator[_Index]:
    server = _Index()
    yield server
    server.stop()


def _api(index: _Index) -> Api:
    return Api(base=index.url, name="the package index", refused="check LOCKPIPE_PYPI")


def test_releases_are_read_stable_and_not_yanked(index: _Index) -> None:
    index.answer = {"releases": {
        "0.30.0": [{"upload_time": "2026-11-02T10:00:00"}],
        "0.31.0rc1": [{"upload_time": "2026-11-05T10:00:00"}],
        "0.31.0": [{"upload_time": "2026-11-09T10:00:00", "yanked": True}],
        "0.32.0": [],
    }}  # fmt: skip
    assert releases(_api(index), "vllm", "pip.x") == {"0.30.0": "2026-11-02"}


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ([], "the answer is a list, not an object"),
        ({"info": {}}, "the answer has no releases"),
        ({"releases": ["0.30.0"]}, "releases is a list, not an object"),
        ({"releases": {"0.30.0": 5}}, "releases.0.30.0 is an integer, not a list"),
        (
            {"releases": {"0.30.0": {"upload_time": "x"}}},
            "releases.0.30.0 is an object, not a list",
        ),
    ],
)
def test_a_releases_answer_of_another_shape_is_one_line(
    index: _Index, answer: Any, words: str
) -> None:
    """An integer for a release's files was a TypeError traceback; an object was read as
    no files, the release as never uploaded."""
    index.answer = answer
    with pytest.raises(FetchError) as info:
        releases(_api(index), "vllm", "pip.x")
    assert str(info.value).startswith(f"pip.x: {index.url}/pypi/vllm/json: {words}")
    assert json.dumps(answer) not in str(info.value)  # the key, not the whole answer


def test_an_answer_nested_too_deeply_is_one_line(index: _Index) -> None:
    """json's decoder recurses per level: 100,000 '[' was a RecursionError traceback."""
    index.raw = b"[" * 100_000
    with pytest.raises(FetchError) as info:
        releases(_api(index), "vllm", "pip.x")
    assert str(info.value) == (
        f"pip.x: {index.url}/pypi/vllm/json answered JSON nested too deeply to read; is "
        f"{index.url} the package index?"
    )


def test_a_release_too_long_to_be_a_version_is_skipped(index: _Index) -> None:
    """packaging reads a release number with int(): past 4300 digits that was a plain
    ValueError traceback (only InvalidVersion was caught); it is not a version."""
    index.answer = {"releases": {
        "0.30.0": [{"upload_time": "2026-11-02T10:00:00"}],
        "9" * 5000: [{"upload_time": "2026-11-09T10:00:00"}],
        "0.31." + "9" * 5000: [{"upload_time": "2026-11-09T10:00:00"}],
    }}  # fmt: skip
    assert releases(_api(index), "vllm", "pip.x") == {"0.30.0": "2026-11-02"}
