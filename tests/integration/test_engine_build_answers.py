"""``lockpipe build`` against a daemon whose answers have another shape: one error naming
the call and what is wrong, never a traceback (issue 18).

Each daemon is a FAKE: a real HTTP server on 127.0.0.1. The FAKE dockerd
(``DOCKER_HOST=tcp://…``) answers what the docker SDK asks before a build (/version,
/info, the image lookup) and streams the test's lines as the /build answer. The FAKE
podman service (``LOCKPIPE_PODMAN_URL=tcp://…``) holds the base under another first
name, so the build lists its images and pulls the base, and answers both as the test
says. Answers of another shape cannot be had from a real daemon; everything else is a
user's ``python -m lockpipe build``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import BuildError, EngineError
from tests.httpfake import FakeHandler, FakeServer
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TAG = "localhost/lockpipe-test/app:1"
IMAGE = "sha256:" + "a" * 64
BUILT = {"id": "moby.image.id", "aux": {"ID": IMAGE}}
INFO = {"DriverStatus": [["Backing Filesystem", "extfs"]]}


class FakeDockerd(FakeServer):
    """FAKE dockerd: the answers a build needs, /info answering ``info``, /build streaming
    ``lines``."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self.lines: list[bytes] = []
        self.info: object = INFO


class _Handler(FakeHandler):
    server: FakeDockerd

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if path.endswith("/version"):
            self.send_json(200, {"Version": "20.10.24", "ApiVersion": "1.41"})
        elif path.endswith("/info"):
            self.send_json(200, self.server.info)
        else:  # an image lookup: none built here
            self.send_json(404, {"message": f"FAKE dockerd: no such image: {path}"})

    def do_POST(self) -> None:
        self.read_body()
        if self.path.partition("?")[0].endswith("/build"):
            body = b"".join(line + b"\r\n" for line in self.server.lines)
            self.send_bytes(200, body, {"Content-Type": "application/json"})
        else:  # /build/cancel, after a failure
            self.send_json(200, {})


@pytest.fixture(scope="module")
def dockerd() -> Iterator[FakeDockerd]:
    server = FakeDockerd()
    yield server
    server.stop()


def _lines(items: tuple[object, ...]) -> list[bytes]:
    return [i if isinstance(i, bytes) else json.dumps(i).encode() for i in items]


def _run_build(
    tmp_path: Path, engine: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    lock = make_repo(tmp_path, doc())
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "build", "app", "--engine", engine, "--lock",
         str(lock), "--state", str(tmp_path / "state")],
        env={**os.environ, **env}, capture_output=True, text=True, cwd=REPO, timeout=120,
        check=False,
    )  # fmt: skip


def _build(
    tmp_path: Path, dockerd: FakeDockerd, *items: object
) -> subprocess.CompletedProcess[str]:
    dockerd.lines = _lines(items)
    return _run_build(tmp_path, "docker", {"DOCKER_HOST": f"tcp://{dockerd.host}"})


def test_a_right_answer_builds(tmp_path: Path, dockerd: FakeDockerd) -> None:
    cut = base64.b64encode(b"\x80").decode()  # a BuildKit trace whose varint is cut short
    out = _build(tmp_path, dockerd, {"stream": "Step 1/2\n"},
                 {"id": "moby.buildkit.trace", "aux": cut}, BUILT)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Step 1/2" in out.stderr
    assert "BuildKit progress message lockpipe cannot decode" in out.stderr
    record = json.loads((tmp_path / "state/records/docker/app.json").read_text())
    assert record["image_id"] == IMAGE


@pytest.mark.parametrize(
    ("items", "words"),
    [
        ((b"not json",), "a line of its answer is not JSON"),
        ((["Step 1/2"],), "a line of its answer is a list, not an object"),
        (({"error": 5},), "error is an integer, not a string"),
        (({"stream": 5},), "stream is an integer, not a string"),
        (({"id": "moby.image.id", "aux": "x"},), "aux is a string, not an object"),
        (({"id": "moby.buildkit.trace", "aux": 5}, BUILT), "aux is an integer, not a string"),
        (({"id": "moby.image.id", "aux": {"ID": "latest"}},),
         "the image ID is 'latest', not sha256:<64 hex>"),
    ],
)  # fmt: skip
def test_an_answer_of_another_shape_is_one_error(
    items: tuple[object, ...], words: str, tmp_path: Path, dockerd: FakeDockerd
) -> None:
    out = _build(tmp_path, dockerd, *items)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == EngineError.return_code, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert f"docker build of {TAG}" in line and words in line, line
    assert not (tmp_path / "state/records/docker/app.json").exists()


