"""A C0 control character or DEL in a lock's string (a NUL in build_args, serve.model,
serve.command) is one LockError naming the key, not ``ValueError: embedded null byte``
from the build's argv or a deploy unit line that names no lock key (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import LockError
from tests.unit.test_lock_path_values import _plan


def _build_arg(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["build_args"]["GREETING"] = "a\x00b"


def _model(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["serve"]["model"] = "m\x00[Service]"


def _command(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["serve"]["command"] = ["serve", "a\nExecStart=/bin/sh"]


def _note(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["origin"] = {"source": "x", "seen": "2026-01-01", "note": "a\x7fb"}


def _arg_name(doc: dict[str, Any]) -> None:
    doc["targets"]["app"]["build_args"]["A\tB"] = "1"


@pytest.mark.parametrize(
    ("change", "key", "char"),
    [
        (_build_arg, "targets.app.build_args.GREETING:", r"'\x00'"),
        (_model, "targets.app.serve.model:", r"'\x00'"),
        (_command, "targets.app.serve.command[1]:", r"'\n'"),
        (_note, "targets.app.origin.note:", r"'\x7f'"),
        (_arg_name, "targets.app.build_args.'A\\tB':", "key"),
    ],
)
def test_a_control_character_in_a_lock_string_is_one_lock_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, key: str, char: str
) -> None:
    code, err = _plan(tmp_path, change, capsys)
    assert code == LockError.return_code, err
    assert "Traceback" not in err and "\x00" not in err
    line = next(x for x in err.splitlines() if key in x)
    assert char in line and "must not contain control characters" in line


def test_the_repository_locks_hold_no_control_characters() -> None:
    from lockpipe.lock.validate import control_errors

    root = Path(__file__).resolve().parents[2]
    for lock in (root / "locks/digests.json", root / "locks/demo/digests.json"):
        assert control_errors(json.loads(lock.read_text())) == [], lock
