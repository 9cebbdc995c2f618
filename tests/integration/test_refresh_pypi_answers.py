"""The package index's JSON, as refresh --propose and upgrade read a package's releases,
from a FAKE index (a real HTTP server on 127.0.0.1): another shape is one line naming the
URL and the key (issue 18 review)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import FetchError
from lockpipe.refresh.api import Api
from lockpipe.refresh.propose import releases
from tests.httpfake import FakeHandler, FakeServer
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("when", ["\ud800", "2026-11-09T10:00:00\n- injected", 20261109])
def test_an_upload_time_that_is_not_a_date_is_an_unknown_day(
    index: _Index, tmp_path: Path, when: object
) -> None:
    """A lone surrogate (JSON's "\\ud800") as a file's upload_time went into the proposal's
    'on PyPI since' and crashed refresh-digests --propose's report with UnicodeEncodeError's
    traceback (issue 18 review); a number or other text went in as its first ten characters.
    The day is for the reviewer, never a pin: one that is not a date is unknown, the release
    still proposed."""
    index.answer = {"info": {"version": "0.30.0"}, "releases": {
        "0.29.0": [{"upload_time": "2026-10-02T10:00:00"}],
        "0.30.0": [{"upload_time": when}],
    }}  # fmt: skip
    document = doc()
    document["pip"] = {"app": {"file": "images/app/requirements.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["app"]
    ctx = tmp_path / "checkout" / "images" / "app"
    ctx.mkdir(parents=True)
    (ctx / "requirements.txt").write_text(
        f"# derived-for: vllm[audio]==0.29.0\nvllm==0.29.0 --hash=sha256:{'1' * 64}\n"
    )
    lock = make_repo(tmp_path / "checkout", document)
    js = tmp_path / "r.json"
    result = subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock), "--kind",
         "pip", "--propose", "--dry-run", "--report-md", "-", "--report-json", str(js),
         "--first-seen", str(tmp_path / "first-seen.json")],
        cwd=REPO, text=True, capture_output=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "LOCKPIPE_PYPI": index.url,
             "LOCKPIPE_NOW": "2026-12-02T01:50:00Z"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "on PyPI since an unknown day" in result.stdout, result.stdout
    assert "injected" not in result.stdout
    (proposal,) = json.loads(js.read_text())["proposals"]
    assert proposal["version"] == "0.30.0"
    assert proposal["also"] == ["on PyPI since an unknown day"]
