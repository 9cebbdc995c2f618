"""The tree hash of a source archive: the same content in other bytes hashes the same."""

from __future__ import annotations

import errno
import io
import tarfile
from pathlib import Path
from typing import Literal

import pytest

from lockpipe.errors import DiskSpaceError, FetchError
from lockpipe.refresh.archive import cache_error, fetch_unpinned, tree_hash


def archive(
    path: Path, members: dict[str, bytes | str], mode: Literal["w", "w:gz", "w:xz"] = "w:gz"
) -> Path:
    """A tar with ``members``: bytes are files, a str is a symlink's target."""
    with tarfile.open(path, mode) as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(body, str):
                info.type, info.linkname = tarfile.SYMTYPE, body
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return path


FILES: dict[str, bytes | str] = {"top/a.c": b"int a;\n", "top/sub/b.h": b"#pragma once\n",
                                 "top/link": "a.c"}  # fmt: skip


def test_other_compression_or_member_order_keeps_the_tree_hash(tmp_path: Path) -> None:
    gz = tree_hash(archive(tmp_path / "a.tar.gz", FILES))
    xz = tree_hash(archive(tmp_path / "a.tar.xz", dict(reversed(FILES.items())), "w:xz"))
    assert gz == xz and gz.root == "top" and gz.files == 3


def test_other_content_mode_or_link_target_changes_it(tmp_path: Path) -> None:
    base = tree_hash(archive(tmp_path / "a.tar", FILES, "w")).sha256
    content = tree_hash(archive(tmp_path / "b.tar", {**FILES, "top/a.c": b"int b;\n"}, "w"))
    link = tree_hash(archive(tmp_path / "c.tar", {**FILES, "top/link": "sub/b.h"}, "w"))
    assert len({base, content.sha256, link.sha256}) == 3


def test_the_top_folder_name_is_not_part_of_the_hash(tmp_path: Path) -> None:
    """A tag's archive (llama.cpp-b10069/) and its commit's (llama.cpp-<sha>/) hash the same."""
    other = {k.replace("top/", "llama.cpp-b1/"): v for k, v in FILES.items()}
    renamed = tree_hash(archive(tmp_path / "b.tar", other, "w"))
    assert renamed.sha256 == tree_hash(archive(tmp_path / "a.tar", FILES, "w")).sha256
    assert renamed.root == "llama.cpp-b1"


def test_two_top_folders_or_a_damaged_file_is_a_fetch_error(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="2 top folders, not one"):
        tree_hash(archive(tmp_path / "a.tar", {**FILES, "other/x": b"x"}, "w"))
    (tmp_path / "bad.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(FetchError, match="not a readable tar archive"):
        tree_hash(tmp_path / "bad.tar.gz")


def test_a_cache_that_cannot_be_written_is_one_fetch_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(FetchError, match=r"a-file.*cannot write the cache.*--cache"):
        fetch_unpinned("https://github.com/o/r/archive/refs/tags/b1.tar.gz", blocker / "cache")


def test_a_full_cache_is_a_disk_space_error() -> None:
    err = cache_error(OSError(errno.ENOSPC, "No space left on device"), Path("/c"))
    assert isinstance(err, DiskSpaceError) and "no room left in the cache" in str(err)


def test_an_archive_of_too_many_members_is_refused_naming_the_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small archive of many empty members (a million took 745 MiB, every TarInfo kept)."""
    monkeypatch.setattr("lockpipe.refresh.archive.MAX_MEMBERS", 50, raising=False)
    many = archive(tmp_path / "many.tar.gz", {f"top/{i:x}": b"" for i in range(80)})
    with pytest.raises(FetchError, match=r"many\.tar\.gz: more than 50 members \(at 'top/32'\)"):
        tree_hash(many)
    assert tree_hash(archive(tmp_path / "few.tar.gz", FILES)).files == 3  # under the bound


def test_an_archive_unpacking_past_the_bound_is_refused_before_hashing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gzip of zeros unpacking to TiBs was hashed to the end; now refused at the member."""
    monkeypatch.setattr("lockpipe.refresh.archive.MAX_UNPACKED", 1 << 20, raising=False)
    read: list[int] = []
    real = tarfile.ExFileObject.read

    def counting(self: tarfile.ExFileObject, size: int | None = -1) -> bytes:
        data = real(self, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(tarfile.ExFileObject, "read", counting)
    bomb = archive(tmp_path / "bomb.tar.gz", {"top/a.c": b"x", "top/zeros": bytes(2 << 20)})
    with pytest.raises(FetchError, match=r"bomb\.tar\.gz: unpacks to more than 1048576 bytes "
                                         r"\(at 'top/zeros', 2097152 bytes\)"):  # fmt: skip
        tree_hash(bomb)
    assert sum(read) == 1  # top/a.c only


@pytest.mark.parametrize(
    ("comment", "commit"),
    [("a" * 40, "a" * 40), ("b" * 64, "b" * 64), (None, None), ("not a commit", None)],
)
def test_the_commit_git_archive_wrote_in_the_pax_comment_is_read(
    comment: str | None, commit: str | None, tmp_path: Path
) -> None:
    """git archive writes the commit an archive is made from into the pax global header's
    comment (git's archive-tar.c, write_global_extended_header), and GitHub's archives are
    git archive's: tree_hash gives it back, so the refresh can check it against the commit
    GitHub's API named (issue 18). No comment, or one that is no commit id: None."""
    raw = io.BytesIO()
    pax = {"comment": comment} if comment else None
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers=pax) as tar:
        info = tarfile.TarInfo("llama.cpp-b1/a.c")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"x\n"))
    path = tmp_path / "a.tar"
    path.write_bytes(raw.getvalue())
    tree = tree_hash(path)
    assert (tree.root, tree.files, tree.commit) == ("llama.cpp-b1", 1, commit)
