"""Long work is never silent in a CI log (issue 19 part 2): when stderr is not a terminal,
payload progress is a line per file and a total line at least every PROGRESS_EVERY s."""

from __future__ import annotations

import time

import pytest

from lockpipe.log import PROGRESS_EVERY, Heartbeat
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


def test_a_quiet_build_gets_a_heartbeat_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A build that prints nothing for a while: lockpipe's own line comes, naming the last
    output and its age; lines that keep coming leave no room for one."""
    with Heartbeat("build app (buildah)", every=0.2) as beat:  # pytest's stderr: no terminal
        beat.line("STEP 2/3: RUN make")
        time.sleep(0.7)
    err = capsys.readouterr().err
    beats = [x for x in err.splitlines() if x.startswith("build app (buildah): 0m00s, running")]
    assert len(beats) >= 2, err
    assert beats[0].endswith("; last output 0 s ago: STEP 2/3: RUN make"), beats
    with Heartbeat("build app (buildah)", every=0.3) as beat:
        for n in range(10):
            beat.line(f"[{n}0%] Building")
            time.sleep(0.05)
    assert "running" not in capsys.readouterr().err


def test_the_heartbeat_line_counts_minutes_and_stays_off_on_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = [100.0]
    beat = Heartbeat("vllm-parser 0.29.0", clock=lambda: now[0], beat=False)
    now[0] = 100.0 + 200.4
    assert beat.status(now[0]) == "vllm-parser 0.29.0: 3m20s, running"
    beat.line("x" * 300)
    now[0] += 40
    assert beat.status(now[0]).endswith("; last output 40 s ago: " + "x" * 100)
    with beat:  # beat=False, as on a terminal: no thread, no lines of its own
        time.sleep(0.05)
    assert "running" not in capsys.readouterr().err
