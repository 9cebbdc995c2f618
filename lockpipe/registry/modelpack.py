"""The CNCF ModelPack artifact of one payload: media types, config, manifest, and reading one.

Pure. Media types and annotation keys are the spec's own (modelpack/model-spec,
``specs-go/v1/mediatype.go`` and ``annotations.go``; the config's shape is
``schema/config-schema.json``, whose ``additionalProperties: false`` is why the
Hub repository and revision sit in the manifest's annotations and the config's
``descriptor``, never in fields of our own). One uncompressed ``raw`` layer per
file, so a layer's digest is the file's sha256: the lock's own pin.

The manifest is deterministic (no time in it): the same payload always gives the
same bytes, so a re-run puts the same digest under the same tag.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import RegistryError, UsageError
from lockpipe.jsonshape import Reader
from lockpipe.lock.model import Payload
from lockpipe.urls import shown

ARTIFACT_TYPE = "application/vnd.cncf.model.manifest.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.cncf.model.config.v1+json"
WEIGHT_RAW = "application/vnd.cncf.model.weight.v1.raw"
WEIGHT_CONFIG_RAW = "application/vnd.cncf.model.weight.config.v1.raw"
DOC_RAW = "application/vnd.cncf.model.doc.v1.raw"
RAW_TYPES = frozenset(
    {
        WEIGHT_RAW,
        WEIGHT_CONFIG_RAW,
        DOC_RAW,
        "application/vnd.cncf.model.code.v1.raw",
        "application/vnd.cncf.model.dataset.v1.raw",
    }
)
FILEPATH = "org.cncf.model.filepath"
TITLE = "org.opencontainers.image.title"  # what oras names a pulled file by
SOURCE = "org.opencontainers.image.source"
REVISION = "org.opencontainers.image.revision"
PAYLOAD = "io.github.lockpipe.payload"  # the lock's name, as images carry io.github.lockpipe.*
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth", ".onnx")
DOC_NAMES = ("readme", "license", "notice")
# distribution's repository name grammar, one path component
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class Layer:
    """One file of the payload as a raw layer."""

    path: str  # inside the snapshot, forward slashes
    digest: str  # sha256:<hex> of the bytes
    size: int

    @property
    def media_type(self) -> str:
        return layer_media_type(self.path)


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """What ``payloads publish`` puts in the registry for one payload."""

    repository: str  # PREFIX-path/NAME (without the registry host)
    tag: str  # rev-<commit>
    config: bytes
    manifest: bytes
    layers: tuple[Layer, ...]


def layer_media_type(path: str) -> str:
    """Weights, documentation, or the weights' configuration (tokenizer, config.json…)."""
    base = path.rsplit("/", 1)[-1].lower()
    if base.endswith(WEIGHT_SUFFIXES):
        return WEIGHT_RAW
    if base.split(".", 1)[0] in DOC_NAMES or base.endswith(".md"):
        return DOC_RAW
    return WEIGHT_CONFIG_RAW


def repository(path_prefix: str, payload: Payload) -> str:
    """``PREFIX/NAME``: one repository per lock payload; UsageError if the name cannot be one."""
    name = payload.name
    if not _COMPONENT.fullmatch(name):
        raise UsageError(
            f"payloads.{name}: not a registry repository name (lowercase letters, digits and "
            "single . _ - between them); rename the payload in the lock to publish it"
        )
    return f"{path_prefix.strip('/')}/{name}" if path_prefix.strip("/") else name


def tag(payload: Payload) -> str:
    """``rev-<commit>``: the revision names the tag, so a new revision never moves an old one."""
    if not payload.revision:
        raise UsageError(f"payloads.{payload.name}: no revision pinned; pin it before publishing")
    return f"rev-{payload.revision}"


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_doc(payload: Payload, layers: Sequence[Layer], source_url: str) -> dict[str, Any]:
    """The ModelPack config: what the lock knows, nothing guessed."""
    settings: dict[str, Any] = {"format": payload.format}
    quant = payload.expect.get("quantization")
    if isinstance(quant, Mapping) and isinstance(quant.get("format"), str):
        settings["quantization"] = quant["format"]
    descriptor = {"name": payload.name, "sourceURL": source_url, "revision": payload.revision}
    return {
        "descriptor": descriptor,
        "modelfs": {"type": "layers", "diffIds": [x.digest for x in layers]},
        "config": settings,
    }


def artifact(
    path_prefix: str, payload: Payload, layers: Sequence[Layer], source_url: str
) -> Artifact:
    """The config and manifest of ``payload`` whose files are ``layers`` (in the lock's order)."""
    config = _dumps(config_doc(payload, layers, source_url))
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": _sha(config), "size": len(config)},
        "layers": [
            {
                "mediaType": x.media_type,
                "digest": x.digest,
                "size": x.size,
                "annotations": {FILEPATH: x.path, TITLE: x.path},
            }
            for x in layers
        ],
        "annotations": {
            SOURCE: source_url,
            REVISION: payload.revision or "",
            PAYLOAD: payload.name,
        },
    }
    return Artifact(
        repository=repository(path_prefix, payload),
        tag=tag(payload),
        config=config,
        manifest=_dumps(manifest),
        layers=tuple(layers),
    )


def file_layers(where: str, manifest: bytes) -> dict[str, Layer]:
    """path -> layer of a manifest another client may have pushed; only raw layers count.

    A layer is named by ``org.cncf.model.filepath``, else ``org.opencontainers.image.title``
    (what ``oras push`` writes). A tar or compressed layer, or one without a name, is
    skipped: its digest is not a file's sha256, so it cannot stand for a pin. A manifest
    of another shape (no list of layers, a layer that is not an object, a named layer
    whose digest is not ``sha256:<64 hex>`` or whose size is not a count) is a
    RegistryError naming ``where`` and the key: the registry is broken, and nothing of it
    is taken for a file.
    """
    fix = "the registry is broken, or another client pushed a malformed manifest"
    read = Reader(where=where, root="the manifest", error=RegistryError, fix=fix)
    doc = read.parse(manifest)
    out: dict[str, Layer] = {}
    for i in range(len(read.get(doc, ("layers",), list))):
        read.get(doc, ("layers", i), dict)
        notes = read.get(doc, ("layers", i, "annotations"), dict, {})
        path = notes.get(FILEPATH) or notes.get(TITLE)
        title = notes.get(TITLE)
        if isinstance(title, str) and title and path != title:
            # podman mounts an artifact's layer as the file its title names: a layer whose
            # filepath and title differ would be checked as one file and mounted as another
            raise read.fail(f"layers[{i}] names the file {shown(path, 80)} in {FILEPATH} but "
                            f"{shown(title, 80)} in {TITLE}, which podman mounts it as"
                            )  # fmt: skip
        mtype = read.get(doc, ("layers", i, "mediaType"), str, "")
        raw = mtype in RAW_TYPES or not mtype.endswith(("tar", "gzip", "zstd"))
        if not (isinstance(path, str) and raw):
            continue
        digest = read.get(doc, ("layers", i, "digest"), str)
        size = read.get(doc, ("layers", i, "size"), int)
        if not _SHA256.fullmatch(digest) or size < 0:
            bad = f"digest {digest!r}" if size >= 0 else f"size {size}"
            raise read.fail(f"layers[{i}] ({path}) has the {bad}, not a sha256 and a size")
        if path in out:  # one of the two is mounted, the other checked
            raise read.fail(f"two layers name the file {shown(path, 80)}")
        out[path] = Layer(path=path, digest=digest, size=size)
    return out
