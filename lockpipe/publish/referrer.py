"""lockpipe's provenance as an OCI referrer: attach it, and find it again among others.

An image may carry many ``application/vnd.in-toto+json`` referrers (a
signer's, a scanner's, BuildKit's own provenance), so the first one listed is
not necessarily lockpipe's. Each candidate's statement is read, digest-checked
and accepted only when its ``buildType`` is lockpipe's; a candidate that is
not JSON or is someone else's is set aside with its reason, so a missing
statement is reported with what was found instead.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import IntegrityError, RegistryError
from lockpipe.imagebuild.provenance import BUILD_TYPE, MEDIA_TYPE, dumps

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"


@dataclass(frozen=True)
class Found:
    """lockpipe's statements about one image, and why the other candidates were set aside."""

    statements: tuple[tuple[str, dict[str, Any]], ...]  # (referrer manifest digest, statement)
    skipped: tuple[str, ...]  # one line per other in-toto referrer


def _descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


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


def attach_provenance(pinned: str, doc: dict[str, Any]) -> str:
    """Upload ``doc`` and an empty config, put the referrer manifest; its digest."""
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import attach_referrer, get_manifest, upload_blob

    digest = pinned.rpartition("@")[2]
    reg, ep = registry_for(pinned)
    body, media_type = get_manifest(reg, ep.repository, digest)  # digest-checked
    subject = _descriptor(media_type, body)
    blob = dumps(doc)
    for data in (EMPTY, blob):  # each a HEAD first: a blob the registry has is not sent
        upload_blob(reg, ep.repository, data, "sha256:" + hashlib.sha256(data).hexdigest())
    return attach_referrer(reg, ep.repository, artifact_manifest(blob, subject), digest)


def build_type(doc: object) -> object:
    """``predicate.buildDefinition.buildType`` of a parsed statement, or None."""
    for key in ("predicate", "buildDefinition", "buildType"):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def find_provenance(pinned: str) -> Found:
    """Every in-toto referrer of ``pinned`` (``REF@sha256:…``), sorted into lockpipe's and not."""
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import referrers

    reg, ep = registry_for(pinned)
    subject = pinned.rpartition("@")[2]
    statements, skipped = [], []
    for desc in referrers(reg, ep.repository, subject, artifact_type=MEDIA_TYPE):
        digest = str(desc.get("digest"))
        doc = _statement(pinned, digest)
        if isinstance(doc, str):
            skipped.append(f"referrer {digest}: {doc}")
        elif build_type(doc) != BUILD_TYPE:
            skipped.append(f"referrer {digest}: buildType {build_type(doc)!r}, not lockpipe's")
        else:
            statements.append((digest, doc))
    return Found(tuple(statements), tuple(skipped))


def _statement(pinned: str, digest: str) -> dict[str, Any] | str:
    """The statement a referrer carries, or why it carries none (a line for the report)."""
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import get_manifest

    reg, ep = registry_for(pinned)
    try:
        art, _ = get_manifest(reg, ep.repository, digest)  # digest-checked
    except RegistryError as exc:
        return f"its manifest is unreadable ({exc})"
    layers = json.loads(art).get("layers")
    if not isinstance(layers, list) or not layers or not isinstance(layers[0], dict):
        return "it carries no statement layer"
    blob_digest = str(layers[0].get("digest"))
    resp = reg.request("GET", ep.repository, f"blobs/{blob_digest}")
    if "sha256:" + hashlib.sha256(resp.content).hexdigest() != blob_digest:
        raise IntegrityError(f"{pinned}: referrer {digest}'s blob {blob_digest} does not match "
                             "its bytes; do not trust this registry's copy")  # fmt: skip
    try:
        doc = json.loads(resp.content)
    except ValueError:
        return f"its blob {blob_digest} is not JSON"
    return doc if isinstance(doc, dict) else f"its blob {blob_digest} is not a JSON object"
