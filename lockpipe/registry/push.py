"""Push primitives: blobs, manifests, and referrers (signatures, SBOMs) attached to a subject.

Blobs go up monolithically (POST an upload, PUT its Location with
``?digest=``); the artifacts lockpipe publishes are small. Referrers use the
OCI 1.1 API when the registry has it and the referrers tag schema
(``sha256-<hex>`` holding an index) when it does not: distribution 2.8, which
CI runs, does not. Every manifest read by digest is checked against it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from lockpipe.errors import RegistryError
from lockpipe.jsonshape import Reader
from lockpipe.lock.refs import DIGEST_RE
from lockpipe.registry import platforms as pf
from lockpipe.registry.client import registry_for
from lockpipe.registry.transport import Registry
from lockpipe.urls import shown

__all__ = ["attach_referrer", "blob_exists", "get_manifest", "put_manifest", "referrers",
           "registry_for", "upload_blob"]  # fmt: skip
PUSH = "pull,push"


def blob_exists(reg: Registry, repository: str, digest: str) -> bool:
    """Whether ``repository`` already holds the blob ``digest``."""
    resp = reg.request("HEAD", repository, f"blobs/{digest}", ok=(200, 404))
    return resp.status_code == 200


def upload_blob(reg: Registry, repository: str, data: bytes, digest: str) -> None:
    """Upload ``data`` as ``digest`` unless the registry has it; the digest is checked first."""
    pf.check_digest(f"{reg.host}/{repository} blob", data, digest)
    if blob_exists(reg, repository, digest):
        return
    start = reg.request("POST", repository, "blobs/uploads/", actions=PUSH, ok=(202,),
                        headers={"Content-Length": "0"})  # fmt: skip
    location = start.headers.get("Location")
    if not location:
        raise RegistryError(
            f"POST {reg.host}/{repository} blobs/uploads/: 202 without a Location header; "
            "the registry is not OCI-distribution compliant"
        )
    sep = "&" if "?" in location else "?"
    reg.request("PUT", repository, f"{location}{sep}digest={digest}", actions=PUSH, data=data,
                headers={"Content-Type": "application/octet-stream"}, ok=(201,))  # fmt: skip


def put_manifest(
    reg: Registry, repository: str, reference: str, body: bytes, media_type: str
) -> str:
    """PUT a manifest as ``reference`` (tag or digest); its sha256, checked with the registry."""
    digest = pf.sha256_digest(body)
    if DIGEST_RE.match(reference) and reference != digest:
        raise RegistryError(f"{reg.host}/{repository}: manifest bytes hash to {digest}, not "
                            f"{reference}; pass the digest of these bytes")  # fmt: skip
    resp = reg.request("PUT", repository, f"manifests/{reference}", actions=PUSH, data=body,
                       headers={"Content-Type": media_type}, ok=(201,))  # fmt: skip
    answered = resp.headers.get("Docker-Content-Digest")
    if answered and answered != digest:
        raise RegistryError(
            f"PUT {reg.host}/{repository} manifests/{reference}: the registry stored "
            f"{shown(answered, 100)}, not {digest}; it rewrote the manifest: push to a registry "
            "that keeps bytes as sent"
        )
    return digest


def get_manifest(reg: Registry, repository: str, reference: str) -> tuple[bytes, str]:
    """(bytes, media type) of a manifest; bytes checked when ``reference`` is a digest."""
    resp = reg.request("GET", repository, f"manifests/{reference}", headers={"Accept": pf.ACCEPT})
    body = resp.content
    if DIGEST_RE.match(reference):
        pf.check_digest(f"{reg.host}/{repository}@{reference}", body, reference)
    doc = pf.parse_json(f"{reg.host}/{repository}:{reference}", body)
    return body, pf.media_type(doc, resp.headers.get("Content-Type"))


def fallback_tag(subject_digest: str) -> str:
    """The referrers tag schema's tag for a subject: ``sha256-<hex>``."""
    return subject_digest.replace(":", "-", 1)


