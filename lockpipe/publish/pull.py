"""What a published image is, read from the registry by digest, before any engine pulls it.

``smoke`` and ``deploy`` given ``REF@sha256:…`` run that reference (the engine
pulls it); what they check it against comes from here: the config digest,
which is the image ID the engine will report for it, and its environment
(LD_LIBRARY_PATH for the GPU attach). Every byte is digest-checked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import IntegrityError, RegistryError, UsageError
from lockpipe.lock.refs import parse_ref


@dataclass(frozen=True)
class PulledImage:
    reference: str  # REF@sha256:…, as given
    image_id: str  # the config digest: the image ID an engine shows once it pulled it
    env: dict[str, str]


def _checked(what: str, data: bytes, digest: str) -> bytes:
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise IntegrityError(f"{what}: the registry served bytes with digest {actual}, not "
                             f"{digest}; do not trust this registry's copy")  # fmt: skip
    return data


def image_digest(image: str) -> str:
    """The digest of ``REF@sha256:…``; a UsageError for anything else."""
    try:
        ref = parse_ref(image)
    except ValueError as exc:
        raise UsageError(f"--image {image!r}: not an image reference ({exc})") from None
    if ref.digest is None:
        raise UsageError(f"--image {image!r}: give it by digest, REF@sha256:… (images.json)")
    return ref.digest


def read_published(image: str) -> PulledImage:
    """The image's config digest and environment; UsageError without a digest."""
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import get_manifest

    digest = image_digest(image)
    reg, ep = registry_for(image)
    body, _ = get_manifest(reg, ep.repository, digest)
    manifest: dict[str, Any] = json.loads(_checked(image, body, digest))
    config = manifest.get("config", {}).get("digest")
    if not isinstance(config, str):
        raise RegistryError(f"{image}: the manifest has no config (an index? publish gives "
                            "one image manifest per target)")  # fmt: skip
    resp = reg.request("GET", ep.repository, f"blobs/{config}")
    doc = json.loads(_checked(f"{image} config", resp.content, config))
    pairs = (doc.get("config") or {}).get("Env") or []
    env = dict(p.split("=", 1) for p in pairs if "=" in p)
    return PulledImage(reference=image, image_id=config, env=env)
