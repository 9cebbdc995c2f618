"""``deploy --artifacts REGISTRY/PREFIX``: mount the payloads from their OCI artifacts.

Each payload's artifact (``payloads publish``: ``PREFIX/NAME:rev-<commit>``) is resolved
to its digest and its manifest checked against the lock; on podman 5.7+ the unit then
mounts it through a ``.artifact`` unit (experimental there), elsewhere the store stays.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from lockpipe.deploy import artifact as art
from lockpipe.deploy.render import DeployInputs
from lockpipe.deploy.unit import Unit
from lockpipe.errors import DeployError
from lockpipe.lock.model import Lock
from lockpipe.log import echo
from lockpipe.publish.push import check_prefix
from lockpipe.refresh.gitsha import MAX_GIT_FILE
from lockpipe.registry import modelpack as mp
from lockpipe.registry.client import registry_for
from lockpipe.registry.push import get_manifest


def _pinned(prefix: str, lock: Lock, payload: str) -> tuple[str, list[str]]:
    """(REF@digest of the payload's artifact, what it lacks against the lock)."""
    registry, _, path_prefix = prefix.partition("/")
    p = lock.payloads[payload]
    repo = mp.repository(path_prefix, p)
    reg, ep = registry_for(f"{registry}/{repo}:{mp.tag(p)}")
    body, _ = get_manifest(reg, ep.repository, mp.tag(p))
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    layers = mp.file_layers(f"{registry}/{repo}:{mp.tag(p)}", body)
    lacks = art.artifact_lacks(p, layers)
    for file, layer in art.by_git_id(p, layers):  # small files kept in git: read and hashed
        if layer.size > MAX_GIT_FILE:
            lacks.append(f"{file.path}: {layer.size:,} bytes, more than lockpipe reads of a file "
                         f"kept in git ({MAX_GIT_FILE:,}); pin its sha256 in the lock")  # fmt: skip
            continue
        data = reg.request("GET", ep.repository, f"blobs/{layer.digest}").content
        lacks += [why for why in [art.git_lacks(file, layer, data)] if why]
    return f"{registry}/{repo}@{digest}", lacks


def with_artifacts(
    prefix: str, lock: Lock, name: str, inputs: DeployInputs
) -> tuple[DeployInputs, tuple[art.ArtifactMount, ...]]:
    """``inputs`` mounting the artifacts (and the ``.artifact`` units to write), or unchanged
    with a note where this podman cannot; DeployError when an artifact lacks a file."""
    prefix = check_prefix(prefix, "--artifacts")
    target = lock.target(name)
    clash = art.unit_clash(target, lock)
    if clash is not None and art.why_not(inputs.podman, lock, target) is None:
        raise DeployError(f"{name}: {clash}")
    refs, problems = {}, []
    for p in target.payloads:
        refs[p], lacks = _pinned(prefix, lock, p)
        problems += [f"payloads.{p}: {line}" for line in lacks]
    if problems:
        raise DeployError(
            f"{name}: the artifacts under {prefix} do not hold what the lock pins:\n  "
            + "\n  ".join(problems) + "\npublish them again: lockpipe payloads publish --to "
            f"{prefix} {' '.join(target.payloads)}"
        )  # fmt: skip
    reason = art.why_not(inputs.podman, lock, target)
    if reason is not None:
        echo(f"note: {name}: {reason}")
        return inputs, ()
    mounts = art.plan_mounts(target, lock, refs)
    echo(f"{name}: payloads mounted from their artifacts (podman's .artifact units are "
         "experimental in 5.7)", style="yellow")  # fmt: skip
    command = art.artifact_command(target, lock, mounts)
    entries = tuple(m.entry() for m in mounts)
    return replace(inputs, store=None, mounts=entries, command=command), mounts


def render_units(mounts: tuple[art.ArtifactMount, ...]) -> dict[str, Unit]:
    """file name -> the ``.artifact`` unit."""
    return {f"{m.unit}.artifact": m.render() for m in mounts}
