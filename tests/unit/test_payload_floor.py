"""The rate floor across a piece's reconnects (retry.Floor), on a clock the test moves."""

from __future__ import annotations

import pytest

from lockpipe.payloads.errors import RetryableHTTP, TooSlow
from lockpipe.payloads.retry import Floor
from lockpipe.payloads.settings import Tuning
from tests.unit.test_payload_retry import Clock

DROP = RetryableHTTP("http://127.0.0.1:1/x: connection broken (ProtocolError)")


def test_drops_under_the_floor_over_slow_for_end_the_piece_with_the_url_and_fix() -> None:
    clock = Clock()
    floor = Floor(Tuning(slowest=1024, slow_for=60.0), 0, clock)
    pos = 0
    while clock.now + 0.35 - 1000.0 < 60.0:  # 128 bytes a drop, a drop every 0.35 s
        clock.now += 0.35
        pos += 128
        floor.judge(pos, DROP)  # less than slow_for: free
    clock.now += 0.35
    pos += 128
    with pytest.raises(TooSlow) as err:
        floor.judge(pos, DROP)
    message = str(err.value)
    assert "http://127.0.0.1:1/x" in message and "under 1,024 bytes/s" in message
    assert "--mirror" in message and "again later" in message


def test_fast_drops_pass_and_a_counted_failure_starts_the_window_again() -> None:
    clock = Clock()
    floor = Floor(Tuning(slowest=1024, slow_for=60.0), 0, clock)
    clock.now += 61.0
    floor.judge(10 << 20, DROP)  # 10 MiB in a minute: fine, and the window moves on
    clock.now += 120.0  # a Retry-After wait the budget counted
    floor.restart(10 << 20)
    clock.now += 1.0
    floor.judge((10 << 20) + 100, DROP)  # the wait is not the server being slow


def test_the_wait_for_a_slot_before_a_free_retry_is_not_counted() -> None:
    """After 429s and 503s the run's gate holds connections back; a piece that waited
    minutes for a slot after a drop that brought bytes was judged too slow though the
    server moved fast while connected (issue 18)."""
    clock = Clock()
    floor = Floor(Tuning(slowest=1024, slow_for=60.0), 0, clock)
    clock.now += 10.0
    floor.judge(1 << 20, DROP)  # 1 MiB in 10 s, then a drop
    waiting = clock.now
    clock.now += 300.0  # the gate held its slot five minutes
    floor.waited(waiting)
    clock.now += 51.0
    floor.judge(2 << 20, DROP)  # 2 MiB in 61 s of connection: fine
