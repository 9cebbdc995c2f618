"""Long work is never silent in a CI log (issue 19 part 2): when stderr is not a terminal,
payload progress is a line per file and a total line at least every PROGRESS_EVERY s."""

from __future__ import annotations

import pytest

from lockpipe.log import PROGRESS_EVERY
from lockpipe.payloads.progress import Lines, Rich, reporter


def test_in_a_log_the_rich_mode_writes_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert PROGRESS_EVERY <= 10
    out = reporter("rich", 3 << 20)  # pytest's stderr is no terminal
    assert isinstance(out, Lines) and not isinstance(out, Rich)
    assert out.every == PROGRESS_EVERY


def test_a_total_line_comes_once_the_interval_passed(capsys: pytest.CaptureFixture[str]) -> None:
    lines = Lines(4 << 20, every=3600.0)
    lines.start("m.gguf", 4 << 20, 0)
    lines.advance("m.gguf", 1 << 20)  # within the interval: no total line yet
    assert "payloads:" not in capsys.readouterr().err
    lines.every = 0.0
    lines.advance("m.gguf", 1 << 20)
    lines.done("m.gguf", "downloaded", 2 << 20)
    err = capsys.readouterr().err
    assert "payloads: 2,097,152 of 4,194,304 bytes (50%)" in err
    assert "m.gguf: downloaded" in err
