"""Resolve one target into :class:`DeployInputs`: its pinned image, command, GPU and health.

Built targets pin the image their build record holds; external ones (frank-large) the
digest their lock entry pins. Host facts (podman's version, the image's entrypoint and
LD_LIBRARY_PATH, the GPU discovery) come in as :class:`HostFacts`, so this stays pure.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lockpipe.deploy import cdi, keys, unit
from lockpipe.deploy.external import ExternalTarget
from lockpipe.deploy.gate import Pinned
from lockpipe.deploy.render import (
    DEFAULT_BIND,
    DEFAULT_PORT_WAIT,
    DEFAULT_START_TIMEOUT,
    DeployInputs,
    Health,
    health_for,
)
from lockpipe.deploy.store import resolved
from lockpipe.errors import DeployError, GpuAttachError
from lockpipe.lock.model import Lock
from lockpipe.lock.refs import parse_ref
from lockpipe.payloads.store import payload_path
from lockpipe.smoke.gpu import GpuAttach, HostGpu, plan_gpu
from lockpipe.smoke.gpucheck import needs_gpu
from lockpipe.smoke.runner import container_command
from lockpipe.urls import shown

DeployGpuMode = Literal["manual", "cdi"]
DEPLOY_GPU_MODES: tuple[DeployGpuMode, ...] = ("manual", "cdi")


@dataclass(frozen=True, kw_only=True)
class HostFacts:
    podman: keys.Version
    image_entrypoint: tuple[str, ...] | None = None  # None: unknown (image not inspected)
    image_ld_path: str | None = None
    gpu_host: HostGpu | None = None  # discovery, for --gpu-mode manual


@dataclass(frozen=True, kw_only=True)
class DeployOptions:
    gpu_mode: DeployGpuMode = "cdi"
    bind: str = DEFAULT_BIND
    health_cmd: str | None = None  # default: per runtime, see render.health_for
    start_timeout: int = DEFAULT_START_TIMEOUT
    port_wait: int = DEFAULT_PORT_WAIT
    note: str = ""  # the smoke gate's verdict, for the header
    cdi_dirs: tuple[Path, ...] | None = None  # CDI spec dirs looked in (None: cdi.CDI_DIRS)


def _gpu(opts: DeployOptions, facts: HostFacts) -> GpuAttach:
    if opts.gpu_mode == "cdi":
        cdi.warn_if_missing(opts.cdi_dirs)
    try:
        return plan_gpu(opts.gpu_mode, engine="podman", host=facts.gpu_host,
                        image_ld_path=facts.image_ld_path)  # fmt: skip
    except GpuAttachError as exc:
        if opts.gpu_mode != "manual":
            raise
        # The unit lists this machine's device nodes and driver files; there is no
        # device list to guess for another host.
        raise GpuAttachError(
            f"{exc}\ndeploy --gpu-mode manual writes the device nodes and driver libraries "
            "of the machine that renders the unit into it, so it cannot render a unit for "
            "another host: run lockpipe deploy on the GPU host itself, or render with "
            "--gpu-mode cdi (AddDevice=nvidia.com/gpu=all, resolved at start by that host's "
            "CDI spec)"
        ) from None


def _health(opts: DeployOptions, runtime: str, port: int) -> Health:
    """--health-cmd (checked here, where the option is named), else the runtime's default."""
    if opts.health_cmd is not None:
        unit.verbatim(opts.health_cmd, "--health-cmd")
    return Health(cmd=opts.health_cmd or health_for(runtime, port))


def _bind(opts: DeployOptions) -> str:
    """--bind as an IP address; DeployError otherwise (it is written into PublishPort=)."""
    try:
        address = ipaddress.ip_address(opts.bind)
    except ValueError:
        raise DeployError(
            f"--bind {opts.bind!r} is not an IP address: give the host address to publish "
            "the port on, e.g. 127.0.0.1 (loopback, the default) or 0.0.0.0 (every interface)"
        ) from None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        # Python takes any text after '%' ('fe80::1%x]:9' was written into PublishPort=);
        # podman's --publish reads its host IP with Go's net.ParseIP, which takes no zone.
        raise DeployError(
            f"--bind {opts.bind!r} names an IPv6 zone (%{address.scope_id}), which podman's "
            "--publish does not take: give the address alone, e.g. ::1 or a global address"
        )
    return str(address)


