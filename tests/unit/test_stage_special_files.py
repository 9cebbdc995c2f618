"""A FIFO or socket in a target's folder is refused at staging, naming it, not a traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from lockpipe.errors import LockError
from lockpipe.imagebuild.context import stage


def _context(tmp_path: Path) -> Path:
    context = tmp_path / "ctx"
    (context / "sub").mkdir(parents=True)
    (context / "Dockerfile").write_text("FROM scratch\n")
    return context


def test_a_fifo_in_the_context_is_refused_naming_it(tmp_path: Path) -> None:
    context = _context(tmp_path)
    os.mkfifo(context / "sub" / "pipe")
    with pytest.raises(LockError, match=r"sub/pipe: a FIFO in the build context.*delete it"):
        stage(context, "Dockerfile", {}, {}, tmp_path / "staged")


def test_a_socket_in_the_context_is_refused_naming_it(tmp_path: Path) -> None:
    context = _context(tmp_path)
    if len(str(context / "sock")) > 100:  # AF_UNIX paths hold about 108 bytes
        pytest.skip("tmp_path too long for a unix socket")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(context / "sock"))
        with pytest.raises(LockError, match=r"ctx/sock: a socket in the build context"):
            stage(context, "Dockerfile", {}, {}, tmp_path / "staged")


def test_a_link_to_a_fifo_is_refused_too(tmp_path: Path) -> None:
    context = _context(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    (context / "link").symlink_to(tmp_path / "pipe")
    with pytest.raises(LockError, match=r"ctx/link: a FIFO"):
        stage(context, "Dockerfile", {}, {}, tmp_path / "staged")


def test_files_folders_and_links_still_stage(tmp_path: Path) -> None:
    context = _context(tmp_path)
    (context / "sub" / "f").write_text("x")
    (context / "link").symlink_to("sub/f")
    (context / "dirlink").symlink_to("sub")
    dest, _ = stage(context, "Dockerfile", {}, {}, tmp_path / "staged")
    assert (dest / "link").read_text() == "x" and (dest / "dirlink" / "f").read_text() == "x"
