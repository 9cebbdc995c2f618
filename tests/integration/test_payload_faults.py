"""Servers that fail often, throttle, or never answer: the run still ends well, and soon.

Half of all requests failing at random must still give a verified file with
the default 16 connections; a server that always fails must end in one clear
error (exit 8, the URL, what to do) in bounded time, never a hang or a traceback.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import FetchError
from lockpipe.payloads.errors import HTTPFatal
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.settings import DEFAULT_CONNECTIONS, MiB, Tuning
from tests.integration.payload_servers import FaultServer, entry, free_port, make_lock

pytestmark = pytest.mark.integration
DATA = os.urandom(4 * MiB + 4321)
# 32 pieces: enough that "six failures in a row for one piece" used to end most runs.
BIG = os.urandom(32 * MiB + 4321)
# The default 16 connections; small pieces so a few MiB make many requests; short waits.
QUICK = Tuning(piece=1 * MiB, backoff=0.05, backoff_cap=0.5, timeout=(2.0, 5.0), journal_every=0.1)


@pytest.fixture(scope="module")
def fault() -> Iterator[FaultServer]:
    srv = FaultServer("127.0.0.1")
    srv.files["model.bin"] = DATA
    srv.files["big.bin"] = BIG
    yield srv
    srv.shutdown()


def fetch(
    tmp: Path, endpoint: str, tuning: Tuning = QUICK, data: bytes = DATA, **more: Any
) -> Path:
    env = {"HF_ENDPOINT": endpoint, "HOME": str(tmp)}
    lock = make_lock(tmp, {"m": entry(data, "big.bin" if data is BIG else "model.bin")})
    opts = Options(store=tmp / "store", output="quiet", tuning=tuning, env=env, **more)
    [result] = run_payloads(lock, [], opts)
    return result.path


@pytest.mark.parametrize("mode", ["coin", "alternate"])
def test_half_the_requests_failing_still_gives_a_verified_file(
    fault: FaultServer, tmp_path: Path, mode: str
) -> None:
    assert QUICK.connections == DEFAULT_CONNECTIONS == 16
    for n in range(5):  # one lucky run proves little; each takes about a second
        before = fault.per_file[(mode, "big.bin")]
        path = fetch(tmp_path / str(n), f"{fault.url}/{mode}", data=BIG)
        assert path.read_bytes() == BIG
        assert fault.per_file[(mode, "big.bin")] - before > 40  # it did meet failures
        shutil.rmtree(tmp_path / str(n))


@pytest.mark.parametrize("date", [False, True])
def test_429_waits_as_long_as_retry_after_says(
    fault: FaultServer, tmp_path: Path, date: bool
) -> None:
    fault.throttles = 1
    fault.retry_after = formatdate(time.time() + 2, usegmt=True) if date else "1"
    fault.per_file[("throttle", "model.bin")] = 0
    fault.times.pop(("throttle", "model.bin"), None)
    assert fetch(tmp_path, f"{fault.url}/throttle").read_bytes() == DATA
    first, second = fault.times[("throttle", "model.bin")][:2]
    assert second - first >= 0.9  # the server's word, not the 10 ms backoff


def test_a_server_that_always_fails_ends_in_a_clear_error_soon(
    fault: FaultServer, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(FetchError) as err:
        fetch(tmp_path, f"{fault.url}/down")
    elapsed = time.monotonic() - started
    message = str(err.value)
    assert err.value.return_code == 8 and not isinstance(err.value, HTTPFatal)
    assert f"{fault.url}/down/org/model/resolve/" in message and "HTTP 503" in message
    assert "try again later" in message and "gave up after" in message
    assert elapsed < 15, f"{elapsed:.1f} s"
    assert fault.per_file[("down", "model.bin")] < 200  # a budget, not a flood


def test_a_body_trickling_in_is_dropped_as_too_slow_and_the_run_ends(
    fault: FaultServer, tmp_path: Path
) -> None:
    """A server sending 64 bytes/s, each write inside the read timeout: before, a read of a
    1 MiB chunk waited for the whole chunk, so the run showed no progress and never ended
    (a 64 KiB file: 17 min); now each connection under ``slowest`` over ``slow_for`` is
    dropped, the retries spend the file's budget, and the error says why."""
    fault.files["slow.bin"] = SMALL = os.urandom(64 * 1024)
    slow = Tuning(slowest=1024, slow_for=1.0, retries=1, retries_per_piece=1, backoff=0.05,
                  timeout=(2.0, 5.0))  # fmt: skip
    lock = make_lock(tmp_path, {"m": entry(SMALL, "slow.bin")})
    env = {"HF_ENDPOINT": f"{fault.url}/trickle", "HOME": str(tmp_path)}
    opts = Options(store=tmp_path / "store", output="quiet", tuning=slow, env=env)
    started = time.monotonic()
    with pytest.raises(FetchError) as err:
        run_payloads(lock, [], opts)
    assert time.monotonic() - started < 30
    message = str(err.value)
    assert err.value.return_code == 8 and f"{fault.url}/trickle/org/model/resolve/" in message
    assert "too slow (" in message and "under 1,024 bytes/s" in message, message
    assert "gave up after" in message
    assert not list((tmp_path / "store").rglob("slow.bin"))  # nothing put in place


def test_a_refused_connection_is_a_clear_error(tmp_path: Path) -> None:
    host = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(FetchError) as err:
        fetch(tmp_path, f"http://{host}", Tuning(backoff=0.5))
    message = str(err.value)
    assert err.value.return_code == 8 and f"http://{host}/" in message
    assert f"cannot connect to {host} (Connection refused)" in message
    assert "gave up after 3 failed requests" in message and f"no connection to {host}" in message
    assert "--mirror" in message and "--connections" not in message
    assert time.monotonic() - started < 5  # a few tries, not the budget of a failing server
    assert not list((tmp_path / "store").rglob("blobs/*"))  # nothing reserved, nothing left


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("http://[::1", "not a URL"),
        ("http://127.0.0.1:99999", "not a URL"),
        ("ftp://127.0.0.1", "not a URL"),
        ("http://a" + "b" * 70 + ".example", "not a URL"),
    ],
)
def test_an_invalid_url_fails_at_once_without_a_traceback(
    tmp_path: Path, endpoint: str, why: str
) -> None:
    started = time.monotonic()
    slow = Tuning(backoff=5.0)  # a retry would show in the time taken
    with pytest.raises(HTTPFatal) as err:
        fetch(tmp_path, endpoint, slow)
    assert err.value.return_code == 8 and why in str(err.value)
    assert "HF_ENDPOINT" in str(err.value)
    assert time.monotonic() - started < 3
