"""lockpipe.http, the rules every client shares: Retry-After, backoff and the retry policy.
Its redirects, against real servers, are in tests/integration/test_http_follow.py."""

from __future__ import annotations

from email.utils import formatdate

from lockpipe.http import Retries, backoff, retry_after, retryable, until


def test_retry_after_reads_seconds_and_dates_and_nothing_else() -> None:
    now = 1_700_000_000.0
    assert retry_after("7", now) == 7.0 and retry_after(" 3600 ", now) == 3600.0
    assert retry_after(formatdate(now + 20, usegmt=True), now) == 20.0
    assert retry_after(formatdate(now - 20, usegmt=True), now) == 0.0
    assert retry_after("-5", now) is None and retry_after("soon", now) is None
    assert retry_after(None, now) is None and retry_after("", now) is None


def test_retryable_is_408_429_and_5xx() -> None:
    assert [s for s in (200, 301, 400, 401, 403, 404, 408, 429, 500, 503) if retryable(s)] == [
        408, 429, 500, 503,
    ]  # fmt: skip


def test_backoff_doubles_to_its_cap_with_equal_jitter() -> None:
    assert [backoff(n, base=0.5, cap=4.0, jitter=1.0) for n in range(5)] == [0.5, 1, 2, 4, 4]
    assert backoff(2, base=0.5, cap=4.0, jitter=0.0) == 1.0  # half the step at the least
    assert all(1.0 <= backoff(2, base=0.5, cap=4.0) <= 2.0 for _ in range(50))
    assert backoff(10_000, base=1.0, cap=8.0, jitter=1.0) == 8.0  # no overflow


def test_retries_waits_what_was_asked_and_refuses_a_wait_past_its_longest() -> None:
    policy = Retries(attempts=3, base=1.0, cap=8.0, longest=30.0)
    assert policy.pause(0, 12.0) == 12.0 and 0.5 <= policy.pause(0) <= 1.0
    assert not policy.too_long(30.0) and policy.too_long(30.5) and not policy.too_long(None)
    assert until(1_700_000_000.0, 3600) == "3600 s; try again after 2023-11-14 23:13:20 UTC"
