"""The publish flow: push a current build by its record, record the digest, attach provenance.

Only an image whose build record carries the key the plan gives now is
pushed; anything else would publish an image the lock no longer describes.
An unchanged build is not pushed again: when ``images.json`` has its entry
and the registry still has ``reference@digest``, one HEAD; without the entry
(a fresh checkout), one GET of the key's tag, whose manifest must name the
record's image ID as its config. Then only the provenance is checked and, if
missing, attached. The entry is written before the provenance is attached, so
a failed attach never loses the digest the push returned.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lockpipe.engines.base import Engine
from lockpipe.errors import UsageError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.provenance import read_pip, statement
from lockpipe.imagebuild.records import BuildRecord, read_record
from lockpipe.imagebuild.run import build_key
from lockpipe.jsonshape import loads
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import Lock
from lockpipe.lock.refs import parse_ref
from lockpipe.log import echo
from lockpipe.publish.outputs import Published, read_images, write_images
from lockpipe.publish.referrer import attach_provenance, find_provenance
from lockpipe.registry.names import is_loopback as loopback_host

KEY_TAG_LENGTH = 12


@dataclass(frozen=True, kw_only=True)
class Outcome:
    target: str
    published: Published
    uploaded: bool  # False: the registry already had this build's image and provenance
    provenance: str  # the referrer manifest's digest


def check_prefix(prefix: str, option: str = "--to", scheme: str = "") -> str:
    """``--to`` (or ``option``, its value ``scheme`` + ``prefix``) as given, trimmed;
    UsageError unless it names a registry host and a path. One with a user and password
    is refused without showing them: a registry's credentials come from podman login
    (auth.json), never from its name."""
    prefix = prefix.strip().rstrip("/")
    if "@" in prefix:  # a prefix has no digest: an '@' ends a user and password ('/' in it too)
        rest = prefix.rpartition("@")[2]
        raise UsageError(
            f"{option} {scheme}***@{rest}: a registry prefix holds no user or password; log "
            f"in with podman login {rest.partition('/')[0]} (or set REGISTRY_AUTH_FILE) and "
            f"give {option} {scheme}{rest}"
        )
    try:
        parsed = parse_ref(f"{prefix}/target:tag")
    except ValueError as exc:
        raise UsageError(f"{option} {scheme}{prefix}: not a REGISTRY/PREFIX ({exc})") from None
    if "/" not in prefix and ("." in prefix or ":" in prefix or prefix == "localhost"):
        raise UsageError(
            f"{option} {scheme}{prefix}: add a path after the registry host, e.g. "
            f"{scheme}{prefix}/lockpipe"
        )
    if "/" not in prefix or (parsed.registry == "docker.io" and "docker.io" not in prefix):
        raise UsageError(
            f"{option} {scheme}{prefix}: name the registry host, e.g. 127.0.0.1:5000/lockpipe or "
            "ghcr.io/OWNER/lockpipe"
        )
    return prefix


def destination(prefix: str, target: str, key: str) -> str:
    """``REGISTRY/PREFIX/TARGET:KEY12``: the tag names the build key, so a new build never
    moves an old tag, and the same build always lands on the same one."""
    return f"{check_prefix(prefix)}/{target}:{key[:KEY_TAG_LENGTH]}"


def is_loopback(ref: str) -> bool:
    """Loopback registries speak plain HTTP (registry 2.8 here, a local mirror on a host);
    the registry client's rule, so a push and a read agree on the scheme."""
    return loopback_host(parse_ref(ref).registry)


def current_record(lock: Lock, name: str, engine: Engine, state: Path) -> BuildRecord:
    """The record of ``name`` built by ``engine`` from what the lock pins now; else the fix."""
    check_drift(lock, lock.target(name))
    key = build_key(plan_target(lock, name), engine.name, engine.version())
    build = f"nox -s build -- {name} (or the build-GROUP session it belongs to)"
    record = read_record(state, engine.name, name)
    if record is None:
        raise UsageError(f"{name}: no {engine.name} build record in {state}; run {build}")
    if record.key != key:
        raise UsageError(
            f"{name}: the {engine.name} build record has key {record.key[:12]}, the lock now "
            f"gives {key[:12]}; run {build}"
        )
    if engine.image_id(record.tag) != record.image_id:
        raise UsageError(
            f"{name}: {record.tag} is no longer the image the record holds "
            f"({record.image_id[:19]}); run {build} --force"
        )
    return record


