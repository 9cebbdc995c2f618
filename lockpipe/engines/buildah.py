"""buildah, driven through its CLI (``buildah bud``, ``push``, ``inspect``).

Builds use ``--isolation chroot`` (works without a daemon or user
namespaces on these hosts) and ``--timestamp``, which makes two builds of
the same input byte-identical. buildah has no long-running containers, so
run/logs/stop go through podman's CLI, which shares buildah's image storage.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from lockpipe import cmd
from lockpipe.engines.base import (
    BuildRequest,
    ContainerState,
    EngineName,
    Log,
    Reproducibility,
    RunSpec,
    env_dict,
    no_device_requests,
    normalize_id,
)
from lockpipe.engines.basenames import settle_first_names
from lockpipe.errors import BuildError, EngineError


class BuildahEngine:
    name: EngineName = "buildah"

    def __init__(self) -> None:
        cmd.which("buildah")

    def version(self) -> str:
        out = cmd.call(["buildah", "version", "--json"], quiet=True, stdout_only=True)
        return str(json.loads(out)["version"])

    def reproducibility(self) -> Reproducibility:
        return Reproducibility(True, "buildah bud --timestamp (file and config times clamped)")

    def build(self, req: BuildRequest, log: Log) -> str:
        for ref in settle_first_names("buildah", req.bases, self.first_name, self.pull):
            log(f"pulled {ref}: buildah records a base by its first local name")
        with tempfile.TemporaryDirectory() as tmp:
            iidfile = Path(tmp) / "iid"
            args = [
                "buildah", "bud", "--isolation", "chroot", "--layers",
                "--timestamp", str(req.timestamp), "--platform", req.platform,
                "--iidfile", str(iidfile), "-f", str(req.context / req.dockerfile),
                "-t", req.tag, *(["--no-cache"] if req.no_cache else []),
            ]  # fmt: skip
            for k, v in sorted(req.build_args.items()):
                args += ["--build-arg", f"{k}={v}"]
            cmd.call([*args, str(req.context)], on_line=log, error=BuildError)
            return normalize_id(iidfile.read_text().strip())

    def image_id(self, ref: str) -> str | None:
        try:
            out = cmd.call(
                ["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", ref],
                quiet=True,
                stdout_only=True,
            )
        except EngineError:
            return None
        return normalize_id(out.strip())

    def first_name(self, ref: str) -> str | None:
        """The first name local storage holds for ``ref``'s image, or None when it is absent."""
        try:
            out = cmd.call(
                ["buildah", "inspect", "--type", "image", "--format", "{{.FromImage}}", ref],
                quiet=True,
                stdout_only=True,
            )
        except EngineError:
            return None
        return out.strip() or None

    def pull(self, ref: str) -> None:
        cmd.call(["buildah", "pull", "--policy", "always", "--quiet", ref], error=BuildError)

    def layers(self, ref: str) -> list[str]:
        out = cmd.call(["buildah", "inspect", "--type", "image", ref], quiet=True, stdout_only=True)
        return list(json.loads(out)["OCIv1"]["rootfs"]["diff_ids"])

    def image_env(self, ref: str) -> dict[str, str]:
        out = cmd.call(["buildah", "inspect", "--type", "image", ref], quiet=True, stdout_only=True)
        return env_dict(json.loads(out)["OCIv1"]["config"].get("Env"))

    def tag(self, ref: str, new: str) -> None:
        cmd.call(["buildah", "tag", ref, new])

    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        with tempfile.TemporaryDirectory() as tmp:
            digestfile = Path(tmp) / "digest"
            cmd.call([
                "buildah", "push", f"--tls-verify={str(tls_verify).lower()}",
                "--digestfile", str(digestfile), ref, f"docker://{dest}",
            ])  # fmt: skip
            return digestfile.read_text().strip()

    def remove(self, ref: str) -> None:
        cmd.call(["buildah", "rmi", "--force", ref])

    # buildah's containers are build containers; serving ones are podman's.
    def run(self, spec: RunSpec) -> str:
        return cmd.call(run_argv(spec), stdout_only=True).strip().splitlines()[-1]

    def logs(self, container: str) -> str:
        return cmd.call(["podman", "logs", container], quiet=True)

    def state(self, container: str) -> ContainerState:
        out = cmd.call(
            ["podman", "inspect", "--type", "container", container], quiet=True, stdout_only=True
        )
        info = json.loads(out)[0]
        running = bool(info["State"]["Running"])
        code = None if running else int(info["State"]["ExitCode"])
        return ContainerState(running, code, normalize_id(info["Image"]))

    def stop(self, container: str) -> None:
        cmd.call(["podman", "rm", "--force", "--ignore", "--time", "0", container], quiet=True)


def run_argv(spec: RunSpec) -> list[str]:
    """The ``podman run -d`` command line for ``spec``."""
    argv = ["podman", "run", "--detach"]
    if spec.name:
        argv += ["--name", spec.name]
    for inner, outer in sorted(spec.ports.items()):
        argv += ["--publish", f"127.0.0.1:{outer}:{inner}"]
    for m in spec.mounts:
        ro = ",ro=true" if m.read_only else ""
        argv += ["--mount", f"type=bind,src={m.source},dst={m.target}{ro}"]
    for k, v in sorted(spec.env.items()):
        argv += ["--env", f"{k}={v}"]
    if spec.entrypoint is not None:
        argv += ["--entrypoint", json.dumps(list(spec.entrypoint))]
    no_device_requests(spec, "buildah")
    for d in spec.devices:
        argv += ["--device", d]
    return [*argv, spec.image, *spec.command]
