"""The payload store: layout, placement and the verification cache.

Layout (the Hugging Face cache layout, so huggingface_hub and vLLM find the files
with ``HF_HUB_CACHE=<store>`` and ``HF_HUB_OFFLINE=1``)::

    <store>/models--<org>--<name>/blobs/<id>                  the bytes, read-only
    <store>/models--<org>--<name>/snapshots/<revision>/<path> -> ../../blobs/<id>
    <store>/.lockpipe/locks/models--<org>--<name>/…           per-blob locks (payloads.locks)
    <store>/.lockpipe/verified.json                           verification cache

``<id>`` is what the Hub's ETag is: the sha256 of an LFS file, the git blob sha1
of a file kept in git. A nested ``<path>`` gets one more ``../`` per folder.
The snapshot link is a single-file payload's stable path; a snapshot payload's
is the folder ``snapshots/<revision>``. Links are created only after the blobs
matched the lock's size and hash and passed the format checks.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Literal

from lockpipe.errors import DiskSpaceError, FetchError, LockError, UsageError
from lockpipe.fs import cache_home, fsync_dir
from lockpipe.jsonshape import loads
from lockpipe.lock.model import PIN_BY_HAND, Payload, PayloadFile
from lockpipe.payloads.locks import STATE, file_lock

BlobKind = Literal["sha256", "git_sha1"]


def default_store(env: Mapping[str, str]) -> Path:
    """Root: /var/lib/lockpipe/payloads (shared state that containers mount, not a cache).

    Others: ``$XDG_CACHE_HOME/lockpipe/store`` (``~/.cache/lockpipe/store``).
    """
    if os.geteuid() == 0:
        return Path("/var/lib/lockpipe/payloads")
    return cache_home(env) / "lockpipe" / "store"


def where(payload: Payload, file: PayloadFile) -> str:
    """The lock key of one file: ``payloads.NAME`` (one file) or ``payloads.NAME.files.PATH``."""
    return f"payloads.{payload.name}" + (f".files.{file.path}" if payload.snapshot else "")


def _checked_path(payload: Payload, file: PayloadFile) -> PurePosixPath:
    name = PurePosixPath(file.path)
    if name.is_absolute() or any(part in ("", ".", "..") for part in file.path.split("/")):
        key = where(payload, file) if payload.snapshot else f"payloads.{payload.name}.filename"
        raise LockError(
            f"{key}: {file.path!r} must be a relative path inside the repository, without '..'"
        )
    return name


def repo_dir(store: Path, payload: Payload) -> Path:
    return store / ("models--" + payload.repository.replace("/", "--"))


def blob_id(payload: Payload, file: PayloadFile) -> tuple[BlobKind, str]:
    """How a file's blob is named and verified: by sha256 where the lock pins one (LFS files:
    the Hub's tree gives ``lfs.oid``), else by git blob sha1 (files kept in git: its ``oid``)."""
    if file.sha256:
        return "sha256", file.sha256
    if file.git_sha1:
        return "git_sha1", file.git_sha1
    raise LockError(f"{where(payload, file)}: no sha256 or git_sha1 pinned; {PIN_BY_HAND}")


def blob_path(store: Path, payload: Payload, file: PayloadFile | None = None) -> Path:
    """``blobs/<id>`` of ``file`` (default: the payload's one file)."""
    return repo_dir(store, payload) / "blobs" / blob_id(payload, file or payload.single)[1]


def snapshot_dir(store: Path, payload: Payload) -> Path:
    """``snapshots/<revision>``: the folder a runtime's ``--model`` gets for a snapshot."""
    if payload.revision is None:
        raise LockError(f"payloads.{payload.name}: no revision pinned; {PIN_BY_HAND}")
    return repo_dir(store, payload) / "snapshots" / payload.revision


def file_path(store: Path, payload: Payload, file: PayloadFile) -> Path:
    """The link of one file: ``snapshots/<revision>/<path>``."""
    return snapshot_dir(store, payload) / _checked_path(payload, file)


