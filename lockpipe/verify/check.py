"""Verify a published image against its provenance and against the lock as it is now.

The manifest is fetched by digest (the registry client checks its bytes against it:
DigestMismatch, exit 9) and must name a config; the provenance is every lockpipe
in-toto referrer whose subject is that digest, newest first
(:func:`lockpipe.publish.referrer.find_provenance`). A malformed statement is passed
over with a warning, and the newest well-formed one that matches is used. Matching
means: about this image, and every resolved dependency as the current lock has it (a
base digest, a pip file's sha256, the source archive's sha256, a context file, the
target's fingerprint). Each mismatch is one line naming the entry and the fix. The
comparison itself (:func:`compare`) is pure, so unit tests check it from literal
statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lockpipe.errors import CheckFailed, RegistryError
from lockpipe.imagebuild.provenance import BUILD_TYPE, MEDIA_TYPE
from lockpipe.lock.fingerprint import context_files
from lockpipe.lock.model import Lock
from lockpipe.log import echo
from lockpipe.publish.pull import config_digest, image_digest
from lockpipe.publish.referrer import Found, malformed, missing_fields

__all__ = ["MOVED", "Verified", "compare", "fetch_statements", "missing_fields", "verify_image"]
MOVED = "the lock moved since this image was built: rebuild and publish it again, or verify "
MOVED += "against the lock it was built from"


@dataclass(frozen=True, kw_only=True)
class Verified:
    target: str
    image: str
    provenance: str  # the referrer manifest's digest
    checked: int  # resolved dependencies compared


def fetch_statements(image: str) -> tuple[dict[str, Any], Found]:
    """(image manifest, lockpipe's statements about it). The manifest's bytes are checked
    against the digest (by the registry client) and it must name a config.

    Other in-toto referrers (a signer's, BuildKit's) are passed over; when none is
    lockpipe's, the RegistryError lists what was found and why each was set aside.
    """
    from lockpipe.publish.referrer import find_provenance
    from lockpipe.registry import platforms as pf
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import get_manifest

    digest = image_digest(image)
    reg, ep = registry_for(image)
    body, _ = get_manifest(reg, ep.repository, digest)  # digest-checked
    manifest = pf.parse_json(image, body)
    config_digest(image, manifest)  # an image manifest, its config named as compare reads it
    found = find_provenance(image)
    if not found.statements and not found.malformed:
        others = "".join(f"\n  {line}" for line in found.skipped)
        raise RegistryError(
            f"{image}: no lockpipe provenance referrer ({MEDIA_TYPE}, buildType {BUILD_TYPE}) "
            "for this digest; publish it with nox -s publish (which attaches it), or check the "
            f"digest{others}"
        )
    return manifest, found


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
    why = malformed(doc)
    if why:
        return [why]
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
    named = manifest.get("config")
    config = str(named.get("digest") or "") if isinstance(named, dict) else ""
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
    """The newest of lockpipe's statements about ``image`` that matches it and the lock.

    A malformed statement is a warning. CheckFailed naming each mismatch of the newest
    well-formed one when none matches, or what each lacks when none is well-formed;
    RegistryError when there is no lockpipe provenance at all.
    """
    lock.target(target)
    digest = image_digest(image)
    manifest, found = fetch_statements(image)
    for line in found.malformed:
        echo(f"warning: {image}: {line}; passed over", style="yellow")
    if not found.statements:
        lines = "\n  ".join(found.malformed)
        raise CheckFailed(f"{image}: no well-formed lockpipe provenance; attach a fresh one "
                          f"with nox -s publish -- {target} --force:\n  {lines}")  # fmt: skip
    mismatches = []
    for ref_digest, doc in found.statements:
        problems = compare(lock, target, digest, manifest, doc)
        if not problems:
            return Verified(target=target, image=image, provenance=ref_digest,
                            checked=len(_deps(doc)))  # fmt: skip
        mismatches.append((ref_digest, problems))
    ref_digest, problems = mismatches[0]  # the newest
    older = len(mismatches) - 1
    also = f" (nor do {older} older statement(s))" if older else ""
    lines = "\n  ".join(problems)
    raise CheckFailed(f"{image} (provenance referrer {ref_digest}) does not match "
                      f"{lock.path} for {target}{also}:\n  {lines}")  # fmt: skip
