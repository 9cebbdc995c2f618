"""A FAKE container engine for smoke-runner tests (no engine may run in unit tests).

It implements lockpipe.engines.base.Engine: it records what the runner asks for,
and its container "runs" until stopped. Subclasses override what a test needs to fail.
"""

from __future__ import annotations

from lockpipe.engines.base import (
    BuildRequest,
    ContainerState,
    EngineName,
    Log,
    Reproducibility,
    RunSpec,
)


class FakeEngine:
    """podman as the runner sees it: records the RunSpec, the container runs until stopped."""

    name: EngineName = "podman"  # build records are per engine: named like a real one

    def __init__(self, image: str, *, running: bool = True, version: str = "5.0") -> None:
        self.image, self.running, self._version = image, running, version
        self.specs: list[RunSpec] = []
        self.stopped: list[str] = []

    def version(self) -> str:
        return self._version

    def reproducibility(self) -> Reproducibility:
        return Reproducibility(True, "fake")

    def build(self, req: BuildRequest, log: Log) -> str:
        raise AssertionError("smoke never builds")

    def image_id(self, ref: str) -> str | None:
        return self.image

    def layers(self, ref: str) -> list[str]:
        return []

    def image_env(self, ref: str) -> dict[str, str]:
        return {}

    def tag(self, ref: str, new: str) -> None:
        raise AssertionError("smoke never tags")

    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        raise AssertionError("smoke never pushes")

    def remove(self, ref: str) -> None:
        raise AssertionError("smoke never removes images")

    def run(self, spec: RunSpec) -> str:
        self.specs.append(spec)
        return "container-1"

    def logs(self, container: str) -> str:
        return "main: server is listening on http://0.0.0.0:8080\n"

    def state(self, container: str) -> ContainerState:
        return ContainerState(running=self.running, exit_code=None if self.running else 1,
                              image_id=self.image)  # fmt: skip

    def stop(self, container: str) -> None:
        self.stopped.append(container)
