"""Retry policy without a network: the AIMD gate, the per-file budget, backoff, Retry-After.

The HTTP side of the same behaviour runs against real loopback servers in
tests/integration/test_payload_faults.py.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
import requests
import urllib3.exceptions

from lockpipe.payloads.errors import HTTPFatal, RetryableHTTP, Stopped, Unreachable
from lockpipe.payloads.gate import Gate, Permit
from lockpipe.payloads.neterrors import classify
from lockpipe.payloads.retry import Budget, Streak, delay, wait_to_retry
from lockpipe.payloads.settings import Context, Tuning

URL = "http://127.0.0.1:1/x"


NO_CONN: Any = None  # the pool and connection urllib3's errors name: classifying needs neither


def wrapped(reason: Exception) -> requests.exceptions.ConnectionError:
    """``reason`` as requests raises it: inside urllib3's MaxRetryError."""
    retries = urllib3.exceptions.MaxRetryError(NO_CONN, URL, reason)
    return requests.exceptions.ConnectionError(retries)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_gate_halves_once_per_epoch_and_grows_back_by_one() -> None:
    gate, stop = Gate(16), threading.Event()
    epochs = [gate.enter(stop) for _ in range(16)]
    for e in epochs:  # sixteen 503s from requests sent together: one halving, not four
        gate.throttled(e)
    assert gate.limit == 8
    gate.throttled(gate.epoch)  # a request sent after the halving still fails: halve again
    assert gate.limit == 4
    for _ in range(20):
        gate.accepted()
    assert gate.limit == 16  # never above what was asked for
    for _ in range(10):
        gate.throttled(gate.epoch)
    assert gate.limit == 1  # never below one


def test_gate_holds_requests_over_the_limit_and_stops_on_ctrl_c() -> None:
    gate, stop = Gate(2), threading.Event()
    with Permit(gate, stop) as a, Permit(gate, stop):
        got = threading.Event()

        def third() -> None:
            with Permit(gate, stop):
                got.set()

        threading.Thread(target=third, daemon=True).start()
        assert not got.wait(0.3)  # two in flight: the third waits
        a.give()
        assert got.wait(2)  # one handed back: it runs
    assert gate.active == 0
    with Permit(gate, stop), Permit(gate, stop):
        stop.set()
        with pytest.raises(Stopped):
            gate.enter(stop)


def test_budget_is_the_base_until_the_server_answers_then_grows_with_the_work() -> None:
    clock = Clock()
    budget = Budget(Tuning(retries=3, retries_per_piece=4), clock)
    fail = RetryableHTTP(f"{URL}: HTTP 503", status=503)
    for _ in range(3):
        budget.spend(fail)
    with pytest.raises(RetryableHTTP) as err:
        budget.spend(fail)  # a server that never answered gets the base only
    message = str(err.value)
    assert message.startswith(f"{URL}: HTTP 503; gave up after 4 failed requests")
    assert "retry budget of 3" in message and "try again later" in message
    assert err.value.status == 503
    budget = Budget(Tuning(retries=3, retries_per_piece=4), clock)
    budget.add_work(10 << 20, 1 << 20)  # ten pieces: forty more
    for _ in range(43):
        budget.spend(fail)
    with pytest.raises(RetryableHTTP, match="retry budget of 43"):
        budget.spend(fail)


def test_budget_ends_a_file_that_stood_still_too_long_whatever_is_left() -> None:
    clock = Clock()
    budget = Budget(Tuning(give_up_after=60.0), clock)
    budget.add_work(1 << 40, 1 << 20)  # a huge budget
    fail = RetryableHTTP(f"{URL}: could not connect (Connection refused)")
    clock.now += 59
    budget.spend(fail)
    budget.progress()  # a byte arrived: the clock starts again
    clock.now += 59
    budget.spend(fail)
    clock.now += 1
    with pytest.raises(RetryableHTTP, match=r"no byte arrived for 60 s"):
        budget.spend(fail)


def test_backoff_grows_only_while_the_whole_file_stands_still() -> None:
    clock = Clock()
    budget = Budget(Tuning(), clock)
    streak = Streak(budget)
    assert [streak.failed(False) for _ in range(3)] == [1, 2, 3]
    clock.now += 1
    budget.progress()  # another connection brought bytes: the server works
    assert streak.failed(False) == 1
    assert streak.failed(True) == 0  # this request brought bytes before it broke: free


def test_delay_honours_retry_after_up_to_the_cap_else_backs_off() -> None:
    t = Tuning(backoff=0.5, backoff_cap=20.0, retry_after_cap=120.0)
    assert delay(t, RetryableHTTP("x", 7.0), 5) == 7.0
    assert delay(t, RetryableHTTP("x", 0.0), 5) == 0.0  # "now" is an answer too
    assert delay(t, RetryableHTTP("x", 3600.0), 1) == 120.0
    assert 0.25 <= delay(t, RetryableHTTP("x"), 1) <= 0.5  # lockpipe.http.backoff: 50-100 %
    assert 10.0 <= delay(t, RetryableHTTP("x"), 40) <= 20.0


