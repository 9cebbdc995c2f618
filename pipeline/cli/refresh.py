"""The ``refresh-digests`` verb: re-resolve what the lock pins, write one reviewable change."""

from __future__ import annotations

import argparse

from pipeline.errors import DriftError
from pipeline.lock.model import load_lock, write_lock
from pipeline.log import echo
from pipeline.refresh.bases import refresh_bases


def do_refresh(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    doc, changes = refresh_bases(loaded, args.targets)
    for change in changes:
        echo(str(change))
    if args.check:
        if changes:
            raise DriftError(f"{args.lock}: {len(changes)} base digest(s) moved; run nox -s "
                             "refresh-digests and review the diff")  # fmt: skip
        echo(f"{args.lock}: every base digest is current")
        return 0
    if doc == loaded.document:
        echo(f"{args.lock}: every base digest is current; nothing written")
        return 0
    write_lock(args.lock, doc)
    echo(f"{args.lock}: {len(changes)} digest(s) and their origins updated; "
         f"review with git diff {args.lock}")  # fmt: skip
    return 0
