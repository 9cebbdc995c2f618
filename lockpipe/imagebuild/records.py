"""Build records: what was built, from which key, by which engine.

One JSON file per (engine, target) under the state folder (default
``.lockpipe/`` beside the lock's checkout): records describe images in this
host's engine storage built from this checkout, so two checkouts never claim
each other's images, and ``git clean -X`` forgets them with the checkout.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from lockpipe.engines.base import IMAGE_ID
from lockpipe.errors import LockpipeError
from lockpipe.fs import write_atomic
from lockpipe.jsonshape import CONTROL, Reader
from lockpipe.log import echo
from lockpipe.urls import shown

_TYPES = {"str": str, "bool": bool, "int": int, "float": float}  # what a field may hold


@dataclass(frozen=True, kw_only=True)
class BuildRecord:
    target: str
    tag: str
    key: str
    image_id: str
    engine: str
    engine_version: str
    reproducible: bool
    reproducible_how: str
    fingerprint: str
    source_date_epoch: int
    built_at: str
    seconds: float


def field_kinds(cls: type) -> dict[str, tuple[type, bool]]:
    """Each field of the dataclass ``cls``: (the type its JSON value must be, whether it may be
    null or absent: ``str | None``). TypeError naming the field whose annotation is another."""
    out: dict[str, tuple[type, bool]] = {}
    for f in fields(cls):
        shown = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        parts = [p.strip() for p in shown.split("|")]
        kinds = [p for p in parts if p != "None"]
        if len(kinds) != 1 or kinds[0] not in _TYPES:
            raise TypeError(
                f"{cls.__name__}.{f.name}: {shown} is none of {', '.join(_TYPES)} (or one of "
                "them | None), which a record is read back as; give the field one of those, "
                "or teach _TYPES in lockpipe/imagebuild/records.py to check it"
            )
        out[f.name] = (_TYPES[kinds[0]], len(kinds) < len(parts))
    return out


_KINDS = field_kinds(BuildRecord)  # at import: a field of another type fails every test


def record_path(state: Path, engine: str, target: str) -> Path:
    return state / "records" / engine / f"{target}.json"


def read_record(state: Path, engine: str, target: str) -> BuildRecord | None:
    """The record, or None if absent or unreadable (then the build simply reruns)."""
    try:
        return load_record(record_path(state, engine, target))
    except LockpipeError as exc:
        echo(f"warning: ignoring unreadable build record {exc}", style="yellow")
    return None


def load_record(path: Path) -> BuildRecord | None:
    """The record at ``path``, None if there is none; LockpipeError naming ``path``, what
    is wrong and the build that writes it again, for a file that is not a record."""
    try:
        return _checked(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise LockpipeError(f"{path}: not a build record ({exc}); {_again(path)}") from None


def _again(path: Path) -> str:
    return f"build again: lockpipe build --engine {path.parent.name} {path.stem}"


def _checked(path: Path) -> BuildRecord:
    """The record ``path`` holds, each field of its type (read back, the file is input:
    an ``image_id`` of null or a tag would reach deploy's ``Image=``)."""
    read = Reader(where=str(path), root="the record", error=LockpipeError, fix=_again(path))
    doc = read.parse(path.read_text(encoding="utf-8"))
    for name, (kind, optional) in _KINDS.items():
        if not (optional and doc.get(name) is None):
            read.get(doc, (name,), kind)
    for name in _KINDS:  # deploy writes them into a unit's header: a NUL was a unit line
        value = doc.get(name)
        if isinstance(value, str) and CONTROL.search(value):
            raise read.fail(
                f"{name} {shown(value, 60)} holds a control character, which no build writes"
            )
    if not IMAGE_ID.match(doc["image_id"]):
        raise read.fail(f"image_id is {doc['image_id']!r}, not sha256:<64 hex>")
    return BuildRecord(**doc)


def write_record(state: Path, record: BuildRecord) -> Path:
    path = record_path(state, record.engine, record.target)
    write_atomic(path, json.dumps(asdict(record), indent=2, sort_keys=True) + "\n")
    return path
