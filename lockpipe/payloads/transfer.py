"""One file from one URL over N ranged connections, hashed in order as it arrives.

The first piece's request is the probe: a 206 starts the other connections,
a 200 means the server ignores Range and that one response streams the whole
file. Bytes are written with pwrite at their offset, journaled for resume and
handed to the :class:`OrderedHasher`. Each request holds a permit of the run's
:class:`Gate` and hands it back while it waits to retry; each failed request
spends from the file's :class:`Budget` (:mod:`lockpipe.payloads.retry`).
"""

from __future__ import annotations

import os
import threading

from lockpipe.errors import IntegrityError, LockpipeError
from lockpipe.payloads.errors import (
    HTTPFatal,
    RangeIgnored,
    RangeRefused,
    RetryableHTTP,
    Stopped,
    TooSlow,
)
from lockpipe.payloads.gate import Permit
from lockpipe.payloads.hasher import OrderedHasher, Unfed
from lockpipe.payloads.http import Opened, body, open_range
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.ranges import RangeSet
from lockpipe.payloads.retry import Budget, Floor, Streak, wait_to_retry
from lockpipe.payloads.schedule import Piece, Scheduler
from lockpipe.payloads.settings import Context, MiB, Tuning
from lockpipe.payloads.sources import Candidate

__all__ = ["Stopped", "Transfer", "piece_size"]


