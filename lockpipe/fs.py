"""Files, once: sha256 of a file, the UTF-8 text of a file lockpipe is given, an atomic
write with its folder fsynced, a lock on a file between processes, the XDG cache home.

Every module that hashes, replaces or caches a file calls these; none has its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from lockpipe.errors import LockpipeError


def sha256_file(path: Path, block: int = 8 << 20) -> str:
    """The sha256 of a whole file, read in ``block``-sized pieces without copies."""
    sha = hashlib.sha256()
    with path.open("rb", buffering=0) as fh:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            sha.update(view[:n])
    return sha.hexdigest()


def read_utf8(path: Path, error: type[LockpipeError]) -> str:
    """The text of ``path``, a file lockpipe reads from the user or the host.

    Bytes that are not UTF-8 raise ``error`` naming the file, the first bad byte and its
    offset, and the fix; OSError (no such file, no permission) is the caller's to word.
    """
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.start + 1].hex()
        raise error(
            f"{path}: not UTF-8 text (byte 0x{bad} at offset {exc.start}); re-save it as UTF-8"
        ) from None


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def file_lock(path: Path, waiting: Callable[[str], None] = lambda pid: None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created, with its folders).

    If another process holds it, ``waiting`` is called once with the holder's pid (as it
    wrote it; ``?`` if unknown) before this one waits its turn. The kernel lets go of the
    lock when its holder exits, even on SIGKILL: no stale lock needs clearing.
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


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new file, never half.

    The new file keeps the old one's mode (mkstemp's 0600 would lock other users out).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


STDOUT = Path("-")  # a report path that means standard output


def write_report(path: Path, text: str) -> None:
    """A report file written atomically, or, for ``-``, the text on stdout (flushed)."""
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(path, text)


def cache_home(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache`` (of ``env``'s HOME), expanded."""
    home = env.get("HOME") or "~"
    return Path(env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")).expanduser()
