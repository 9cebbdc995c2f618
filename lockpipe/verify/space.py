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
from lockpipe.jsonshape import Key, Reader, loads, render

COMPRESSED_RATIO = 3
GIB = 1 << 30
HUGE = 2**63  # no descriptor's size: it is a signed 64-bit integer


class Usage(NamedTuple):
    """What ``shutil.disk_usage`` returns; tests inject one."""

    total: int
    used: int
    free: int


def space_needed(manifest: Mapping[str, Any], source: str) -> int:
    """Bytes an export of the image ``manifest`` describes may write, at most (an estimate).

    EngineError naming ``source`` where a size is no size (``"12x"``, ``1e999``, true,
    below 0, 2**63 or more) or a descriptor no object: skopeo's manifest, as its registry
    wrote it."""
    fix = "check the image at its source (skopeo inspect --raw shows its manifest)"
    read = Reader(where=source, root="the manifest", error=EngineError, fix=fix)
    total = _size(read, manifest, ("config", "size"))
    for i in range(len(read.get(manifest, ("layers",), list, []))):
        media = read.get(manifest, ("layers", i, "mediaType"), str, "")
        size = _size(read, manifest, ("layers", i, "size"))
        total += size * (COMPRESSED_RATIO if ("gzip" in media or "zstd" in media) else 1)
    return total


def _size(read: Reader, manifest: Mapping[str, Any], path: tuple[Key, ...]) -> int:
    """The descriptor size at ``path``: a count of bytes, 0 where there is none."""
    size = read.get(manifest, path, int, 0)
    if not 0 <= size < HUGE:
        shown = size if abs(size) <= HUGE else f"{len(str(abs(size)))} digits long"
        raise read.fail(f"{render(path)} is {shown}, not a size (0 to 2**63 - 1)")

    return size


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
