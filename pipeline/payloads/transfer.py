"""One file from one URL over N ranged connections, hashed in order as it arrives.

The first piece's request is the probe: a 206 starts the other connections,
a 200 means the server ignores Range and that one response streams the whole
file. Bytes are written with pwrite at their offset, journaled for resume and
handed to the :class:`OrderedHasher`.
"""

from __future__ import annotations

import os
import random
import threading
from collections import deque

from pipeline.payloads.errors import IntegrityError, RangeIgnored, RetryableHTTP
from pipeline.payloads.hasher import OrderedHasher
from pipeline.payloads.http import Opened, body, open_range
from pipeline.payloads.partial import Partial
from pipeline.payloads.ranges import RangeSet, split
from pipeline.payloads.settings import Context, MiB, Slot, Stopped, Tuning
from pipeline.payloads.sources import Candidate

__all__ = ["Stopped", "Transfer", "piece_size"]


def piece_size(size: int, tuning: Tuning) -> int:
    """Four pieces per connection at least, so a slow connection delays the end little."""
    return max(MiB, min(tuning.piece, -(-size // (4 * tuning.connections))))


class Transfer:
    """One attempt at filling ``partial`` from one candidate."""

    def __init__(self, label: str, cand: Candidate, partial: Partial, ctx: Context) -> None:
        self.label, self.cand, self.partial, self.ctx = label, cand, partial, ctx
        self.error: BaseException | None = None
        self.pieces: deque[tuple[int, int]] = deque()
        self.lock = threading.Lock()
        self.hasher = OrderedHasher(
            partial.fd, partial.size, RangeSet(partial.done), ctx.tuning.memory_cap
        )

    def run(self) -> tuple[int, str]:
        """Fill the file and return (bytes hashed, sha256)."""
        p = self.partial
        try:
            if p.size is None or p.done.missing(p.size):
                self._download()
            return self.hasher.result()
        finally:
            self.hasher.stop()
            p.flush(force=True)

    def _download(self) -> None:
        p, t = self.partial, self.ctx.tuning
        if p.size is None:
            first = (0, t.piece)
        else:
            self.pieces.extend(split(p.done.missing(p.size), piece_size(p.size, t)))
            first = self.pieces.popleft()
        with Slot(self.ctx.slots):
            opened = self._probe(*first)
            self._check_total(opened)
            if not opened.ranged:
                self._stream(opened)
                return
            if p.size is None:  # learnt from Content-Range: plan the rest now
                if opened.total is None:
                    opened.response.close()
                    raise RangeIgnored(f"{opened.url}: a 206 without the file's total size")
                p.preallocate(opened.total)
                self.hasher.set_size(opened.total)
                first = (0, min(first[1], opened.total))
                self.pieces.extend(split([(first[1], opened.total)], piece_size(opened.total, t)))
            count = min(t.connections - 1, len(self.pieces))
            workers = [threading.Thread(target=self._worker, daemon=True) for _ in range(count)]
            for w in workers:
                w.start()
            self._guard(first, opened)
        self._worker()  # the probing thread takes pieces too once its own is done
        for w in workers:
            w.join()
        if self.error is not None:
            raise self.error

    def _probe(self, start: int, end: int) -> Opened:
        t = self.ctx.tuning
        for n in range(t.attempts):
            try:
                return open_range(self.ctx.session(), self.cand, start, end, t.timeout)
            except RetryableHTTP as exc:
                if n + 1 == t.attempts:
                    raise
                self.ctx.sleep(exc.retry_after or self._backoff(n + 1))
        raise AssertionError("unreachable")

    def _backoff(self, failures: int) -> float:
        t = self.ctx.tuning
        if failures == 0:  # the connection dropped after some progress: go again at once
            return 0.05
        return min(t.backoff_cap, t.backoff * 2.0 ** (failures - 1)) * random.uniform(0.8, 1.2)

    def _check_total(self, opened: Opened) -> None:
        size = self.partial.size
        if opened.total is not None and size is not None and opened.total != size:
            opened.response.close()
            raise IntegrityError(
                f"{self.label}: {opened.url} serves {opened.total:,} bytes, the lock pins "
                f"{size:,}; the file changed upstream or the revision is wrong: fix the mirror, "
                "or relock with nox -s refresh-digests"
            )

    def _worker(self) -> None:
        while self.error is None:
            with Slot(self.ctx.slots):
                with self.lock:
                    if not self.pieces:
                        return
                    piece = self.pieces.popleft()
                self._guard(piece, None)

    def _guard(self, piece: tuple[int, int], opened: Opened | None) -> None:
        try:
            self._fill(piece, opened)
        except BaseException as exc:  # the first error ends the transfer; _download raises it
            with self.lock:
                self.error = self.error or exc
                self.pieces.clear()

    def _fill(self, piece: tuple[int, int], opened: Opened | None) -> None:
        """Write ``[start, end)``, reopening from where it broke off after a drop."""
        pos, end = piece
        failures = 0
        while pos < end:
            before = pos
            try:
                if opened is None:
                    opened = open_range(
                        self.ctx.session(), self.cand, pos, end, self.ctx.tuning.timeout
                    )
                    self._check_total(opened)
                    if not opened.ranged:
                        opened.response.close()
                        raise RangeIgnored(f"{opened.url}: the server stopped honouring Range")
                for data in body(opened, self.ctx.tuning.chunk):
                    data = data[: end - pos]
                    if not data:
                        break  # more than asked for: drop the connection, keep the bytes
                    self._write(pos, data)
                    pos += len(data)
                if pos < end:
                    raise RetryableHTTP(f"{opened.url}: the body ended {end - pos:,} bytes early")
            except RetryableHTTP as exc:
                failures = 0 if pos > before else failures + 1
                if failures >= self.ctx.tuning.attempts:
                    raise
                self.ctx.sleep(exc.retry_after or self._backoff(failures))
            opened = None

    def _write(self, pos: int, data: bytes) -> None:
        if self.ctx.stop.is_set():
            raise Stopped
        view, at = memoryview(data), pos
        while view:
            n = os.pwrite(self.partial.fd, view, at)
            view, at = view[n:], at + n
        self.hasher.feed(pos, data)
        self.partial.wrote(pos, at)
        self.ctx.advance(self.label, len(data))

    def _stream(self, opened: Opened) -> None:
        """The whole file on one connection, from byte 0 (resume is impossible here)."""
        p = self.partial
        p.reset()
        self.hasher.stop()
        self.hasher = OrderedHasher(p.fd, None, RangeSet(), self.ctx.tuning.memory_cap)
        pos = 0
        for data in body(opened, self.ctx.tuning.chunk):
            if p.size is not None and pos + len(data) > p.size:
                raise IntegrityError(
                    f"{self.label}: {opened.url} sends more than the {p.size:,} bytes the lock "
                    "pins; the file changed upstream or the mirror is wrong"
                )
            self._write(pos, data)
            pos += len(data)
        if (opened.total is not None and pos != opened.total) or (
            p.size is not None and pos != p.size
        ):
            raise RetryableHTTP(f"{opened.url}: the body ended at byte {pos:,}")
        os.ftruncate(p.fd, pos)
        p.size = pos
        self.hasher.set_size(pos)
