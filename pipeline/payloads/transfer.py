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

from pipeline.errors import IntegrityError
from pipeline.payloads.errors import RangeIgnored, RetryableHTTP
from pipeline.payloads.hasher import OrderedHasher
from pipeline.payloads.http import Opened, body, open_range
from pipeline.payloads.partial import Partial
from pipeline.payloads.ranges import RangeSet
from pipeline.payloads.schedule import Piece, Scheduler
from pipeline.payloads.settings import Context, MiB, Slot, Stopped, Tuning
from pipeline.payloads.sources import Candidate

__all__ = ["Stopped", "Transfer", "piece_size"]


def piece_size(size: int, tuning: Tuning) -> int:
    """The largest piece: a quarter of a connection's share at most, so pieces shrink early."""
    return max(MiB, min(tuning.piece, -(-size // (4 * tuning.connections))))


class Transfer:
    """One attempt at filling ``partial`` from one candidate."""

    def __init__(self, label: str, cand: Candidate, partial: Partial, ctx: Context) -> None:
        self.label, self.cand, self.partial, self.ctx = label, cand, partial, ctx
        self.error: BaseException | None = None
        self.sched = Scheduler((), 1, MiB)
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
            p.stop_flushing()
            p.flush(force=True)

    def _plan(self, size: int) -> tuple[int, int]:
        """Schedule the gaps of ``[0, size)``; the first piece, for the probe."""
        t = self.ctx.tuning
        self.sched = Scheduler(self.partial.done.missing(size), t.connections, piece_size(size, t))
        first = self.sched.take()
        assert first is not None
        self.sched.done(first)
        return first.pos, first.end

    def _download(self) -> None:
        p, t = self.partial, self.ctx.tuning
        first = (0, t.piece) if p.size is None else self._plan(p.size)
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
                self.sched = Scheduler(
                    [(first[1], opened.total)], t.connections, piece_size(opened.total, t)
                )
            workers = [
                threading.Thread(target=self._worker, daemon=True) for _ in range(t.connections - 1)
            ]
            for w in workers:
                w.start()
            piece = self.sched.take(first)
            assert piece is not None
            self._guard(piece, opened)
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
                "or re-pin the entry from the repository's file page"
            )

    def _worker(self) -> None:
        while self.error is None:
            with Slot(self.ctx.slots):
                piece = self.sched.take()
                if piece is None:
                    return
                self._guard(piece, None)

    def _guard(self, piece: Piece, opened: Opened | None) -> None:
        try:
            self._fill(piece, opened)
        except BaseException as exc:  # the first error ends the transfer; _download raises it
            with self.lock:
                self.error = self.error or exc
            self.sched.clear()
        finally:
            self.sched.done(piece)

    def _fill(self, piece: Piece, opened: Opened | None) -> None:
        """Write the piece, reopening from where it broke off after a drop.

        Its end may move closer while this runs (another connection took the rest).
        """
        failures = 0
        while piece.pos < piece.end:
            before = piece.pos
            try:
                if opened is None:
                    opened = open_range(
                        self.ctx.session(), self.cand, piece.pos, piece.end, self.ctx.tuning.timeout
                    )
                    self._check_total(opened)
                    if not opened.ranged:
                        opened.response.close()
                        raise RangeIgnored(f"{opened.url}: the server stopped honouring Range")
                asked = piece.end
                for data in body(opened, self.ctx.tuning.chunk):
                    if self.ctx.stop.is_set():
                        raise Stopped
                    pos = piece.pos
                    n = self.sched.claim(piece, len(data))
                    if n:
                        self._write(pos, data if n == len(data) else data[:n])
                    if n < len(data):
                        break  # more than asked for, or the end moved: drop the connection
                if piece.pos < min(asked, piece.end):
                    raise RetryableHTTP(
                        f"{opened.url}: the body ended {piece.end - piece.pos:,} bytes early"
                    )
            except RetryableHTTP as exc:
                failures = 0 if piece.pos > before else failures + 1
                if failures >= self.ctx.tuning.attempts:
                    raise
                self.ctx.sleep(exc.retry_after or self._backoff(failures))
            opened = None

    def _write(self, pos: int, data: bytes) -> None:
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
            if self.ctx.stop.is_set():
                raise Stopped
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
