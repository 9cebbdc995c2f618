"""lockpipe's provenance as an OCI referrer: attach it, and find it again among others.

An image may carry many ``application/vnd.in-toto+json`` referrers (a
signer's, a scanner's, BuildKit's own provenance), so the first one listed is
not necessarily lockpipe's. Each candidate's statement is read, digest-checked
and accepted only when its ``buildType`` is lockpipe's; a candidate that is
not JSON or is someone else's is set aside with its reason, so a missing
statement is reported with what was found instead. lockpipe's own statements
may be many too (an older lockpipe's, a ``publish --force``'s): the well-formed
ones come newest first, and a malformed one is kept apart with what it lacks, so
that it never hides a good one, nor counts as the provenance publish attaches.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import IntegrityError, RegistryError
from lockpipe.http.transport import Req
from lockpipe.imagebuild.provenance import (
    BUILD_TYPE,
    MEDIA_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    dumps,
)
from lockpipe.jsonshape import loads
from lockpipe.lock.refs import DIGEST_RE
from lockpipe.urls import redact, shown

# find_provenance's bounds. A statement lockpipe writes has a line per base, pip package and
# context file: some KB, a few hundred at most. A referrer's statement blob is read to
# MAX_STATEMENT bytes (as a manifest is, MAX_MANIFEST), past that it is set aside with the
# reason; an image's in-toto referrers are read when there are at most MAX_REFERRERS, and
# lockpipe's statements kept when they have MAX_KEPT bytes in all. Past either, a RegistryError
# naming the image: a verdict is never reached from some of them.
MAX_STATEMENT = 4 << 20
MAX_REFERRERS = 64
MAX_KEPT = 16 << 20

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"


@dataclass(frozen=True)
class Found:
    """lockpipe's statements about one image, and why the other candidates were set aside."""

    # (referrer manifest digest, statement): the well-formed ones, newest first
    statements: tuple[tuple[str, dict[str, Any]], ...]
    skipped: tuple[str, ...]  # one line per other in-toto referrer
    malformed: tuple[str, ...] = ()  # one line per lockpipe statement of another shape


REQUIRED = (
    ("predicate", "buildDefinition", "externalParameters"),
    ("predicate", "buildDefinition", "internalParameters"),
    ("predicate", "buildDefinition", "resolvedDependencies"),
    ("predicate", "runDetails", "byproducts"),
)


def missing_fields(doc: dict[str, Any]) -> list[str]:
    """The fields verify reads that the statement lacks or has in another shape."""
    out = []
    for path in REQUIRED:
        node: Any = doc
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        kind = list if path[-1] in ("resolvedDependencies", "byproducts") else dict
        if not isinstance(node, kind) or (kind is list and not node):
            out.append(".".join(path))
    deps = doc["predicate"]["buildDefinition"]["resolvedDependencies"] if not out else []
    if any(not isinstance(d, dict) or "name" not in d for d in deps):
        out.append("predicate.buildDefinition.resolvedDependencies[].name")
    return out


def malformed(doc: dict[str, Any]) -> str | None:
    """What makes ``doc`` no statement verify can read (one line, with the fix), or None."""
    if doc.get("_type") != STATEMENT_TYPE or doc.get("predicateType") != PREDICATE_TYPE:
        return f"the referrer is not an in-toto {PREDICATE_TYPE} statement"
    missing = missing_fields(doc)
    if missing:
        return (f"the statement has no {', '.join(missing)}: not one lockpipe wrote; attach a "
                "fresh one with nox -s publish -- --force")  # fmt: skip
    return None


