"""The engine table: factories by name, and auto-detection in a fixed order."""

from __future__ import annotations

from collections.abc import Callable

from lockpipe.engines.base import Engine
from lockpipe.errors import EngineMissing, UsageError


def _buildah() -> Engine:
    from lockpipe.engines.buildah import BuildahEngine

    return BuildahEngine()


def _podman() -> Engine:
    from lockpipe.engines.podman import PodmanEngine

    return PodmanEngine()


def _docker() -> Engine:
    from lockpipe.engines.docker import DockerEngine

    return DockerEngine()


# Auto-detection tries them in this order: buildah needs no daemon.
ENGINES: dict[str, Callable[[], Engine]] = {
    "buildah": _buildah,
    "podman": _podman,
    "docker": _docker,
}


def get_engine(name: str | None = None) -> Engine:
    """The named engine, or the first one that works here; EngineMissing says what to install."""
    if name:
        if name not in ENGINES:
            raise UsageError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}")
        return ENGINES[name]()
    problems = []
    for factory in ENGINES.values():
        try:
            return factory()
        except EngineMissing as exc:
            problems.append(f"  - {exc}")
    raise EngineMissing(
        "no container engine is usable here; install one, e.g. apt-get install buildah "
        "(or podman, or docker.io), or pick one with --engine / LOCKPIPE_ENGINE:\n"
        + "\n".join(problems)
    )
