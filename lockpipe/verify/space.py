"""Room in TMPDIR for an image export, checked before skopeo writes a byte.

``explain`` and ``verify --rebuild`` copy whole images into an OCI layout under
``tempfile.gettempdir()``; a CUDA image fills a small /tmp half-way through
and fails with a bare ENOSPC. The need is estimated from the manifest's layer
sizes: an uncompressed layer counts once, a gzip or zstd one three times (a
conservative ratio for image layers, since a copy from local storage is
written uncompressed; a registry copy stays compressed and needs less). Pure
apart from reading the manifest and the disk's free space, both injectable.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from lockpipe import cmd
from lockpipe.errors import DiskSpaceError, EngineError
from lockpipe.jsonshape import loads

COMPRESSED_RATIO = 3
GIB = 1 << 30


class Usage(NamedTuple):
    """What ``shutil.disk_usage`` returns; tests inject one."""

    total: int
    used: int
    free: int


def space_needed(manifest: Mapping[str, Any]) -> int:
    """Bytes an export of the image ``manifest`` describes may write, at most (an estimate)."""
    total = int((manifest.get("config") or {}).get("size") or 0)
    for layer in manifest.get("layers") or []:
        size = int(layer.get("size") or 0) if isinstance(layer, dict) else 0
        media = str(layer.get("mediaType", "")) if isinstance(layer, dict) else ""
        total += size * (COMPRESSED_RATIO if ("gzip" in media or "zstd" in media) else 1)
    return total


def check_space(
    need: int, what: str, *, where: str | None = None,
    usage: Callable[[str], Any] = shutil.disk_usage,
) -> None:  # fmt: skip
    """DiskSpaceError naming TMPDIR and the fix unless ``where`` has ``need`` bytes free."""
    folder = where or tempfile.gettempdir()
    free = int(usage(folder).free)
    if need > free:
        raise DiskSpaceError(
            f"{folder} (TMPDIR): {free / GIB:.1f} GiB free, exporting {what} needs about "
            f"{need / GIB:.1f} GiB (layer sizes, compressed ones x{COMPRESSED_RATIO}); set "
            "TMPDIR to a folder on a bigger disk"
        )


def manifest_of(source: str, *, tls_verify: bool = True) -> dict[str, Any] | None:
    """The manifest skopeo reads for ``source`` without copying it; None for ``docker-daemon:``
    (skopeo reads even its manifest from a full ``docker save``, which would double the work)."""
    if source.startswith("docker-daemon:"):
        return None
    args = ["skopeo", "inspect", "--raw"]
    if source.startswith("docker://"):
        args.append(f"--tls-verify={str(tls_verify).lower()}")
    out = cmd.call([*args, source], quiet=True, stdout_only=True)  # its log lines: stderr
    try:
        doc = loads(out)
    except ValueError:
        raise EngineError(f"{source}: skopeo inspect --raw printed no JSON manifest") from None
    return doc if isinstance(doc, dict) else None
