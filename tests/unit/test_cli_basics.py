"""The command line's basics (issue 19 parts 2 and 5): --version, the lock found from any
folder of the checkout, and colour."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.cli.options import find_lock
from lockpipe.log import console, out, set_color

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


@pytest.mark.parametrize(("color", "ansi"), [("always", True), ("never", False)])
def test_color_follows_the_option(
    color: str, ansi: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """--color always colours even a pipe (pytest's capture is one); never never does."""
    lock = str(REPO / "locks" / "digests.json")
    try:
        code = main(["preflight", "--lock", lock, "--gpu", "rtx3090", "--color", color,
                     "llama-cuda"])  # fmt: skip
    finally:
        set_color("auto", {})
    out = capsys.readouterr().out
    assert code == 0 and "verdict" in out
    assert ("\x1b[" in out) is ansi


def test_no_color_turns_auto_off() -> None:
    try:
        set_color("auto", {"NO_COLOR": "1"})
        assert out.no_color and console.no_color
        set_color("auto", {})
        assert not out.no_color
        set_color("always", {"NO_COLOR": "1"})  # the option, given, wins
        assert not out.no_color and out.is_terminal
    finally:
        set_color("auto", {})


def test_a_digest_in_an_error_is_printed_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    # rich turns ':name:' into an emoji: 'sha256:abc: not found' came out 'sha256🔤 not found'
    console.print("error: sha256:abc: not found :x:", markup=False)
    assert "sha256:abc: not found :x:" in capsys.readouterr().err
