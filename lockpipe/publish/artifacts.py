"""``payloads publish --to REGISTRY/PREFIX``: each stored payload as a ModelPack artifact.

Order: the payloads to publish are those whose every file is in the store (a
name given on the command line must be); the store vouches for them offline
(verification cache, else a re-hash: :func:`run_payloads` with
``HF_HUB_OFFLINE``), so only pinned bytes go up. Then per payload: each file as a
raw layer (nothing sent for a blob the repository has), the config, the manifest
under ``rev-<commit>`` (not put again when the tag already holds these bytes),
and lockpipe's provenance as a referrer (not attached twice).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lockpipe.errors import UsageError
from lockpipe.fs import sha256_file
from lockpipe.imagebuild.provenance import MEDIA_TYPE, dumps
from lockpipe.lock.model import Lock, Payload
from lockpipe.log import echo
from lockpipe.payloads.blobs import Blob, blobs_of
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.selection import select
from lockpipe.payloads.sources import file_url
from lockpipe.publish.payloadprov import payload_statement
from lockpipe.publish.push import check_prefix
from lockpipe.publish.referrer import EMPTY, artifact_manifest
from lockpipe.registry import modelpack as mp
from lockpipe.registry.client import registry_for
from lockpipe.registry.push import attach_referrer, put_manifest, referrers, upload_blob
from lockpipe.registry.transport import Registry
from lockpipe.registry.upload import DEFAULT_CHUNK, Uploaded, upload_file
from lockpipe.urls import redact, split_userinfo


@dataclass(frozen=True, kw_only=True)
class PublishOptions:
    store: Path
    prefix: str  # REGISTRY/PREFIX
    chunk: int = DEFAULT_CHUNK
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True, kw_only=True)
class Published:
    name: str
    reference: str  # REGISTRY/PREFIX/NAME:rev-<commit>
    digest: str  # the manifest's
    uploads: tuple[Uploaded, ...]  # one per layer, in the manifest's order
    provenance: str  # the referrer manifest's digest
    attached: bool  # False: the provenance was there already

    @property
    def sent(self) -> int:
        """Layers whose bytes went up in this run."""
        return sum(u.mode != "present" for u in self.uploads)


def stored(store: Path, payloads: Sequence[Payload]) -> tuple[list[Payload], list[Payload]]:
    """(every file in the store, not): by the blobs' presence; their bytes are checked next."""
    have: list[Payload] = []
    lack: list[Payload] = []
    for p in payloads:
        (have if all(b.path.is_file() for b in blobs_of(store, p)) else lack).append(p)
    return have, lack


def _layer(b: Blob) -> mp.Layer:
    """A blob as a raw layer; a git-pinned file's sha256 read from its (small) bytes."""
    sha = b.digest if b.kind == "sha256" else sha256_file(b.path)
    return mp.Layer(path=b.file.path, digest=f"sha256:{sha}", size=b.size)


def publish_payloads(lock: Lock, names: Sequence[str], o: PublishOptions) -> list[Published]:
    """Push every selected payload the store holds; the outcome of each, in lock order."""
    prefix = check_prefix(o.prefix)
    payloads, _ = select(lock, names)
    have, lack = stored(o.store, payloads)
    if lack and names:
        raise UsageError(
            f"{', '.join('payloads.' + p.name for p in lack)}: not in the store {o.store}; "
            "fetch it first (lockpipe payloads NAME --store …), then publish"
        )
    for p in lack:
        echo(f"note: payloads.{p.name} is not in the store {o.store}; not published")
    if not have:
        raise UsageError(
            f"no payload of the lock is in the store {o.store}; run lockpipe payloads first"
        )
    offline = Options(store=o.store, output="quiet", env={**o.env, "HF_HUB_OFFLINE": "1"})
    run_payloads(lock, [p.name for p in have], offline)  # verified: only pinned bytes go up
    return [_publish(p, prefix, o) for p in have]


def _publish(p: Payload, prefix: str, o: PublishOptions) -> Published:
    registry, _, path_prefix = prefix.partition("/")
    blobs = blobs_of(o.store, p)
    layers = tuple(_layer(b) for b in blobs)
    urls = {b.file.path: _recorded(file_url(p, b.file.path, o.env)) for b in blobs}
    source = urls[blobs[0].file.path].partition("/resolve/")[0]
    art = mp.artifact(path_prefix, p, layers, source)
    reference = f"{registry}/{art.repository}:{art.tag}"
    reg, ep = registry_for(reference)
    uploads = []
    for b, x in zip(blobs, layers, strict=True):
        up = upload_file(reg, ep.repository, b.path, x.digest, x.size, chunk=o.chunk)
        echo(f"payloads.{p.name}: {x.path}: {_said(up, x.size)}")
        uploads.append(up)
    upload_blob(reg, ep.repository, art.config, _sha(art.config))
    digest = _sha(art.manifest)
    if _tagged(reg, ep.repository, art.tag) != digest:
        put_manifest(reg, ep.repository, art.tag, art.manifest, mp.OCI_MANIFEST)
    git_ids = {b.file.path: b.digest for b in blobs if b.kind == "git_sha1"}
    doc = payload_statement(p, reference, digest, layers, urls, git_ids)
    provenance, attached = _provenance(reg, ep.repository, doc, digest, len(art.manifest))
    sent = sum(u.mode != "present" for u in uploads)
    echo(
        f"payloads.{p.name}: published {reference}@{digest}; {sent} of {len(uploads)} files "
        f"uploaded; provenance {provenance[:19]}{'' if attached else ' (already attached)'}"
    )
    return Published(
        name=p.name,
        reference=reference,
        digest=digest,
        uploads=tuple(uploads),
        provenance=provenance,
        attached=attached,
    )


def _recorded(url: str) -> str:
    """``url`` as the artifact and its provenance record it (the manifest's source
    annotation, the config's sourceURL, the statement's uris): without the user and
    password an ``HF_ENDPOINT`` may hold, which are for fetching, not for the registry."""
    try:
        return split_userinfo(url)[0]
    except ValueError:  # not parsable: every login-like part masked all the same
        return redact(url)


def _said(up: Uploaded, size: int) -> str:
    if up.mode == "present":
        return "in the registry already, not sent"
    how = f"{up.requests} chunks" if up.mode == "chunked" else "one PUT"
    return f"uploaded {size:,} bytes ({how})"


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _tagged(reg: Registry, repository: str, tag: str) -> str | None:
    """The digest ``tag`` holds now (one HEAD), or None."""
    resp = reg.request(
        "HEAD", repository, f"manifests/{tag}", ok=(200, 404), headers={"Accept": mp.OCI_MANIFEST}
    )
    return resp.headers.get("Docker-Content-Digest") if resp.status_code == 200 else None


def _provenance(
    reg: Registry, repository: str, doc: dict[str, object], subject: str, size: int
) -> tuple[str, bool]:
    """(referrer digest, whether this run attached it)."""
    blob = dumps(doc)
    manifest = artifact_manifest(
        blob, {"mediaType": mp.OCI_MANIFEST, "digest": subject, "size": size}
    )
    digest = _sha(manifest)
    listed = referrers(reg, repository, subject, artifact_type=MEDIA_TYPE)
    if any(d.get("digest") == digest for d in listed):
        return digest, False
    for data in (EMPTY, blob):
        upload_blob(reg, repository, data, _sha(data))
    return attach_referrer(reg, repository, manifest, subject), True
