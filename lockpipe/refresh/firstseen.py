"""When lockpipe first saw each proposed version: the record behind ``--min-age``.

The age of a release cannot come from the image: reproducible builds clamp its
``created`` (every lockpipe image says 2026-11-… whatever day it was built), and a
registry keeps no push date. So lockpipe keeps its own record, a JSON file::

    {"version": 1, "first_seen": {"bases.vllm-openai": {"v0.33.0-cu129": "2026-12-02T01:50:00Z"}}}

Each run adds the versions it sees for the first time, stamped with the run's clock
(injected: tests pass their own). A version is held while ``now - first seen`` is below the
minimum age. :func:`observe` and :func:`age` are pure; :func:`load` and :func:`save` are the
file (written atomically).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path

from lockpipe.errors import UsageError
from lockpipe.fs import write_atomic
from lockpipe.jsonshape import loads

Record = Mapping[str, Mapping[str, str]]  # key ("bases.NAME") -> version -> ISO UTC time
_AGE = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def parse_age(text: str) -> timedelta:
    """``3d``, ``12h``, ``2w``, ``90m``, ``0s`` as a duration; UsageError otherwise."""
    m = _AGE.match(text.strip())
    if m is None:
        raise UsageError(
            f"--min-age {text!r}: give a whole number and a unit, s m h d or w (3d: three days)"
        )
    return timedelta(**{_UNITS[m[2]]: int(m[1])})


def stamp(now: datetime) -> str:
    return now.astimezone(timezone.utc).strftime(_FORMAT)


def observe(
    record: Record, key: str, versions: Iterable[str], now: datetime
) -> dict[str, dict[str, str]]:
    """``record`` with each of ``versions`` not yet seen under ``key`` stamped ``now``."""
    out = {k: dict(v) for k, v in record.items()}
    seen = out.setdefault(key, {})
    for version in versions:
        seen.setdefault(version, stamp(now))
    return out


def first_seen(record: Record, key: str, version: str) -> datetime | None:
    when = record.get(key, {}).get(version)
    return datetime.strptime(when, _FORMAT).replace(tzinfo=timezone.utc) if when else None


def age(record: Record, key: str, version: str, now: datetime) -> timedelta:
    """How long ago lockpipe first saw ``version`` (zero when it never did)."""
    when = first_seen(record, key, version)
    return now - when if when else timedelta(0)


def load(path: Path) -> dict[str, dict[str, str]]:
    """The record at ``path``; empty when there is none yet. UsageError naming the file
    when it cannot be read as one."""
    try:
        doc = loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"--first-seen {path}: not a first-seen record ({exc}); move it "
            "away and the next run starts a new one"
        ) from None
    table = doc.get("first_seen") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(table, dict):
        raise UsageError(
            f"--first-seen {path}: not a version 1 first-seen record; move it "
            "away and the next run starts a new one"
        )
    for key, versions in table.items():
        if not isinstance(versions, dict):
            raise UsageError(f"--first-seen {path}: first_seen.{key} is not an object")
        for version, when in versions.items():
            try:
                datetime.strptime(str(when), _FORMAT)
            except ValueError:
                raise UsageError(
                    f"--first-seen {path}: first_seen.{key}.{version}: "
                    f"{when!r} is not YYYY-MM-DDTHH:MM:SSZ"
                ) from None
    return {k: dict(v) for k, v in table.items()}


def save(path: Path, record: Record) -> None:
    doc = {
        "version": 1,
        "first_seen": {k: dict(sorted(v.items())) for k, v in sorted(record.items())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc, indent=2) + "\n")
