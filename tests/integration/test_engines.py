"""Each engine builds, rebuilds, pushes and no-ops a real image from a pinned base."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from lockpipe.engines import get_engine
from lockpipe.engines.base import BuildRequest, Engine, Log
from lockpipe.errors import BuildError, EngineError, EngineMissing
from lockpipe.imagebuild.plan import LABEL_PREFIX
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import load_lock
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = pytest.mark.integration

DOCKERFILE = """\
ARG BASE
FROM ${BASE}
ARG GREETING
RUN echo "${GREETING} from $(uname -s)" > /built.txt && cat /built.txt
"""


@dataclass
class CountingEngine:
    """The real engine, with its build calls counted (a spy, not a fake)."""

    inner: Engine
    builds: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def build(self, req: BuildRequest, log: Log) -> str:
        self.builds.append(req.tag)
        return self.inner.build(req, log)


def _lock(tmp_path: Path, base: tuple[str, str], engine: str) -> Path:
    document = doc()
    ref, digest = base
    document["bases"]["busybox"] = {"ref": ref, "digest": digest}
    document["targets"]["app"]["tag"] = f"localhost/lockpipe-test/app-{engine}:1"
    return make_repo(tmp_path, document, DOCKERFILE)


def test_build_twice_push_and_noop(
    engine: Engine, busybox_base: tuple[str, str], registry: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    lock = load_lock(_lock(tmp_path, busybox_base, engine.name))
    spy = CountingEngine(engine)
    settings = Settings(state=tmp_path / "state", cache=tmp_path / "cache", force=True)

    first = build_target(lock, "app", spy, settings)  # type: ignore[arg-type]
    second = build_target(lock, "app", spy, settings)  # type: ignore[arg-type]
    assert first.built and second.built and len(spy.builds) == 2
    report = capsys.readouterr().err
    if engine.name in ("buildah", "podman"):
        assert first.record.reproducible and second.record.reproducible
        assert first.record.image_id == second.record.image_id, "same input, different image"
        assert "reproducible: " in report
    else:
        # This dockerd's BuildKit cannot clamp timestamps: the pipeline must say so.
        assert not first.record.reproducible
        assert "NOT reproducible" in report
        assert "SOURCE_DATE_EPOCH" in first.record.reproducible_how

    # Labels and build args reached the image the same way on every engine.
    tag = lock.target("app").tag
    assert engine.image_id(tag) == second.record.image_id

    # The no-op path: nothing changed and the image is present, so no build call.
    settings = Settings(state=tmp_path / "state", cache=tmp_path / "cache")
    noop = build_target(lock, "app", spy, settings)  # type: ignore[arg-type]
    assert not noop.built and len(spy.builds) == 2
    assert noop.record == second.record

    # Push to the loopback registry; the registry serves the digest we were given.
    dest = f"{registry}/lockpipe-test/app-{engine.name}:1"
    digest = engine.push(tag, dest, tls_verify=False)
    head = requests.head(
        f"http://{registry}/v2/lockpipe-test/app-{engine.name}/manifests/1",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json, "
                           "application/vnd.docker.distribution.manifest.v2+json"},
        timeout=10,
    )  # fmt: skip
    assert head.headers["Docker-Content-Digest"] == digest


def test_labels_record_the_lock_inputs(
    engine: Engine, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    lock = load_lock(_lock(tmp_path, busybox_base, engine.name))
    outcome = build_target(
        lock, "app", engine, Settings(state=tmp_path / "s", cache=tmp_path / "c", force=True)
    )
    labels = _labels(engine, lock.target("app").tag)
    ref, digest = busybox_base
    assert labels[f"{LABEL_PREFIX}.base.busybox"] == f"{ref}@{digest}"
    assert labels[f"{LABEL_PREFIX}.build-key"] == outcome.record.key
    assert labels["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"


def _labels(engine: Engine, tag: str) -> dict[str, str]:
    if engine.name == "buildah":
        import json
        import subprocess

        out = subprocess.run(
            ["buildah", "inspect", "--type", "image", tag],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return dict(json.loads(out)["OCIv1"]["config"]["Labels"])
    client = engine.client  # type: ignore[attr-defined]
    return dict(client.images.get(tag).labels)


def test_wrong_base_digest_names_the_lock_entry(
    engine: Engine, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, _ = busybox_base
    wrong = (ref, "sha256:" + "0" * 64)
    lock = load_lock(_lock(tmp_path, wrong, engine.name))
    with pytest.raises(BuildError) as info:
        build_target(
            lock, "app", engine, Settings(state=tmp_path / "s", cache=tmp_path / "c", force=True)
        )
    message = str(info.value)
    assert "bases.busybox" in message
    assert "run nox -s refresh-digests" in message


BIND_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
RUN --mount=type=bind,source=requirements.txt,target=/tmp/requirements.txt \\
    sha256sum /tmp/requirements.txt > /installed.txt && test ! -e /requirements.txt
"""


