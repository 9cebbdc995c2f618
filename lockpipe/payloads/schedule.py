"""Which bytes each connection fetches next: shrinking pieces, then splitting the tail.

Pieces are cut from the front of what is left, each about ``left / (2 x
connections)`` (between ``smallest`` and ``largest``): big pieces while much is
left (few requests), small ones near the end, so the connections finish close
together and little arrives out of order for the hasher at the end. A
connection that finds nothing left takes the second half of the piece with the
most bytes still to come (work stealing), so no connection idles while another
still has seconds of work. The owner of a split piece sees its end move and
stops there (dropping that response's connection).

A connection *claims* bytes before writing them (:meth:`Scheduler.claim`), under
the same lock as splitting, so no byte is written or hashed twice.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

from lockpipe.payloads.settings import MiB

ALIGN = 64 << 10  # split points on 64 KiB boundaries


class Piece:
    """``[pos, end)`` still to fetch; ``end`` may shrink when another connection splits it."""

    __slots__ = ("end", "pos")

    def __init__(self, start: int, end: int) -> None:
        self.pos, self.end = start, end

    def __repr__(self) -> str:
        return f"Piece({self.pos}, {self.end})"


class Scheduler:
    """Hands out pieces of the gaps ``gaps`` to ``connections`` connections."""

    def __init__(
        self,
        gaps: Iterable[tuple[int, int]],
        connections: int,
        largest: int,
        smallest: int = 4 * MiB,
        split_min: int = 2 * MiB,
    ) -> None:
        self._gaps: deque[tuple[int, int]] = deque((s, e) for s, e in gaps if e > s)
        self._left = sum(e - s for s, e in self._gaps)
        self._n = max(1, connections)
        self._largest = max(largest, ALIGN)
        self._smallest = min(max(smallest, ALIGN), self._largest)
        self._split_min = max(split_min, ALIGN)
        self._active: list[Piece] = []
        self._lock = threading.Lock()
        self.splits = 0

    def take(self) -> Piece | None:
        """The next piece for a connection, or None when done."""
        with self._lock:
            piece = self._cut() if self._gaps else self._steal()
            if piece is not None:
                self._active.append(piece)
            return piece

    def take_exact(self, start: int, end: int) -> Piece:
        """``[start, end)`` as an active piece (the probe's, cut before the plan was known)."""
        with self._lock:
            piece = Piece(start, end)
            self._active.append(piece)
            return piece

    def _cut(self) -> Piece:
        start, end = self._gaps.popleft()
        want = max(self._smallest, min(self._largest, self._left // (2 * self._n)))
        want = -(-want // ALIGN) * ALIGN
        cut = end if end - start <= want + self._smallest // 2 else start + want
        if cut < end:
            self._gaps.appendleft((cut, end))
        self._left -= cut - start
        return Piece(start, cut)

    def _steal(self) -> Piece | None:
        victim = max(self._active, key=lambda p: p.end - p.pos, default=None)
        if victim is None or victim.end - victim.pos < 2 * self._split_min:
            return None
        mid = victim.pos + (victim.end - victim.pos) // 2
        mid -= mid % ALIGN
        if mid <= victim.pos:
            return None
        piece = Piece(mid, victim.end)
        victim.end = mid
        self.splits += 1
        return piece

    def claim(self, piece: Piece, n: int) -> int:
        """Reserve up to ``n`` bytes at ``piece.pos`` for writing; how many (0: piece done)."""
        with self._lock:
            n = max(0, min(n, piece.end - piece.pos))
            piece.pos += n
            return n

    def done(self, piece: Piece) -> None:
        with self._lock:
            if piece in self._active:
                self._active.remove(piece)

    def clear(self) -> None:
        with self._lock:
            self._gaps.clear()
            self._left = 0
            for p in self._active:
                p.end = p.pos