def finished_on(doc: dict[str, Any]) -> str:
    """``runDetails.metadata.finishedOn`` (the build's time, ISO 8601 UTC), or "" if none."""
    meta = doc["predicate"]["runDetails"].get("metadata")
    when = meta.get("finishedOn") if isinstance(meta, dict) else None
    return when if isinstance(when, str) else ""


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
    listed = referrers(reg, ep.repository, subject, artifact_type=MEDIA_TYPE)
    if len(listed) > MAX_REFERRERS:
        raise RegistryError(f"{pinned}: {len(listed)} in-toto referrers, more than the "
                            f"{MAX_REFERRERS} lockpipe reads; delete the old ones (each publish "
                            "--force adds one), or check what attaches them")  # fmt: skip
    statements, skipped, bad, kept = [], [], [], 0
    for desc in listed:
        digest = str(desc.get("digest"))
        read = _statement(pinned, digest)
        named = digest if DIGEST_RE.fullmatch(digest) else shown(digest, 90)  # the index's text
        if isinstance(read, str):
            skipped.append(f"referrer {named}: {read}")
            continue
        doc, size = read
        if build_type(doc) != BUILD_TYPE:
            kind = shown(build_type(doc), 90)
            skipped.append(f"referrer {digest}: buildType {kind}, not lockpipe's")
        elif why := malformed(doc):
            bad.append(f"provenance referrer {digest}: {why}")
        else:
            kept += size
            if kept > MAX_KEPT:
                raise RegistryError(f"{pinned}: lockpipe's provenance referrers have more than "
                                    f"{MAX_KEPT} bytes in all (at {digest}); delete the old "
                                    "ones (each publish --force adds one)")  # fmt: skip
            statements.append((digest, doc))
    # Newest build first; of equal times, the one attached (listed) later.
    order = sorted(range(len(statements)), key=lambda i: (finished_on(statements[i][1]), i))
    return Found(tuple(statements[i] for i in reversed(order)), tuple(skipped), tuple(bad))


def _statement(pinned: str, digest: str) -> tuple[dict[str, Any], int] | str:
    """The statement a referrer carries and its blob's size, or why it carries none (a line
    for the report)."""
    from lockpipe.registry import platforms as pf
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import get_manifest

    if not DIGEST_RE.fullmatch(digest):  # by digest alone: what get_manifest checks the bytes of
        return f"the referrers index names it {shown(digest, 90)}, not sha256:<64 hex>"
    reg, ep = registry_for(pinned)
    try:
        art, _ = get_manifest(reg, ep.repository, digest)  # digest-checked
    except IntegrityError:
        raise  # altered bytes: nothing this registry serves can be trusted
    except RegistryError as exc:
        return f"its manifest is unreadable ({exc})"
    layers = loads(art).get("layers")  # an object: get_manifest read it
    if not isinstance(layers, list) or not layers or not isinstance(layers[0], dict):
        return "it carries no statement layer"
    blob_digest = layers[0].get("digest")
    if not isinstance(blob_digest, str) or not DIGEST_RE.fullmatch(blob_digest):
        # a path such as sha256:../.. never reaches a URL
        return f"its statement layer has the digest {shown(blob_digest, 90)}, not sha256:<64 hex>"
    try:
        path = f"blobs/{blob_digest}"  # reg.request's GET, with the statement's own limit
        req = Req(method="GET", url=reg.url(ep.repository, path), limit=MAX_STATEMENT,
                  scope=f"repository:{ep.repository}:pull")  # fmt: skip
        what = redact(f"GET {reg.host}/{ep.repository} {path}")
        resp = reg.transport.request(req, what=what, ok=(200,))
    except RegistryError as exc:  # another's referrer, its blob gone: set aside, not fatal
        return f"its statement blob {blob_digest} is unreadable ({exc})"
    pf.check_digest(f"{pinned} referrer {digest}'s blob {blob_digest}", resp.content,
                    blob_digest)  # fmt: skip
    try:
        doc = loads(resp.content)
    except ValueError:
        return f"its blob {blob_digest} is not JSON"
    if not isinstance(doc, dict):
        return f"its blob {blob_digest} is not a JSON object"
    return doc, len(resp.content)
