"""Deploy from the registry: payloads mounted from their OCI artifacts instead of the store.

Pure. podman 5.7 added ``.artifact`` quadlet units (``[Artifact]`` with ``Artifact=REF``,
which ``podman artifact pull``s it), marked experimental in podman-systemd.unit(5); a
``.container`` mounts one with ``Mount=type=artifact,source=NAME.artifact,destination=PATH``
(podman's ``--mount type=artifact``, where PATH is not in the image: one blob is mounted as
the file PATH, several as files in the folder PATH named by their
``org.opencontainers.image.title``, which ``payloads publish`` sets to the file's path;
measured with podman 5.8.6, tools/trixie-probe.sh artifact-mount).
Older podman keeps the store bind mount. Either way the deploy checks that what the unit
mounts holds every file of every payload the serve command names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from lockpipe.deploy import keys
from lockpipe.deploy.unit import Entry, Unit, sections, verbatim
from lockpipe.lock.model import PIN_BY_HAND, Lock, Payload, PayloadFile, Target
from lockpipe.lock.schema import PLACEHOLDER
from lockpipe.payloads.blobs import git_blob_id
from lockpipe.registry.modelpack import Layer

ARTIFACT_SINCE: keys.Version = (5, 7)
MOUNT_ROOT = "/artifacts"


@dataclass(frozen=True, kw_only=True)
class ArtifactMount:
    payload: str
    reference: str  # REGISTRY/PREFIX/NAME@sha256:… (pinned: a tag could move)
    unit: str  # the .artifact file's stem: TARGET-PAYLOAD
    sole: str | None = None  # the file of a one-file payload: its artifact has one blob

    @property
    def destination(self) -> str:
        """The folder the payload's files are in, inside the container."""
        return f"{MOUNT_ROOT}/{self.payload}"

    def entry(self) -> Entry:
        # podman mounts a one-blob artifact as a file at the destination (a folder only when
        # the image has one there), so the destination names the file itself
        target = f"{self.destination}/{self.sole}" if self.sole else self.destination
        value = f"type=artifact,source={self.unit}.artifact,destination={target}"
        return ("Mount", verbatim(value, f"payloads.{self.payload}"))

    def pull_entry(self) -> Entry:
        return ("Artifact", verbatim(self.reference, "--artifacts"))

    def render(self) -> Unit:
        """The ``.artifact`` unit that pulls the artifact before the container starts."""
        return Unit(
            header=(
                f"{self.unit}.artifact: rendered by `lockpipe deploy --artifacts`; re-render, "
                "do not edit.",
                "Quadlet .artifact units are experimental in podman 5.7 (podman-systemd.unit(5)).",
            ),
            sections=sections(
                ("Artifact", [("Artifact", verbatim(self.reference, "--artifacts"))])
            ),
        )


def why_not(podman: keys.Version, lock: Lock, target: Target) -> str | None:
    """Why this host keeps the store bind mount (a line), or None when it can mount artifacts."""
    if podman < ARTIFACT_SINCE:
        return (f"podman {keys.show(podman)} has no .artifact quadlet units (5.7+, experimental): "
                "the unit mounts the payload store")  # fmt: skip
    nested = [f"payloads.{p}" for p in target.payloads
              if any("/" in f.path for f in lock.payloads[p].files)]  # fmt: skip
    if nested:
        return (f"{', '.join(nested)} hold files in subfolders, which an artifact mount lays out "
                "flat by title: the unit mounts the payload store")  # fmt: skip
    return None


def unit_name(target: str, payload: str) -> str:
    """The stem of the ``.artifact`` unit that mounts ``payload`` into ``target``'s container."""
    return f"{target}-{payload}"


