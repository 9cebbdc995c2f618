"""A source archive whose sha256 is not known yet: fetch it, hash its bytes and its tree.

The bytes come through the payload downloader's :class:`Transfer` (the probe,
retries, the mirror first), like every other download; they land in the cache
under their sha256, exactly where :func:`lockpipe.payloads.cache.fetch_verified`
looks for them, so the build that follows fetches nothing.

The tree hash is over the extracted content, not the compressed bytes: the
sorted ``(mode, content sha256, path)`` of every file and link below the
archive's top folder. GitHub regenerates archives now and then (another gzip,
another tar); the tree hash tells "bytes changed, content same" from a real
change.
"""

from __future__ import annotations

import errno
import hashlib
import re
import tarfile
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from lockpipe.errors import DiskSpaceError, FetchError
from lockpipe.fs import file_lock
from lockpipe.log import echo
from lockpipe.payloads.cache import cached
from lockpipe.payloads.download import MAX_ARCHIVE  # the bound of every unpinned size
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.settings import Context, Tuning
from lockpipe.payloads.sources import candidates
from lockpipe.payloads.store import place
from lockpipe.payloads.transfer import Transfer
from lockpipe.urls import redact

CONNECTIONS = 4  # GitHub's generated archives ignore Range: one stream in practice


@dataclass(frozen=True, kw_only=True)
class Fetched:
    path: Path
    sha256: str
    size: int
    mirror: str | None = None  # the mirror's URL the bytes came from; None: from ``url`` itself


@dataclass(frozen=True, kw_only=True)
class Tree:
    root: str  # the archive's one top folder (``llama.cpp-b10069``)
    sha256: str
    files: int
    # the commit the archive was made from, as ``git archive`` (and so GitHub) writes it: the
    # pax global header's ``comment`` (git's archive-tar.c, write_global_extended_header);
    # None where there is none (not a git archive, or one made from a tree)
    commit: str | None = None


def cache_error(exc: OSError, where: Path) -> FetchError:
    """An OSError of the cache as one line naming the folder and the fix."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskSpaceError(f"{where}: no room left in the cache ({exc.strerror}); free "
                              "space or point --cache (LOCKPIPE_CACHE) elsewhere")  # fmt: skip
    return FetchError(f"{where}: cannot write the cache ({exc.strerror or exc}); make it "
                      "writable or point --cache (LOCKPIPE_CACHE) elsewhere")  # fmt: skip


def fetch_unpinned(
    url: str, cache: Path, mirror: str | None = None, *, most: int = MAX_ARCHIVE
) -> Fetched:
    """The bytes of ``url`` (the mirror's copy first) in the cache; their sha256 and size.

    A cache that cannot be written is a FetchError (DiskSpaceError when full) naming it, and
    so is an archive of more than ``most`` bytes (claimed or sent) naming the URL."""
    try:
        return _fetch_unpinned(url, cache, mirror, most)
    except OSError as exc:
        raise cache_error(exc, Path(exc.filename or cache)) from None


def _fetch_unpinned(url: str, cache: Path, mirror: str | None, most: int) -> Fetched:
    work = cache / "refresh"
    work.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    with file_lock(
        work / f"{key}.lock",
        lambda pid: echo(f"waiting for pid {pid}, which fetches {redact(url)} too"),
    ):
        return _fetch_locked(url, cache, mirror, most, work, key)


def _fetch_locked(
    url: str, cache: Path, mirror: str | None, most: int, work: Path, key: str
) -> Fetched:
    """:func:`_fetch_unpinned` under the URL's lock: a second run's start unlinked the
    partial file a first one still wrote, which then placed the second's bytes under its
    own digest."""
    problems = []
    for cand in candidates(url, mirror):
        path = work / f"{key}.lockpipe-partial"
        # Never resume here: without a pinned sha256, old bytes cannot be told from new ones.
        for stale in (path, path.with_name(f"{key}.lockpipe-journal")):
            stale.unlink(missing_ok=True)
        partial = Partial(path, f"unpinned {cand.url}", None)
        ctx = Context(tuning=Tuning(connections=CONNECTIONS), stop=threading.Event())
        try:
            size, digest = Transfer(url, cand, partial, ctx, most=most).run()
        except FetchError as exc:
            problems.append(f"{cand.kind} {exc}")
            partial.close()
            partial.discard()
            continue
        dest = cached(cache, digest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        place(partial.path, partial.fd, dest)
        partial.journal.unlink(missing_ok=True)
        partial.close()
        return Fetched(path=dest, sha256=digest, size=size,
                       mirror=cand.url if cand.kind == "mirror" else None)  # fmt: skip
    raise FetchError(f"{url}: could not fetch the archive:\n  " + "\n  ".join(problems))


# tree_hash's (and llama_tree.read_archive's) bounds on what an archive unpacks to. llama.cpp's
# real tree has a few thousand members and unpacks to some hundred MB; these are far above it,
# and low enough that a small archive of many empty members or of a huge file of zeros is
# refused before it takes the memory (every member's row) or the time (hashing TiBs) it claims.
MAX_MEMBERS = 200_000
MAX_UNPACKED = 4 << 30  # bytes of the tar stream after decompression, headers included


def tree_hash(archive: Path) -> Tree:
    """The hash of the tree inside a tar archive (any compression), below its top folder.

    An archive of more than MAX_MEMBERS members or MAX_UNPACKED unpacked bytes is a
    FetchError naming it and the member past the bound."""
    rows: list[tuple[str, str]] = []
    roots: set[str] = set()
    comment: object = None
    try:
        with tarfile.open(archive, "r:*") as tar:
            count = 0
            while (m := tar.next()) is not None:
                tar.members = []  # type: ignore[attr-defined]  # else every TarInfo is kept
                count += 1
                check_unpacked(archive, m, count, tar.offset)
                top, _, rest = m.name.strip("/").partition("/")
                roots.add(top)
                if not rest or m.isdir():
                    continue
                if m.issym() or m.islnk():
                    mode = "120000" if m.issym() else "hardlink"
                    # tarfile decodes names that are not UTF-8 with surrogateescape: the
                    # hash stays a function of the archive's bytes
                    digest = hashlib.sha256(_raw(m.linkname)).hexdigest()
                elif m.isfile():
                    mode = "100755" if m.mode & 0o111 else "100644"
                    digest = _member_sha256(tar, m)
                else:
                    continue  # devices and fifos carry no content
                rows.append((rest, f"{mode} {digest} {rest}\n"))
            comment = tar.pax_headers.get("comment")  # read with the first member
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise FetchError(f"{archive}: not a readable tar archive ({exc}); the download is "
                         "damaged or the URL serves something else") from None  # fmt: skip
    if len(roots) != 1:
        raise FetchError(f"{archive}: {len(roots)} top folders, not one; the lock's root needs "
                         "an archive with a single top folder, as GitHub makes them")  # fmt: skip
    root = roots.pop()
    if root != _raw(root).decode("utf-8", "replace"):  # it goes into the lock, as text
        raise FetchError(f"{archive}: its top folder {_raw(root)!r} is not UTF-8 text; the "
                         "lock's root needs one that is, as GitHub makes them")  # fmt: skip
    h = hashlib.sha256()
    for _, row in sorted(rows):
        h.update(_raw(row))
    commit = comment if isinstance(comment, str) and _OID.fullmatch(comment) else None
    return Tree(root=root, sha256=h.hexdigest(), files=len(rows), commit=commit)


_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a commit id, SHA-1 or SHA-256


def check_unpacked(archive: Path, member: tarfile.TarInfo, count: int, end: int) -> None:
    """A FetchError when ``member`` (the ``count``th, its data ending at ``end`` bytes of the
    unpacked stream) is past MAX_MEMBERS or MAX_UNPACKED; checked before its data is read."""
    if count > MAX_MEMBERS:
        raise FetchError(f"{archive}: more than {MAX_MEMBERS} members (at {member.name!r}); "
                         "a source tree such as llama.cpp's has a few thousand")  # fmt: skip
    if end > MAX_UNPACKED:
        raise FetchError(f"{archive}: unpacks to more than {MAX_UNPACKED} bytes (at "
                         f"{member.name!r}, {member.size} bytes); a source tree such as "
                         "llama.cpp's unpacks to some hundred MB")  # fmt: skip


def _raw(name: str) -> bytes:
    """A member name as the archive's bytes (tarfile decodes them with surrogateescape)."""
    return name.encode("utf-8", "surrogateescape")


def _member_sha256(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    h = hashlib.sha256()
    f = tar.extractfile(member)
    if f is None:
        return h.hexdigest()
    with f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