@pytest.mark.parametrize(
    ("info", "words"),
    [
        ({"DriverStatus": [["driver-type"], None]}, "DriverStatus[1] is null, not a list"),
        ({"DriverStatus": {"driver-type": "x"}}, "DriverStatus is an object, not a list"),
        ({"DriverStatus": [["driver-type", 5]]}, "DriverStatus[0][1] is an integer, not a string"),
        ([], "its answer is a list, not an object"),
    ],
)  # fmt: skip
def test_an_info_of_another_shape_is_one_error(
    info: object, words: str, tmp_path: Path, dockerd: FakeDockerd
) -> None:
    dockerd.info = info
    try:
        out = _build(tmp_path, dockerd, BUILT)
    finally:
        dockerd.info = INFO
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == EngineError.return_code, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert "docker info" in line and words in line and "lockpipe doctor" in line, line
    assert not (tmp_path / "state/records/docker/app.json").exists()


BASE_ID = "b" * 64
LISTED = [{"Id": BASE_ID, "Names": ["localhost/another-name:1"]}]  # the base, first as another


class FakePodman(FakeServer):
    """FAKE podman service: the base held under ``listed``'s names, pulled as ``pull`` says."""

    def __init__(self) -> None:
        super().__init__(_PodmanHandler)
        self.listed: object = LISTED
        self.pull: list[bytes] = []
        self.info: object = {}
        self.builds: list[str] = []


class _PodmanHandler(FakeHandler):
    server: FakePodman

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if path.endswith("/version"):
            self.send_json(200, {"Version": "4.3.1", "ApiVersion": "4.3.1"})
        elif path.endswith("/images/json"):
            self.send_json(200, self.server.listed)
        elif path.endswith("/json"):  # the base, by its pinned reference
            self.send_json(200, {"Id": BASE_ID})
        else:  # /info: by default an odd service, whose builds go unmarked
            self.send_json(200, self.server.info)

    def do_POST(self) -> None:
        self.read_body()
        path = self.path.partition("?")[0]
        if path.endswith("/images/pull"):
            self.send_bytes(200, b"".join(line + b"\n" for line in self.server.pull))
        else:  # /build
            self.server.builds.append(self.path)
            self.send_bytes(200, json.dumps({"stream": IMAGE.removeprefix("sha256:")}).encode())


@pytest.fixture(scope="module")
def podman() -> Iterator[FakePodman]:
    server = FakePodman()
    yield server
    server.stop()


def _podman_build(
    tmp_path: Path, podman: FakePodman, listed: object, *pull: object
) -> subprocess.CompletedProcess[str]:
    podman.listed, podman.pull = listed, _lines(pull)
    return _run_build(tmp_path, "podman", {"LOCKPIPE_PODMAN_URL": f"tcp://{podman.host}"})


def test_podman_pulls_a_base_held_under_another_name(tmp_path: Path, podman: FakePodman) -> None:
    out = _podman_build(tmp_path, podman, LISTED, {"stream": "Copying blob\n"}, {"id": BASE_ID})
    assert out.returncode == 0, out.stderr
    assert "podman records a base by its first local name" in out.stderr


@pytest.mark.parametrize(
    ("listed", "pull", "words"),
    [
        (LISTED, (b"not json",), "podman pull 127.0.0.1:5000/lockpipe-test/busybox:1@sha256:"),
        (LISTED, ([1],), "a line of its answer is a list, not an object"),
        (LISTED, ({"error": 5},), "error is an integer, not a string"),
        ({"images": LISTED}, (), "its answer is an object, not a list"),
        ([1], (), "[0] is an integer, not an object"),
        ([{"Id": BASE_ID, "Names": "localhost/another-name:1"}], (),
         "[0].Names is a string, not a list"),
    ],
)  # fmt: skip
def test_podman_answers_of_another_shape_are_one_error(
    listed: object, pull: tuple[object, ...], words: str, tmp_path: Path, podman: FakePodman
) -> None:
    out = _podman_build(tmp_path, podman, listed, *pull)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == EngineError.return_code, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: podman ") and words in line, line
    assert "lockpipe doctor" in line, line
    assert not (tmp_path / "state/records/podman/app.json").exists()


