"""The publish flow: push a current build by its record, record the digest, attach provenance.

Only an image whose build record carries the key the plan gives now is
pushed; anything else would publish an image the lock no longer describes.
A target whose ``images.json`` entry has the same key, and whose
``reference@digest`` the registry still has, is not pushed again: one HEAD.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline.build.plan import plan_target
from pipeline.build.provenance import MEDIA_TYPE, dumps, read_pip, statement
from pipeline.build.records import BuildRecord, read_record
from pipeline.build.run import build_key
from pipeline.engines.base import Engine
from pipeline.errors import UsageError
from pipeline.lock.fingerprint import check_drift
from pipeline.lock.model import Lock
from pipeline.lock.refs import parse_ref
from pipeline.log import echo
from pipeline.publish.outputs import Published, read_images, write_images

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
KEY_TAG_LENGTH = 12


@dataclass(frozen=True, kw_only=True)
class Outcome:
    target: str
    published: Published
    uploaded: bool  # False: the registry already had this build's image and provenance
    provenance: str  # the referrer manifest's digest


def check_prefix(prefix: str) -> str:
    """``--to`` as given, trimmed; UsageError unless it names a registry host and a path."""
    prefix = prefix.strip().rstrip("/")
    try:
        parsed = parse_ref(f"{prefix}/target:tag")
    except ValueError as exc:
        raise UsageError(f"--to {prefix!r}: not a REGISTRY/PREFIX ({exc})") from None
    if "/" not in prefix or (parsed.registry == "docker.io" and "docker.io" not in prefix):
        raise UsageError(
            f"--to {prefix!r}: name the registry host, e.g. 127.0.0.1:5000/lockpipe or "
            "ghcr.io/OWNER/lockpipe"
        )
    return prefix


def destination(prefix: str, target: str, key: str) -> str:
    """``REGISTRY/PREFIX/TARGET:KEY12``: the tag names the build key, so a new build never
    moves an old tag, and the same build always lands on the same one."""
    return f"{check_prefix(prefix)}/{target}:{key[:KEY_TAG_LENGTH]}"


def is_loopback(ref: str) -> bool:
    """Loopback registries speak plain HTTP (registry 2.8 here, a local mirror on a host)."""
    host = parse_ref(ref).registry.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


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


def artifact_manifest(blob: bytes, subject: dict[str, Any]) -> bytes:
    """An OCI image manifest that carries ``blob`` (a statement) and points at ``subject``."""
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": MEDIA_TYPE,
        "config": _descriptor(EMPTY_MEDIA_TYPE, EMPTY),
        "layers": [_descriptor(MEDIA_TYPE, blob)],
        "subject": subject,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def attach_provenance(pinned: str, doc: dict[str, Any]) -> str:
    """Upload ``doc`` and an empty config, put the referrer manifest; its digest."""
    from pipeline.registry.client import registry_for
    from pipeline.registry.push import attach_referrer, get_manifest, upload_blob

    digest = pinned.rpartition("@")[2]
    reg, ep = registry_for(pinned)
    body, media_type = get_manifest(reg, ep.repository, digest)  # digest-checked
    subject = _descriptor(media_type, body)
    blob = dumps(doc)
    for data in (EMPTY, blob):  # each a HEAD first: a blob the registry has is not sent
        upload_blob(reg, ep.repository, data, "sha256:" + hashlib.sha256(data).hexdigest())
    return attach_referrer(reg, ep.repository, artifact_manifest(blob, subject), digest)


def _provenance_present(pinned: str) -> str | None:
    from pipeline.registry.client import registry_for
    from pipeline.registry.push import referrers

    reg, ep = registry_for(pinned)
    found = referrers(reg, ep.repository, pinned.rpartition("@")[2], artifact_type=MEDIA_TYPE)
    return str(found[0]["digest"]) if found else None


def publish_target(
    lock: Lock, name: str, engine: Engine, *, state: Path, prefix: str, images: Path
) -> Outcome:
    """Push ``name`` unless ``images`` shows this build already there; attach its provenance."""
    from pipeline.registry.client import exists

    record = current_record(lock, name, engine, state)
    ref = destination(prefix, name, record.key)
    known = read_images(images).get(name)
    same = known is not None and known.key == record.key and known.reference == ref
    if known is not None and same and exists(known.pinned):
        provenance = _provenance_present(known.pinned)
        if provenance is None:
            provenance = _attach(lock, name, record, known)
        echo(f"{name}: unchanged, {known.pinned} is in the registry; nothing uploaded")
        return Outcome(target=name, published=known, uploaded=False, provenance=provenance)
    echo(f"{name}: pushing {record.tag} ({record.image_id[:19]}) to {ref}")
    digest = engine.push(record.tag, ref, tls_verify=not is_loopback(ref))
    entry = Published(
        reference=ref, digest=digest, key=record.key, engine=record.engine,
        engine_version=record.engine_version,
        published=datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    )  # fmt: skip
    provenance = _attach(lock, name, record, entry)
    write_images(images, {**read_images(images), name: entry})
    echo(f"{name}: published {entry.pinned}; provenance {provenance[:19]}; recorded in {images}")
    return Outcome(target=name, published=entry, uploaded=True, provenance=provenance)


def _attach(lock: Lock, name: str, record: BuildRecord, entry: Published) -> str:
    plan = plan_target(lock, name)
    doc = statement(plan, record, read_pip(lock, plan), subject=(entry.reference, entry.digest))
    return attach_provenance(entry.pinned, doc)
