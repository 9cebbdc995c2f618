"""Pure manifest reading: media types, the platforms an index lists, which child to pin.

An index (OCI image index or Docker manifest list) names one manifest per
platform; build tools add attestation manifests as ``unknown/unknown``, which
no engine ever pulls, so they are left out of what is "available".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.errors import RegistryError

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEXES = (OCI_INDEX, DOCKER_LIST)
MANIFESTS = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join(INDEXES + MANIFESTS)
UNKNOWN = "unknown/unknown"


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_digest(what: str, data: bytes, digest: str) -> None:
    """Raise unless ``data`` hashes to ``digest`` (sha256 only: what the lock pins)."""
    actual = sha256_digest(data)
    if actual != digest:
        raise RegistryError(
            f"{what}: the bytes do not match their digest ({digest} claimed, {actual} received); "
            "a proxy or mirror altered them: retry, or bypass it"
        )


def parse_json(what: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise RegistryError(f"{what}: the manifest is not a JSON object; the registry is broken")
    return doc


def media_type(doc: Mapping[str, Any], header: str | None) -> str:
    """The manifest's own ``mediaType``, else the Content-Type it was served with."""
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared:
        return declared
    if "manifests" in doc:
        return OCI_INDEX
    return (header or OCI_MANIFEST).split(";", 1)[0].strip()


def is_index(doc: Mapping[str, Any], header: str | None) -> bool:
    return media_type(doc, header) in INDEXES or isinstance(doc.get("manifests"), list)


def platform_name(platform: Mapping[str, Any]) -> str:
    """``{"os": "linux", "architecture": "arm64", "variant": "v8"}`` → ``linux/arm64/v8``."""
    name = f"{platform.get('os', 'unknown')}/{platform.get('architecture', 'unknown')}"
    return f"{name}/{platform['variant']}" if platform.get("variant") else name


def entries(index: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(platform, digest) for each runnable manifest an index lists, in its order."""
    out = []
    for item in index.get("manifests") or []:
        if not isinstance(item, dict) or not isinstance(item.get("digest"), str):
            continue
        name = platform_name(item.get("platform") or {})
        if name.startswith(UNKNOWN):
            continue
        out.append((name, item["digest"]))
    return out


def matches(required: str, offered: str) -> bool:
    """``linux/amd64`` matches ``linux/amd64`` and ``linux/amd64/v2``; a variant must match."""
    want, have = required.split("/"), offered.split("/")
    if want[:2] != have[:2]:
        return False
    if len(want) > 2:
        return want[2] == (have[2] if len(have) > 2 else ("v8" if want[1] == "arm64" else ""))
    return True


def select(
    what: str, available: Sequence[tuple[str, str]], required: Sequence[str]
) -> dict[str, str]:
    """Required platform → child digest; the first matching entry wins, as engines pick."""
    chosen = {}
    for want in required:
        found = next((digest for name, digest in available if matches(want, name)), None)
        if found is None:
            names = ", ".join(name for name, _ in available) or "none"
            raise RegistryError(
                f"{what}: no {want} image in its index (available: {names}); pick a tag built "
                f"for {want}, or set the base's platform to one available"
            )
        chosen[want] = found
    return chosen


def config_descriptor(what: str, manifest: Mapping[str, Any]) -> tuple[str, str] | None:
    """(digest, media type) of an image manifest's config blob; None for schema-less bodies."""
    config = manifest.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("digest"), str):
        return None
    return config["digest"], str(config.get("mediaType") or "")


def version_label(config: Mapping[str, Any]) -> str | None:
    labels = (config.get("config") or {}).get("Labels") or {}
    value = labels.get("org.opencontainers.image.version") if isinstance(labels, dict) else None
    return value if isinstance(value, str) and value else None


def config_platform(config: Mapping[str, Any]) -> str:
    return platform_name({"os": config.get("os"), "architecture": config.get("architecture"),
                          "variant": config.get("variant")})  # fmt: skip
