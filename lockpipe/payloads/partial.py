"""The partial file and its journal: what lets a killed download resume safely.

The journal lists the byte ranges already written. It is replaced atomically,
and only after an fdatasync of the partial file, so a range it names is on
disk even after a power cut; a range written but not yet journaled is simply
fetched again. A journal that does not match (other sha256 or size, or no
partial file) is discarded with its partial file.

The periodic flush runs in its own thread, so no connection waits on an
fdatasync: a connection that stalls loses throughput a rate-limited server
never gives back.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from pathlib import Path

from lockpipe.payloads.ranges import RangeSet


class Partial:
    """``{blob}.lockpipe-partial`` plus ``{blob}.lockpipe-journal``, open for writing."""

    def __init__(self, path: Path, sha256: str, size: int | None, every: float = 0.5) -> None:
        self.path = path
        self.journal = path.with_name(path.name.replace("-partial", "-journal"))
        self.sha256 = sha256
        self.size = size
        self.done = self._load()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._every = every
        self._last = time.monotonic()
        self._lock = threading.Lock()  # guards done
        self._flushing = threading.Lock()
        self._flusher: tuple[threading.Thread, threading.Event] | None = None
        if size is not None:
            self.preallocate(size)

    def _load(self) -> RangeSet:
        try:
            doc = json.loads(self.journal.read_text(encoding="utf-8"))
            ok = (
                doc.get("sha256") == self.sha256
                and (self.size is None or doc.get("size") == self.size)
                and self.path.is_file()
            )
            if ok:
                if self.size is None:
                    self.size = doc.get("size")
                return RangeSet((int(s), int(e)) for s, e in doc["done"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        self.discard()
        return RangeSet()

    def preallocate(self, size: int) -> None:
        """Reserve the blocks now, so a full disk fails here and not at 97 %."""
        self.size = size
        if os.fstat(self.fd).st_size > size:
            os.ftruncate(self.fd, size)
        try:
            os.posix_fallocate(self.fd, 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.ftruncate(self.fd, size)  # a file system without fallocate: sparse is fine

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
        if not self._flushing.acquire(blocking=force):
            return
        try:
            with self._lock:
                snapshot = self.done.as_list()
            os.fdatasync(self.fd)
            doc = {"version": 1, "sha256": self.sha256, "size": self.size, "done": snapshot}
            tmp = self.journal.with_name(self.journal.name + ".tmp")
            tmp.write_text(json.dumps(doc), encoding="utf-8")
            os.replace(tmp, self.journal)
            self._last = time.monotonic()
        finally:
            self._flushing.release()

    def close(self) -> None:
        self.stop_flushing()
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def discard(self) -> None:
        for p in (self.path, self.journal):
            p.unlink(missing_ok=True)
