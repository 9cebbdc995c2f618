"""A target's name becomes an image repository component (``localhost/lockpipe-check/NAME``
for verify --rebuild, ``REGISTRY/PREFIX/NAME`` for publish): one no engine takes is refused
where the lock is read, with one line naming the target, not met later as a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import LockError
from lockpipe.lock.refs import parse_ref
from tests.lockfactory import doc, make_repo


def _lint(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    document = doc()
    document["targets"] = {name: document["targets"]["app"]}
    lock = make_repo(tmp_path, document, relocked=False)
    code = main(["lint", "--lock", str(lock)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", ["x.", "a..b", "a-", "a_-b", "a___b", "a._b"])
def test_a_target_name_no_image_repository_takes_is_refused_naming_it(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _lint(tmp_path, name, capsys)
    assert code == LockError.return_code, err
    assert "Traceback" not in err and "Error:" not in err
    lines = [x.strip() for x in err.splitlines() if x.startswith("  ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"targets.{name}: ") and "rename the target" in lines[0]


@pytest.mark.parametrize("name", ["app", "llama-cuda", "a--b", "a__b", "a.b", "a_b-c.d", "9"])
def test_a_target_name_an_image_repository_takes_passes(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _lint(tmp_path, name, capsys)
    assert f"targets.{name}:" not in err
    assert code == 0, err
    parse_ref(f"localhost/lockpipe-check/{name}:clean")  # what verify --rebuild tags
    parse_ref(f"127.0.0.1:5000/lockpipe/{name}:0123456789ab")  # what publish pushes
