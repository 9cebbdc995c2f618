"""Pure manifest reading: media types, the platforms an index lists, which child to pin.

An index (OCI image index or Docker manifest list) names one manifest per
platform; build tools add attestation manifests as ``unknown/unknown``, which
no engine ever pulls, so they are left out of what is "available".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from lockpipe.errors import IntegrityError, RegistryError
from lockpipe.jsonshape import Reader, TooDeep, loads
from lockpipe.lock.refs import DIGEST_RE
from lockpipe.urls import shown

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


class DigestMismatch(IntegrityError, RegistryError):
    """Bytes a registry served that do not hash to the digest they were asked by (or
    claimed): an IntegrityError, exit 9, that is also a RegistryError, so a mirror serving
    them is passed over for the next source as any failing mirror is."""


def check_digest(what: str, data: bytes, digest: str) -> None:
    """DigestMismatch unless ``data`` hashes to ``digest`` (sha256 only: what the lock pins)."""
    actual = sha256_digest(data)
    if actual != digest:
        raise DigestMismatch(
            f"{what}: the bytes do not match their digest ({digest} claimed, {actual} received); "
            "the registry, a mirror or a proxy altered them: do not trust this copy; retry, "
            "or bypass the mirror or proxy"
        )


def parse_json(what: str, data: bytes) -> dict[str, Any]:
    try:
        doc = loads(data)
    except TooDeep:
        raise RegistryError(
            f"{what}: the manifest is nested too deeply to read; the registry is broken"
        ) from None
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
    name = f"{platform.get('os') or 'unknown'}/{platform.get('architecture') or 'unknown'}"
    return f"{name}/{platform['variant']}" if platform.get("variant") else name


def entries(what: str, index: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(platform, digest) for each runnable manifest an index lists, in its order.

    An index of another shape (no list of manifests, an entry or its platform that is
    not an object, a digest that is not ``sha256:<64 hex>``) is a RegistryError naming
    ``what`` and the key: no entry of a broken index is passed over or pinned."""
    read = Reader(where=what, root="the index", error=RegistryError, fix="the registry is broken")
    out = []
    for i in range(len(read.get(index, ("manifests",), list))):
        read.get(index, ("manifests", i), dict)
        name = platform_name(read.get(index, ("manifests", i, "platform"), dict, {}))
        digest = read.get(index, ("manifests", i, "digest"), str)
        if not DIGEST_RE.fullmatch(digest):
            raise read.fail(f"manifests[{i}].digest is {shown(digest, 90)}, not sha256:<64 hex>")
        if not name.startswith(UNKNOWN):
            out.append((name, digest))
    return out


class PlatformMissing(RegistryError):
    """The registry answered, and the image offers no entry for a required platform.

    Not a transient failure: a caller may fall back on it (fewer platforms),
    never on a plain RegistryError (a 5xx, a refused token).
    """

    def __init__(self, what: str, platform: str, available: Sequence[str], *, index: bool) -> None:
        self.platform = platform
        self.available = tuple(available)
        names = ", ".join(self.available) or "none"
        if index:
            text = f"no {platform} image in its index (available: {names})"
        else:
            declared = "" if UNKNOWN not in names else ", as its config names no os/architecture"
            text = f"a single-platform image for {names}{declared}, not {platform} (no index)"
        super().__init__(f"{what}: {text}; pick a tag built for {platform}, or set the base's "
                         "platform to one available")  # fmt: skip


# containers/image's platform matcher (internal/pkg/platform): for an architecture with
# variants, the compatible ones from most to least capable; and the variant every machine
# of an architecture runs, accepted when none is asked for.
COMPATIBLE = {"arm": ("v7", "v6", "v5"), "arm64": ("v8",)}
BASE_VARIANT = {"arm64": "v8"}


def wanted(required: str) -> list[str]:
    """The index entries that may serve ``required``, best first, as podman and skopeo rank them.

    ``linux/amd64`` takes only a plain amd64 entry (an ``amd64/v3`` build does
    not run on every amd64 host); ``linux/amd64/v3`` takes v3, else plain;
    ``linux/arm64`` and ``linux/arm64/v8`` are one platform; ``linux/arm/v7``
    takes v7, v6, v5, then plain, and ``linux/arm/v6`` never takes v7.
    """
    parts = required.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise RegistryError(f"platform {required!r}: write it as os/arch or os/arch/variant")
    os_, arch = parts[0], parts[1]
    variant = parts[2] if len(parts) == 3 else ""
    if variant:
        order = COMPATIBLE.get(arch, ())
        variants = [*order[order.index(variant) :], ""] if variant in order else [variant, ""]
    else:
        variants = ["", BASE_VARIANT[arch]] if arch in BASE_VARIANT else [""]
    return [f"{os_}/{arch}/{v}" if v else f"{os_}/{arch}" for v in variants]


def select(
    what: str, available: Sequence[tuple[str, str]], required: Sequence[str], *, index: bool = True
) -> dict[str, str]:
    """Required platform → child digest: the best-ranked match, wherever it sits in the index.

    Raises :class:`PlatformMissing` naming the first required platform nothing matches.
    """
    chosen = {}
    for want in required:
        found = next((digest for candidate in wanted(want) for name, digest in available
                      if name == candidate), None)  # fmt: skip
        if found is None:
            raise PlatformMissing(what, want, [name for name, _ in available], index=index)
        chosen[want] = found
    return chosen


def config_descriptor(what: str, manifest: Mapping[str, Any]) -> tuple[str, str] | None:
    """(digest, media type) of an image manifest's config blob; None for schema-less bodies.

    A digest that is not ``sha256:<64 hex>`` is a RegistryError naming ``what``: it would go
    into the blob URL as a path (``sha256:../..``)."""
    config = manifest.get("config")
    if not isinstance(config, dict) or config.get("digest") is None:
        return None
    return config_digest(what, manifest), str(config.get("mediaType") or "")


def config_digest(
    what: str, manifest: Mapping[str, Any], fix: str = "the registry is broken"
) -> str:
    """The ``config.digest`` of an image manifest, ``sha256:<64 hex>``; else a RegistryError
    naming ``what``, the key and ``fix``."""
    read = Reader(where=what, root="the manifest", error=RegistryError, fix=fix)
    digest = read.get(manifest, ("config", "digest"), str)
    if not DIGEST_RE.fullmatch(digest):
        raise read.fail(f"config.digest is {shown(digest, 90)}, not sha256:<64 hex>")
    return digest


def version_label(config: Mapping[str, Any], what: str = "the image config") -> str | None:
    """The config's ``org.opencontainers.image.version`` label, None where it has none (or
    one that is not text); a RegistryError naming ``what`` where it holds a lone surrogate
    (JSON's ``"\\ud800"``), which no lock, log or terminal takes."""
    inner = config.get("config")
    labels = inner.get("Labels") if isinstance(inner, dict) else None
    value = labels.get("org.opencontainers.image.version") if isinstance(labels, dict) else None
    if not isinstance(value, str) or not value:
        return None
    read = Reader(where=what, root="the image config", error=RegistryError,
                  fix="re-push the image with a label that is text")  # fmt: skip
    return read.get(config, ("config", "Labels", "org.opencontainers.image.version"), str)


def config_platform(config: Mapping[str, Any]) -> str:
    """A single image's platform from its config; ``unknown`` for what it does not name."""
    return platform_name({"os": config.get("os"), "architecture": config.get("architecture"),
                          "variant": config.get("variant")})  # fmt: skip
