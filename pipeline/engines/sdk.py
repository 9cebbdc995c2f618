"""What the docker SDK and podman-py engines share.

Both clients expose the same object model over the same (Docker-compatible)
API: ``images.get(ref).attrs``, ``.tag()``, ``containers.get(id).attrs``. The
calls that differ (build, push, run, errors) stay in each engine's module.
"""

from __future__ import annotations

from typing import Any

from pipeline.engines.base import ContainerState, env_dict, normalize_id
from pipeline.errors import EngineError


class SdkEngine:
    name: str
    client: Any

    def layers(self, ref: str) -> list[str]:
        return list(self.client.images.get(ref).attrs["RootFS"]["Layers"])

    def image_env(self, ref: str) -> dict[str, str]:
        return env_dict(self.client.images.get(ref).attrs.get("Config", {}).get("Env"))

    def tag(self, ref: str, new: str) -> None:
        repo, _, tag = new.rpartition(":")
        if not self.client.images.get(ref).tag(repo, tag):
            raise EngineError(f"{self.name} could not tag {ref} as {new}")

    def state(self, container: str) -> ContainerState:
        c = self.client.containers.get(container)
        c.reload()
        running = c.attrs["State"]["Running"]
        code = None if running else int(c.attrs["State"]["ExitCode"])
        return ContainerState(bool(running), code, normalize_id(c.attrs["Image"]))
