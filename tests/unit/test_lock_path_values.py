"""A lock value that names a file or folder, but no path the kernel takes (5000 characters,
past NAME_MAX and PATH_MAX), is one LockError naming the key and the kernel's reason, not
``OSError: File name too long`` from ``is_file()`` (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import LockError
from tests.lockfactory import make_repo

LONG = "x" * 5000


def _plan(tmp_path: Path, change: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    lock = make_repo(tmp_path)
    doc = json.loads(lock.read_text())
    change(doc)
    lock.write_text(json.dumps(doc))
    code = main(["plan", "--lock", str(lock)])
    return code, capsys.readouterr().err


def _pip(doc: dict[str, Any]) -> None:
    doc["pip"] = {"app": {"file": LONG, "sha256": "ab" * 32}}


def _context(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["context"] = f"images/{LONG}"


def _dockerfile(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["dockerfile"] = "/".join(["d" * 200] * 30)  # 6 kB: past PATH_MAX


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (_pip, "pip.app.file"),
        (_context, "targets.app.context"),
        (_dockerfile, "targets.app.dockerfile"),
    ],
)
def test_a_lock_path_too_long_for_the_kernel_is_one_lock_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, key: str
) -> None:
    code, err = _plan(tmp_path, change, capsys)
    assert code == LockError.return_code, err
    assert "Traceback" not in err and "OSError" not in err
    line = next(x for x in err.splitlines() if key in x)
    assert "cannot be a path here (File name too long)" in line
    assert len(line) < 400  # the value is shortened, not 5000 characters again
