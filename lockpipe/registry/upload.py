"""A large file up as one blob: chunked PATCHes where the registry takes them, one PUT where not.

The first PATCH is the probe: a 202 whose ``Range`` covers the chunk means the
registry keeps chunks, and the rest follow it; anything else (405, 416, 400,
501, a ``Range`` that does not add up) means it does not, and the upload starts
again as one streamed PUT. Before each chunk the token is renewed if it would
expire within :data:`RENEW_MARGIN` (a 60 s token does not last a 10 GiB upload),
so no chunk is sent to be refused. A blob the repository already has is not sent.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lockpipe.errors import RegistryError
from lockpipe.http import whole_number
from lockpipe.registry.push import PUSH, blob_exists
from lockpipe.registry.transport import Registry
from lockpipe.urls import shown

MiB = 1 << 20
DEFAULT_CHUNK = 64 * MiB
RENEW_MARGIN = 30.0  # seconds: a chunk starts with a token that outlives it
NO_CHUNKS = (400, 404, 405, 413, 416, 501)  # answers to the probe that mean "one PUT"
Mode = Literal["present", "chunked", "single"]


@dataclass(frozen=True, kw_only=True)
class Uploaded:
    digest: str
    mode: Mode  # "present": the registry had it, nothing was sent
    requests: int  # PATCH and PUT requests that carried bytes


def _start(reg: Registry, repository: str) -> str:
    resp = reg.request(
        "POST",
        repository,
        "blobs/uploads/",
        actions=PUSH,
        ok=(202,),
        headers={"Content-Length": "0"},
    )
    location = resp.headers.get("Location")
    if not location:
        raise RegistryError(
            f"POST {reg.host}/{repository} blobs/uploads/: 202 without a "
            "Location header; the registry is not OCI-distribution compliant"
        )
    return location


def _with_digest(location: str, digest: str) -> str:
    return f"{location}{'&' if '?' in location else '?'}digest={digest}"


def _covers(range_header: str | None, end: int) -> bool:
    """Whether the registry's ``Range: 0-N`` says it holds bytes up to ``end`` (exclusive)."""
    return whole_number((range_header or "").rpartition("-")[2].strip()) == end - 1


def upload_file(
    reg: Registry,
    repository: str,
    path: Path,
    digest: str,
    size: int,
    *,
    chunk: int = DEFAULT_CHUNK,
) -> Uploaded:
    """Make ``repository`` hold ``path``'s bytes as ``digest`` (the caller verified them)."""
    if blob_exists(reg, repository, digest):
        return Uploaded(digest=digest, mode="present", requests=0)
    location = _start(reg, repository)
    if size > chunk:
        sent = _chunked(reg, repository, path, digest, size, chunk, location)
        if sent:
            return Uploaded(digest=digest, mode="chunked", requests=sent)
        location = _start(reg, repository)  # the probe's upload is abandoned; a fresh one
    reg.authorization(repository, PUSH, margin=RENEW_MARGIN)
    with path.open("rb") as fh:
        reg.request(
            "PUT",
            repository,
            _with_digest(location, digest),
            actions=PUSH,
            data=fh,
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
            ok=(201,),
        )
    return Uploaded(digest=digest, mode="single", requests=1)


def _chunked(
    reg: Registry, repository: str, path: Path, digest: str, size: int, chunk: int, location: str
) -> int:
    """The PATCH requests sent, all chunks and the closing PUT done; 0 when the probe says
    the registry takes no chunks (nothing kept)."""
    sent = 0
    with path.open("rb") as fh:
        for start in range(0, size, chunk):
            data = fh.read(chunk)
            end = start + len(data)
            reg.authorization(repository, PUSH, margin=RENEW_MARGIN)
            resp = reg.request(
                "PATCH",
                repository,
                location,
                actions=PUSH,
                data=data,
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Range": f"{start}-{end - 1}",
                    "Content-Length": str(len(data)),
                },
                ok=(202, *NO_CHUNKS) if start == 0 else (202,),
            )
            probe_failed = resp.status_code != 202 or not _covers(resp.headers.get("Range"), end)
            if probe_failed and start == 0:
                # A courtesy: a registry expires an abandoned upload itself, so one that
                # refuses the DELETE (400, 403, a 5xx) must not end the single PUT after it.
                with contextlib.suppress(RegistryError):
                    reg.request("DELETE", repository, location, actions=PUSH, ok=(204, 404, 405))
                return 0
            if probe_failed:
                raise RegistryError(
                    f"PATCH {reg.host}/{repository} upload of {digest}: the registry holds "
                    f"{shown(resp.headers.get('Range'), 100)} after bytes {start}-{end - 1}; "
                    "it lost a chunk: run payloads publish again"
                )
            location = resp.headers.get("Location") or location
            sent += 1
    reg.request(
        "PUT",
        repository,
        _with_digest(location, digest),
        actions=PUSH,
        headers={"Content-Length": "0"},
        ok=(201,),
    )
    return sent
