"""Verify a published image against its provenance and against the lock as it is now.

The manifest is fetched by digest and its bytes hashed; the provenance is the
in-toto referrer whose subject is that digest. Then every resolved dependency
is compared with the current lock: a base digest, a pip file's sha256, the
source archive's sha256, a context file, the target's fingerprint. Each
mismatch is one line naming the entry and the fix. The comparison itself
(:func:`compare`) is pure, so unit tests check it from literal statements.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pipeline.build.provenance import MEDIA_TYPE, PREDICATE_TYPE, STATEMENT_TYPE
from pipeline.errors import CheckFailed, IntegrityError, RegistryError, UsageError
from pipeline.lock.fingerprint import context_files
from pipeline.lock.model import Lock
from pipeline.lock.refs import parse_ref

MOVED = "the lock moved since this image was built: rebuild and publish it again, or verify "
MOVED += "against the lock it was built from"


@dataclass(frozen=True, kw_only=True)
class Verified:
    target: str
    image: str
    provenance: str  # the referrer manifest's digest
    checked: int  # resolved dependencies compared


def _digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pinned_image(text: str) -> tuple[str, str, str]:
    """(reference, repository, digest) of ``REF@sha256:…``; UsageError without a digest."""
    try:
        ref = parse_ref(text)
    except ValueError as exc:
        raise UsageError(f"--image {text!r}: not an image reference ({exc})") from None
    if ref.digest is None:
        raise UsageError(f"--image {text!r}: give it by digest, REF@sha256:… (see images.json)")
    return text, ref.repository, ref.digest


def fetch_statement(image: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(image manifest, statement, referrer digest) from the registry, each digest-checked."""
    from pipeline.registry.client import registry_for
    from pipeline.registry.push import get_manifest, referrers

    _, _, digest = pinned_image(image)
    reg, ep = registry_for(image)
    repository = ep.repository
    body, _ = get_manifest(reg, repository, digest)
    if _digest_of(body) != digest:
        raise IntegrityError(f"{image}: the registry served a manifest with digest "
                             f"{_digest_of(body)}; do not trust this registry's copy")  # fmt: skip
    found = referrers(reg, repository, digest, artifact_type=MEDIA_TYPE)
    if not found:
        raise RegistryError(
            f"{image}: no provenance referrer ({MEDIA_TYPE}) for this digest; publish it with "
            "nox -s publish (which attaches it), or check the digest"
        )
    ref_digest = str(found[0]["digest"])
    art, _ = get_manifest(reg, repository, ref_digest)
    layers = json.loads(art).get("layers") or []
    blob_digest = str(layers[0]["digest"]) if layers else ""
    if not blob_digest:
        raise RegistryError(f"{image}: referrer {ref_digest} carries no statement layer")
    resp = reg.request("GET", repository, f"blobs/{blob_digest}")
    if _digest_of(resp.content) != blob_digest:
        raise IntegrityError(f"{image}: provenance blob {blob_digest} does not match its bytes")
    return json.loads(body), json.loads(resp.content), ref_digest


def _deps(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    deps = doc["predicate"]["buildDefinition"]["resolvedDependencies"]
    return {str(d["name"]): d for d in deps}


def compare(
    lock: Lock, target: str, digest: str, manifest: dict[str, Any], doc: dict[str, Any]
) -> list[str]:
    """Every way the statement disagrees with the image or the lock, one line each."""
    if doc.get("_type") != STATEMENT_TYPE or doc.get("predicateType") != PREDICATE_TYPE:
        return [f"the referrer is not an in-toto {PREDICATE_TYPE} statement"]
    problems = []
    subjects = [s.get("digest", {}).get("sha256") for s in doc.get("subject", [])]
    if digest.removeprefix("sha256:") not in subjects:
        problems.append(f"subject: the statement is about {subjects}, not this image {digest}; "
                        "it was attached to the wrong image: publish again")  # fmt: skip
    params = doc["predicate"]["buildDefinition"]
    built = params["externalParameters"].get("target")
    if built != target:
        problems.append(f"target: this image was built for {built}, not {target}; "
                        "name the target it was built for")  # fmt: skip
    image_id = doc["predicate"]["runDetails"]["byproducts"][0]["digest"]["sha256"]
    config = manifest.get("config", {}).get("digest", "")
    if config.removeprefix("sha256:") != image_id:
        problems.append(f"config: the image's config is {config}, the build produced "
                        f"sha256:{image_id}: not the image the statement describes")  # fmt: skip
    return problems + _against_lock(lock, target, params)


def _against_lock(lock: Lock, target: str, params: dict[str, Any]) -> list[str]:
    t = lock.target(target)
    deps = _deps({"predicate": {"buildDefinition": params}})
    want: dict[str, str] = {}
    for name in t.bases.values():
        want[f"bases.{name}"] = (lock.bases[name].digest or "none").removeprefix("sha256:")
    for name in t.pip:
        want[f"pip.{name}"] = lock.pip[name].sha256
    if t.source is not None:
        want[f"sources.{t.source}"] = lock.sources[t.source].sha256 or "none"
    for path, sha in context_files(lock, t).items():
        want[f"context:{path}"] = sha
    problems = []
    for name, sha in sorted(want.items()):
        got = deps.get(name, {}).get("digest", {}).get("sha256")
        if got is None:
            problems.append(f"{name}: the lock has it (sha256 {sha[:12]}), the image was "
                            f"built without it; {MOVED}")  # fmt: skip
        elif got != sha:
            problems.append(f"{name}: the image was built from sha256 {got[:12]}, the lock now "
                            f"says {sha[:12]}; {MOVED}")  # fmt: skip
    for name in sorted(set(deps) - set(want)):
        if name.split(":")[0] in ("context",) or name.split(".")[0] in ("bases", "pip", "sources"):
            problems.append(f"{name}: the image was built with it, the lock no longer has it; "
                            f"{MOVED}")  # fmt: skip
    fingerprint = params["internalParameters"].get("fingerprint")
    if fingerprint != lock.fingerprints.get(target):
        problems.append(f"fingerprints.{target}: the image was built at fingerprint "
                        f"{str(fingerprint)[:12]}, the lock says "
                        f"{str(lock.fingerprints.get(target))[:12]}; {MOVED}")  # fmt: skip
    return problems


def verify_image(lock: Lock, target: str, image: str) -> Verified:
    """Raise CheckFailed naming each mismatch; RegistryError when there is no provenance."""
    lock.target(target)
    _, _, digest = pinned_image(image)
    manifest, doc, ref_digest = fetch_statement(image)
    problems = compare(lock, target, digest, manifest, doc)
    if problems:
        lines = "\n  ".join(problems)
        raise CheckFailed(f"{image} does not match {lock.path} for {target}:\n  {lines}")
    return Verified(target=target, image=image, provenance=ref_digest, checked=len(_deps(doc)))
