"""Fetch one file by URL and sha256 into a content-addressed cache (source archives).

The mirror (``--mirror`` / LOCKPIPE_MIRROR) is tried first, at
``{mirror}/{host}/{path}`` of the upstream URL, then upstream. The bytes come
through the payload downloader (parallel ranges where the server allows,
resumable, sha256 checked before the file takes its name), so the cache never
holds a wrong file.
"""

from __future__ import annotations

from pathlib import Path

from lockpipe.fs import sha256_file
from lockpipe.log import echo
from lockpipe.payloads.download import download_url
from lockpipe.urls import redact


def cached(cache: Path, sha256: str) -> Path:
    """Where the cache keeps the bytes whose sha256 is ``sha256``."""
    return cache / "sha256" / sha256[:2] / sha256


def fetch_verified(url: str, sha256: str, cache: Path, mirror: str | None = None) -> Path:
    """A local path whose bytes have ``sha256``, fetched from the mirror or ``url`` if needed."""
    dest = cached(cache, sha256)
    if dest.is_file():
        # Archives are small next to models: re-hash rather than trust the cache, so a
        # damaged file is fetched again here instead of failing inside the build.
        if sha256_file(dest) == sha256:
            return dest
        echo(f"warning: {dest} no longer has its sha256; fetching it again", style="yellow")
        dest.unlink()
    echo(f"fetching {redact(url)}" + (f" (mirror {redact(mirror)} first)" if mirror else ""))
    return download_url(url, sha256, dest, mirror=mirror, say=echo)
