"""The small interface every engine implements, and the values it exchanges.

A BuildPlan never knows which engine runs it: build args and the timestamp
reach every engine in the same BuildRequest, and labels reach every engine
as one LABEL line in the staged Dockerfile (see context.stage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, get_args

from lockpipe.errors import GpuAttachError
from lockpipe.jsonshape import Reader
from lockpipe.lock.refs import DIGEST_RE

IMAGE_ID = DIGEST_RE  # an image ID, as every engine gives it, has a digest's shape

EngineName = Literal["buildah", "podman", "docker"]
GpuMode = Literal["docker-gpus", "cdi", "manual"]
GPU_MODES: tuple[GpuMode, ...] = get_args(GpuMode)


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    context: Path
    dockerfile: str
    tag: str
    build_args: Mapping[str, str]
    timestamp: int
    platform: str
    bases: tuple[str, ...] = ()  # the pinned references the FROM lines name (basenames.py)
    no_cache: bool = False  # every step runs again: what proving reproducibility needs


@dataclass(frozen=True)
class Reproducibility:
    """Whether this engine's builds of the same input give the same digest, and why."""

    reproducible: bool
    how: str


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True)
class DeviceRequest:
    """docker's HostConfig.DeviceRequests entry (Engine API >= 1.40)."""

    driver: str = ""
    count: int = 0
    device_ids: tuple[str, ...] = ()
    capabilities: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    image: str
    command: tuple[str, ...] = ()
    name: str | None = None
    ports: Mapping[int, int] = field(default_factory=dict)  # container port -> host port
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] | None = None
    devices: tuple[str, ...] = ()  # host device paths, or CDI names (nvidia.com/gpu=all)
    device_requests: tuple[DeviceRequest, ...] = ()  # docker only


@dataclass(frozen=True)
class ContainerState:
    running: bool
    exit_code: int | None
    image_id: str


Log = Callable[[str], None]


class Engine(Protocol):
    @property
    def name(self) -> EngineName:
        """buildah, podman or docker: part of every build key and record path."""

    def version(self) -> str:
        """The engine's version string, part of every build key."""

    def reproducibility(self) -> Reproducibility: ...

    def build(self, req: BuildRequest, log: Log) -> str:
        """Build and tag ``req.tag``; return the image ID (``sha256:…``)."""

    def image_id(self, ref: str) -> str | None:
        """The local image ID of ``ref``, or None when it is absent."""

    def layers(self, ref: str) -> list[str]:
        """The image's layer diff IDs, base first."""

    def image_env(self, ref: str) -> dict[str, str]:
        """The image's configured environment (its ENV lines and its bases')."""

    def tag(self, ref: str, new: str) -> None: ...

    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        """Push ``ref`` to ``dest``; return the registry's manifest digest."""

    def remove(self, ref: str) -> None: ...

    def run(self, spec: RunSpec) -> str:
        """Start a detached container; return its ID."""

    def logs(self, container: str) -> str: ...

    def state(self, container: str) -> ContainerState:
        """Whether it runs, its exit code once it stopped, and the image it runs."""

    def stop(self, container: str) -> None:
        """Stop and remove the container; a missing one is not an error."""


def env_dict(pairs: list[str] | None) -> dict[str, str]:
    """``["K=V", …]`` as a dict."""
    return dict(p.split("=", 1) for p in pairs or [] if "=" in p)


def env_of(read: Reader, doc: object, path: tuple[str, ...]) -> dict[str, str]:
    """The ``["K=V", …]`` list at ``path`` in an engine's answer ``doc`` as a dict (absent or
    null: none); a list of another shape is ``read``'s error."""
    count = len(read.get(doc, path, list, []))
    return env_dict([read.get(doc, (*path, i), str) for i in range(count)])


def no_device_requests(spec: RunSpec, engine: str) -> None:
    """Refuse docker device requests on an engine that has none (podman, buildah)."""
    if spec.device_requests:
        raise GpuAttachError(
            f"the {engine} engine cannot send docker device requests (--gpus); "
            "use --gpu-mode cdi or manual"
        )


def normalize_id(image_id: str) -> str:
    return image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"


def checked_id(image_id: object, read: Reader) -> str:
    """``image_id`` as ``sha256:<64 hex>``, what a build returns and its record pins; else
    ``read``'s error (the engine's answer): a tag or a path must never pass for an ID."""
    full = normalize_id(image_id) if isinstance(image_id, str) else ""
    if not IMAGE_ID.match(full):
        raise read.fail(f"the image ID is {image_id!r}, not sha256:<64 hex>")
    return full
