"""Files, once: sha256 of a file, the UTF-8 text of a file lockpipe is given, an atomic
write with its folder fsynced, a lock on a file between processes, the XDG cache home.

Every module that hashes, replaces or caches a file calls these; none has its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lockpipe.errors import LockpipeError, UsageError

if TYPE_CHECKING:
    from hashlib import _Hash as Hash


def sha256_file(path: Path, block: int = 8 << 20) -> str:
    """The sha256 of a whole file, read in ``block``-sized pieces without copies."""
    return hash_file(hashlib.sha256(), path, block).hexdigest()


def hash_file(sha: Hash, path: Path, block: int = 8 << 20) -> Hash:
    """``sha`` updated with the bytes of ``path``, read in ``block``-sized pieces (never the
    whole file in memory: a 600 MB wheel took 620 MB read whole)."""
    with path.open("rb", buffering=0) as fh:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            sha.update(view[:n])
    return sha


# The most read_utf8 reads: a lock, a Dockerfile, a token or pip's report is far less.
READ_LIMIT = 64 << 20


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return kind
    return "no regular file"


def read_utf8(path: Path, error: type[LockpipeError], limit: int = READ_LIMIT) -> str:
    """The text of ``path``, a file lockpipe reads from the user or the host.

    Bytes that are not UTF-8 raise ``error`` naming the file, the first bad byte and its
    offset, and the fix; so do a path that is no regular file or pipe (a device such as
    /dev/zero would never end) and a file over ``limit`` bytes (read whole, it
    would be held in memory). OSError (no such file, no permission, a folder) is the
    caller's to word. Line ends are read as ``read_text`` reads them (universal newlines).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO's open does not wait
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        pipe = stat.S_ISFIFO(st.st_mode)  # HF_TOKEN_PATH=<(pass hf): a pipe, read to its end
        if not (stat.S_ISREG(st.st_mode) or pipe):
            raise error(f"{path}: {_kind(st.st_mode)}, not a file; lockpipe reads only regular "
                        "files (or a pipe) here: give it the path of one")  # fmt: skip
        if pipe:  # opened without waiting for a writer; now wait for what it writes
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:  # at most limit + 1 bytes, also of a file still growing
        data = fh.read(limit + 1) if st.st_size <= limit else b""
    if (size := max(st.st_size, len(data))) > limit:
        raise error(f"{path}: {size / (1 << 20):.1f} MiB, over the {limit / (1 << 20):g} MiB "
                    "lockpipe reads of such a file; check that it is the file meant")  # fmt: skip
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.start + 1].hex()
        raise error(
            f"{path}: not UTF-8 text (byte 0x{bad} at offset {exc.start}); re-save it as UTF-8"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


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


def _shown(text: str) -> str:
    """``text`` as it can be printed: a file name's bytes that are not UTF-8 as ``\\xff``,
    any other lone surrogate (a server's ``"\\ud800"``) as ``\\ud800``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _under(path: Path, *folders: str) -> bool:
    """Whether ``path`` as given names something in one of ``folders`` (no link followed)."""
    shown = os.path.abspath(path)
    return any(shown == f or shown.startswith(f + "/") for f in folders)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new file, never half;
    a device or FIFO there (``/dev/null``, ``/dev/stdout``) is written to, never replaced.

    The new file keeps the old one's mode (mkstemp's 0600 would lock other users out).
    Text that cannot be UTF-8 (a file name of other bytes, which Python holds as lone
    surrogates) is a UsageError naming it, and nothing is written: every file lockpipe
    writes is read as UTF-8 (JSON, XML, a systemd unit, whose parser drops such a line).
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        near = _shown(text[max(0, exc.start - 40) : exc.end + 20])
        if "\udc80" <= text[exc.start] <= "\udcff":  # a byte of a name, surrogate-escaped
            why, fix = "a name that is not UTF-8", "use a path whose names are UTF-8"
        else:  # JSON may carry a lone surrogate ("\ud800"); the check reading it missed it
            why, fix = "a lone surrogate (no UTF-8 text holds one)", "please report it"
        raise UsageError(
            f"{_shown(str(path))}: not written: it would hold '{near}', {why}, which no "
            f"reader of the file could take; {fix}"
        ) from None
    try:
        kind = stat.S_IFMT(os.stat(path).st_mode)  # of what the path names, through links
    except OSError:  # nothing there yet (or nothing to tell): a new file, as before
        kind = stat.S_IFREG
    if kind != stat.S_IFREG or _under(path, "/dev", "/proc"):
        # --json /dev/null, /dev/stdout (a terminal, a pipe, or a file opened with '>>'), a
        # FIFO: the bytes go to it, appended, as a shell's redirection sends them. Renaming
        # over it would put a regular file in place of the device (as root, /dev/null
        # itself), or replace the file a '>>' appends to, its earlier lines lost.
        with open(path, "ab") as fh:
            fh.write(data)
        return
    path = Path(os.path.realpath(path))  # a link's target is written, not the link replaced
    path.parent.mkdir(parents=True, exist_ok=True)
    # a short fixed name beside it, not ".{name}.XXXXXXXX": a name of up to 255 bytes (the
    # most a folder takes) must be writable, and the temporary one longer than it is not
    fd, tmp = tempfile.mkstemp(prefix=".lockpipe-", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
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
