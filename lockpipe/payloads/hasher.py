"""sha256 in file order while pieces arrive out of order.

Connections hand over each chunk after writing it. A chunk at the hashed
prefix's end is hashed at once; a later one waits in memory until the prefix
reaches it. Past ``memory_cap`` a chunk is not kept: it is on disk already,
so the hasher reads it back from the page cache when its turn comes. Ranges
written by an earlier, interrupted run are read back the same way. Every byte
is hashed exactly once and the finished file is never read again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable

from lockpipe.errors import FetchError
from lockpipe.payloads.ranges import RangeSet

READ_BLOCK = 4 << 20
Reader = Callable[[int, int], bytes]  # (n, offset) -> bytes: os.pread without its fd


class Unfed(FetchError):
    """No more bytes will be fed, and the hashed prefix has not reached the file's end:
    the bytes at its end were never written nor fed (what was fetched and what the hasher
    was told is on disk disagree). An error, where waiting for them would hang for ever."""


class OrderedHasher:
    """Hashes ``[0, size)`` of a file, fed in any order.

    ``file``: the file's descriptor, or a :data:`Reader` of it (a file created only
    once bytes arrive has no descriptor yet).
    """

    def __init__(
        self, file: int | Reader, size: int | None, on_disk: RangeSet, memory_cap: int
    ) -> None:
        self._read: Reader = functools.partial(os.pread, file) if isinstance(file, int) else file
        self._size = size
        self._disk = on_disk
        self._mem: dict[int, bytes] = {}
        self._mem_bytes = 0
        self._cap = memory_cap
        self._pos = 0
        self._sha = hashlib.sha256()
        self._cond = threading.Condition()
        self._stopped = False
        self._fed = False  # no more feeds will come (finish)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()

    def feed(self, offset: int, data: bytes) -> None:
        """``data`` was written at ``offset``."""
        with self._cond:
            if offset == self._pos or self._mem_bytes + len(data) <= self._cap:
                self._mem[offset] = data
                self._mem_bytes += len(data)
            else:
                self._disk.add(offset, offset + len(data))
            self._cond.notify()

    def set_size(self, size: int) -> None:
        """The stream ended at ``size`` (for downloads whose size was not known)."""
        with self._cond:
            self._size = size
            self._cond.notify()

    def finish(self) -> None:
        """Every byte has been fed: past this, a byte the prefix waits for that is neither in
        memory nor on disk raises :class:`Unfed` in :meth:`result`, instead of a wait for
        ever."""
        with self._cond:
            self._fed = True
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def result(self, timeout: float | None = None) -> tuple[int, str]:
        """Wait for the whole prefix; the number of bytes hashed and the hex digest.

        Past ``timeout`` it raises: the digest of the bytes hashed so far would
        look like an answer, and a caller comparing it would report a mismatch
        (or worse, trust it) for a file that was never fully hashed.
        """
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._cond:
                pos, size = self._pos, self._size
            total = "?" if size is None else f"{size:,}"
            raise FetchError(
                f"the sha256 of the partial file was not finished after {timeout} s "
                f"({pos:,} of {total} bytes hashed); the disk may be too slow or stuck: "
                "run again, the written bytes are kept"
            )
        if self._error is not None:
            raise self._error
        return self._pos, self._sha.hexdigest()

    def _next(self) -> tuple[bytes | None, int] | None:
        """What to hash next: (bytes, n) from memory, (None, n) from disk; None when finished."""
        with self._cond:
            while True:
                if self._stopped or (self._size is not None and self._pos >= self._size):
                    return None
                data = self._mem.pop(self._pos, None)
                if data is not None:
                    self._mem_bytes -= len(data)
                    return data, len(data)
                end = self._disk.end_of(self._pos)
                if end is not None:
                    return None, min(end - self._pos, READ_BLOCK)
                if self._fed:
                    total = "an unknown size" if self._size is None else f"{self._size:,}"
                    raise Unfed(
                        f"the sha256 stopped at byte {self._pos:,} of {total}: no bytes came "
                        "for it though the download ended (a bug); the partial file is "
                        "discarded, run again"
                    )
                self._cond.wait()

    def _run(self) -> None:
        try:
            while (step := self._next()) is not None:
                data, n = step
                if data is None:
                    data = self._read(n, self._pos)
                    if len(data) != n:
                        raise OSError(f"short read at byte {self._pos} of the partial file")
                self._sha.update(data)  # releases the GIL: hashing overlaps the downloads
                self._pos += n
        except BaseException as exc:  # handed to result(), in the caller's thread
            self._error = exc
