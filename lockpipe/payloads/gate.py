"""The run's connection budget, which shrinks when a server says it is overloaded.

A 429 or 503 means "fewer requests, please": answering it with the same 16
connections just collects more of them. So the number of requests allowed at
once adapts as TCP's window does (AIMD): it halves on a 429 or 503 and grows
by one with each request the server accepts, back up to the number asked for.

Only the first 429/503 of an *epoch* halves the limit: the requests already in
flight when it was halved were sent under the old load, and counting each of
their answers would cut 16 connections to 1 at once.
"""

from __future__ import annotations

import threading
from types import TracebackType

from lockpipe.payloads.errors import Stopped

WAKE = 0.25  # how often a waiting thread looks at the stop flag


class Gate:
    """At most :attr:`limit` requests at once; the limit moves between 1 and ``most``."""

    def __init__(self, most: int) -> None:
        self.most = max(1, most)
        self.limit = self.most
        self.active = 0
        self.epoch = 0  # counts the decreases
        self._cond = threading.Condition()

    def enter(self, stop: threading.Event) -> int:
        """Wait for a free connection; return the epoch it was granted in."""
        with self._cond:
            while self.active >= self.limit:
                if stop.is_set():
                    raise Stopped
                self._cond.wait(WAKE)
            self.active += 1
            return self.epoch

    def leave(self) -> None:
        with self._cond:
            self.active -= 1
            self._cond.notify()

    def throttled(self, epoch: int) -> None:
        """A request granted in ``epoch`` got a 429 or 503: halve the limit, once per epoch."""
        with self._cond:
            if epoch == self.epoch:
                self.limit = max(1, self.limit // 2)
                self.epoch += 1

    def accepted(self) -> None:
        """The server answered a request with data: allow one more at once."""
        with self._cond:
            if self.limit < self.most:
                self.limit += 1
                self._cond.notify()


class Permit:
    """One connection of the gate, held while a request runs, let go while waiting to retry."""

    def __init__(self, gate: Gate, stop: threading.Event) -> None:
        self.gate, self.stop = gate, stop
        self.epoch = -1
        self.held = False

    def __enter__(self) -> Permit:
        self.take()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.give()

    def take(self) -> None:
        if not self.held:
            self.epoch = self.gate.enter(self.stop)
            self.held = True

    def give(self) -> None:
        if self.held:
            self.held = False
            self.gate.leave()

    def throttled(self) -> None:
        self.gate.throttled(self.epoch)
