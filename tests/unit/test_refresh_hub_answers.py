"""What the Hub's (and GitHub's, PyPI's) API answers is checked where it enters
refresh-digests (issue 18's review):
a tree entry whose ids are not hex, a size that is not a count, a file without a path and
a revision without a commit are one-line errors naming the entry, never pins in the lock
(an id names a file in the store; ``../..`` must never get that far)."""

from __future__ import annotations

from typing import Any

import pytest

from lockpipe.errors import FetchError
from lockpipe.refresh.payloads import _listed, _pins, _revision
from lockpipe.refresh.pypi import latest
from lockpipe.refresh.sources import _commit

GIT = "a" * 40
SHA = "b" * 64


def test_a_well_formed_entry_is_pinned() -> None:
    assert _pins({"path": "config.json", "size": 5, "oid": GIT}, "p") == {
        "size": 5, "git_sha1": GIT,
    }  # fmt: skip
    lfs = {"path": "w.safetensors", "size": 9, "oid": GIT, "lfs": {"oid": SHA, "size": 9}}
    assert _pins(lfs, "p") == {"size": 9, "sha256": SHA}


@pytest.mark.parametrize(
    "entry",
    [
        {"path": "config.json", "size": 5, "oid": "../../../../tmp/x"},
        {"path": "config.json", "size": 5, "oid": GIT.upper()},
        {"path": "config.json", "size": "5", "oid": GIT},
        {"path": "config.json", "size": True, "oid": GIT},
        {"path": "config.json", "size": -1, "oid": GIT},
        {"path": "w", "size": 9, "oid": GIT, "lfs": {"oid": "../" + SHA[3:]}},
        {"path": "w", "size": 9, "oid": GIT, "lfs": {}},
    ],
)
def test_an_entry_the_hub_would_not_give_is_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(
        FetchError, match=r"payloads\.m: the Hub's tree entry for '(config\.json|w)'"
    ):
        _pins(entry, "payloads.m")


def test_a_file_without_a_path_is_refused_and_folders_are_skipped() -> None:
    assert _listed([{"type": "directory", "path": "d"}, {"type": "file", "path": "f"}], "p") == {
        "f": {"type": "file", "path": "f"}
    }
    with pytest.raises(FetchError, match="listed a file without a path"):
        _listed([{"type": "file", "size": 1}], "payloads.m")


class _Hub:
    def __init__(self, doc: Any) -> None:
        self.doc = doc

    def get(self, path: str, what: str) -> Any:
        return self.doc


@pytest.mark.parametrize("doc", [{"sha": "z" * 40}, {"sha": 7}, ["sha"], {}])
def test_a_revision_without_a_commit_is_refused(doc: Any) -> None:
    with pytest.raises(FetchError, match=r"no commit sha \(40 hex digits\) for o/r@main"):
        _revision(_Hub(doc), "o/r", "main", "payloads.m")  # type: ignore[arg-type]


class _Index(_Hub):
    def url(self, path: str) -> str:
        return f"http://index/{path}"


@pytest.mark.parametrize("doc", [{"info": ["2.0"]}, {"info": "2.0"}, {"info": {"version": 2}}, []])
def test_a_pypi_answer_of_another_shape_is_refused(doc: Any) -> None:
    with pytest.raises(FetchError, match=r"pip\.app: http://index/pypi/requests/json has no info"):
        latest(_Index(doc), "requests", "pip.app")  # type: ignore[arg-type]


def test_a_github_commit_of_another_shape_gives_no_date_not_a_traceback() -> None:
    for commit in ("x", ["x"], {"committer": "x"}, {"committer": {"date": 5}}):
        doc = {"sha": GIT, "commit": commit}
        assert _commit(_Hub(doc), "o/r", "main", "sources.x") == (GIT, None)  # type: ignore[arg-type]
