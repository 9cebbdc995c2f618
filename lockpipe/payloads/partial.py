"""The partial file and its journal: what lets a killed download resume safely.

The journal lists the byte ranges already written. It is replaced atomically,
and only after an fdatasync of the partial file, so a range it names is on
disk even after a power cut; a range written but not yet journaled is simply
fetched again. A journal that does not match (other sha256 or size, or no
partial file) is discarded with its partial file.

The periodic flush runs in its own thread, so no connection waits on an
fdatasync: a connection that stalls loses throughput a rate-limited server
never gives back.

The partial file is created, and its blocks reserved, only when the first
bytes arrive: a host that never answers costs no disk, and a run that ends
(fails, or is interrupted) before any byte came leaves nothing behind.
Closing a partial file that holds no bytes removes it. Only a size the lock pins
is reserved: one a server claims (a source archive's ``Content-Range`` total) is
recorded, and the file grows as its bytes come, so a server claiming a petabyte
cannot fill the disk. A claim stays a claim when a later run resumes from the journal
(:attr:`Partial.pinned` stays None): an answer that contradicts it discards the bytes
and starts again, where one that contradicts a pinned size is an integrity error.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from pathlib import Path

from lockpipe.jsonshape import loads
from lockpipe.payloads.ranges import RangeSet


def reserve(fd: int, size: int) -> None:
    """Reserve the blocks of ``size`` bytes, so a full disk fails at the first bytes, not
    at 97 %."""
    if os.fstat(fd).st_size > size:
        os.ftruncate(fd, size)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.ftruncate(fd, size)  # a file system without fallocate: sparse is fine


class Partial:
    """``{blob}.lockpipe-partial`` plus ``{blob}.lockpipe-journal``, open for writing."""

    def __init__(self, path: Path, sha256: str, size: int | None, every: float = 0.5) -> None:
        self.path = path
        self.journal = path.with_name(path.name.replace("-partial", "-journal"))
        self.sha256 = sha256
        self.size = size
        self.pinned = size  # the size reserved on disk: the lock's, never a server's claim
        self.done = self._load()
        self._fd: int | None = None
        self._opening = threading.Lock()  # guards _fd
        self._every = every
        self._last = time.monotonic()
        self._lock = threading.Lock()  # guards done
        self._flushing = threading.Lock()
        self._flusher: tuple[threading.Thread, threading.Event] | None = None
        if self.done.total():
            self._open()  # resumed bytes: the file is there

    @property
    def fd(self) -> int:
        """The partial file, open for writing; created and reserved on first use."""
        with self._opening:
            return self._open()

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if self.pinned is not None:
                reserve(self._fd, self.pinned)
        return self._fd

    def read(self, n: int, offset: int) -> bytes:
        """``n`` bytes at ``offset`` (written ones: the file exists by then)."""
        return os.pread(self.fd, n, offset)

    def _load(self) -> RangeSet:
        try:
            doc = loads(self.journal.read_text(encoding="utf-8"))
            ok = (
                isinstance(doc, dict)  # another shape: not a journal of this file
                and doc.get("sha256") == self.sha256
                and (self.size is None or doc.get("size") == self.size)
                and self.path.is_file()
                and doc["done"]  # a journal of nothing: nothing to resume
            )
            if ok:
                if self.size is None:
                    self.size = doc.get("size")
                return RangeSet((int(s), int(e)) for s, e in doc["done"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        self.discard()
        return RangeSet()

    def set_size(self, size: int) -> None:
        """The file's size is ``size``, as a server told it: recorded, not reserved."""
        with self._opening:
            self.size = size

    def forget_claim(self) -> None:
        """The size a server claimed (none is pinned) is contradicted: forget it, and every
        byte written under it; the file starts again from nothing."""
        with self._opening:
            self.size = self.pinned
            if self._fd is not None:
                os.ftruncate(self._fd, 0)
        self.reset()

    def wrote(self, start: int, end: int) -> None:
        with self._lock:
            self.done.add(start, end)
            if self._flusher is None:
                stop = threading.Event()
                thread = threading.Thread(target=self._flush_often, args=(stop,), daemon=True)
                self._flusher = (thread, stop)
                thread.start()

    def _flush_often(self, stop: threading.Event) -> None:
        """Journal what is written every ``every`` seconds until :meth:`stop_flushing`."""
        while not stop.wait(max(0.0, self._last + self._every - time.monotonic())):
            try:
                self.flush()
            except OSError:  # the next flush, or the forced one at the end, reports it
                self._last = time.monotonic()

    def stop_flushing(self) -> None:
        """End the periodic flushes (the next :meth:`wrote` starts them again)."""
        with self._lock:
            flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher[1].set()
            flusher[0].join()

    def reset(self) -> None:
        """Forget everything written (the next bytes start the file again)."""
        with self._lock:
            self.done = RangeSet()
        self.flush(force=True)

    def flush(self, force: bool = False) -> None:
        """Record what is on disk; one flush at a time, others skip unless forced."""
        if self._fd is None or not self._flushing.acquire(blocking=force):
            return  # no file: nothing was written, and a journal of nothing is not kept
        try:
            with self._lock:
                snapshot = self.done.as_list()
            os.fdatasync(self._fd)
            doc = {"version": 1, "sha256": self.sha256, "size": self.size, "done": snapshot}
            tmp = self.journal.with_name(self.journal.name + ".tmp")
            tmp.write_text(json.dumps(doc), encoding="utf-8")
            os.replace(tmp, self.journal)
            self._last = time.monotonic()
        finally:
            self._flushing.release()

    def close(self) -> None:
        """Stop the flushes and close the file; one that holds no bytes is removed."""
        self.stop_flushing()
        with self._opening:
            fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if not self.done.total():
            self.discard()

    def discard(self) -> None:
        for p in (self.path, self.journal):
            p.unlink(missing_ok=True)