def published_as(ref: str, image_id: str) -> str | None:
    """The manifest digest at ``ref`` (the key's tag) when its config is ``image_id``; else None.

    The tag names the build key, so a tag whose config is the record's image ID holds this
    very build, already pushed (by this host before its images.json was lost, or by another
    host with the same reproducible build).
    """
    from lockpipe.registry import platforms as pf
    from lockpipe.registry.client import registry_for

    reg, ep = registry_for(ref)
    tag = parse_ref(ref).tag or ""
    resp = reg.request("GET", ep.repository, f"manifests/{tag}", headers={"Accept": pf.ACCEPT},
                       ok=(200, 404))  # fmt: skip
    if resp.status_code == 404:
        return None
    try:
        config = loads(resp.content).get("config", {}).get("digest")
    except (ValueError, AttributeError):
        return None  # not an image manifest: push over it
    return "sha256:" + hashlib.sha256(resp.content).hexdigest() if config == image_id else None


def publish_target(
    lock: Lock, name: str, engine: Engine, *, state: Path, prefix: str, images: Path,
    force: bool = False,
) -> Outcome:  # fmt: skip
    """Push ``name`` unless the registry already has this build (``force`` pushes anyway);
    record it in ``images``, then attach its provenance unless the registry has it."""
    from lockpipe.registry.client import held

    record = current_record(lock, name, engine, state)
    ref = destination(prefix, name, record.key)
    known = read_images(images).get(name)
    if known is not None and (known.key != record.key or known.reference != ref):
        known = None
    digest = None
    if not force:
        if known is not None and held(known.pinned):  # the destination itself, no mirror
            digest = known.digest  # one HEAD
        else:
            digest = published_as(ref, record.image_id)  # one GET of the key's tag
    uploaded = digest is None
    if digest is None:
        echo(f"{name}: pushing {record.tag} ({record.image_id[:19]}) to {ref}")
        digest = engine.push(record.tag, ref, tls_verify=not is_loopback(ref))
    same = known is not None and known.digest == digest
    entry = known if known is not None and same else Published(
        reference=ref, digest=digest, key=record.key, engine=record.engine,
        engine_version=record.engine_version,
        published=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    )  # fmt: skip
    if not same:  # before the attach: a failed attach must not lose the pushed digest
        write_images(images, {**read_images(images), name: entry})
    found = find_provenance(entry.pinned)
    ours = [d for d, doc in found.statements if _about(doc, record.image_id)]
    provenance = ours[0] if ours else _attach(lock, name, record, entry)
    if uploaded:
        echo(f"{name}: published {entry.pinned}; provenance {provenance[:19]}; "
             f"recorded in {images}")  # fmt: skip
    else:
        attached = "" if ours else f"; attached its missing provenance {provenance[:19]}"
        echo(f"{name}: unchanged, {entry.pinned} is in the registry; no image upload{attached}")
    return Outcome(target=name, published=entry, uploaded=uploaded, provenance=provenance)


def _about(doc: dict[str, Any], image_id: str) -> bool:
    """Whether a lockpipe statement describes the build whose image ID is ``image_id``."""
    try:
        got = doc["predicate"]["runDetails"]["byproducts"][0]["digest"]["sha256"]
    except (KeyError, IndexError, TypeError):
        return False  # malformed: attach a good one beside it
    return bool(got == image_id.removeprefix("sha256:"))


def _attach(lock: Lock, name: str, record: BuildRecord, entry: Published) -> str:
    plan = plan_target(lock, name)
    doc = statement(plan, record, read_pip(lock, plan), subject=(entry.reference, entry.digest))
    return attach_provenance(entry.pinned, doc)
