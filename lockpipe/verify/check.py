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

from lockpipe.errors import CheckFailed, IntegrityError, RegistryError
from lockpipe.imagebuild.provenance import BUILD_TYPE, MEDIA_TYPE, PREDICATE_TYPE, STATEMENT_TYPE
from lockpipe.lock.fingerprint import context_files
from lockpipe.lock.model import Lock
from lockpipe.publish.pull import image_digest

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


def fetch_statement(image: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(image manifest, lockpipe's statement, its referrer's digest), each digest-checked.

    Other in-toto referrers (a signer's, BuildKit's) are passed over; when none is
    lockpipe's, the RegistryError lists what was found and why each was set aside.
    """
    from lockpipe.publish.referrer import find_provenance
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import get_manifest

    digest = image_digest(image)
    reg, ep = registry_for(image)
    body, _ = get_manifest(reg, ep.repository, digest)
    if _digest_of(body) != digest:
        raise IntegrityError(f"{image}: the registry served a manifest with digest "
                             f"{_digest_of(body)}; do not trust this registry's copy")  # fmt: skip
    found = find_provenance(image)
    if not found.statements:
        others = "".join(f"\n  {line}" for line in found.skipped)
        raise RegistryError(
            f"{image}: no lockpipe provenance referrer ({MEDIA_TYPE}, buildType {BUILD_TYPE}) "
            "for this digest; publish it with nox -s publish (which attaches it), or check the "
            f"digest{others}"
        )
    ref_digest, doc = found.statements[0]
    return json.loads(body), doc, ref_digest


REQUIRED = (
    ("predicate", "buildDefinition", "externalParameters"),
    ("predicate", "buildDefinition", "internalParameters"),
    ("predicate", "buildDefinition", "resolvedDependencies"),
    ("predicate", "runDetails", "byproducts"),
)


def missing_fields(doc: dict[str, Any]) -> list[str]:
    """The fields :func:`compare` reads that the statement lacks or has in another shape."""
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


def _sha256(node: object) -> str | None:
    """``node["digest"]["sha256"]`` of a descriptor-like dict, or None in any other shape."""
    digest = node.get("digest") if isinstance(node, dict) else None
    sha = digest.get("sha256") if isinstance(digest, dict) else None
    return sha if isinstance(sha, str) else None


def _deps(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    deps = doc["predicate"]["buildDefinition"]["resolvedDependencies"]
    return {str(d["name"]): d for d in deps}


def compare(
    lock: Lock, target: str, digest: str, manifest: dict[str, Any], doc: dict[str, Any]
) -> list[str]:
    """Every way the statement disagrees with the image or the lock, one line each."""
    if doc.get("_type") != STATEMENT_TYPE or doc.get("predicateType") != PREDICATE_TYPE:
        return [f"the referrer is not an in-toto {PREDICATE_TYPE} statement"]
    missing = missing_fields(doc)
    if missing:
        return [f"the statement has no {', '.join(missing)}: not one lockpipe wrote; attach a "
                "fresh one with nox -s publish -- --force"]  # fmt: skip
    problems = []
    listed = doc.get("subject")
    subjects = [_sha256(s) for s in listed] if isinstance(listed, list) else []
    if digest.removeprefix("sha256:") not in subjects:
        problems.append(f"subject: the statement is about {subjects}, not this image {digest}; "
                        "it was attached to the wrong image: publish again")  # fmt: skip
    params = doc["predicate"]["buildDefinition"]
    built = params["externalParameters"].get("target")
    if built != target:
        problems.append(f"target: this image was built for {built}, not {target}; "
                        "name the target it was built for")  # fmt: skip
    image_id = _sha256(doc["predicate"]["runDetails"]["byproducts"][0])
    config = str(manifest.get("config", {}).get("digest", ""))
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
        got = _sha256(deps.get(name))
        if got is None:
            problems.append(f"{name}: the lock has it (sha256 {sha[:12]}), the image was "
                            f"built without it; {MOVED}")  # fmt: skip
        elif got != sha and name.startswith("bases."):
            problems.append(f"{name}: a refresh moved {name} (refresh-digests): the image was "
                            f"built from sha256 {got[:12]}, the lock now says {sha[:12]}; "
                            f"{MOVED}")  # fmt: skip
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
    digest = image_digest(image)
    manifest, doc, ref_digest = fetch_statement(image)
    problems = compare(lock, target, digest, manifest, doc)
    if problems:
        lines = "\n  ".join(problems)
        raise CheckFailed(f"{image} (provenance referrer {ref_digest}) does not match "
                          f"{lock.path} for {target}:\n  {lines}")  # fmt: skip
    return Verified(target=target, image=image, provenance=ref_digest, checked=len(_deps(doc)))
