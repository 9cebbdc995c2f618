"""Run build plans through an engine, skipping builds whose key has not changed.

The key covers the plan (lock entries, context file hashes, build args,
labels, timestamp) plus the engine and its version. A build whose key
matches its record, with the recorded image still present, never reaches
the engine's build call.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipeline.context import stage
from pipeline.engines.base import BuildRequest, Engine
from pipeline.fetch import fetch_verified
from pipeline.fingerprint import check_drift
from pipeline.lock import Lock
from pipeline.log import echo, step
from pipeline.plan import LABEL_PREFIX, BuildPlan, plan_target
from pipeline.records import BuildRecord, read_record, write_record


@dataclass(frozen=True)
class Settings:
    state: Path
    cache: Path
    mirror: str | None = None
    force: bool = False


@dataclass(frozen=True)
class Outcome:
    target: str
    built: bool
    record: BuildRecord


def build_key(plan: BuildPlan, engine: str, version: str) -> str:
    return hashlib.sha256(f"{plan.identity()}|{engine}|{version}".encode()).hexdigest()


def _up_to_date(engine: Engine, plan: BuildPlan, key: str, s: Settings) -> BuildRecord | None:
    record = read_record(s.state, engine.name, plan.target)
    if s.force or record is None or record.key != key:
        return None
    if engine.image_id(plan.tag) != record.image_id:
        return None
    return record


def _run_build(engine: Engine, plan: BuildPlan, key: str, s: Settings) -> BuildRecord:
    started = time.monotonic()
    labels = {**dict(plan.labels), f"{LABEL_PREFIX}.build-key": key}
    with tempfile.TemporaryDirectory(prefix=f"lockpipe-{plan.target}-") as tmp:
        extra = {}
        if plan.source is not None:
            src = plan.source
            extra[src.filename] = fetch_verified(src.url, src.sha256, s.cache, s.mirror)
        context = stage(plan.context, extra, Path(tmp) / "context")
        req = BuildRequest(
            context, plan.dockerfile, plan.tag, dict(plan.build_args), labels,
            plan.timestamp, plan.platform,
        )  # fmt: skip
        image_id = engine.build(req, lambda line: echo(line, style="dim"))
    repro = engine.reproducibility()
    return BuildRecord(
        target=plan.target,
        tag=plan.tag,
        key=key,
        image_id=image_id,
        engine=engine.name,
        engine_version=engine.version(),
        reproducible=repro.reproducible,
        reproducible_how=repro.how,
        fingerprint=plan.fingerprint,
        source_date_epoch=plan.timestamp,
        built_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        seconds=round(time.monotonic() - started, 3),
    )


def build_target(lock: Lock, name: str, engine: Engine, s: Settings) -> Outcome:
    """Build one target unless its record proves the image is current."""
    check_drift(lock, lock.target(name))
    plan = plan_target(lock, name)
    key = build_key(plan, engine.name, engine.version())
    current = _up_to_date(engine, plan, key, s)
    if current is not None:
        echo(f"{name}: up to date ({current.image_id[:19]}, key {key[:12]}); --force rebuilds")
        return Outcome(name, False, current)
    with step(f"build {name} with {engine.name} {engine.version()}"):
        record = _run_build(engine, plan, key, s)
        path = write_record(s.state, record)
    how = "reproducible" if record.reproducible else "NOT reproducible"
    echo(f"{name}: built {record.image_id} in {record.seconds:.1f}s; record {path}")
    echo(f"{name}: {how}: {record.reproducible_how}", style=None if record.reproducible else "yellow")
    return Outcome(name, True, record)
