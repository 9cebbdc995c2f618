"""Locks of the payload store: one per blob and one per snapshot folder, as huggingface_hub
keeps one per blob (``.locks/<repo>/<etag>.lock``).

Layout::

    <store>/.lockpipe/locks/models--<org>--<name>/<id>.lock              one blob
    <store>/.lockpipe/locks/models--<org>--<name>/snapshot-<rev>.lock    its links

So two runs that share a store wait for each other only where they touch the same
bytes: a smoke run of a target already fetched does not wait behind another target's
50 GB download, and two runs fetching the same blob fetch it once (the second finds it
placed when it gets the lock). A lock is an ``flock`` on a file that stays: the kernel
lets go of it when its holder exits, even on SIGKILL, so no stale lock needs clearing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

STATE = ".lockpipe"  # the store's own folder (store.STATE)


def blob_lock_path(store: Path, blob: Path) -> Path:
    """``<store>/.lockpipe/locks/<repo folder>/<id>.lock`` of ``<repo folder>/blobs/<id>``."""
    return store / STATE / "locks" / blob.parent.parent.name / f"{blob.name}.lock"


def snapshot_lock_path(store: Path, snapshot: Path) -> Path:
    """``<store>/.lockpipe/locks/<repo folder>/snapshot-<rev>.lock`` of
    ``<repo folder>/snapshots/<rev>``."""
    return store / STATE / "locks" / snapshot.parent.parent.name / f"snapshot-{snapshot.name}.lock"


@contextlib.contextmanager
def file_lock(path: Path, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created, with its folders).

    If another process holds it, ``waiting`` is called once with the holder's pid
    (as it wrote it; ``?`` if unknown) before this one waits its turn.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            waiting(holder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock
