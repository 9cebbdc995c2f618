"""Fetch one file by URL and sha256 into a content-addressed cache (source archives).

The mirror (``--mirror`` / LOCKPIPE_MIRROR) is tried first, at
``{mirror}/{host}/{path}`` of the upstream URL, then upstream. The bytes come
through the payload downloader (parallel ranges where the server allows,
resumable, sha256 checked before the file takes its name), so the cache never
holds a wrong file.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from lockpipe.errors import DiskSpaceError, FetchError
from lockpipe.fs import sha256_file
from lockpipe.log import echo
from lockpipe.payloads.download import MAX_ARCHIVE, download_url
from lockpipe.urls import redact


def cached(cache: Path, sha256: str) -> Path:
    """Where the cache keeps the bytes whose sha256 is ``sha256``."""
    return cache / "sha256" / sha256[:2] / sha256


def unwritable(cache: Path, exc: OSError) -> FetchError:
    """An OSError of writing into ``cache`` as one line naming the option and the fix."""
    why = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
    kind = DiskSpaceError if exc.errno == errno.ENOSPC else FetchError
    return kind(f"--cache {cache}: cannot write the cache ({why}); set --cache or "
                "LOCKPIPE_CACHE to a writable folder")  # fmt: skip


def writable_folder(cache: Path, folder: Path) -> None:
    """Make ``folder`` (in ``cache``) exist and be writable, or say so naming --cache."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
    except OSError as exc:
        raise unwritable(cache, exc) from None


def fetch_verified(
    url: str, sha256: str, cache: Path, mirror: str | None = None, *, most: int = MAX_ARCHIVE
) -> Path:
    """A local path whose bytes have ``sha256``, fetched from the mirror or ``url`` if needed.

    No size is pinned, so a server claiming or sending more than ``most`` bytes is an
    IntegrityError naming the URL (never a disk filled with an endless body).

    A cache that is no writable folder (--cache a regular file) is a FetchError naming it;
    what the download itself raises is left to it (a network error is an OSError too)."""
    dest = cached(cache, sha256)
    if dest.is_file():
        # Archives are small next to models: re-hash rather than trust the cache, so a
        # damaged file is fetched again here instead of failing inside the build.
        if sha256_file(dest) == sha256:
            return dest
        echo(f"warning: {dest} no longer has its sha256; fetching it again", style="yellow")
        try:
            dest.unlink()
        except OSError as exc:
            raise unwritable(cache, exc) from None
    writable_folder(cache, dest.parent)
    echo(f"fetching {redact(url)}" + (f" (mirror {redact(mirror)} first)" if mirror else ""))
    return download_url(url, sha256, dest, mirror=mirror, most=most, say=echo)