def referrers(
    reg: Registry, repository: str, subject_digest: str, artifact_type: str | None = None
) -> list[dict[str, Any]]:
    """Descriptors of the manifests whose ``subject`` is ``subject_digest``."""
    path = f"referrers/{subject_digest}"
    if artifact_type:
        path += f"?artifactType={quote(artifact_type, safe='')}"  # the + in …in-toto+json
    resp = reg.request("GET", repository, path, ok=(200, 404))
    if resp.status_code == 200 and "json" in resp.headers.get("Content-Type", ""):
        where = f"{reg.host}/{repository} referrers/{subject_digest}"
        index = pf.parse_json(where, resp.content)
    else:
        where = f"{reg.host}/{repository}:{fallback_tag(subject_digest)}"
        index = _fallback_index(reg, repository, subject_digest)
    found = [d for d in _listed(where, index) if isinstance(d, dict)]
    return [d for d in found if artifact_type is None or d.get("artifactType") == artifact_type]


def _listed(where: str, index: dict[str, Any]) -> list[Any]:
    """An index's ``manifests``; RegistryError naming ``where`` when it is not a list."""
    reader = Reader(where=where, root="the index", error=RegistryError,
                    fix="the registry is broken")  # fmt: skip
    return reader.get(index, ("manifests",), list, default=[])


def attach_referrer(reg: Registry, repository: str, manifest: bytes, subject_digest: str) -> str:
    """Push an artifact manifest whose subject is ``subject_digest``; its digest.

    Without an ``OCI-Subject`` answer the registry keeps no referrers index, so
    the fallback tag's index is read, extended (once per digest) and written back.
    """
    doc = pf.parse_json(f"{reg.host}/{repository} artifact", manifest)
    subject = doc.get("subject")
    if not isinstance(subject, dict) or subject.get("digest") != subject_digest:
        raise RegistryError(
            f"{reg.host}/{repository}: the artifact's subject is not {subject_digest}; "
            "set manifest['subject'] to its descriptor"
        )
    mtype = pf.media_type(doc, None)
    digest = pf.sha256_digest(manifest)
    resp = reg.request("PUT", repository, f"manifests/{digest}", actions=PUSH, data=manifest,
                       headers={"Content-Type": mtype}, ok=(201,))  # fmt: skip
    if resp.headers.get("OCI-Subject"):
        return digest
    descriptor: dict[str, Any] = {"mediaType": mtype, "digest": digest, "size": len(manifest)}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    kind = doc.get("artifactType") or (config or {}).get("mediaType")
    if kind:
        descriptor["artifactType"] = kind
    if doc.get("annotations"):
        descriptor["annotations"] = doc["annotations"]
    index = _fallback_index(reg, repository, subject_digest)
    where = f"{reg.host}/{repository}:{fallback_tag(subject_digest)}"
    listed = [d for d in _listed(where, index) if isinstance(d, dict)]
    if any(d.get("digest") == digest for d in listed):
        return digest
    index["manifests"] = [*listed, descriptor]
    body = json.dumps(index, separators=(",", ":"), sort_keys=True).encode()
    put_manifest(reg, repository, fallback_tag(subject_digest), body, pf.OCI_INDEX)
    return digest


def _fallback_index(reg: Registry, repository: str, subject_digest: str) -> dict[str, Any]:
    """The index the fallback tag holds, or a new empty one."""
    tag = fallback_tag(subject_digest)
    resp = reg.request("GET", repository, f"manifests/{tag}", headers={"Accept": pf.OCI_INDEX},
                       ok=(200, 404))  # fmt: skip
    if resp.status_code == 404:
        return {"schemaVersion": 2, "mediaType": pf.OCI_INDEX, "manifests": []}
    return pf.parse_json(f"{reg.host}/{repository}:{tag}", resp.content)
