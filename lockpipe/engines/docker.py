"""docker, driven through the docker SDK (docker-py).

docker-py's ``images.build`` only reaches the classic builder, which has no
``RUN --mount``; the daemon's /build endpoint runs BuildKit when asked with
``version=2`` and an uploaded context tar, so the build is posted through
the SDK's API client. Everything else uses the SDK's high-level calls.

That post goes through the SDK's private ``APIClient._post``/``_url`` (its public
``build()`` cannot ask for BuildKit); they are checked before use, and the SDK
range they are known in is SUPPORTED_SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

from lockpipe.engines import sdk
from lockpipe.engines.base import (
    BuildRequest,
    EngineName,
    Log,
    Reproducibility,
    RunSpec,
    checked_id,
)
from lockpipe.engines.buildkit import Progress
from lockpipe.engines.context import context_tar
from lockpipe.engines.sdk import BUILD_HINT, PUSH_HINT, SdkEngine, sdk_call
from lockpipe.engines.stop import BuildStop, stopped_by
from lockpipe.errors import BuildError, EngineError, EngineMissing
from lockpipe.lock.refs import DIGEST_RE

# BuildKit honours SOURCE_DATE_EPOCH from v0.11, first shipped in docker 23.
SOURCE_DATE_EPOCH_SINCE = 23
# The image exporter's rewrite-timestamp=true (clamp layer file mtimes too) came with
# BuildKit v0.13 (moby/buildkit#4057), which docker 26.0 embeds; Debian 13 has 26.1.
REWRITE_TIMESTAMP_SINCE = 26
REWRITE_OUTPUT = [{"Type": "moby", "Attrs": {"rewrite-timestamp": "true"}}]
DEFAULT_HOST = "unix:///var/run/docker.sock"
CONTAINERD_STORE = "io.containerd.snapshotter.v1"  # DriverStatus driver-type of that store
# The docker SDK versions whose private APIClient._post/_url the build was tested with.
SUPPORTED_SDK = ">=7.1,<8"


class DockerStop(BuildStop):
    """Ctrl-C during a docker build: cancel it by its ``buildid`` and wait for dockerd.

    dockerd cancels a build whose connection closed, too, but then nothing reports
    when its RUN processes are gone; ``POST /build/cancel`` leaves the answer open
    until they are. A daemon without it (podman's docker API) is left the disconnect.
    """

    engine = "docker"

    def __init__(self, client: Any, url: str, tag: str) -> None:
        super().__init__(client, url, tag)
        self.params = {"buildid": uuid.uuid4().hex}
        self.cancelled = False

    def ask(self) -> None:
        try:
            post, url = private_post(self.client.api)
            answer = post(url("/build/cancel"), params={"id": self.params["buildid"]}, timeout=10)
            answer.raise_for_status()
            self.cancelled = True
        except Exception:  # the disconnect cancels it all the same
            self.cancelled = False

    def wait_seconds(self) -> float:
        return super().wait_seconds() if self.cancelled else 0.0

    def ended(self) -> str:
        return f"cancelled docker's build of {self.tag}: dockerd ended its steps"

    def left(self) -> str:
        return f"left docker's build of {self.tag} to dockerd, which cancels it as we disconnect"


class DockerEngine(SdkEngine):
    name: EngineName = "docker"

    def __init__(self, url: str | None = None) -> None:
        try:
            import docker
        except ImportError:
            raise EngineMissing(
                f"the docker SDK is not installed; pip install 'docker{SUPPORTED_SDK}'"
            ) from None

        self.url = url or os.environ.get("DOCKER_HOST") or DEFAULT_HOST
        self.timeout = timeout = sdk.API_TIMEOUT  # the SDK's default, named: all but /build
        try:
            self.client = (
                docker.DockerClient(base_url=url, timeout=timeout)
                if url
                else docker.from_env(timeout=timeout)
            )
            self._version = str(self.client.version()["Version"])
        except Exception as exc:
            if sdk.timed_out(exc):
                raise EngineMissing(self.no_answer("docker version", self.timeout)) from None
            raise EngineMissing(
                f"dockerd does not answer at {self.url} ({type(exc).__name__}); {self.start_hint()}"
            ) from None

    def start_hint(self) -> str:
        return (
            "install docker.io (apt-get install docker.io) and start dockerd, "
            "or point DOCKER_HOST at a running one"
        )

    def errors(self) -> ModuleType:
        import docker.errors

        return docker.errors

    def reproducibility(self) -> Reproducibility:
        major = dockerd_major(self._version)
        if major >= REWRITE_TIMESTAMP_SINCE:
            # Asked for, not claimed: measured on Debian 13's dockerd 26.1.5 (docs/debian13.md),
            # its default (graphdriver) image store clamps the config's times to
            # SOURCE_DATE_EPOCH but ignores rewrite-timestamp (moby/buildkit#4986), so
            # files a RUN step writes keep the build clock's mtimes.
            return Reproducibility(
                False,
                f"dockerd {self._version}: SOURCE_DATE_EPOCH clamps the image config's times "
                "and rewrite-timestamp=true is asked for, but dockerd's graphdriver image store "
                "ignores it (moby/buildkit#4986; measured on 26.1.5): files written by RUN keep "
                "the build clock's mtimes",
            )
        if major < SOURCE_DATE_EPOCH_SINCE:
            return Reproducibility(
                False,
                f"dockerd {self._version}: its BuildKit predates SOURCE_DATE_EPOCH support, "
                "so two builds of the same input get different timestamps and digests",
            )
        return Reproducibility(
            False,
            f"dockerd {self._version}: SOURCE_DATE_EPOCH is passed to BuildKit, but layer "
            "mtimes are only rewritten by exporters the /build API cannot select; unverified",
        )

    @sdk_call("build", error=BuildError, hint=BUILD_HINT)
    @stopped_by(DockerStop)
    def build(self, req: BuildRequest, log: Log) -> str:
        params = {
            "version": "2",
            "t": req.tag,
            "dockerfile": req.dockerfile,
            "buildargs": json.dumps(dict(req.build_args)),
            "platform": req.platform,
            "rm": "1",
            **({"nocache": "1"} if req.no_cache else {}),
            **rewrite_params(self._version),
        }
        params.update(self.stop_params())  # the build ID Ctrl-C cancels it by
        self._refuse_containerd_store()
        post, url = private_post(self.client.api)
        image = None
        progress = Progress()
        with context_tar(req.context, req.timestamp) as body:
            resp = post(  # the SDK's public build() cannot request BuildKit
                url("/build"), params=params, data=body,
                headers={"Content-Type": "application/x-tar"}, stream=True,
                timeout=None,  # deliberate: a RUN step may print nothing for long; Ctrl-C stops
            )  # fmt: skip
            read = self.build_reader(req.tag)
            for item in self.build_items(req.tag, resp):
                if item.get("id") == "moby.image.id":
                    image = read.get(item, ("aux", "ID"), str)
                elif item.get("id") == "moby.buildkit.trace":
                    for line in progress.lines(read.get(item, ("aux",), str, "")):
                        log(line)
                elif "stream" in item:
                    log(read.get(item, ("stream",), str).rstrip("\n"))
        if image is None:
            raise BuildError(f"docker build of {req.tag} ended without an image ID")
        return checked_id(image, read)

    def _refuse_containerd_store(self) -> None:
        """dockerd's containerd image store cannot read a build context posted as a tar
        (moby/moby#47717, measured on 26.1.5): say so before a build fails obscurely."""
        info, read = self.client.info(), self._reader("info")
        pairs = read.get(info, ("DriverStatus",), list, [])
        status = {
            read.get(info, ("DriverStatus", i, 0), str): read.get(info, ("DriverStatus", i, 1), str)
            for i in range(len(pairs))
            if len(read.get(info, ("DriverStatus", i), list)) == 2
        }
        if status.get("driver-type") == CONTAINERD_STORE:
            raise EngineError(
                f"dockerd {self._version} at {self.url} uses the containerd image store, which "
                "cannot read a build context sent over the API (moby/moby#47717); turn off "
                '"containerd-snapshotter" in /etc/docker/daemon.json, or use --engine buildah '
                "or podman"
            )

    @sdk_call("push", hint=PUSH_HINT)
    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        # dockerd decides TLS itself: loopback registries are insecure by default.
        del tls_verify
        if ref != dest:
            self.tag(ref, dest)
        repo, _, tag = dest.rpartition(":")
        digest = None
        read = self._reader(f"push {dest}", root="a line of its answer")
        for item in self.client.images.push(repo, tag, stream=True, decode=True):
            item = read.get(item, (), dict)
            if item.get("error"):
                raise EngineError(f"docker push {dest} failed: {item['error']}")
            digest = read.get(item, ("aux", "Digest"), str, "") or digest
        if digest is None:
            raise EngineError(f"docker push {dest} reported no digest")
        if not DIGEST_RE.match(digest):
            raise read.fail(f"the digest is {digest!r}, not sha256:<64 hex>")
        return digest

    def run_options(self, spec: RunSpec) -> dict[str, object]:
        from docker.types import Mount

        mounts = [
            Mount(m.target, str(m.source), "bind", read_only=m.read_only) for m in spec.mounts
        ]
        return {"mounts": mounts, **run_devices(spec)}

    @sdk_call("logs of container")
    def logs(self, container: str) -> str:
        return bytes(self.client.containers.get(container).logs()).decode(errors="replace")

    @sdk_call("stop container")
    def stop(self, container: str) -> None:
        from docker.errors import NotFound

        with contextlib.suppress(NotFound):
            self.client.containers.get(container).remove(force=True)


def dockerd_major(version: str) -> int:
    """The major version of a dockerd version string (``26.1.5+dfsg1`` → 26)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def rewrite_params(version: str) -> dict[str, str]:
    """The /build ``outputs`` that ask BuildKit to clamp layer file times, where it can."""
    if dockerd_major(version) < REWRITE_TIMESTAMP_SINCE:
        return {}
    return {"outputs": json.dumps(REWRITE_OUTPUT)}


def private_post(api: Any) -> tuple[Callable[..., Any], Callable[..., str]]:
    """The SDK's private ``APIClient._post`` and ``_url``, or EngineError naming the range."""
    post, url = getattr(api, "_post", None), getattr(api, "_url", None)
    if callable(post) and callable(url):
        return post, url
    import docker

    raise EngineError(
        f"docker SDK {docker.__version__} has no APIClient._post/_url, which the BuildKit "
        f"build posts through; install a supported version: pip install 'docker{SUPPORTED_SDK}'"
    )


def run_devices(spec: RunSpec) -> dict[str, object]:
    """The docker SDK's ``containers.run`` keywords for the spec's devices and requests."""
    out: dict[str, object] = {}
    if spec.devices:
        # A bare path means the same path inside, with "rwm" cgroup permissions.
        out["devices"] = list(spec.devices)
    if spec.device_requests:
        # The SDK turns each dict into docker.types.DeviceRequest(**dict).
        out["device_requests"] = [
            {
                "driver": r.driver,
                "count": r.count,
                "device_ids": list(r.device_ids),
                "capabilities": [list(c) for c in r.capabilities],
            }
            for r in spec.device_requests
        ]
    return out
