"""``images.json`` beside the lock: what ``publish`` pushed, by digest, per target.

The lock says what goes in; this file says what came out and where it lives,
so a host that never built can pull ``reference@digest`` (``smoke``/``deploy``
``--published``). It is canonical JSON (sorted keys, two-space indent) written
atomically, so a publish gives a small, reviewable diff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from lockpipe.errors import LockError
from lockpipe.fs import read_utf8, write_atomic
from lockpipe.jsonshape import Reader
from lockpipe.lock.refs import DIGEST_RE, ReferenceError, parse_ref
from lockpipe.urls import clipped, shown

VERSION = 1
FILENAME = "images.json"


@dataclass(frozen=True, kw_only=True)
class Published:
    reference: str  # REGISTRY/PREFIX/TARGET:TAG, as pushed
    digest: str  # the manifest digest the registry returned
    key: str  # the build key of the record that was pushed
    engine: str
    engine_version: str
    published: str  # UTC date this host first recorded this digest (push or found in the registry)

    @property
    def pinned(self) -> str:
        """``name@digest``, without the tag: what a host pulls (skopeo and containers/image
        refuse a reference with both a tag and a digest)."""
        return f"{parse_ref(self.reference).name}@{self.digest}"


_FIELDS = tuple(f.name for f in fields(Published))


def images_path(lock_path: Path) -> Path:
    return lock_path.parent / FILENAME


def read_images(path: Path) -> dict[str, Published]:
    """Target → Published; empty when the file does not exist yet. A file of another shape
    (a field that is no string, a digest that is no sha256:…, a reference that is none) is
    one LockError naming the file, the field and the fix."""
    try:
        text = read_utf8(path, LockError)  # a FIFO waited for ever; 300 MB took 651 MB
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        msg = f"{path}: unreadable ({exc}); fix it or delete it and publish again"
        raise LockError(msg) from None
    reader = Reader(where=str(path), root="the file", error=LockError,
                    fix="fix it or delete it and publish again")  # fmt: skip
    doc = reader.parse(text)
    if doc.get("version") != VERSION:
        raise LockError(f"{path}: not a version {VERSION} images file; delete it and publish again")
    images = reader.get(doc, ("images",), dict)
    return {target: _entry(reader, doc, target) for target in images}


def _entry(reader: Reader, doc: dict[str, Any], target: str) -> Published:
    extra = sorted(set(reader.get(doc, ("images", target), dict)) - set(_FIELDS))
    if extra:
        raise reader.fail(f"images.{target} has the unknown field {extra[0]!r}")
    values = {name: reader.get(doc, ("images", target, name), str) for name in _FIELDS}
    if not DIGEST_RE.match(values["digest"]):
        raise reader.fail(f"images.{target}.digest is {shown(values['digest'], 80)}, not "
                          "sha256: and 64 lowercase hex digits")  # fmt: skip
    try:
        parse_ref(values["reference"])
    except ReferenceError as exc:
        raise reader.fail(f"images.{target}.reference: {clipped(str(exc), 200)}") from None
    return Published(**values)


def dump_images(images: Mapping[str, Published]) -> str:
    doc = {"version": VERSION, "images": {t: asdict(p) for t, p in sorted(images.items())}}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write_images(path: Path, images: Mapping[str, Published]) -> None:
    write_atomic(path, dump_images(images))


def published_for(path: Path, target: str) -> Published:
    """The entry for ``target``; a LockError naming the publish that makes it."""
    entry = read_images(path).get(target)
    if entry is None:
        raise LockError(
            f"{path}: no published image for {target}; run nox -s publish -- {target} "
            "--to REGISTRY/PREFIX on a host that built it"
        )
    return entry
