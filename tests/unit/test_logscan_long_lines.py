"""A long log line is scanned in time linear in its length, and real lines still match.

Several patterns took time quadratic in a line's length when a prefix repeated: before,
``"kleidiai: " * 20000`` took 20 s, ``"but " * 30000`` 18 s and the vLLM record line 37 s
(one run here), a 1 MB line minutes. Each line is now scanned up to logscan.MAX_LINE
characters; the bounds below only guard against that hang.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lockpipe.smoke import logscan
from lockpipe.smoke.logscan import scan, verdict

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
RECORD = "INFO 01-01 00:00:00 [x.py:1] "


@pytest.mark.parametrize(
    ("runtime", "log"),
    [
        ("llama.cpp", "kleidiai: " * 20000),
        ("llama.cpp", "but " * 30000),
        ("vllm", (RECORD + "not supported ") * 5000),
    ],
    ids=["kleidiai", "but", "vllm-record"],
)
def test_a_long_repeating_line_is_scanned_quickly(runtime: str, log: str) -> None:
    start = time.monotonic()
    assert scan(runtime, log) == []
    assert time.monotonic() - start < 5


def test_a_fatal_message_at_a_long_lines_start_is_still_reported() -> None:
    line = "llama_model_load: error loading model: bad magic " + "x" * 100_000
    [found] = scan("llama.cpp", "ok\n" + line)
    assert (found.line_no, found.pattern) == (2, "model-load-failed")
    assert found.line == line[: logscan.MAX_LINE]


def test_a_benign_message_at_a_long_lines_start_is_still_benign() -> None:
    line = "kleidiai: not supported on this CPU; disabling " + "but " * 30000
    pattern = verdict("llama.cpp", line)
    assert pattern is not None and pattern.name == "platform-fallback"
    assert scan("llama.cpp", line) == []


def test_every_fixture_line_is_far_shorter_than_the_cap() -> None:
    lines = [
        line for path in sorted(LOGS.iterdir()) for line in path.read_text().splitlines()
    ]  # fmt: skip
    assert len(lines) > 300
    assert max(map(len, lines)) < logscan.MAX_LINE // 2