def payload_path(store: Path, payload: Payload) -> Path:
    """The stable path of a pinned payload: the snapshot folder ``snapshots/<revision>`` for
    a snapshot payload, else ``snapshots/<revision>/<filename>``.

    It exists only once the files are verified; mount it (or the store) read-only.
    """
    if payload.snapshot:
        return snapshot_dir(store, payload)
    return file_path(store, payload, payload.single)


def is_snapshot_dir(store: Path, path: Path) -> bool:
    """Whether ``path`` (from :func:`payload_path`) is a snapshot folder, not one file."""
    try:
        parts = path.relative_to(store).parts
    except ValueError:
        return False
    return len(parts) == 3 and parts[0].startswith("models--") and parts[1] == "snapshots"


@contextlib.contextmanager
def store_errors(store: Path) -> Iterator[None]:
    """The store's file system failing (full, read-only, not ours) as an error naming the fix.

    Reserving a file, writing into it, taking the lock or saving the verification cache
    can each hit it, in the main thread or a worker's; none may reach a user as a trace.
    """
    try:
        yield
    except OSError as exc:
        import requests  # an HTTP fault that escaped its boundary is not the disk's

        if isinstance(exc, requests.RequestException):
            raise FetchError(f"{exc}; check the network, then run again") from None
        where = f" ({exc.filename})" if exc.filename else ""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskSpaceError(
                f"{store}: the file system is full{where}: {exc.strerror}; free space or "
                "point --store (LOCKPIPE_STORE) at a larger one, then run again to resume"
            ) from None
        raise UsageError(
            f"{store}: cannot write the store{where}: {exc.strerror}; set --store "
            "(LOCKPIPE_STORE) to a folder this user can write"
        ) from None


def place(partial_path: Path, fd: int, blob: Path) -> None:
    """Make the verified partial file the blob: read-only, fsynced, renamed, folder fsynced."""
    os.fchmod(fd, 0o444)
    os.fsync(fd)
    os.replace(partial_path, blob)
    fsync_dir(blob.parent)