def unit_clash(target: Target, lock: Lock) -> str | None:
    """Why one of ``target``'s ``.artifact`` units would have the name of another target's
    unit for another payload (``llama-cuda`` + ``mtp-x`` and ``llama-cuda-mtp`` + ``x``), or
    None: installing one unit replaces the other, and a container mounts the wrong payload."""
    mine = {unit_name(target.name, p): p for p in target.payloads}
    for other in lock.targets.values():
        if other.name == target.name:
            continue
        for q in other.payloads:
            unit = unit_name(other.name, q)
            if unit in mine:
                p = mine[unit]
                return (f"targets.{target.name} with payloads.{p} and targets.{other.name} with "
                        f"payloads.{q} both make the unit {unit}.artifact, so installing one "
                        "replaces the other and a container mounts the wrong payload; rename "
                        f"payloads.{p} or payloads.{q} in the lock")  # fmt: skip
    return None


def plan_mounts(
    target: Target, lock: Lock, references: Mapping[str, str]
) -> tuple[ArtifactMount, ...]:
    """One mount per payload of ``target``; ``references``: payload -> pinned reference."""

    def sole(p: Payload) -> str | None:
        return p.files[0].path if len(p.files) == 1 else None

    return tuple(
        ArtifactMount(payload=p, reference=references[p], unit=unit_name(target.name, p),
                      sole=sole(lock.payloads[p]))
        for p in target.payloads
    )  # fmt: skip


def artifact_command(
    target: Target, lock: Lock, mounts: tuple[ArtifactMount, ...]
) -> tuple[str, ...]:
    """The serve command with each placeholder at its artifact mount: ``{payload-dir:N}`` the
    mount's folder, ``{payload:N}`` the file in it (a snapshot's ``{payload:N}`` is refused
    earlier, by the store path's rules)."""
    where = {m.payload: m.destination for m in mounts}

    def inside(match: re.Match[str]) -> str:
        name = match.group(2)
        folder = where[name]
        payload = lock.payloads[name]
        return folder if match.group(1) or payload.snapshot else f"{folder}/{payload.filename}"

    return tuple(PLACEHOLDER.sub(inside, arg) for arg in target.serve.command)


def artifact_lacks(payload: Payload, layers: Mapping[str, Layer]) -> list[str]:
    """The files of ``payload`` its artifact's manifest does not hold as the lock pins them.
    A file pinned by its git blob id alone (:func:`by_git_id`) is checked by its bytes; one
    pinned by nothing cannot be checked, so it is one too (the store refuses it as well)."""
    out = []
    for f in payload.files:
        layer = layers.get(f.path)
        if layer is None:
            out.append(f"{f.path}: not in the artifact")
        elif f.size is not None and layer.size != f.size:
            out.append(f"{f.path}: {layer.size:,} bytes in the artifact, the lock pins {f.size:,}")
        elif f.sha256 and layer.digest != f"sha256:{f.sha256}":
            out.append(f"{f.path}: {layer.digest} in the artifact, the lock pins sha256:{f.sha256}")
        elif not f.sha256 and not f.git_sha1:
            out.append(f"{f.path}: the lock pins no sha256 or git_sha1 for it, so no copy of it "
                       f"can be checked; {PIN_BY_HAND}")  # fmt: skip
    return out


def by_git_id(payload: Payload, layers: Mapping[str, Layer]) -> list[tuple[PayloadFile, Layer]]:
    """The files whose artifact layer only their bytes can check: pinned by git blob id
    alone (files the Hub keeps in git), which the layer's sha256 digest cannot be compared
    with. Only files the manifest holds at the pinned size."""
    return [
        (f, layers[f.path]) for f in payload.files
        if not f.sha256 and f.git_sha1 and f.path in layers
        and (f.size is None or layers[f.path].size == f.size)
    ]  # fmt: skip


def git_lacks(file: PayloadFile, layer: Layer, data: bytes) -> str | None:
    """What is wrong with ``data``, the registry's blob of ``layer``, as ``file``'s bytes."""
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != layer.digest:
        return f"{file.path}: the registry answered the blob {layer.digest} with bytes of {got}"
    blob = git_blob_id(data)
    if blob != file.git_sha1:
        return f"{file.path}: git blob {blob} in the artifact, the lock pins {file.git_sha1}"
    return None
