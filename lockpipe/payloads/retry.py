"""When to retry a failed request, how long to wait first, and when to give up.

"Six failures in a row ends the download" fails most large files against a
server that refuses half its requests at random: among a hundred pieces, one
meets six in a row. What tells a bad server from an unlucky streak is the
share of failures over the whole file, and whether the file still moves. So:

- each file gets a retry budget proportional to its work (a base, plus a few
  per piece once the server has answered one request for the file: a server
  that never does gets only the base);
- a wall-clock bound: no new byte for ``give_up_after`` seconds ends it, so a
  server that stops answering ends the run in bounded time at any file size;
- a drop that still brought bytes is retried at once and costs nothing, but only
  while its piece moves at ``slowest`` bytes/s or more over ``slow_for`` s across
  its reconnects (:class:`Floor`): each connection's own floor starts again with
  each request, so a server hanging up after a few bytes of every request beat it
  and took hours for a file, never failing;
- backoff grows only while the whole file stands still. When other connections
  bring bytes the server works, and a piece that doubled its wait on each
  unlucky failure would sleep for a minute while the rest of the file is done.

A host never reached for the file (its name does not resolve, nothing answers)
gets ``retries_unreachable`` tries, not the server's budget: a machine without
network learns so in seconds, with the fix that applies to it (its network, or
a ``--mirror`` it can reach) instead of the one for a failing server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lockpipe.http import backoff
from lockpipe.payloads.errors import RetryableHTTP, Stopped, TooSlow, Unreachable
from lockpipe.payloads.gate import WAKE, Permit
from lockpipe.payloads.settings import Context, Tuning

AGAIN_AT_ONCE = 0.05  # after a drop that still brought bytes: the server is working
THROTTLED = (429, 503)  # the server asks for fewer requests: the run's gate shrinks
FIX = "try again later, or with fewer --connections, or from a --mirror"
SLOW_FIX = "try a --mirror (LOCKPIPE_MIRROR), or again later"
UNREACHABLE_FIX = (
    "check this host's network, DNS and proxy (HTTPS_PROXY), or fetch from a --mirror "
    "(LOCKPIPE_MIRROR) it can reach"
)


def delay(tuning: Tuning, exc: RetryableHTTP, failures: int) -> float:
    """Seconds to wait before the next try of a piece (``failures``: :meth:`Streak.failed`).

    The server's Retry-After wins (capped: a proxy asking for an hour should not
    stall a build that long); else :func:`lockpipe.http.backoff`, every client's.
    Unlike the registry and API clients, a long Retry-After is waited for up to the
    cap rather than failed at once: the file's budget and stall bound end a run.
    """
    if exc.retry_after is not None:
        return min(max(0.0, exc.retry_after), tuning.retry_after_cap)
    if failures == 0:
        return AGAIN_AT_ONCE
    return backoff(failures - 1, base=tuning.backoff, cap=tuning.backoff_cap)


class Budget:
    """How many failed requests one file may still retry, and until when.

    Thread-safe: every connection of the file spends from it.
    """

    def __init__(self, tuning: Tuning, clock: Callable[[], float] = time.monotonic) -> None:
        self.tuning, self.clock = tuning, clock
        self.allowed = tuning.retries
        self.failed = 0
        self.started = self.moved = clock()
        self.answered = False  # the server answered a request for this file
        self._lock = threading.Lock()

    def add_work(self, nbytes: int, piece: int) -> None:
        """``nbytes`` are to be fetched in pieces of up to ``piece``: allow retries for them."""
        pieces = -(-max(0, nbytes) // max(1, piece))
        with self._lock:
            self.allowed += self.tuning.retries_per_piece * pieces
            self.answered = True

    def progress(self) -> None:
        """Bytes arrived: the file is moving."""
        self.moved = self.clock()
        self.answered = True

    def spend(self, exc: RetryableHTTP) -> None:
        """Count the failed request ``exc``; raise once the budget is spent or the file stalled."""
        with self._lock:
            self.failed += 1
            now = self.clock()
            idle, took = now - self.moved, now - self.started
            never = isinstance(exc, Unreachable) and not self.answered
            if never:
                if self.failed <= self.tuning.retries_unreachable:
                    return
            elif self.failed <= self.allowed and idle < self.tuning.give_up_after:
                return
            why = (
                "the host was never reached"
                if never
                else f"no byte arrived for {idle:.0f} s"
                if idle >= self.tuning.give_up_after
                else f"the retry budget of {self.allowed} for this file is spent"
            )
        gave_up = f"{exc}; gave up after {self.failed} failed requests in {took:.0f} s ({why})"
        if isinstance(exc, Unreachable):
            raise Unreachable(f"{gave_up}: no connection to {exc.host}; {UNREACHABLE_FIX}",
                              exc.host)  # fmt: skip
        raise RetryableHTTP(
            f"{gave_up}: the server keeps failing; {FIX}", exc.retry_after, exc.status
        )


class Streak:
    """One piece's failed requests in a row while the whole file stood still."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.count = 0
        self.mark = budget.moved

    def failed(self, progressed: bool) -> int:
        """Count a failed request; ``progressed``: it brought bytes before it broke (0: free)."""
        moved, self.mark = self.budget.moved != self.mark, self.budget.moved
        if progressed:
            self.count = 0
        elif moved:
            self.count = 1  # other connections brought bytes meanwhile: no reason to wait longer
        else:
            self.count += 1
        return self.count


