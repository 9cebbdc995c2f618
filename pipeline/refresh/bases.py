"""Re-resolve what the lock pins by tag, and write the change for review.

Today this covers base images: each ``bases.NAME.ref`` is asked of its registry
(HEAD on the manifest, which answers with the digest of the tag's index or
manifest), and a changed digest is written with a fresh ``origin``. Every
reference is resolved before anything is written, so a dead registry leaves
the lock untouched; the write is canonical and atomic, and the fingerprints
are brought up to date, so the result is one reviewable diff.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from pipeline.errors import RegistryError, UsageError
from pipeline.lock.fingerprint import relock
from pipeline.lock.model import Lock, parse_lock
from pipeline.lock.refs import parse_ref
from pipeline.registry.client import manifest_digest

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True, kw_only=True)
class Change:
    name: str
    ref: str
    old: str | None
    new: str

    def __str__(self) -> str:
        return f"bases.{self.name}: {self.ref} {self.old or '(unpinned)'} -> {self.new}"


def insecure(ref: str) -> bool:
    """Plain HTTP for loopback registries, as the engines do by default."""
    registry = parse_ref(ref).registry
    return registry.rsplit(":", 1)[0] in LOOPBACK or registry in LOOPBACK


def refresh_bases(
    lock: Lock,
    names: Sequence[str] = (),
    *,
    resolve: Callable[[str, bool], str] = lambda ref, plain: manifest_digest(ref, insecure=plain),
    today: str | None = None,
) -> tuple[dict[str, Any], list[Change]]:
    """The lock document with re-resolved base digests, and what changed."""
    unknown = [n for n in names if n not in lock.bases]
    if unknown:
        raise UsageError(f"{', '.join(unknown)}: not in bases; choose from {', '.join(lock.bases)}")
    doc: dict[str, Any] = copy.deepcopy(dict(lock.document))
    changes = []
    for name in names or sorted(lock.bases):
        base = lock.bases[name]
        registry = parse_ref(base.ref).registry
        try:
            digest = resolve(base.ref, insecure(base.ref))
        except RegistryError as exc:
            raise RegistryError(f"bases.{name}: {exc}; nothing was written") from None
        if digest != base.digest:
            # Only a moved digest gets a new origin: an unchanged entry keeps its
            # provenance and notes, so a refresh with no change writes nothing.
            entry = doc["bases"][name]
            entry["digest"] = digest
            entry["origin"] = {"source": f"registry {registry}: HEAD of the tag's manifest",
                               "seen": today or date.today().isoformat()}  # fmt: skip
            changes.append(Change(name=name, ref=base.ref, old=base.digest, new=digest))
    return relock(parse_lock(doc, lock.path, lock.root)), changes
