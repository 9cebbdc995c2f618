"""The files of a payload as the store keeps them: one content-addressed blob each.

A single-file payload has one :class:`Blob`; a snapshot has one per file the
lock lists. A blob is named and verified by what the lock pins: the sha256 of
an LFS file, or the git blob id of a small file kept in git,
``sha1(b"blob <size>\\0" + bytes)`` (the ``oid`` the Hub's tree API lists).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from lockpipe.fs import sha256_file
from lockpipe.lock.model import Payload, PayloadFile
from lockpipe.payloads import store as st
from lockpipe.payloads.store import BlobKind


@dataclass(frozen=True, kw_only=True)
class Blob:
    """One pinned file of a payload: where its bytes and its snapshot link live."""

    payload: Payload
    file: PayloadFile
    kind: BlobKind
    digest: str  # the pinned sha256 or git blob sha1; also the blob's file name
    size: int
    path: Path  # <repo>/blobs/<digest>
    link: Path  # <repo>/snapshots/<revision>/<file.path>
    label: str  # the lock key: payloads.NAME, or payloads.NAME.files.PATH in a snapshot

    @property
    def partial(self) -> Path:
        return self.path.with_name(self.path.name + ".lockpipe-partial")


def blobs_of(store: Path, payload: Payload) -> list[Blob]:
    """Every file of ``payload`` (pinned: ``check_pinned`` ran first)."""
    out = []
    for f in payload.files:
        kind, digest = st.blob_id(payload, f)
        out.append(
            Blob(
                payload=payload, file=f, kind=kind, digest=digest, size=f.size or 0,
                path=st.repo_dir(store, payload) / "blobs" / digest,
                link=st.file_path(store, payload, f), label=st.where(payload, f),
            )
        )  # fmt: skip
    return out


def git_blob_hasher(size: int) -> hashlib._Hash:
    """A sha1 primed with git's blob header; feed it the file's bytes."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update(b"blob %d\0" % size)
    return h


def git_blob_id(data: bytes) -> str:
    """The git blob id of ``data``: what ``git hash-object`` prints."""
    h = git_blob_hasher(len(data))
    h.update(data)
    return h.hexdigest()


def digest_file(path: Path, kind: BlobKind) -> str:
    """Re-hash a file in the store the way its lock entry pins it."""
    if kind == "sha256":
        return sha256_file(path)
    h = git_blob_hasher(path.stat().st_size)
    with path.open("rb") as fh:
        while block := fh.read(8 << 20):
            h.update(block)
    return h.hexdigest()
