"""store.link_all never follows a link on the way to a snapshot path, and a real folder
where a path's link belongs is an error that names it and says to remove it (issue 18)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.payloads import store as st


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "store" / "models--org--m"
    blob = repo / "blobs" / "abc"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"bytes")
    return blob, repo / "snapshots" / "rev"


def test_a_linked_folder_on_the_way_is_replaced_not_followed(tmp_path: Path) -> None:
    blob, folder = _repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.mkdir(parents=True)
    os.symlink(elsewhere, folder / "sub")
    st.link(blob, folder / "sub" / "x.json")
    assert list(elsewhere.iterdir()) == []
    assert not (folder / "sub").is_symlink()
    assert os.readlink(folder / "sub" / "x.json") == "../../../blobs/abc"
    assert (folder / "sub" / "x.json").read_bytes() == b"bytes"
    assert st.misplaced([(blob, folder / "sub" / "x.json")]) == []


def test_a_linked_snapshot_folder_is_replaced_not_followed(tmp_path: Path) -> None:
    blob, folder = _repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.parent.mkdir(parents=True)
    os.symlink(elsewhere, folder)
    st.link(blob, folder / "x.json")
    assert list(elsewhere.iterdir()) == [] and not folder.is_symlink()
    assert os.readlink(folder / "x.json") == "../../blobs/abc"


def test_a_folder_where_a_link_belongs_is_named_and_no_temporary_stays(tmp_path: Path) -> None:
    blob, folder = _repo(tmp_path)
    (folder / "x.json").mkdir(parents=True)
    (folder / "x.json" / "inside").write_text("other")
    with pytest.raises(FetchError, match=r"x\.json is a folder where the lock lists a file.*"
                       r"remove it"):  # fmt: skip
        st.link(blob, folder / "x.json")
    assert sorted(p.name for p in folder.iterdir()) == ["x.json"]  # no .lockpipe-link left


def test_a_path_reached_through_a_link_is_misplaced(tmp_path: Path) -> None:
    blob, folder = _repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.mkdir(parents=True)
    os.symlink(elsewhere, folder / "sub")
    os.symlink("../../../blobs/abc", elsewhere / "x.json")
    assert st.misplaced([(blob, folder / "sub" / "x.json")]) == [folder / "sub" / "x.json"]
    assert st.misplaced([(blob, folder / "y.json")]) == [folder / "y.json"]