def test_a_retry_waits_without_its_connection_and_a_throttle_shrinks_the_gate() -> None:
    """wait_to_retry, which the ranged and the git-blob downloads share."""
    ctx = Context(tuning=Tuning(connections=4, retry_after_cap=120.0), connections=4)
    budget, permit = Budget(ctx.tuning), Permit(ctx.gate, ctx.stop)
    permit.take()
    wait_to_retry(ctx, budget, permit, RetryableHTTP("x", 0.01, 429), 1)
    assert ctx.gate.limit == 2 and budget.failed == 1 and permit.held  # halved, spent, back
    wait_to_retry(ctx, budget, permit, RetryableHTTP("x", 0.01, 502), 0)  # brought bytes
    assert ctx.gate.limit == 2 and budget.failed == 1
    halt = threading.Event()
    halt.set()  # the transfer failed elsewhere: no waiting out the 120 s asked
    started = time.monotonic()
    wait_to_retry(ctx, budget, permit, RetryableHTTP("x", 3600.0, 503), 1, halt)
    assert time.monotonic() - started < 5
    ctx.stop.set()
    with pytest.raises(Stopped):
        wait_to_retry(ctx, budget, permit, RetryableHTTP("x", 0.05, 503), 1)
    assert not permit.held  # Ctrl-C while waiting: the connection is not taken again


def test_a_dead_server_is_given_up_on_within_a_minute_by_default() -> None:
    """The base budget's waits, at their jittered worst, with the default tuning."""
    t = Tuning()
    waits = [min(t.backoff_cap, t.backoff * 2.0 ** (k - 1)) for k in range(1, t.retries + 1)]
    assert sum(waits) < 60, sum(waits)


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (requests.exceptions.ConnectionError("[Errno 111] Connection refused"), RetryableHTTP,
         "could not connect (Connection refused)"),
        (requests.exceptions.ConnectTimeout("x"), Unreachable, "no connection to 127.0.0.1:1"),
        (wrapped(urllib3.exceptions.NameResolutionError(
            "127.0.0.1", NO_CONN, socket.gaierror(-2, "Name or service not known"))),
         Unreachable, "the host name 127.0.0.1:1 does not resolve (DNS: Name or service"),
        (wrapped(urllib3.exceptions.NewConnectionError(
            NO_CONN, "Failed to establish a new connection: [Errno 111] Connection refused")),
         Unreachable, "cannot connect to 127.0.0.1:1 (Connection refused)"),
        (requests.exceptions.InvalidURL("Invalid URL 'http://u:sekrit@h/': No host"), HTTPFatal,
         "http://***@h/"),
        (requests.exceptions.ReadTimeout("x"), RetryableHTTP, "30 s to read"),
        (requests.exceptions.ChunkedEncodingError("x"), RetryableHTTP, "ChunkedEncodingError"),
        (requests.exceptions.ContentDecodingError("x"), RetryableHTTP, "ContentDecodingError"),
        (urllib3.exceptions.ProtocolError("x"), RetryableHTTP, "ProtocolError"),
        (requests.exceptions.SSLError("EOF in violation of protocol"), RetryableHTTP, "TLS"),
        (requests.exceptions.SSLError("certificate verify failed"), HTTPFatal,
         "REQUESTS_CA_BUNDLE"),
        (requests.exceptions.InvalidURL("Failed to parse"), HTTPFatal, "not a URL"),
        (requests.exceptions.MissingSchema("No scheme"), HTTPFatal, "HF_ENDPOINT"),
        (requests.exceptions.InvalidSchema("No adapters"), HTTPFatal, "not a URL"),
        (urllib3.exceptions.LocationParseError("label too long"), HTTPFatal, "not a URL"),
        (requests.exceptions.TooManyRedirects("x"), HTTPFatal, "too many redirects"),
        (ValueError("Invalid IPv6 URL"), HTTPFatal, "not a URL"),
    ],
)  # fmt: skip
def test_every_network_exception_becomes_retry_or_fatal_with_the_url(
    exc: Exception, kind: type[Exception], words: str
) -> None:
    err = classify(URL, exc, (10.0, 30.0))
    assert type(err) is kind and str(err).startswith(URL) and words in str(err)


def test_an_invalid_header_never_shows_the_token() -> None:
    exc = requests.exceptions.InvalidHeader("Invalid return character in header: 'Bearer hf_x\n'")
    err = classify(URL, exc, (10.0, 30.0))
    assert isinstance(err, HTTPFatal) and "hf_x" not in str(err) and "HF_TOKEN" in str(err)


def test_a_host_never_reached_gets_a_few_tries_and_the_network_fix() -> None:
    budget = Budget(Tuning(retries=6, retries_unreachable=2), Clock())
    cut = Unreachable(f"{URL}: the host name hub.invalid does not resolve", "hub.invalid")
    for _ in range(2):
        budget.spend(cut)
    with pytest.raises(Unreachable) as err:
        budget.spend(cut)  # the third try: not six, as for a server that answers with errors
    message = str(err.value)
    assert "gave up after 3 failed requests" in message and "never reached" in message
    assert "no connection to hub.invalid" in message and "--mirror" in message
    assert "--connections" not in message and "try again later" not in message
    answered = Budget(Tuning(retries=6, retries_unreachable=2), Clock())
    answered.add_work(4, 1)  # the server answered for this file: a dropped link may come back
    for _ in range(6 + 4 * 4):
        answered.spend(cut)
    with pytest.raises(Unreachable, match=r"budget of 22 .* no connection to hub\.invalid"):
        answered.spend(cut)
