"""Ctrl-C during ``lockpipe build`` leaves nothing behind, on every engine.

``python -m lockpipe build`` runs in a session of its own, as a terminal's foreground
job does, with a TMPDIR of its own. Once its RUN step says that it sleeps, SIGINT goes
to the whole process group, as Ctrl-C sends it. Then: the exit code is INTERRUPTED,
the message names what was cleaned up (and no resume: a build that was not fetching
has nothing to resume), no working container of the build is left, no process whose
command line names the build (buildah, the RUN step's shell) runs, and TMPDIR is empty.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lockpipe.engines import get_engine
from lockpipe.errors import INTERRUPTED, EngineMissing
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# The shell prints the marker (the step's text, "$((6*7))", never matches it by itself),
# then sleeps for a time of its own, so that its sleep, too, is told from other builds'.
DOCKERFILE = """\
ARG BASE
FROM ${{BASE}}
RUN echo "asleep-$((6*7))-{mark}" && sleep {seconds} && echo woke
"""
STEP_IMAGE = r"^--> (?:Using cache )?([0-9a-f]{11,64})$"  # buildah's and podman's step images
# What each engine's cleanup says it did (lockpipe.engines: buildah, podman, docker).
CLEANED = {
    "buildah": r"buildah removed its working container|removed buildah working container",
    "podman": r"stopped podman's build of \S+: its RUN step's processes ended",
    "docker": r"cancelled docker's build of \S+: dockerd ended its steps",
}


@dataclass
class Output:
    """The build's output, read in a thread; ``seen`` is set once ``marker`` arrived."""

    marker: str
    lines: list[str] = field(default_factory=list)
    seen: threading.Event = field(default_factory=threading.Event)

    def read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)
            if line.strip() == self.marker:
                self.seen.set()

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _containers(engine: str) -> dict[str, str]:
    """Every container the engine's storage holds: ID -> the image it was made from."""
    if engine == "docker":
        out = subprocess.run(["docker", "ps", "-a", "--no-trunc", "--format", "{{json .}}"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        return {c["ID"]: c["Image"] for c in map(json.loads, out.splitlines())}
    # buildah's working containers, podman's service's among them (one storage), and podman's.
    out = subprocess.run(["buildah", "containers", "-a", "--json"],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return {c["id"]: c["imageid"] for c in json.loads(out) or []}


def _processes(needles: list[str]) -> list[str]:
    """The running processes whose command line holds one of ``needles`` (zombies have none)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(n in cmdline for n in needles):
            found.append(f"{entry}: {cmdline[:200]}")
    return found


def _base_id(engine: str, ref: str) -> str:
    """The local image ID of the base, once the build has pulled it ("" when unknown)."""
    argv = (
        ["docker", "image", "inspect", "--format", "{{.Id}}", ref]
        if engine == "docker"
        else ["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", ref]
    )
    out = subprocess.run(argv, capture_output=True, text=True).stdout  # fmt: skip
    return out.strip().removeprefix("sha256:")


@pytest.mark.parametrize(
    "name",
    [pytest.param("buildah", marks=pytest.mark.buildah),
     pytest.param("podman", marks=pytest.mark.podman),
     pytest.param("docker", marks=pytest.mark.docker)],
)  # fmt: skip
def test_ctrl_c_in_a_run_step_leaves_no_container_process_or_folder(
    name: str, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    try:
        get_engine(name)
    except EngineMissing as exc:
        unavailable(f"engine {name} is not usable: {exc}")
    mark = uuid.uuid4().hex[:12]
    document = doc()
    document["bases"]["busybox"] = {"ref": busybox_base[0], "digest": busybox_base[1]}
    tag = f"localhost/lockpipe-test/interrupt-{name}-{mark}:1"
    document["targets"]["app"]["tag"] = tag
    seconds = 100000 + int(mark, 16) % 800000
    lock = make_repo(tmp_path, document, DOCKERFILE.format(mark=mark, seconds=seconds))
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    before = _containers(name)

    proc = subprocess.Popen(
        [sys.executable, "-m", "lockpipe", "build", "app", "--engine", name, "--lock", str(lock),
         "--state", str(tmp_path / "state"), "--cache", str(tmp_path / "cache")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)},
        start_new_session=True,  # its own group, as a terminal's foreground job
    )  # fmt: skip
    output = Output(f"asleep-42-{mark}")
    reader = threading.Thread(target=output.read, args=(proc,), daemon=True)
    reader.start()
    needles = [mark, str(tmp_path), f"sleep {seconds} "]
    try:
        if not output.seen.wait(timeout=180):
            pytest.fail(f"the build never reached its RUN step:\n{output.text}")
        time.sleep(0.5)  # well inside the step
        assert _processes([f"sleep {seconds} "]), "the RUN step is not running"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        code = proc.wait(timeout=90)
        reader.join(timeout=10)
        left = _processes(needles)  # at once: the engine waited for its build to end
    finally:
        _end(proc)
    text = output.text
    assert code == INTERRUPTED, text
    assert left == [], f"processes of the interrupted build still run: {left}\n{text}"
    assert list(tmpdir.iterdir()) == [], f"the build left temporary files\n{text}"

    # No container of this build is left: none made since it began from its base or
    # from a step it committed (the `--> ID` lines). Other builds' are not looked at.
    ours = {_base_id(name, busybox_base[0]), *re.findall(STEP_IMAGE, text, re.M)}
    ours.discard("")
    new = {c: image for c, image in _containers(name).items() if c not in before}
    leftover = [c for c, image in new.items()
                if any(image.removeprefix("sha256:").startswith(i) for i in ours)]  # fmt: skip
    deadline = time.monotonic() + 20  # another build's, from the same base, goes when it ends
    while leftover and time.monotonic() < deadline:
        time.sleep(1)
        leftover = [c for c in leftover if c in _containers(name)]
    assert leftover == [], f"containers of the interrupted build are left: {leftover}\n{text}"

    # It says what it did, and nothing of resuming: this build was fetching nothing.
    assert "\ninterrupted\n" in f"\n{text}" and "Traceback" not in text, text
    assert "run again to resume" not in text, text
    assert re.search(CLEANED[name], text), text
    assert "removed the build's temporary folder" in text, text


def _end(proc: subprocess.Popen[str]) -> None:
    """A build the test gave up on still gets Ctrl-C first, so it cleans up after itself."""
    for sig, wait in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