def test_bind_mount_reads_the_context_without_copy(
    engine: Engine, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    """frank-small's way of installing: RUN --mount=type=bind, no COPY, on every engine."""
    document = doc()
    document["bases"]["busybox"] = {"ref": busybox_base[0], "digest": busybox_base[1]}
    document["targets"]["app"].update(
        allow_copy=False, tag=f"localhost/lockpipe-test/bind-{engine.name}:1"
    )
    (tmp_path / "images/app").mkdir(parents=True)
    (tmp_path / "images/app/requirements.txt").write_text("x==1 --hash=sha256:" + "0" * 64 + "\n")
    lock = load_lock(make_repo(tmp_path, document, BIND_DOCKERFILE))
    outcome = build_target(
        lock, "app", engine, Settings(state=tmp_path / "s", cache=tmp_path / "c", force=True)
    )
    assert outcome.built and engine.image_id(lock.target("app").tag) == outcome.record.image_id


def test_reproduce_compares_a_cached_and_a_clean_build_and_leaves_the_record(
    engine: Engine, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    from lockpipe.imagebuild.reproduce import reproduce_target

    lock = load_lock(_lock(tmp_path, busybox_base, engine.name))
    spy = CountingEngine(engine)
    settings = Settings(state=tmp_path / "s", cache=tmp_path / "c")
    built = build_target(lock, "app", spy, settings)  # type: ignore[arg-type]
    record = next((tmp_path / "s").rglob("app.json"))
    before = record.read_bytes()
    spy.builds.clear()
    result = reproduce_target(lock, "app", spy, settings)  # type: ignore[arg-type]
    assert len(spy.builds) == 2
    if engine.name in ("buildah", "podman") or engine.reproducibility().reproducible:
        assert result.same, result.why
    elif not result.same:
        # dockerd 20.10 (Debian 12): the layers match but the config's times differ, and the
        # pipeline says why. A newer dockerd (26.1 on Debian 13) may agree; the probe decides.
        assert "differs" in result.why and "SOURCE_DATE_EPOCH" in result.why
    # The user's build, its record and its tag are left as they were: a plain build
    # afterwards is a no-op that names the user's image.
    assert record.read_bytes() == before
    again = build_target(lock, "app", spy, settings)  # type: ignore[arg-type]
    assert not again.built and again.record.image_id == built.record.image_id


def test_run_state_logs_and_stop(engine: Engine, busybox_base: tuple[str, str]) -> None:
    """The run half of the interface, which smoke drives, on every engine."""
    from lockpipe.engines.base import RunSpec

    ref, _ = busybox_base
    image = _local_image(engine, ref)
    spec = RunSpec(image=ref, entrypoint=("/bin/sh", "-c"), command=("echo up; sleep 30",),
                   name=f"lockpipe-test-run-{engine.name}")  # fmt: skip
    container = engine.run(spec)
    try:
        state = engine.state(container)
        assert state.running and state.exit_code is None
        assert state.image_id == image
        assert "up" in _logs_once_they_show(engine, container, "up")
    finally:
        engine.stop(container)
    engine.stop(container)  # a second stop of a gone container is not an error


@pytest.mark.parametrize("folder", ["store,with,commas", 'store"quoted', 'st,o"re'])
def test_a_mount_whose_host_path_holds_a_comma_or_quote_reaches_the_container(
    engine: Engine, busybox_base: tuple[str, str], tmp_path: Path, folder: str
) -> None:
    """smoke mounts the payload store at /store; the buildah engine runs containers with
    ``podman run --mount type=bind,src=…``, which podman splits as one CSV record (Go's
    encoding/csv), so a ',' or '"' in the host path must reach podman quoted."""
    from lockpipe.engines.base import Mount, RunSpec

    ref, _ = busybox_base
    _local_image(engine, ref)
    store = tmp_path / folder
    store.mkdir()
    (store / "model.gguf").write_text("weights\n")
    spec = RunSpec(image=ref, entrypoint=("/bin/sh", "-c"),
                   command=("cat /store/model.gguf; sleep 30",),
                   mounts=(Mount(store, "/store", read_only=True),),
                   name=f"lockpipe-test-mount-{engine.name}")  # fmt: skip
    container = engine.run(spec)
    try:
        assert "weights" in _logs_once_they_show(engine, container, "weights")
    finally:
        engine.stop(container)


def _local_image(engine: Engine, ref: str) -> str:
    """The id of ``ref`` in ``engine``'s storage: buildah shares podman's, the SDK engines
    pull it here."""
    image = engine.image_id(ref) or ""
    if not image:
        subprocess.run(["podman", "pull", "--tls-verify=false", ref], check=True,
                       capture_output=True)  # fmt: skip
        if engine.name == "docker":
            engine.client.images.pull(ref)  # type: ignore[attr-defined]
        image = engine.image_id(ref) or ""
    return image


def _logs_once_they_show(engine: Engine, container: str, text: str) -> str:
    """The container's logs once they hold ``text``, or after some 5 s."""
    for _ in range(50):
        if text in engine.logs(container):
            break
        time.sleep(0.1)
    return engine.logs(container)


# Engine faults: what the SDKs raise leaves the engine as a pipeline error that names
# the engine, the operation, the reference and a fix; no SDK exception gets through.

ABSENT = "localhost/lockpipe-test/absent:1"


def _fails(action: Callable[[], object], error: type[EngineError] = EngineError) -> str:
    """The message of the pipeline error ``action`` raises (any other exception fails)."""
    with pytest.raises(error) as info:
        action()
    return str(info.value)


def test_acting_on_an_absent_image_names_engine_and_ref(engine: Engine) -> None:
    assert engine.image_id(ABSENT) is None
    for action in (
        lambda: engine.remove(ABSENT),
        lambda: engine.tag(ABSENT, "localhost/lockpipe-test/absent:2"),
        lambda: engine.layers(ABSENT),
        lambda: engine.image_env(ABSENT),
    ):
        message = _fails(action)
        assert engine.name in message and ABSENT in message
        if engine.name != "buildah":  # buildah's CLI speaks for itself through cmd.call
            assert "nox -s build" in message, message


def test_running_an_absent_image_names_engine_ref_and_fix(engine: Engine) -> None:
    from lockpipe.engines.base import RunSpec

    message = _fails(lambda: engine.run(RunSpec(image=ABSENT, command=("true",))))
    runner = "podman" if engine.name == "buildah" else engine.name  # buildah runs via podman
    assert runner in message and ABSENT in message
    if engine.name != "buildah":
        assert "run" in message and "nox -s build" in message, message


def test_an_absent_container_is_named(engine: Engine) -> None:
    container = "lockpipe-test-absent-container"
    for action in (lambda: engine.logs(container), lambda: engine.state(container)):
        message = _fails(action)
        assert container in message
        if engine.name != "buildah":
            assert engine.name in message and "ps -a" in message, message
    engine.stop(container)  # stopping what is gone is not an error


def test_an_invalid_reference_is_named(engine: Engine) -> None:
    message = _fails(lambda: engine.remove("Invalid::Ref"))
    assert "Invalid::Ref" in message
    if engine.name != "buildah":
        assert engine.name in message and "remove image" in message, message


def _sdk_engine(name: str, url: str) -> Engine:
    from lockpipe.engines.docker import DockerEngine
    from lockpipe.engines.podman import PodmanEngine

    return DockerEngine(url) if name == "docker" else PodmanEngine(url)


@pytest.fixture
def podman_service() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A private podman API service on its own socket: (url, process), ours to stop."""
    if shutil.which("podman") is None:
        unavailable("podman is not installed")
    folder = Path(tempfile.mkdtemp(prefix="lp-", dir="/tmp"))  # short: sockets cap at 108
    sock = folder / "podman.sock"
    proc = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(100):
            if sock.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        if not sock.exists():
            unavailable("podman system service did not open its socket")
        yield f"unix://{sock}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.podman
@pytest.mark.parametrize("name", ["podman", "docker"])
def test_an_sdk_engine_whose_daemon_went_away_is_engine_missing(
    name: str, podman_service: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """podman's service speaks the docker API too: both SDKs talk to it, then it stops."""
    url, service = podman_service
    engine = _sdk_engine(name, url)
    assert engine.image_id(ABSENT) is None  # it answered
    service.terminate()
    service.wait(timeout=30)

    message = _fails(lambda: engine.image_id(ABSENT), EngineMissing)
    assert f"{name} inspect image {ABSENT}" in message and url in message
    assert "start" in message, message
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    request = BuildRequest(context=tmp_path, dockerfile="Dockerfile", tag=ABSENT, build_args={},
                           timestamp=0, platform="linux/amd64")  # fmt: skip
    message = _fails(lambda: engine.build(request, lambda line: None), EngineMissing)
    assert f"{name} build {ABSENT}" in message and url in message


@pytest.mark.parametrize("name", ["podman", "docker"])
def test_an_sdk_engine_at_a_socket_that_does_not_exist_is_engine_missing(name: str) -> None:
    url = "unix:///tmp/lockpipe-test-no-such-dir/engine.sock"
    message = _fails(lambda: _sdk_engine(name, url), EngineMissing)
    assert url in message and "apt-get install" in message


@pytest.mark.docker
def test_a_docker_sdk_without_its_private_post_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The BuildKit build posts through APIClient._post/_url; a future SDK may drop them."""
    from docker.api.client import APIClient

    try:
        engine = get_engine("docker")
    except EngineMissing as exc:
        unavailable(f"engine docker is not usable: {exc}")
    monkeypatch.delattr(APIClient, "_post")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    request = BuildRequest(context=tmp_path, dockerfile="Dockerfile", tag=ABSENT, build_args={},
                           timestamp=0, platform="linux/amd64")  # fmt: skip
    message = _fails(lambda: engine.build(request, lambda line: None))
    assert re.search(r"docker SDK \d+\.\d+\.\d+ has no APIClient\._post/_url", message), message
    assert "pip install 'docker>=7.1,<8'" in message
