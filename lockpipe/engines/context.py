"""A build context as the engines' APIs take it: a deterministic tar.

The tar has sorted entries, uid/gid 0, no owner names and one mtime (the
lock's SOURCE_DATE_EPOCH), so the engines' context caches and digests do
not depend on checkout times (repo2docker does the same).
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import IO


def _normalize(info: tarfile.TarInfo, mtime: int) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = mtime
    if info.isdir() or info.mode & 0o100:
        info.mode = 0o755
    else:
        info.mode = 0o644
    return info


def context_tar(context: Path, mtime: int) -> IO[bytes]:
    """A deterministic tar of ``context``, rewound and ready to upload."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 - returned open; the caller closes it
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(context.rglob("*")):
            rel = path.relative_to(context).as_posix()
            info = _normalize(tar.gettarinfo(str(path), arcname=rel), mtime)
            if info.isreg():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    out.seek(0)
    return out
