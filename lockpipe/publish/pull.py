"""What a published image is, read from the registry by digest, before any engine pulls it.

``smoke`` and ``deploy`` given ``REF@sha256:…`` run that reference (the engine
pulls it); what they check it against comes from here: the config digest,
which is the image ID the engine will report for it, and its environment
(LD_LIBRARY_PATH for the GPU attach). Every byte is digest-checked, and each
document's shape too: a registry is an outside source.
"""

from __future__ import annotations

from dataclasses import dataclass

from lockpipe.errors import RegistryError, UsageError
from lockpipe.jsonshape import Reader
from lockpipe.lock.refs import parse_ref

NOT_AN_IMAGE = "an index? publish gives one image manifest per target: pass its digest"
BROKEN = "the registry serves what no engine can run: republish it, or ask its owner"


@dataclass(frozen=True)
class PulledImage:
    reference: str  # REF@sha256:…, as given
    image_id: str  # the config digest: the image ID an engine shows once it pulled it
    env: dict[str, str]


def image_digest(image: str) -> str:
    """The digest of ``REF@sha256:…``; a UsageError for anything else."""
    try:
        ref = parse_ref(image)
    except ValueError as exc:
        raise UsageError(f"--image {image!r}: not an image reference ({exc})") from None
    if ref.digest is None:
        raise UsageError(f"--image {image!r}: give it by digest, REF@sha256:… (images.json)")
    return ref.digest


def config_digest(image: str, manifest: dict[str, object]) -> str:
    """The config digest an image manifest names; RegistryError naming ``image`` when the
    manifest has none (an index) or holds it in another shape."""
    from lockpipe.registry import platforms as pf

    reader = Reader(where=image, root="the manifest", error=RegistryError, fix=BROKEN)
    if reader.get(manifest, ("config",), dict, default={}) == {}:
        raise RegistryError(f"{image}: the manifest has no config ({NOT_AN_IMAGE})")
    return pf.config_digest(image, manifest, BROKEN)  # never a path into the blob URL


def read_published(image: str) -> PulledImage:
    """The image's config digest and environment; UsageError without a digest.

    The manifest and its config are checked against their digests (DigestMismatch,
    exit 9) and their shapes (RegistryError naming the reference and the path)."""
    from lockpipe.registry import platforms as pf
    from lockpipe.registry.client import registry_for
    from lockpipe.registry.push import get_manifest

    digest = image_digest(image)
    reg, ep = registry_for(image)
    body, _ = get_manifest(reg, ep.repository, digest)  # digest-checked, a JSON object
    manifest = Reader(where=image, root="the manifest", error=RegistryError).parse(body)
    config = config_digest(image, manifest)
    blob = reg.request("GET", ep.repository, f"blobs/{config}").content
    pf.check_digest(f"{image} config {config}", blob, config)
    reader = Reader(where=f"{image} config {config}", root="the config", error=RegistryError,
                    fix=BROKEN)  # fmt: skip
    doc = reader.parse(blob)
    pairs = reader.get(doc, ("config", "Env"), list, default=[])
    env = [reader.get(doc, ("config", "Env", i), str) for i in range(len(pairs))]
    return PulledImage(reference=image, image_id=config,
                       env=dict(p.split("=", 1) for p in env if "=" in p))  # fmt: skip
