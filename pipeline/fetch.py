"""Fetch one file by URL and sha256 into a content-addressed cache.

The mirror (``--mirror`` / PIPELINE_MIRROR) is tried first, at
``{mirror}/{host}/{path}`` of the upstream URL, then upstream. Bytes go to a
temp file beside the destination and are renamed into place only after the
sha256 matched, so the cache never holds a wrong file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import requests

from pipeline.errors import PipelineError
from pipeline.log import echo


class FetchError(PipelineError):
    """A file could not be fetched, or its bytes did not match the lock."""

    return_code = 8


def mirror_url(mirror: str, url: str) -> str:
    """Where ``url`` lives on ``mirror``: ``{mirror}/{host}/{path}``."""
    parts = urlsplit(url)
    return f"{mirror.rstrip('/')}/{parts.netloc}{parts.path}"


def candidates(url: str, mirror: str | None) -> list[str]:
    return ([mirror_url(mirror, url)] if mirror else []) + [url]


def _download(url: str, sha256: str, dest: Path, timeout: float) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, requests.get(url, stream=True, timeout=timeout) as resp:
            if resp.status_code != 200:
                raise FetchError(f"{url}: HTTP {resp.status_code}")
            for chunk in resp.iter_content(1 << 20):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise FetchError(
                f"{url}: sha256 mismatch: the lock pins {sha256}, received {digest.hexdigest()}; "
                "the file changed upstream or the mirror is wrong, fix the mirror or relock"
            )
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fetch_verified(
    url: str, sha256: str, cache: Path, mirror: str | None = None, timeout: float = 60.0
) -> Path:
    """A local path whose bytes have ``sha256``, fetched from the mirror or ``url`` if needed."""
    dest = cache / "sha256" / sha256[:2] / sha256
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    problems = []
    for candidate in candidates(url, mirror):
        echo(f"fetching {candidate}")
        try:
            _download(candidate, sha256, dest, timeout)
            return dest
        except requests.RequestException as exc:
            problems.append(f"{candidate}: {type(exc).__name__}")
        except FetchError as exc:
            problems.append(str(exc))
    raise FetchError(
        "could not fetch a verified copy:\n  "
        + "\n  ".join(problems)
        + "\nset --mirror / PIPELINE_MIRROR to a reachable mirror, "
        "or check the lock's url and sha256"
    )
