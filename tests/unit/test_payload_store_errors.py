"""The store's file system failing is an error that names the store and the fix, never a trace."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import DiskSpaceError, UsageError
from lockpipe.payloads.store import store_errors

REPO = Path(__file__).resolve().parents[2]


def test_a_full_disk_is_a_disk_space_error(tmp_path: Path) -> None:
    full = r"file system is full.*run again to resume"
    with pytest.raises(DiskSpaceError, match=full), store_errors(tmp_path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "x.partial"))


def test_a_store_this_user_cannot_write_names_the_option(tmp_path: Path) -> None:
    with (
        pytest.raises(UsageError, match=r"cannot write the store .*set --store"),
        store_errors(tmp_path),
    ):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path))


def test_the_cli_reports_an_unwritable_store_in_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "payloads", "gemma-4-12b-mmproj-bf16", "--quiet",
         "--store", "/proc/sys/lockpipe-store"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert out.returncode == UsageError.return_code, out.stderr
    assert "cannot write the store" in out.stderr and "Traceback" not in out.stderr