def _common_header(name: str, facts: HostFacts, gpu: GpuAttach | None) -> list[str]:
    mode = gpu.mode if gpu is not None else "none"
    return [
        f"{name}.container: rendered by `lockpipe deploy {name}`; re-render, do not edit.",
        f"Keys checked against podman {keys.show(facts.podman)}'s quadlet; GPU: {mode}. "
        "Published on the bind address only (127.0.0.1: a local proxy or SSH tunnel "
        "exposes it).",
    ]


def inputs_for_target(
    lock: Lock, name: str, pinned: Pinned, store: Path, facts: HostFacts, opts: DeployOptions
) -> DeployInputs:
    """A built target: the record's image, the payload store mounted read-only."""
    r = pinned.record
    line = (f"Image: {r.tag} pinned by image ID (built {r.built_at} by {r.engine} "
            f"{r.engine_version}, build key {r.key[:12]}).")  # fmt: skip
    return _served(lock, name, pinned.image, line, store, facts, opts)


def require_digest(image: str) -> None:
    """DeployError unless ``image`` is a reference pinned by digest (a tag moves under the
    unit), read as smoke --image reads it: '@sha256:' in the text was enough before, so
    'Not A/Ref@sha256:zz' was written into Image=."""
    try:
        ref = parse_ref(image)
    except ValueError as exc:
        raise DeployError(f"--image {shown(image, 120)}: not an image reference ({exc})") from None
    if ref.digest is None:
        raise DeployError(f"--image {shown(image, 120)}: give it by digest, REF@sha256:… "
                          "(images.json)")  # fmt: skip


def inputs_for_published(
    lock: Lock, name: str, image: str, store: Path, facts: HostFacts, opts: DeployOptions
) -> DeployInputs:
    """A target published by digest (``--image``/``--published``): ``Image=ref@digest``,
    which podman pulls on this host instead of a build here; the rest as for a built one."""
    require_digest(image)
    line = f"Image: {image}, published by digest (lockpipe publish), pulled here, not built."
    return _served(lock, name, image, line, store, facts, opts)


def _served(
    lock: Lock, name: str, image: str, line: str, store: Path, facts: HostFacts,
    opts: DeployOptions,
) -> DeployInputs:  # fmt: skip
    target = lock.target(name)
    store = resolved(store, "the unit's")
    paths = {p: payload_path(store, lock.payloads[p]) for p in target.payloads}
    gpu = _gpu(opts, facts) if needs_gpu(target) else None
    serve = target.serve
    header = [*_common_header(name, facts, gpu), line]
    return DeployInputs(
        name=name,
        description=f"lockpipe {name}: {serve.runtime} serving {serve.model or name} "
        f"on {opts.bind}:{serve.port}",
        image=image,
        provenance=(*header, *([opts.note] if opts.note else [])),
        command=container_command(target, paths, store),
        image_entrypoint=facts.image_entrypoint,
        port=serve.port,
        podman=facts.podman,
        health=_health(opts, serve.runtime, serve.port),
        bind=_bind(opts),
        store=store if target.payloads else None,
        gpu=gpu,
        env=dict(serve.env),
        start_timeout=opts.start_timeout,
        port_wait=opts.port_wait,
    )


def inputs_for_external(ext: ExternalTarget, facts: HostFacts, opts: DeployOptions) -> DeployInputs:
    """An external target: its lock digest (LockError if absent), its env, always a GPU."""
    image = ext.pinned()
    gpu = _gpu(opts, facts)
    header = [
        *_common_header(ext.name, facts, gpu),
        f"Image: {image}, built elsewhere and pinned by digest in the lock (no build here).",
    ]
    slots = f", {ext.parallel} slots of {ext.context}" if ext.parallel and ext.context else ""
    return DeployInputs(
        name=ext.name,
        description=f"lockpipe {ext.name}: {ext.runtime} on {opts.bind}:{ext.port}{slots}",
        image=image,
        provenance=tuple(header),
        command=ext.command,
        image_entrypoint=facts.image_entrypoint,
        port=ext.port,
        podman=facts.podman,
        health=_health(opts, ext.runtime, ext.port),
        bind=_bind(opts),
        gpu=gpu,
        env=ext.env,
        start_timeout=opts.start_timeout,
        port_wait=opts.port_wait,
    )
