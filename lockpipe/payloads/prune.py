"""Snapshot folders hold exactly what the lock lists.

A runtime given ``snapshots/<revision>`` loads whatever the folder holds: a file
dropped from the lock's ``files``, or one another Hugging Face cache tool (``hf
download``, a runtime fetching what it lacked) wrote there, would be loaded
without ever having been verified. So, before a snapshot payload is linked, every
entry of its folder that no payload of the lock at that repository and revision
names is removed: a link, a file, a folder of them. Blobs stay (other snapshots
may point at them); only the folder's view changes. Pruning comes first because
such an entry can stand in the links' way: a link to a folder elsewhere where the
lock lists ``sub/x`` (linking through it would write outside the store), or a real
folder where the lock lists a file.

:func:`strays` only reads; :func:`remove` acts. Callers hold the snapshot's lock
(:mod:`lockpipe.payloads.locks`), so no other run links into the folder meanwhile.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from pathlib import Path, PurePosixPath

from lockpipe.fs import fsync_dir


def strays(folder: Path, keep: Collection[str]) -> list[Path]:
    """What ``folder`` holds beyond the relative paths ``keep`` and the folders on the way
    to them, sorted; a stray folder is listed once, without its contents. Symbolic links
    are never followed: a link to a folder is one entry."""
    wanted = {PurePosixPath(k) for k in keep}
    ways = {parent for k in wanted for parent in k.parents}
    out: list[Path] = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        here = PurePosixPath(Path(root).relative_to(folder).as_posix())
        for name in sorted(dirs):
            rel = here / name
            if (Path(root) / name).is_symlink() or rel not in ways:
                out.append(Path(root) / name)
        dirs[:] = sorted(
            d for d in dirs if (here / d) in ways and not (Path(root) / d).is_symlink()
        )
        out += [Path(root) / n for n in sorted(files) if here / n not in wanted]
    return sorted(out)


def remove(paths: list[Path]) -> None:
    """Remove each of ``paths`` (a real folder with its contents), then fsync their folders."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for folder in sorted({p.parent for p in paths}):
        fsync_dir(folder)