def link(blob: Path, path: Path) -> None:
    """Point the snapshot path at the blob, atomically (a reader sees the old or new link)."""
    link_all([(blob, path)])


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _subdir(fd: int, name: str) -> int:
    """Open the folder ``name`` in the folder ``fd``, made if missing, never through a link:
    a link (to a folder elsewhere, say) or a file where the layout has a folder is an entry
    of the store no lock lists, and is replaced by a folder (what a link pointed to stays)."""
    for _ in range(2):
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=fd)
        try:
            return os.open(name, _DIR, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
        os.unlink(name, dir_fd=fd)
    raise OSError(errno.ENOTDIR, "not a folder", name)


def _open_folder(base: Path, folder: Path) -> int:
    """``folder`` (below ``base``) opened one part at a time from ``base`` (:func:`_subdir`)."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in folder.relative_to(base).parts:
            fd, parent = _subdir(fd, part), fd
            os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


def real_folder(store: Path, payload: Payload) -> None:
    """Make ``snapshots/<revision>`` a real folder of the store: pruning it then never walks
    into (or removes from) a folder a link there pointed to."""
    folder = snapshot_dir(store, payload)
    os.close(_open_folder(repo_dir(store, payload), folder))


def link_all(pairs: list[tuple[Path, Path]]) -> None:
    """:func:`link` for many (blob, path) pairs: links already right are left alone, and
    each folder is fsynced once (a snapshot's re-run then writes nothing).

    No link is followed on the way to a path (:func:`_subdir`), so nothing is written
    outside the store. A real folder where a path's link belongs is not removed here:
    :class:`FetchError` names it (a snapshot payload's run prunes it first).
    """
    folders: dict[Path, tuple[int, bool]] = {}  # folder -> (its fd, whether it changed)
    try:
        for blob, path in pairs:
            target = os.path.relpath(blob, path.parent)
            if path.parent not in folders:
                base = Path(os.path.commonpath([blob, path.parent]))
                folders[path.parent] = (_open_folder(base, path.parent), False)
            fd, name = folders[path.parent][0], path.name
            with contextlib.suppress(OSError):
                if os.readlink(name, dir_fd=fd) == target:
                    continue
            # a name of this process's and thread's own: another run may link the same path
            tmp = f".{name}.{os.getpid()}-{threading.get_ident()}.lockpipe-link"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=fd)
            os.symlink(target, tmp, dir_fd=fd)
            try:
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                    raise FetchError(
                        f"{path} is a folder where the lock lists a file: its contents are "
                        "nothing the lock pins; remove it, then run again"
                    ) from None
                raise
            folders[path.parent] = (fd, True)
        for fd, changed in folders.values():
            if changed:
                os.fsync(fd)
    finally:
        for fd, _ in folders.values():
            os.close(fd)


def misplaced(pairs: list[tuple[Path, Path]]) -> list[Path]:
    """The paths of ``pairs`` that are not their blob's link: a link with another target,
    or a path reached through a link (what :func:`link_all` left must be what is there)."""
    out = []
    for blob, path in pairs:
        base = Path(os.path.commonpath([blob, path.parent]))
        through = [q for q in path.parents if q != base and base in q.parents]
        try:
            right = os.readlink(path) == os.path.relpath(blob, path.parent)
        except OSError:
            right = False
        if not right or any(q.is_symlink() for q in through):
            out.append(path)
    return out


def unlink(path: Path) -> None:
    """Withdraw a snapshot path whose file no longer passes its checks."""
    if path.is_symlink() or path.exists():
        path.unlink()
        fsync_dir(path.parent)


class VerifyCache:
    """(device, inode, size, mtime_ns) -> the hash (sha256 or git blob sha1) of every blob
    verified in this store.

    Any write to a file changes its mtime (and a replaced file has a new inode),
    so a stale entry never vouches for changed bytes; such a file is re-hashed.

    Runs that share the store share the file: :meth:`save` merges this run's changes
    into what is on disk under a lock, and :meth:`lookup` reads the file again for a
    blob this run has no entry for (another run may have just placed it). Thread-safe.
    """

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = store / STATE / "verified.json"
        self.files = self._read()
        self._changed: dict[str, dict[str, int | str] | None] = {}  # None: forgotten
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, int | str]]:
        try:
            files = loads(self.path.read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        return (
            {k: v for k, v in files.items() if isinstance(v, dict)}
            if isinstance(files, dict)
            else {}
        )

    @staticmethod
    def _key(st: os.stat_result) -> dict[str, int | str]:
        return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def lookup(self, blob: Path, st: os.stat_result, kind: BlobKind = "sha256") -> str | None:
        name = str(blob.relative_to(self.store))
        with self._lock:
            entry = self.files.get(name)
            if entry is None and name not in self._changed:
                entry = self._read().get(name)
                if entry is not None:
                    self.files[name] = entry
        if entry is None or {k: entry.get(k) for k in self._key(st)} != self._key(st):
            return None
        digest = entry.get(kind)
        return digest if isinstance(digest, str) else None

    def record(self, blob: Path, digest: str, kind: BlobKind = "sha256") -> None:
        name, entry = str(blob.relative_to(self.store)), {**self._key(blob.stat()), kind: digest}
        with self._lock:
            self.files[name] = self._changed[name] = entry

    def forget(self, blob: Path) -> None:
        name = str(blob.relative_to(self.store))
        with self._lock:
            self.files.pop(name, None)
            self._changed[name] = None

    def save(self) -> None:
        """Write this run's changes over what the file holds now (other runs' entries stay)."""
        with self._lock, file_lock(self.path.with_name("verified.lock"), lambda _: None):
            merged = self._read()
            for name, entry in self._changed.items():
                if entry is None:
                    merged.pop(name, None)
                else:
                    merged[name] = entry
            self._changed.clear()
            self.files = merged
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": 1, "files": merged}, indent=1), encoding="utf-8")
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
            "--store / LOCKPIPE_STORE"
        )
