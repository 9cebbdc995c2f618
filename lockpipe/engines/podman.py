"""podman, driven through podman-py and podman's REST API service.

podman-py's ``images.build`` drops parameters it does not know, among them
``timestamp``; the libpod build endpoint accepts it, so the build is posted
through podman-py's own API client with a deterministic context tar.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from lockpipe.engines import sdk
from lockpipe.engines.base import (
    BuildRequest,
    EngineName,
    Log,
    Reproducibility,
    RunSpec,
    no_device_requests,
    normalize_id,
)
from lockpipe.engines.basenames import settle_first_names
from lockpipe.engines.context import context_tar
from lockpipe.engines.sdk import BUILD_HINT, PUSH_HINT, SdkEngine, sdk_call
from lockpipe.engines.stop import STOP_WAIT, BuildStop, stopped_by
from lockpipe.errors import BuildError, EngineError, EngineMissing
from lockpipe.urls import shown

ROOT_SOCKET = "unix:///run/podman/podman.sock"


def service_url() -> str:
    """LOCKPIPE_PODMAN_URL, CONTAINER_HOST, the user's socket, or root's."""
    for var in ("LOCKPIPE_PODMAN_URL", "CONTAINER_HOST"):
        if os.environ.get(var):
            return os.environ[var]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if os.getuid() != 0 and runtime:
        return f"unix://{runtime}/podman/podman.sock"
    return ROOT_SOCKET


_MARKS: dict[str, bool] = {}  # service URL -> whether its builds' RUN steps can be found


class PodmanStop(BuildStop):
    """Ctrl-C during a podman build: end its RUN step's processes, and the build with them.

    The service's API cannot cancel a build, and it runs a RUN step on to its end after
    the client went. Ending the step's processes fails the build; ``forcerm`` then has
    the service remove the build's working containers itself, so none of another build
    is touched. The processes are told from every other build's by ``cgroupparent``: a
    cgroup named for this build alone. That needs the service on this host, as root,
    with the cgroupfs manager (systemd's takes slices only), as .ci/start-services sets.
    """

    engine = "podman"

    def __init__(self, client: Any, url: str, tag: str) -> None:
        super().__init__(client, url, tag)
        self.cgroup = f"lockpipe-build-{secrets.token_hex(6)}" if marks_builds(client, url) else ""
        self.params = {"forcerm": "true"}
        if self.cgroup:
            self.params["cgroupparent"] = f"/{self.cgroup}"
        self.killed = 0

    def ask(self) -> None:
        self.poll()

    def poll(self) -> None:
        if self.cgroup:
            self.killed += kill_cgroup(self.cgroup)

    def wait_seconds(self) -> float:
        return STOP_WAIT if self.cgroup else 0.0

    def ended(self) -> str:
        if self.stream is not None and not self.stream.failed:
            return (f"podman's service finished building {self.tag} before it could be stopped "
                    "(the image stays, with no build record)")  # fmt: skip
        how = "its RUN step's processes ended; " if self.killed else ""
        return f"stopped podman's build of {self.tag}: {how}its service removed its containers"

    def left(self) -> str:
        step = "the step it runs" if self.cgroup else (
            "the RUN step it runs, whose processes cannot be told apart here"
        )  # fmt: skip
        return (f"left podman's build of {self.tag} to its service: it stops after {step}, "
                "then removes the build's working containers")  # fmt: skip


def marks_builds(client: Any, url: str) -> bool:
    """Whether the service at ``url`` puts RUN steps in a cgroup named by the request."""
    if url not in _MARKS:
        try:
            info = client.info()
        except Exception:  # an old or odd service: builds go unmarked
            info = {}
        # an answer of another shape is an odd service too: each step is a dict, or unmarked
        host = info.get("host") if isinstance(info, dict) else None
        host = host if isinstance(host, dict) else {}
        security = host.get("security")
        _MARKS[url] = (
            url.startswith("unix://")
            and host.get("cgroupManager") == "cgroupfs"
            and isinstance(security, dict)
            and security.get("rootless") is False
        )
    return _MARKS[url]


def kill_cgroup(name: str, proc: Path = Path("/proc")) -> int:
    """SIGKILL each process of a cgroup named ``name`` (in any hierarchy); how many there were."""
    killed, want = 0, os.fsencode(name)
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            # bytes: a cgroup is a folder, its name any bytes, UTF-8 or not
            lines = (proc / entry / "cgroup").read_bytes().splitlines()
        except OSError:
            continue  # it ended meanwhile
        if any(want in line.rpartition(b":")[2].split(b"/") for line in lines):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
    return killed


class PodmanEngine(SdkEngine):
    name: EngineName = "podman"

    def __init__(self, url: str | None = None, timeout: float | None = None) -> None:
        try:
            import podman
        except ImportError:
            raise EngineMissing("podman-py is not installed; pip install podman") from None
        self.url = url or service_url()
        self.timeout = timeout or sdk.API_TIMEOUT  # without one, a hung service hangs lockpipe
        # podman-py is typed, but loosely (unions of stream and value): use it as Any.
        self.client: Any = cast(Any, podman.PodmanClient(base_url=self.url, timeout=self.timeout))
        try:
            self._version = str(self.client.version()["Version"])
        except Exception as exc:
            if sdk.timed_out(exc):
                raise EngineMissing(self.no_answer("podman version", self.timeout)) from None
            raise EngineMissing(
                f"podman's API service does not answer at {self.url} ({type(exc).__name__}); "
                f"{self.start_hint()}"
            ) from None

    def start_hint(self) -> str:
        return (
            "install podman (apt-get install podman) and start its API service: "
            f"podman system service --time=0 {self.url} &"
        )

    def stuck_hint(self) -> str:
        user = "--user " if os.getuid() != 0 else ""
        return (
            f"is podman's API service running and well? restart it: systemctl {user}restart "
            f"podman.socket podman.service, or start one: podman system service --time=0 "
            f"{self.url} &"
        )

    def errors(self) -> ModuleType:
        import podman.errors

        return podman.errors

    def reproducibility(self) -> Reproducibility:
        return Reproducibility(
            True, "libpod /build with timestamp= (file and config times clamped)"
        )

    @sdk_call("build", error=BuildError, hint=BUILD_HINT)
    @stopped_by(PodmanStop)
    def build(self, req: BuildRequest, log: Log) -> str:
        for ref in settle_first_names(
            "podman", req.bases, self.first_name, lambda ref: self.pull(ref, req.platform)
        ):
            log(f"pulled {ref}: podman records a base by its first local name")
        params = {
            "t": req.tag,
            "dockerfile": req.dockerfile,
            "buildargs": json.dumps(dict(req.build_args)),
            "timestamp": str(req.timestamp),
            "platform": req.platform,
            "layers": "true",
            **({"nocache": "true"} if req.no_cache else {}),
        }
        params.update(self.stop_params())  # forcerm, and the cgroup Ctrl-C finds RUN steps by
        with context_tar(req.context, req.timestamp) as body:
            resp = self.client.api.post(
                "/build", params=params, data=body,
                headers={"Content-Type": "application/x-tar"}, stream=True,
                timeout=self.stream_timeout(),  # a RUN step may print nothing for long
            )  # fmt: skip
            image, read = None, self.build_reader(req.tag)
            for item in self.build_items(req.tag, resp):
                text = read.get(item, ("stream",), str, "")
                log(text.rstrip("\n"))
                stripped = text.strip()
                if len(stripped) == 64 and all(c in "0123456789abcdef" for c in stripped):
                    image = stripped
        if image is None:
            raise BuildError(f"podman build of {req.tag} ended without an image ID")
        return normalize_id(image)

    @sdk_call("inspect image")
    def first_name(self, ref: str) -> str | None:
        """The first name the service's storage holds for ``ref``'s image, or None if absent."""
        try:
            image_id = self.client.images.get(ref).id
        except self.errors().ImageNotFound:
            return None
        read = self._reader("list images")
        images = read.get(self.client.api.get("/images/json").json(), (), list)
        for i in range(len(images)):
            names = read.get(images, (i, "Names"), list, [])
            if read.get(images, (i, "Id"), str, "") == image_id and names:
                return read.get(images, (i, "Names", 0), str)
        return None

    @sdk_call("pull", error=BuildError)
    def pull(self, ref: str, platform: str) -> None:
        os_, _, rest = platform.partition("/")
        arch, _, variant = rest.partition("/")
        params = {"reference": ref, "policy": "always", "quiet": "true", "OS": os_, "Arch": arch,
                  **({"Variant": variant} if variant else {})}  # fmt: skip
        # quiet: nothing is read until the last layer is in, which may take long
        resp = self.client.api.post(
            "/images/pull", params=params, stream=True, timeout=self.stream_timeout()
        )
        read = self._reader(f"pull {ref}", root="a line of its answer")
        for raw in resp.iter_lines():
            item = read.parse(raw) if raw.strip() else {}
            if item.get("error"):
                raise BuildError(
                    f"podman pull {ref} failed: {read.get(item, ('error',), str).strip()}"
                )
        if resp.status_code != 200:
            raise BuildError(f"podman pull {ref}: {resp.status_code} {shown(resp.text, 300)}")

    @sdk_call("push", hint=PUSH_HINT)
    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        from lockpipe.registry.client import manifest_digest

        if ref != dest:
            self.tag(ref, dest)
        # Not podman-py's images.push: with stream=True it yields two lines of its own and
        # drops the service's answer, where a failed push says {"error": …} after a 200
        # (podman 4.3.1, measured: a refused upload streams its error, status 200).
        params = {"tlsVerify": str(tls_verify).lower(), "quiet": "false"}
        resp = self.client.api.post(  # a large layer's upload may print nothing for long
            f"/images/{dest}/push", params=params, stream=True, timeout=self.stream_timeout()
        )
        if resp.status_code != 200:
            raise EngineError(f"podman push {dest}: {resp.status_code} {shown(resp.text, 300)}")
        read = self._reader(f"push {dest}", root="a line of its answer")
        for raw in resp.iter_lines():
            item = read.parse(raw) if raw.strip() else {}
            error = read.get(item, ("error",), str, "").strip()
            if error:
                raise EngineError(f"podman push {dest} failed: {error}")
        return manifest_digest(dest, insecure=not tls_verify)

    def run_options(self, spec: RunSpec) -> dict[str, object]:
        mounts = [
            {"type": "bind", "source": str(m.source), "target": m.target, "read_only": m.read_only}
            for m in spec.mounts
        ]
        return {"mounts": mounts, **run_devices(spec)}

    @sdk_call("logs of container")
    def logs(self, container: str) -> str:
        out = self.client.containers.get(container).logs(stdout=True, stderr=True)
        return b"".join(out).decode(errors="replace")

    @sdk_call("stop container")
    def stop(self, container: str) -> None:
        from podman.errors import APIError, NotFound

        with contextlib.suppress(NotFound):
            c = self.client.containers.get(container)
            # Kill at once: a server as PID 1 ignores SIGTERM, and a forced remove
            # would wait its 10 s grace first.
            with contextlib.suppress(APIError):
                c.stop(timeout=0)
            c.remove(force=True)


def run_devices(spec: RunSpec) -> dict[str, object]:
    """podman-py's ``containers.run`` keywords for the spec's devices (CDI names or paths)."""
    no_device_requests(spec, "podman")
    return {"devices": list(spec.devices)} if spec.devices else {}
