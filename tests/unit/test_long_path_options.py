"""A path option with a name past 255 bytes is one UsageError naming the option and the
fix; before, Python 3.11's Path.is_dir()/is_file() raised ``OSError: [Errno 36] File name
too long`` through ``--json`` (smoke, plan, payloads, preflight), ``--preflight`` and
``--store`` as a traceback (issue 18).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
LONG = "x" * 300


@pytest.mark.parametrize(
    ("argv", "option"),
    [(["plan", "--json", "@"], "--json"), (["payloads", "--json", "@"], "--json"),
     (["smoke", "llama-cpu", "--json", "@"], "--json"), (["preflight", "--json", "@"], "--json"),
     (["preflight", "--preflight", "@"], "--preflight"),
     (["preflight", "--store", "@"], "--store")],
    ids=["plan-json", "payloads-json", "smoke-json", "preflight-json", "preflight", "store"],
)  # fmt: skip
def test_a_path_option_with_a_name_too_long_is_one_usage_error(
    argv: list[str], option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / LONG)
    given = [path if a == "@" else a for a in argv]
    code = main([*given, "--lock", str(REPO / "locks" / "digests.json")])
    err = capsys.readouterr().err
    assert "Traceback" not in err and code == UsageError.return_code, err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: {option} {path}: not a usable path (File name too long)")
    assert "every name is at most 255 bytes" in line