class UnixFakePodman(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The FAKE podman service on a unix socket, as only a local service's builds are
    marked with a cgroup of their own: its /info answers ``info``."""

    daemon_threads = True

    def __init__(self, path: Path, info: object) -> None:
        super().__init__(str(path), _PodmanHandler)
        self.listed, self.pull, self.info = LISTED, _lines(PULLED), info
        self.builds: list[str] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()


PULLED = ({"stream": "Copying blob\n"}, {"id": BASE_ID})
ROOTFUL = {"cgroupManager": "cgroupfs", "security": {"rootless": False}}


@pytest.mark.parametrize(
    ("info", "marked"),
    [
        ({"host": ROOTFUL}, True),
        ({"host": {"cgroupManager": "cgroupfs", "security": None}}, False),
        ({"host": {"cgroupManager": "cgroupfs", "security": []}}, False),
        ({"host": []}, False),
        ({"host": None}, False),
        ([], False),
    ],
)  # fmt: skip
def test_a_podman_info_of_another_shape_leaves_builds_unmarked(
    info: object, marked: bool, tmp_path: Path
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="lp-", dir="/tmp"))  # a socket path is short
    podman = UnixFakePodman(folder / "podman.sock", info)
    try:
        out = _run_build(
            tmp_path, "podman", {"LOCKPIPE_PODMAN_URL": f"unix://{folder}/podman.sock"}
        )
    finally:
        podman.shutdown()
        podman.server_close()
        shutil.rmtree(folder)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
    (build,) = podman.builds
    assert ("cgroupparent=" in build) is marked, build


FAKE_BUILDAH = """#!/bin/sh
# FAKE buildah: the base is held under its pinned name; bud logs creating a working
# container, then writes $FAKE_IID as the image ID, or fails without one
case "$1 $2" in
  "version --json") echo '{"version": "1.28.2"}';;
  "inspect --type") echo "$FAKE_FROM";;
  "containers --json") printf '%s\\n' "$FAKE_CONTAINERS";;
  "rm "*) ;;
  "--log-level debug")
    for a in "$@"; do [ "$prev" = --iidfile ] && iid="$a"; prev="$a"; done
    echo 'time="now" level=debug msg="Container ID: @ID@"'
    [ "$FAKE_IID" = NONE ] && exit 0
    [ "$FAKE_IID" = BYTES ] && printf '\\377\\376sha256:' > "$iid" && exit 0
    [ -n "$FAKE_IID" ] && printf '%s' "$FAKE_IID" > "$iid" && exit 0
    echo 'Error: building at STEP 2/2: exit status 1' >&2; exit 1;;
  *) echo "FAKE buildah: not asked for that: $*" >&2; exit 3;;
esac
""".replace("@ID@", "c" * 64)


def _buildah_build(tmp_path: Path, iid: str, containers: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "buildah").write_text(FAKE_BUILDAH)
    (fake / "buildah").chmod(0o755)
    base = f"{doc()['bases']['busybox']['ref']}@{doc()['bases']['busybox']['digest']}"
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "FAKE_FROM": base,
           "FAKE_IID": iid, "FAKE_CONTAINERS": containers}  # fmt: skip
    return _run_build(tmp_path, "buildah", env)


def test_buildah_names_an_image_id_that_is_none(tmp_path: Path) -> None:
    out = _buildah_build(tmp_path, "latest", "[]")
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == EngineError.return_code, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert f"`buildah bud` of {TAG}: the image ID is 'latest', not sha256:<64 hex>" in line
    assert not (tmp_path / "state/records/buildah/app.json").exists()


@pytest.mark.parametrize(
    ("iid", "words"),
    [("NONE", "it wrote no image ID file"), ("BYTES", "its image ID file is not UTF-8 text")],
)
def test_a_buildah_bud_that_succeeds_without_an_image_id_is_one_build_error(
    iid: str, words: str, tmp_path: Path
) -> None:
    """buildah bud exiting 0 with its --iidfile unwritten (or not text) is a BuildError
    naming the fix, not a FileNotFoundError or UnicodeDecodeError traceback (issue 18)."""
    out = _buildah_build(tmp_path, iid, "[]")
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == BuildError.return_code, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert f"`buildah bud` of {TAG} exited 0, but {words}" in line
    assert "see the build log above" in line
    assert not (tmp_path / "state/records/buildah/app.json").exists()


@pytest.mark.parametrize(
    ("containers", "words"),
    [("not json", "its output is not JSON"), ('{"id": 1}', "its output is an object, not a list"),
     ('[{"id": 1}]', "[0].id is an integer, not a string")],
)  # fmt: skip
def test_a_failed_buildah_build_is_reported_whatever_its_container_list_says(
    containers: str, words: str, tmp_path: Path
) -> None:
    """After a failed bud, its working containers are looked up to remove them: a list
    of another shape must not hide the build's own failure behind a traceback."""
    out = _buildah_build(tmp_path, "", containers)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == BuildError.return_code, out.stderr
    assert "could not remove the build's buildah working containers: " in out.stderr
    assert f"`buildah containers --json`: {words}" in out.stderr
    assert len([x for x in out.stderr.splitlines() if x.startswith("error:")]) == 1
    assert "exited with 1:\nError: building at STEP 2/2: exit status 1" in out.stderr
