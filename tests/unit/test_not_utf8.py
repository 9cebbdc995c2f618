"""A file lockpipe is given that is not UTF-8 is one error naming the file, the byte and
the fix, never a traceback: the lock, a Dockerfile, a pip file (through the CLI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from lockpipe.errors import LintError, LockError

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", *args], cwd=REPO, text=True, capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )  # fmt: skip


def test_a_lock_that_is_not_utf8_is_a_lock_error_naming_the_byte(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "digests.json"
    lock.parent.mkdir()
    lock.write_bytes(b'{"x":"\xff"}')
    out = _cli("plan", "--lock", str(lock))
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == LockError.return_code, out.stderr
    assert f"{lock}: not UTF-8 text (byte 0xff at offset 6); re-save it as UTF-8" in out.stderr


def _checkout(tmp_path: Path) -> Path:
    for folder in ("images", "locks"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    return tmp_path / "locks" / "digests.json"


def test_lint_of_a_dockerfile_that_is_not_utf8_names_it(tmp_path: Path) -> None:
    lock = _checkout(tmp_path)
    dockerfile = tmp_path / "images" / "llama-cuda" / "Dockerfile"
    size = dockerfile.stat().st_size
    with dockerfile.open("ab") as fh:
        fh.write(b"\xe9")
    out = _cli("lint", "--lock", str(lock))
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == LintError.return_code, out.stderr
    assert f"{dockerfile}: not UTF-8 text (byte 0xe9 at offset {size})" in out.stderr
