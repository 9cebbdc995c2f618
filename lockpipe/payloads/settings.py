"""What one run's downloads share: tuning, the stop flag and the connection budget."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from lockpipe.http import Retries
from lockpipe.http.transport import Policy, Transport
from lockpipe.payloads.errors import Stopped
from lockpipe.payloads.gate import Gate

__all__ = ["DEFAULT_CONNECTIONS", "Context", "MiB", "Stopped", "Tuning"]

MiB = 1 << 20
# CDNs cap each connection (the Hub's too); 16 reached 92 % of this machine's ceiling
# in the benchmark (docs/payloads.md) where 8 reached 82 % of 8 x cap.
DEFAULT_CONNECTIONS = 16


@dataclass(frozen=True, kw_only=True)
class Tuning:
    connections: int = DEFAULT_CONNECTIONS
    piece: int = 32 * MiB  # upper bound; small files get smaller pieces
    chunk: int = 1 * MiB
    # Retries are budgeted per file (lockpipe.payloads.retry): ``retries`` plus
    # ``retries_per_piece`` for each piece; none once no byte came for ``give_up_after`` s.
    retries: int = 6  # a dead server: given up on after about 30 s (backoff 0.5 s doubling)
    retries_per_piece: int = 4
    # A host never reached for the file (no DNS answer, nothing listening): tries after the
    # first, about 1.5 s with the default backoff, before the fix for this host's network.
    retries_unreachable: int = 2
    give_up_after: float = 300.0
    # A connection bringing under ``slowest`` bytes/s over ``slow_for`` s is dropped and
    # retried (curl's --speed-limit and --speed-time): a body sent a byte at a time, just
    # inside the read timeout, would otherwise hold its piece for ever.
    slowest: int = 1024
    slow_for: float = 60.0
    backoff: float = 0.5  # doubling per failure in a row of one piece, up to backoff_cap
    backoff_cap: float = 20.0
    retry_after_cap: float = 120.0  # the longest Retry-After honoured
    timeout: tuple[float, float] = (10.0, 30.0)  # connect, read
    memory_cap: int = 256 * MiB
    journal_every: float = 0.5


@dataclass(kw_only=True)
class Context:
    """What every transfer in one run shares."""

    tuning: Tuning
    advance: Callable[[str, int], None] = lambda label, n: None
    stop: threading.Event = field(default_factory=threading.Event)
    connections: int = 0  # requests at once across the run's files (0: tuning.connections)
    local: threading.local = field(default_factory=threading.local)
    gate: Gate = field(init=False)  # the run-wide connection budget, shrunk on 429/503

    def __post_init__(self) -> None:
        self.gate = Gate(self.connections or self.tuning.connections)

    def transport(self) -> Transport:
        """One transport per thread, for its keep-alive session (requests sessions are not
        thread-safe); it sends single tries: a file's retries are its Budget's."""
        t: Transport | None = getattr(self.local, "transport", None)
        if t is None:
            policy = Policy(retries=Retries(attempts=0), timeout=self.tuning.timeout)
            t = self.local.transport = Transport(policy)
        return t
