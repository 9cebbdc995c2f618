"""Locks of the payload store: one per blob and one per snapshot folder, as huggingface_hub
keeps one per blob (``.locks/<repo>/<etag>.lock``).

Layout::

    <store>/.lockpipe/locks/models--<org>--<name>/<id>.lock              one blob
    <store>/.lockpipe/locks/models--<org>--<name>/snapshot-<rev>.lock    its links

So two runs that share a store wait for each other only where they touch the same
bytes: a smoke run of a target already fetched does not wait behind another target's
50 GB download, and two runs fetching the same blob fetch it once (the second finds it
placed when it gets the lock). A lock is :func:`lockpipe.fs.file_lock`, an ``flock`` on
a file that stays: the kernel lets go of it when its holder exits, even on SIGKILL, so no
stale lock needs clearing.
"""

from __future__ import annotations

from pathlib import Path

from lockpipe.fs import file_lock

__all__ = ["STATE", "blob_lock_path", "file_lock", "snapshot_lock_path"]
STATE = ".lockpipe"  # the store's own folder (store.STATE)


def blob_lock_path(store: Path, blob: Path) -> Path:
    """``<store>/.lockpipe/locks/<repo folder>/<id>.lock`` of ``<repo folder>/blobs/<id>``."""
    return store / STATE / "locks" / blob.parent.parent.name / f"{blob.name}.lock"


def snapshot_lock_path(store: Path, snapshot: Path) -> Path:
    """``<store>/.lockpipe/locks/<repo folder>/snapshot-<rev>.lock`` of
    ``<repo folder>/snapshots/<rev>``."""
    return store / STATE / "locks" / snapshot.parent.parent.name / f"snapshot-{snapshot.name}.lock"
