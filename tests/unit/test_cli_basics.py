"""The command line's basics (issue 19 part 5): --version, and the lock found from any
folder of the checkout."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.cli.options import find_lock

REPO = Path(__file__).resolve().parents[2]


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"lockpipe {version('lockpipe')}\n"


def test_the_lock_is_found_from_a_subfolder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LOCKPIPE_LOCK", raising=False)
    monkeypatch.chdir(REPO / "images" / "llama-cuda")
    assert find_lock() == REPO / "locks" / "digests.json"
    assert main(["plan", "llama-cpu"]) == 0
    assert capsys.readouterr().out.startswith("llama-cpu -> localhost/lockpipe/llama-cpu:")


def test_outside_a_checkout_the_error_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LOCKPIPE_LOCK", raising=False)
    monkeypatch.chdir(tmp_path)
    assert find_lock() == Path("locks/digests.json")
    assert main(["plan"]) == 2
    assert "no lock file here or in any folder above" in capsys.readouterr().err
