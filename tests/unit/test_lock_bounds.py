"""Absurd lock values end as the invalid-lock error (exit 2) with their JSON path.

Each case here reached a traceback or a silent wrong answer before the lock
was decoded with bounds: a 5000-digit integer (ValueError), an epoch of 1e20
(OverflowError in plan), a size of 1e400, duplicate keys (last one won), a
filename escaping its snapshot folder, and two targets with one tag.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import LockError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.lock.model import load_lock
from tests.lockfactory import make_repo

PAYLOAD = {"repository": "org/repo", "filename": "model.gguf", "role": "model"}


def _write(tmp_path: Path, text_of: Any) -> Path:
    path = make_repo(tmp_path)
    doc = json.loads(path.read_text())
    path.write_text(text_of(doc))
    return path


def _load_error(path: Path) -> str:
    with pytest.raises(LockError) as info:
        load_lock(path)
    return str(info.value)


def test_a_5000_digit_integer_is_a_lock_error(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda d: json.dumps(d).replace("1700000000", "9" * 5000))
    assert "source_date_epoch: a 5000-digit number" in _load_error(path)


def test_an_epoch_past_time_t_is_refused_before_plan(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda d: json.dumps({**d, "source_date_epoch": 10**15}))
    assert "source_date_epoch: 1000000000000000 is out of range" in _load_error(path)
    path = _write(tmp_path, lambda d: json.dumps({**d, "source_date_epoch": 10**20}))
    assert "source_date_epoch: a 21-digit number" in _load_error(path)


def test_the_largest_epoch_allowed_plans(tmp_path: Path) -> None:
    from lockpipe.lock.fingerprint import relock
    from lockpipe.lock.model import write_lock
    from lockpipe.lock.schema import MAX_EPOCH

    path = _write(tmp_path, lambda d: json.dumps({**d, "source_date_epoch": MAX_EPOCH}))
    write_lock(path, relock(load_lock(path)))
    assert plan_target(load_lock(path), "app").timestamp == MAX_EPOCH


def test_a_size_of_1e400_is_refused(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        d["payloads"] = {"m": {**PAYLOAD, "size": 1}}
        return json.dumps(d).replace('"size": 1', '"size": 1e400')

    assert "payloads.m.size: 1e400 is out of range" in _load_error(_write(tmp_path, text))


def test_a_size_past_off_t_is_refused(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        d["payloads"] = {"m": {**PAYLOAD, "size": 2**63}}
        return json.dumps(d)

    assert "payloads.m.size: 9223372036854775808 is out of range" in _load_error(
        _write(tmp_path, text)
    )


def test_nan_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda d: json.dumps(d).replace("1700000000", "NaN"))
    assert "source_date_epoch: NaN is not a number JSON allows" in _load_error(path)


def test_duplicate_keys_are_refused_with_their_path(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        body = json.dumps(d)
        return body.replace('"tag": ', '"tag": "localhost/other:1", "tag": ', 1)

    assert "targets.app.tag: the key appears twice" in _load_error(_write(tmp_path, text))


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "a/../b", "a//b", "a\\b"])
def test_a_filename_that_escapes_its_snapshot_is_refused(tmp_path: Path, name: str) -> None:
    def text(d: dict[str, Any]) -> str:
        d["payloads"] = {"m": {**PAYLOAD, "filename": name}}
        return json.dumps(d)

    assert f"payloads.m.filename: {name!r} must" in _load_error(_write(tmp_path, text))


def test_two_targets_with_one_tag_are_refused(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        d["targets"]["twin"] = d["targets"]["app"]
        return json.dumps(d)

    assert "targets.twin.tag: 'localhost/lockpipe-test/app:1' is also targets.app's tag" in (
        _load_error(_write(tmp_path, text))
    )


def test_a_lock_validated_once_is_not_validated_again_unless_it_changes(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    load_lock(path)
    assert list((tmp_path / ".lockpipe" / "valid-locks").iterdir())
    # The same bytes skip the schema pass (a fresh process does not import jsonschema) ...
    code = "import sys; from lockpipe.lock.model import load_lock; from pathlib import Path; "
    code += f"load_lock(Path({str(path)!r})); print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    # ... and any change is validated in full.
    path.write_text(path.read_text().replace('"version": 1', '"version": 2'))
    assert "version: 1 was expected" in _load_error(path)


def test_the_cli_exits_2_for_a_huge_number(tmp_path: Path) -> None:
    path = _write(tmp_path, lambda d: json.dumps(d).replace("1700000000", "9" * 5000))
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "plan", "--lock", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr


def test_a_snapshot_with_no_files_is_a_lock_error(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        d["payloads"] = {"m": {"repository": "org/repo", "role": "model", "files": {}}}
        return json.dumps(d)

    assert "payloads.m.files" in _load_error(_write(tmp_path, text))


def test_a_control_character_in_a_snapshot_path_is_refused(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        d["payloads"] = {"m": {"repository": "org/repo", "role": "model",
                               "files": {"a\u0000b": {"size": 1}}}}  # fmt: skip
        return json.dumps(d)

    assert "must not contain control characters" in _load_error(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ('"port": 8080', '"port": 8080.0', "serve.port: must be a whole number, not 8080.0"),
        ("1700000000", "1.7e9", "source_date_epoch: must be a whole number, not 1700000000.0 ("),
    ],
)
def test_a_float_where_an_integer_belongs_is_refused_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, error: str
) -> None:
    """8080.0 passed jsonschema's "integer" and reached podman (PublishPort=...:8080.0)."""
    from lockpipe.cli.main import main

    path = _write(tmp_path, lambda d: json.dumps(d).replace(old, new))
    assert main(["plan", "app", "--lock", str(path)]) == 2
    err = capsys.readouterr().err
    assert error in err
    assert "Traceback" not in err


def test_a_float_size_and_count_are_refused(tmp_path: Path) -> None:
    def text(d: dict[str, Any]) -> str:
        d["payloads"] = {"m": {**PAYLOAD, "size": 7}}
        d["targets"]["app"]["serve"]["context"] = 8192
        return json.dumps(d).replace('"size": 7', '"size": 7.0').replace("8192", "8192.0")

    error = _load_error(_write(tmp_path, text))
    assert "payloads.m.size: must be a whole number, not 7.0" in error
    assert "targets.app.serve.context: must be a whole number, not 8192.0" in error
