"""read_archive reads a llama.cpp tree in one bounded pass: a tar bomb is refused, not read."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from lockpipe.errors import FormatError
from lockpipe.refresh import llama_tree

ARG = b'add_opt(common_arg({"-x"}, "h"));\n'


def archive(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


def test_the_server_files_come_from_one_pass_wherever_arg_cpp_is(tmp_path: Path) -> None:
    """Server files listed before arg.cpp count too; another tree's do not."""
    tree = llama_tree.read_archive(archive(tmp_path / "a.tar.gz", {
        "t/tools/server/early.cpp": b'"a"', "other/tools/server/x.cpp": b"",
        "t/common/arg.cpp": ARG, "t/tools/server/server.cpp": b'"b"', "t/tools/server/x.h": b"",
    }))  # fmt: skip
    assert tree.files == {"common/arg.cpp": ARG.decode(), "tools/server/early.cpp": '"a"',
                          "tools/server/server.cpp": '"b"'}  # fmt: skip


def test_a_huge_server_cpp_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MB tar.gz with a 1 GiB server.cpp took 2 GiB of memory; now one FormatError."""
    monkeypatch.setattr(llama_tree, "MAX_SOURCE", 1 << 16, raising=False)
    huge = {"t/common/arg.cpp": ARG, "t/tools/server/server.cpp": bytes(1 << 17)}
    bomb = archive(tmp_path / "bomb.tar.gz", huge)
    with pytest.raises(FormatError, match=r"bomb\.tar\.gz: t/tools/server/server\.cpp has "
                                          r"131072 bytes, more than the 65536"):  # fmt: skip
        llama_tree.read_archive(bomb)


def test_many_server_files_together_past_the_bound_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_tree, "MAX_KEPT", 1 << 16, raising=False)
    files = {f"t/tools/server/{i}.cpp": bytes(1 << 14) for i in range(5)}
    bomb = archive(tmp_path / "bomb.tar.gz", {"t/common/arg.cpp": ARG, **files})
    with pytest.raises(FormatError, match=r"t/tools/server/3\.cpp has 16384 bytes"):
        llama_tree.read_archive(bomb)


def test_an_archive_of_too_many_members_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lockpipe.refresh.archive.MAX_MEMBERS", 20, raising=False)
    many = archive(tmp_path / "many.tar.gz", {"t/common/arg.cpp": ARG,
                                              **{f"t/{i}": b"" for i in range(30)}})  # fmt: skip
    with pytest.raises(FormatError, match=r"many\.tar\.gz: more than 20 members \(at 't/19'\)"):
        llama_tree.read_archive(many)
