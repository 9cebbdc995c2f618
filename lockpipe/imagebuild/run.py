"""Run build plans through an engine, skipping builds whose key has not changed.

The key covers the plan (lock entries, context file hashes, build args,
labels, timestamp) plus the engine and its version. A build whose key
matches its record, with the recorded image still present, never reaches
the engine's build call.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from lockpipe.engines.base import BuildRequest, Engine
from lockpipe.engines.basenames import BaseNameUnsettled
from lockpipe.errors import BuildError, interrupted
from lockpipe.imagebuild.context import stage
from lockpipe.imagebuild.plan import LABEL_PREFIX, BuildPlan, plan_target
from lockpipe.imagebuild.provenance import record_build
from lockpipe.imagebuild.records import BuildRecord, read_record
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import Lock
from lockpipe.log import Heartbeat, echo, step
from lockpipe.urls import redact


@dataclass(frozen=True, kw_only=True)
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


# How run_build stages a context and settles bases. Part of every build key, so that a
# change to it rebuilds images a record names: 2 = the base marker and first-name settling,
# 3 = the digest of each RUN's bind-mounted context files (context.mark_mounts).
STAGING = 3


def build_key(plan: BuildPlan, engine: str, version: str) -> str:
    material = f"{plan.identity()}|{engine}|{version}|staging-{STAGING}"
    return hashlib.sha256(material.encode()).hexdigest()


def _up_to_date(engine: Engine, plan: BuildPlan, key: str, s: Settings) -> BuildRecord | None:
    record = read_record(s.state, engine.name, plan.target)
    if s.force or record is None or record.key != key:
        return None
    if engine.image_id(plan.tag) != record.image_id:
        return None
    return record


@contextmanager
def build_folder(target: str) -> Iterator[str]:
    """A temporary folder (``lockpipe-TARGET-…``) for one build's staged context.

    It is removed however the build ends; Ctrl-C leaves as Interrupted naming it, once
    it is gone, beside whatever the engine stopped or removed.
    """
    folder = tempfile.TemporaryDirectory(prefix=f"lockpipe-{target}-")
    try:
        yield folder.name
    except KeyboardInterrupt as exc:
        folder.cleanup()
        gone = [f"removed the build's temporary folder {folder.name}"]
        raise interrupted(exc, *([] if os.path.exists(folder.name) else gone)) from None
    finally:
        folder.cleanup()


def run_build(
    engine: Engine, plan: BuildPlan, key: str, s: Settings, *, no_cache: bool = False
) -> BuildRecord:
    """Build ``plan`` (its source archive fetched and checked first); the record, not yet kept."""
    started = time.monotonic()
    labels = {**dict(plan.labels), f"{LABEL_PREFIX}.build-key": key}
    with build_folder(plan.target) as tmp:
        extra = {}
        if plan.source is not None:
            # Only a build that runs fetches: a no-op build never loads the HTTP stack.
            from lockpipe.payloads.cache import fetch_verified

            src = plan.source
            try:
                extra[src.filename] = fetch_verified(src.url, src.sha256, s.cache, s.mirror)
            except KeyboardInterrupt as exc:  # what was written stays: the next build resumes
                raise interrupted(exc, resumable=True) from None
        bases = tuple(ref for _, ref in plan.bases)
        base_args = {arg: ref for arg, ref in plan.build_args if ref in bases}
        context, marked = stage(
            plan.context, plan.dockerfile, labels, extra, Path(tmp) / "context", base_args
        )
        req = BuildRequest(
            context=context, dockerfile=plan.dockerfile, tag=plan.tag,
            build_args=dict(plan.build_args), timestamp=plan.timestamp,
            platform=plan.platform, bases=tuple(dict.fromkeys(marked)), no_cache=no_cache,
        )  # fmt: skip
        try:
            # every engine's build lines, the SDKs' too: no credentials of a URL shown; in a
            # log, a line of lockpipe's own whenever the engine is quiet for 10 s
            with Heartbeat(f"build {plan.target} ({engine.name})") as beat:
                image_id = engine.build(req, lambda line: beat.line(redact(line)))
        except BuildError as exc:
            raise _explain(exc, plan) from None
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


_UNREACHABLE = (
    "dial tcp",
    "no such host",
    "connection refused",
    "i/o timeout",
    "network is unreachable",
    "TLS handshake",
    "Temporary failure in name resolution",
    "server misbehaving",
)


# Words of an engine's line that reports a failure. Every engine echoes the FROM line, the
# pinned digest in it, before any step runs, so a digest alone blames nothing.
_FAILED = ("error", "fail", "not found", "unknown", "denied", "unauthorized", "refused")


def _pull_failure(text: str, digest: str) -> str | None:
    """The first line of ``text`` that reports a failure and names ``digest``."""
    for line in text.splitlines():
        if digest in line and any(word in line.lower() for word in _FAILED):
            return line
    return None


def _explain(exc: BuildError, plan: BuildPlan) -> BuildError:
    """Name the lock entry when the failure was pulling one of its pinned bases."""
    if isinstance(exc, BaseNameUnsettled):
        return exc  # it names the base, the other name and the fix already
    text = str(exc)
    for name, pinned in plan.bases:
        line = _pull_failure(text, pinned.rpartition("@")[2].removeprefix("sha256:"))
        if line is None:
            continue
        if any(sign.lower() in line.lower() for sign in _UNREACHABLE):
            return BuildError(
                f"bases.{name}: the registry of {pinned} cannot be reached from this host. "
                "Check the network or proxy, or load the image into the engine first "
                f"(e.g. skopeo copy from a reachable mirror); the digest stays as locked.\n{text}"
            )
        return BuildError(
            f"bases.{name}: the engine could not pull {pinned}; the digest is wrong or the "
            f"image is gone. Fix bases.{name}.digest in the lock or run nox -s "
            f"refresh-digests.\n{text}"
        )
    return exc


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
        record = run_build(engine, plan, key, s)
        path = record_build(s.state, lock, plan, record)
    how = "reproducible" if record.reproducible else "NOT reproducible"
    echo(f"{name}: built {record.image_id} in {record.seconds:.1f}s; record {path}")
    echo(
        f"{name}: {how}: {record.reproducible_how}", style=None if record.reproducible else "yellow"
    )
    return Outcome(name, True, record)
