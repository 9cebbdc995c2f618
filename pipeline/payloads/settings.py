"""What one run's downloads share: tuning, the stop flag and the connection budget."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import requests

MiB = 1 << 20
# CDNs cap each connection (the Hub's too); 16 reached 92 % of this machine's ceiling
# in the benchmark (docs/payloads.md) where 8 reached 82 % of 8 x cap.
DEFAULT_CONNECTIONS = 16


class Stopped(Exception):
    """The run is being interrupted; the journal keeps what was written."""


@dataclass(frozen=True)
class Tuning:
    connections: int = DEFAULT_CONNECTIONS
    piece: int = 32 * MiB  # upper bound; small files get smaller pieces
    chunk: int = 1 * MiB
    attempts: int = 6  # consecutive failures without progress, per piece
    backoff: float = 0.5
    backoff_cap: float = 20.0
    timeout: tuple[float, float] = (10.0, 30.0)  # connect, read
    memory_cap: int = 256 * MiB
    journal_every: float = 0.5


@dataclass
class Context:
    """What every transfer in one run shares."""

    tuning: Tuning
    advance: Callable[[str, int], None] = lambda label, n: None
    stop: threading.Event = field(default_factory=threading.Event)
    slots: threading.Semaphore | None = None  # the run-wide connection budget
    local: threading.local = field(default_factory=threading.local)

    def session(self) -> requests.Session:
        """One keep-alive session per thread (requests sessions are not thread-safe)."""
        s: requests.Session | None = getattr(self.local, "session", None)
        if s is None:
            s = self.local.session = requests.Session()
        return s

    def sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Stopped


class Slot:
    """A permit of the run-wide connection budget (none when there is no budget)."""

    def __init__(self, sem: threading.Semaphore | None) -> None:
        self.sem = sem

    def __enter__(self) -> None:
        if self.sem is not None:
            self.sem.acquire()

    def __exit__(self, *exc: object) -> None:
        if self.sem is not None:
            self.sem.release()