def piece_size(size: int, tuning: Tuning) -> int:
    """The largest piece: a quarter of a connection's share at most, so pieces shrink early."""
    return max(MiB, min(tuning.piece, -(-size // (4 * tuning.connections))))


class Transfer:
    """One attempt at filling ``partial`` from one candidate."""

    def __init__(
        self, label: str, cand: Candidate, partial: Partial, ctx: Context, most: int | None = None
    ) -> None:
        self.label, self.cand, self.partial, self.ctx = label, cand, partial, ctx
        self.most = most  # the most bytes a file whose size the lock does not pin may have
        self.error: BaseException | None = None
        self.halt = threading.Event()  # set with error: connections waiting to retry quit
        self.sched = Scheduler((), 1, MiB)
        self.budget = Budget(ctx.tuning)
        self.planned = (0, MiB)  # bytes and piece size, budgeted once the probe got an answer
        self.lock = threading.Lock()
        self.hasher = OrderedHasher(
            partial.read, partial.size, RangeSet(partial.done), ctx.tuning.memory_cap
        )

    def run(self) -> tuple[int, str]:
        """Fill the file and return (bytes hashed, sha256)."""
        p = self.partial
        try:
            if p.size is None or p.done.missing(p.size):
                self._download()
            self.hasher.finish()  # a byte still missing now never comes: Unfed, not a hang
            return self.hasher.result()
        except Unfed:
            p.reset()  # the journal and the hashed bytes disagree: start the file again
            raise
        finally:
            self.hasher.stop()
            p.stop_flushing()
            p.flush(force=True)

    def _plan(self, size: int) -> tuple[int, int]:
        """Schedule the gaps of ``[0, size)``; the first piece, for the probe."""
        t = self.ctx.tuning
        gaps, largest = self.partial.done.missing(size), piece_size(size, t)
        self.sched = Scheduler(gaps, t.connections, largest)
        self.planned = (sum(e - s for s, e in gaps), largest)
        first = self.sched.take()
        if first is None:  # run() downloads only when bytes are missing
            raise LockpipeError(f"{self.label}: no gap to fetch in an incomplete file (a bug)")
        self.sched.done(first)
        return first.pos, first.end

    def _learn_size(self, opened: Opened, end: int) -> tuple[int, int] | None:
        """A 206 told the size the caller did not know: plan the rest; the probe's piece
        (None: its bytes are written already, and its response is of no use).

        Bytes an earlier try wrote (a 200 that broke off journals ``[0, n)`` with no size)
        are kept: only the gaps are fetched, and the hasher, which reads them back from disk,
        is fed the rest at their own offsets. Written bytes past the size do not fit: the
        file starts again, the partial file and the hasher together.
        """
        t, total, p = self.ctx.tuning, opened.total, self.partial
        if total is None:
            opened.response.close()
            raise RangeIgnored(f"{opened.url}: a 206 without the file's total size")
        self._bound(opened, total, f"says the file has {total:,} bytes, more than")
        if any(e > total for _, e in p.done):
            p.forget_claim()  # truncated: no byte of the longer file stays past the end
            self.hasher.stop()
            self.hasher = OrderedHasher(p.read, None, RangeSet(), t.memory_cap)
        p.set_size(total)
        self.hasher.set_size(total)
        gaps, largest = p.done.missing(total), piece_size(total, t)
        first = None
        if gaps and gaps[0][0] == 0:  # the probe's bytes [0, end) are missing: keep it
            cut = min(end, gaps[0][1])
            first, gaps[0] = (0, cut), (cut, gaps[0][1])
        self.sched = Scheduler(gaps, t.connections, largest)
        self.planned = (sum(e - s for s, e in gaps) + (first[1] if first else 0), largest)
        return first

    def _download(self) -> None:
        p, t = self.partial, self.ctx.tuning
        first = (0, t.piece) if p.size is None else self._plan(p.size)
        with Permit(self.ctx.gate, self.ctx.stop) as permit:
            opened = self._probe(*first, permit)
            if self._claim_contradicted(opened):  # a size only claimed: start from nothing
                opened.response.close()
                p.forget_claim()
                self.hasher.stop()
                self.hasher = OrderedHasher(p.read, None, RangeSet(), t.memory_cap)
                first = (0, t.piece)
                opened = self._probe(*first, permit)
            self._check_total(opened)
            if not opened.ranged:
                self._stream(opened)
                return
            probe: tuple[int, int] | None = first
            if p.size is None:
                probe = self._learn_size(opened, first[1])
            self.budget.add_work(*self.planned)  # the server serves this file: budget its work
            workers = [
                threading.Thread(target=self._worker, daemon=True) for _ in range(t.connections - 1)
            ]
            for w in workers:
                w.start()
            if probe is None:
                opened.response.close()
            else:
                self._guard(self.sched.take_exact(*probe), opened, permit)
        self._worker()  # the probing thread takes pieces too once its own is done
        for w in workers:
            w.join()
        if self.error is not None:
            raise self.error

    def _probe(self, start: int, end: int, permit: Permit) -> Opened:
        streak = Streak(self.budget)
        while True:
            try:
                return self._open(start, end)
            except RetryableHTTP as exc:
                self._retry(exc, permit, streak.failed(False))

    def _open(self, start: int, end: int) -> Opened:
        try:
            opened = open_range(self.ctx.transport(), self.cand, start, end)
        except RangeRefused as exc:  # a resume past the end of a shorter file: its size
            if exc.total is not None:
                self._sizes_agree(exc.total, exc.url)
            raise
        self.ctx.gate.accepted()
        return opened

    def _retry(self, exc: RetryableHTTP, permit: Permit, failures: int) -> None:
        wait_to_retry(self.ctx, self.budget, permit, exc, failures, self.halt)

    def _claim_contradicted(self, opened: Opened) -> bool:
        """Whether ``opened`` says another size than the one a server claimed (a journal
        of an earlier run keeps it) for a file whose size the lock does not pin."""
        p = self.partial
        return p.pinned is None and opened.total is not None and p.size not in (None, opened.total)

    def _check_total(self, opened: Opened) -> None:
        if opened.total is not None:
            try:
                self._sizes_agree(opened.total, opened.url)
            except LockpipeError:
                opened.response.close()
                raise

    def _sizes_agree(self, total: int, url: str) -> None:
        """HTTPFatal or IntegrityError when ``url`` says the file has ``total`` bytes and
        the lock pins, or a server claimed, another size."""
        size = self.partial.size
        if size is not None and total != size:
            if self.partial.pinned is None:  # a server's claim, contradicted mid-transfer
                raise HTTPFatal(
                    f"{url} now says the file has {total:,} bytes, "
                    f"{size:,} before; the server changed the file while it was fetched",
                    206,
                )
            raise IntegrityError(
                f"{self.label}: {url} serves {total:,} bytes, the lock pins "
                f"{size:,}; the file changed upstream or the revision is wrong: fix the mirror, "
                "or re-pin the entry from the repository's file page"
            )

    def _worker(self) -> None:
        while self.error is None:
            with Permit(self.ctx.gate, self.ctx.stop) as permit:
                piece = self.sched.take()
                if piece is None:
                    return
                self._guard(piece, None, permit)

    def _guard(self, piece: Piece, opened: Opened | None, permit: Permit) -> None:
        try:
            self._fill(piece, opened, permit)
        except BaseException as exc:  # the first error ends the transfer; _download raises it
            with self.lock:
                self.error = self.error or exc
            self.halt.set()
            self.sched.clear()
        finally:
            self.sched.done(piece)

    def _fill(self, piece: Piece, opened: Opened | None, permit: Permit) -> None:
        """Write the piece, reopening from where it broke off after a drop.

        Its end may move closer while this runs (another connection took the rest).
        """
        streak, floor = Streak(self.budget), Floor(self.ctx.tuning, piece.pos)
        while piece.pos < piece.end:
            before = piece.pos
            try:
                if opened is None:
                    opened = self._open(piece.pos, piece.end)
                    self._check_total(opened)
                    if not opened.ranged:
                        opened.response.close()
                        raise RangeIgnored(f"{opened.url}: the server stopped honouring Range")
                asked = piece.end
                for data in body(opened, self.ctx.tuning):
                    if self.ctx.stop.is_set():
                        raise Stopped
                    pos = piece.pos
                    n = self.sched.claim(piece, len(data))
                    if n:
                        self._write(pos, data if n == len(data) else data[:n], opened)
                    if n < len(data):
                        break  # more than asked for, or the end moved: drop the connection
                if piece.pos < min(asked, piece.end):
                    raise RetryableHTTP(
                        f"{opened.url}: the body ended {piece.end - piece.pos:,} bytes early"
                    )
            except RetryableHTTP as exc:
                moved = piece.pos > before and not isinstance(exc, TooSlow)
                failures = streak.failed(moved)
                if not failures:  # free to retry, unless the piece moves under the floor
                    floor.judge(piece.pos, exc)
                waiting = floor.clock()
                self._retry(exc, permit, failures)
                if failures:
                    floor.restart(piece.pos)
                else:
                    floor.waited(waiting)  # a slot the gate held back is not a slow server
            opened = None

    def _bound(self, opened: Opened, end: int, what: str) -> None:
        """IntegrityError (the next source is tried, the partial file discarded) when ``end``
        bytes are past ``most`` for a file whose size the lock does not pin."""
        if self.most is None or self.partial.pinned is not None or end <= self.most:
            return
        opened.response.close()
        raise IntegrityError(
            f"{opened.url} {what} the {self.most:,} bytes a file whose size the "
            "lock does not pin may have; check the url and the --mirror (a source archive "
            "is megabytes)"
        )

    def _write(self, pos: int, data: bytes, opened: Opened) -> None:
        self._bound(opened, pos + len(data), "sends more than")
        view, at = memoryview(data), pos
        while view:
            n = os.pwrite(self.partial.fd, view, at)
            view, at = view[n:], at + n
        self.hasher.feed(pos, data)
        self.partial.wrote(pos, at)
        self.budget.progress()
        self.ctx.advance(self.label, len(data))

    def _stream(self, opened: Opened) -> None:
        """The whole file on one connection, from byte 0 (resume is impossible here)."""
        p = self.partial
        p.reset()
        self.hasher.stop()
        self.hasher = OrderedHasher(p.read, None, RangeSet(), self.ctx.tuning.memory_cap)
        pos = 0
        if opened.total is not None:  # a 200's Content-Length
            self._bound(
                opened, opened.total, f"says the file has {opened.total:,} bytes, more than"
            )
        for data in body(opened, self.ctx.tuning):
            if self.ctx.stop.is_set():
                raise Stopped
            if p.pinned is not None and pos + len(data) > p.pinned:
                raise IntegrityError(
                    f"{self.label}: {opened.url} sends more than the {p.pinned:,} bytes the "
                    "lock pins; the file changed upstream or the mirror is wrong"
                )
            self._write(pos, data, opened)
            pos += len(data)
        if (opened.total is not None and pos != opened.total) or (
            p.pinned is not None and pos != p.pinned
        ):
            raise RetryableHTTP(f"{opened.url}: the body ended at byte {pos:,}")
        os.ftruncate(p.fd, pos)
        p.size = pos
        self.hasher.set_size(pos)
