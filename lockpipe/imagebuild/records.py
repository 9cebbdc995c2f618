"""Build records: what was built, from which key, by which engine.

One JSON file per (engine, target) under the state folder (default
``.lockpipe/`` beside the lock's checkout): records describe images in this
host's engine storage built from this checkout, so two checkouts never claim
each other's images, and ``git clean -X`` forgets them with the checkout.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lockpipe.fs import write_atomic
from lockpipe.log import echo


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


def record_path(state: Path, engine: str, target: str) -> Path:
    return state / "records" / engine / f"{target}.json"


def read_record(state: Path, engine: str, target: str) -> BuildRecord | None:
    """The record, or None if absent or unreadable (then the build simply reruns)."""
    path = record_path(state, engine, target)
    try:
        return BuildRecord(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        echo(f"warning: ignoring unreadable build record {path} ({exc})", style="yellow")
        return None


def write_record(state: Path, record: BuildRecord) -> Path:
    path = record_path(state, record.engine, record.target)
    write_atomic(path, json.dumps(asdict(record), indent=2, sort_keys=True) + "\n")
    return path