class Floor:
    """One piece's rate across its reconnects, against ``slowest`` bytes/s over ``slow_for``
    s: what ends a piece whose every request brings a few bytes and hangs up.

    Its window starts again after a failure the budget counts (the wait after it, a
    Retry-After included, is not the server being slow; the budget bounds those), and
    leaves out the wait before a free retry (:meth:`waited`).
    """

    def __init__(
        self, tuning: Tuning, pos: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.tuning, self.clock = tuning, clock
        self.since, self.mark, self.drops = clock(), pos, 0

    def restart(self, pos: int) -> None:
        self.since, self.mark = self.clock(), pos

    def waited(self, since: float) -> None:
        """Leave out of the window the wait from ``since`` (this clock's) to now: the wait
        before a free retry, for the run's connection gate after 429s and 503s too, is not
        the server being slow."""
        self.since += max(self.clock() - since, 0.0)

    def judge(self, pos: int, exc: RetryableHTTP) -> None:
        """A drop that brought the piece to ``pos``: raise :class:`TooSlow`, naming ``exc``
        (its URL) and the fix, when the piece came under the floor over ``slow_for`` s or
        more; else the window moves on once it is that long."""
        t, now = self.tuning, self.clock()
        self.drops += 1
        took, came = now - self.since, pos - self.mark
        if took < t.slow_for:
            return
        if came >= t.slowest * took:
            self.restart(pos)
            return
        raise TooSlow(
            f"{exc}; too slow across reconnects: {came:,} bytes in {took:.0f} s, under "
            f"{t.slowest:,} bytes/s, the server hanging up {self.drops:,} times after a few "
            f"bytes; {SLOW_FIX}"
        )


def wait_to_retry(
    ctx: Context,
    budget: Budget,
    permit: Permit,
    exc: RetryableHTTP,
    failures: int,
    halt: threading.Event | None = None,
) -> None:
    """Count the failed request ``exc`` against ``budget`` and wait before its retry,
    without holding a connection; every retry of the downloader goes through here.

    ``failures``: from :meth:`Streak.failed`; 0 when the request still brought bytes (free,
    and retried almost at once). A 429 or 503 shrinks the run's gate. The wait ends early
    when ``halt`` is set (the transfer failed elsewhere); Ctrl-C raises :class:`Stopped`.
    """
    if exc.status in THROTTLED:
        permit.throttled()
    if failures:
        budget.spend(exc)  # raises once the file has failed too often or too long
    permit.give()
    deadline = time.monotonic() + delay(ctx.tuning, exc, failures)
    while not (halt and halt.is_set()) and (left := deadline - time.monotonic()) > 0:
        if ctx.stop.wait(min(left, WAKE)):
            raise Stopped
    permit.take()
