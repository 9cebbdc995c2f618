"""The payload store: layout, the store lock, placement and the verification cache.

Layout (the Hugging Face cache layout, so huggingface_hub and vLLM find the files
with ``HF_HUB_CACHE=<store>`` and ``HF_HUB_OFFLINE=1``)::

    <store>/models--<org>--<name>/blobs/<sha256>              the bytes, read-only
    <store>/models--<org>--<name>/snapshots/<revision>/<file> -> ../../blobs/<sha256>
    <store>/.lockpipe/lock                                    flock held by a run
    <store>/.lockpipe/verified.json                           verification cache

The snapshot link is the payload's stable path. It is created only after the
blob matched the lock's size and sha256 and passed the format checks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath

from pipeline.errors import DiskSpaceError, LockError
from pipeline.fs import cache_home, fsync_dir
from pipeline.lock.model import PIN_BY_HAND, Payload

STATE = ".lockpipe"


def default_store(env: Mapping[str, str]) -> Path:
    """Root: /var/lib/lockpipe/payloads (shared state that containers mount, not a cache).

    Others: ``$XDG_CACHE_HOME/lockpipe/store`` (``~/.cache/lockpipe/store``).
    """
    if os.geteuid() == 0:
        return Path("/var/lib/lockpipe/payloads")
    return cache_home(env) / "lockpipe" / "store"


def _checked_filename(payload: Payload) -> PurePosixPath:
    name = PurePosixPath(payload.filename)
    if name.is_absolute() or any(part in ("", ".", "..") for part in payload.filename.split("/")):
        raise LockError(
            f"payloads.{payload.name}.filename: {payload.filename!r} must be a relative path "
            "inside the repository, without '..'"
        )
    return name


def repo_dir(store: Path, payload: Payload) -> Path:
    return store / ("models--" + payload.repository.replace("/", "--"))


def blob_path(store: Path, payload: Payload) -> Path:
    if payload.sha256 is None:
        raise LockError(f"payloads.{payload.name}: no sha256 pinned; {PIN_BY_HAND}")
    return repo_dir(store, payload) / "blobs" / payload.sha256


def payload_path(store: Path, payload: Payload) -> Path:
    """The stable path of a pinned payload: ``snapshots/<revision>/<filename>`` in the store.

    It exists only once the file is verified; mount it (or the store) read-only.
    """
    if payload.revision is None:
        raise LockError(f"payloads.{payload.name}: no revision pinned; {PIN_BY_HAND}")
    return repo_dir(store, payload) / "snapshots" / payload.revision / _checked_filename(payload)


@contextlib.contextmanager
def store_lock(store: Path, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the store's lock: a second run waits here, then finds the files already verified."""
    state = store / STATE
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            say(f"waiting for the store lock on {store} (held by pid {holder})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def place(partial_path: Path, fd: int, blob: Path) -> None:
    """Make the verified partial file the blob: read-only, fsynced, renamed, folder fsynced."""
    os.fchmod(fd, 0o444)
    os.fsync(fd)
    os.replace(partial_path, blob)
    fsync_dir(blob.parent)


def link(blob: Path, path: Path) -> None:
    """Point the snapshot path at the blob, atomically (a reader sees the old or new link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.lockpipe-link")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(blob, path.parent), tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def unlink(path: Path) -> None:
    """Withdraw a snapshot path whose file no longer passes its checks."""
    if path.is_symlink() or path.exists():
        path.unlink()
        fsync_dir(path.parent)


class VerifyCache:
    """(device, inode, size, mtime_ns) -> sha256 of every blob verified in this store.

    Any write to a file changes its mtime (and a replaced file has a new inode),
    so a stale entry never vouches for changed bytes; such a file is re-hashed.
    """

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = store / STATE / "verified.json"
        try:
            self.files: dict[str, dict[str, int | str]] = json.loads(
                self.path.read_text(encoding="utf-8")
            )["files"]
        except (OSError, ValueError, KeyError, TypeError):
            self.files = {}

    @staticmethod
    def _key(st: os.stat_result) -> dict[str, int | str]:
        return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def lookup(self, blob: Path, st: os.stat_result) -> str | None:
        entry = self.files.get(str(blob.relative_to(self.store)))
        if entry is None or {k: entry.get(k) for k in self._key(st)} != self._key(st):
            return None
        sha = entry.get("sha256")
        return sha if isinstance(sha, str) else None

    def record(self, blob: Path, sha256: str) -> None:
        st = blob.stat()
        self.files[str(blob.relative_to(self.store))] = {**self._key(st), "sha256": sha256}

    def forget(self, blob: Path) -> None:
        self.files.pop(str(blob.relative_to(self.store)), None)

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "files": self.files}, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


def allocated(path: Path, size: int) -> int:
    """Bytes of ``size`` already reserved on disk by a partial file (0 if there is none)."""
    try:
        return min(size, path.stat().st_blocks * 512)
    except OSError:
        return 0


def check_space(store: Path, needs: list[tuple[str, int]]) -> None:
    """Fail before any download if the store cannot hold everything still to fetch."""
    free = shutil.disk_usage(store).free
    total = sum(n for _, n in needs)
    if total > free:
        listed = ", ".join(f"{name} ({n / 1e9:.2f} GB)" for name, n in needs)
        raise DiskSpaceError(
            f"{store}: {free / 1e9:.2f} GB free, {total / 1e9:.2f} GB still to fetch "
            f"({listed}); free {(total - free) / 1e9:.2f} GB or choose another store with "
            "--store / PIPELINE_STORE"
        )
