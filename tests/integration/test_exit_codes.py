"""The README's exit-code table, row by row: each code has a real command line that exits
with it (issue 19 part 3). Every case runs ``python -m lockpipe`` as a user does.

Needs the loopback registry (the busybox base), buildah and docker for two rows; the rest
runs anywhere. One FAKE: a ``podman`` whose ``--version`` fails (row 5), since a broken
engine install cannot be made otherwise on this host.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lockpipe.errors import BROKEN_PIPE, INTERRUPTED
from lockpipe.lock.model import dump_lock
from tests.lockfactory import doc, make_repo
from tests.policy import scratch

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
REV = "a" * 40
BYTES = b"hello"


@dataclass(kw_only=True)
class Case:
    argv: list[str]
    module: str = "lockpipe"  # what `python -m` runs
    cwd: Path = REPO
    env: dict[str, str] = field(default_factory=dict)
    says: str = ""  # a piece of the one-line error


@dataclass(frozen=True)
class World:
    tmp: Path
    busybox: Callable[[], tuple[str, str]]  # (ref, digest) in the loopback registry
    files: str  # a loopback HTTP server's base URL, serving tmp/srv


def _readme_codes() -> list[int]:
    text = (REPO / "README.md").read_text()
    return [int(c) for c in re.findall(r"^\| (\d+) \| ", text, re.M)]


def _repo(w: World, name: str, dockerfile: str | None = None, payload: bool = False,
          base: tuple[str, str] | None = None) -> Path:  # fmt: skip
    document = doc()
    if base is not None:
        document["bases"]["busybox"] = {"ref": base[0], "digest": base[1]}
    if payload:
        document["payloads"] = {"m": {"repository": "org/m", "revision": REV,
                                      "filename": "m.gguf", "size": len(BYTES),
                                      "sha256": hashlib.sha256(BYTES).hexdigest(),
                                      "role": "model", "format": "gguf"}}  # fmt: skip
        document["targets"]["app"]["payloads"] = ["m"]
    if dockerfile is None:
        return make_repo(w.tmp / name, document)
    return make_repo(w.tmp / name, document, dockerfile=dockerfile)


def _edit_lock(lock: Path, edit: Callable[[dict], None]) -> Path:  # type: ignore[type-arg]
    document = json.loads(lock.read_text())
    edit(document)
    lock.write_text(dump_lock(document))
    return lock


def case_1(w: World) -> Case:  # unexpected: a checkout without its parser constraints file
    lock = _copy_lock(w, "r1")  # no constraints/ beside it: nox -s vllm-parser cannot pin
    return Case(module="lockpipe.preflight.vllm_parser_env", argv=["--lock", str(lock)],
                says="constraints/vllm-parser-")  # fmt: skip


def case_2(w: World) -> Case:
    return Case(argv=["plan", "--lock", str(w.tmp / "absent.json")], says="no lock file here")


def case_3(w: World) -> Case:
    lock = _repo(w, "r3")
    (lock.parents[1] / "images/app/Dockerfile").write_text("ARG BASE\nFROM ${BASE}\n")
    return Case(argv=["plan", "--lock", str(lock)], says="changed since")


def case_4(w: World) -> Case:
    lock = _repo(w, "r4", dockerfile="FROM docker.io/library/busybox:latest\n")
    return Case(argv=["lint", "--lock", str(lock)], says="pinning rules broken")


def case_5(w: World) -> Case:  # FAKE podman: its --version fails, so deploy cannot ask it
    fake = w.tmp / "fake-bin"
    fake.mkdir()
    (fake / "podman").write_text("#!/bin/sh\necho 'FAKE podman: broken' >&2\nexit 3\n")
    (fake / "podman").chmod(0o755)
    lock = _edit_lock(_copy_lock(w, "r5"), _pin_frank_large)
    return Case(argv=["deploy", "--lock", str(lock), "--force", "--no-inspect", "--no-verify",
                      "--out", str(w.tmp / "units"), "frank-large"],
                env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})  # fmt: skip


def _copy_lock(w: World, name: str) -> Path:
    lock = w.tmp / name / "locks" / "digests.json"
    lock.parent.mkdir(parents=True)
    (w.tmp / name / "images").symlink_to(REPO / "images")  # the lock's contexts, as they are
    for name_ in ("digests.json", "smoke.json", "preflight.json"):  # the lock and beside it
        (lock.parent / name_).write_text((REPO / "locks" / name_).read_text())
    return lock


def _pin_frank_large(document: dict) -> None:  # type: ignore[type-arg]
    document["targets"]["frank-large"]["external"]["digest"] = "sha256:" + "c" * 64


def case_6(w: World) -> Case:
    lock = _repo(w, "r6")
    return Case(argv=["build", "--engine", "docker", "--lock", str(lock)],
                env={"DOCKER_HOST": "unix:///nonexistent.sock"},
                says="does not answer")  # fmt: skip


def case_7(w: World) -> Case:
    lock = _repo(w, "r7", dockerfile="ARG BASE\nFROM ${BASE}\nRUN false\n", base=w.busybox())
    return Case(argv=["build", "--engine", "buildah", "--lock", str(lock),
                      "--state", str(w.tmp / "state7")])  # fmt: skip


def case_8(w: World) -> Case:
    lock = _repo(w, "r8", payload=True)
    return Case(argv=["payloads", "--lock", str(lock), "--store", str(w.tmp / "s8"), "--quiet"],
                env={"HF_ENDPOINT": "http://127.0.0.1:9"}, says="cannot connect")  # fmt: skip


def _serve(w: World, data: bytes) -> str:
    """The Hub's resolve path for org/m@REV/m.gguf on the loopback server, holding ``data``."""
    where = w.tmp / "srv" / "hub" / "org/m/resolve" / REV
    where.mkdir(parents=True, exist_ok=True)
    (where / "m.gguf").write_bytes(data)
    return f"{w.files}/hub"


def case_9(w: World) -> Case:  # the server's bytes are not the pinned ones
    lock = _repo(w, "r9", payload=True)
    hub = _serve(w, b"HELLO")
    return Case(argv=["payloads", "--lock", str(lock), "--store", str(w.tmp / "s9"), "--quiet"],
                env={"HF_ENDPOINT": hub}, says="sha256 mismatch")  # fmt: skip


def case_10(w: World) -> Case:  # the pinned bytes, but no GGUF
    lock = _repo(w, "r10", payload=True)
    hub = _serve(w, BYTES)
    return Case(argv=["payloads", "--lock", str(lock), "--store", str(w.tmp / "s10"), "--quiet"],
                env={"HF_ENDPOINT": hub}, says="no GGUF magic")  # fmt: skip


def case_11(w: World) -> Case:  # more than any file system here holds
    lock = _edit_lock(_repo(w, "r11", payload=True),
                      lambda d: d["payloads"]["m"].update(size=2**60))  # fmt: skip
    return Case(argv=["payloads", "--lock", str(lock), "--store", str(w.tmp / "s11"), "--quiet"],
                env={"HF_ENDPOINT": "http://127.0.0.1:9"})  # fmt: skip


def case_12(w: World) -> Case:
    """frank-large (external, a GPU target) pinned to a tiny image in podman's storage, so
    everything but the host is right: --gpu-mode cdi without a CDI spec is refused."""
    from lockpipe.deploy.cdi import NVIDIA_KIND, find_specs

    if find_specs(NVIDIA_KIND):
        pytest.skip("this host has a CDI spec: the refusal cannot be shown here")
    (w.tmp / "ctx").mkdir()
    (w.tmp / "ctx" / "f").write_text("external\n")
    (w.tmp / "ctx" / "Containerfile").write_text("FROM scratch\nCOPY f /f\n")
    repo = "localhost/lockpipe-test/exit12"
    subprocess.run(["podman", "build", "-q", "-t", f"{repo}:1", str(w.tmp / "ctx")],
                   capture_output=True, timeout=300, check=True)  # fmt: skip
    digest = subprocess.run(["podman", "image", "inspect", "--format", "{{.Digest}}",
                             f"{repo}:1"], capture_output=True, text=True, timeout=60,
                            check=True).stdout.strip()  # fmt: skip

    def pin(document: dict) -> None:  # type: ignore[type-arg]
        document["targets"]["frank-large"]["external"].update(image=repo, digest=digest)

    _IMAGES.append(f"{repo}:1")
    lock = _edit_lock(_copy_lock(w, "r12"), pin)
    return Case(argv=["smoke", "--gpu", "--engine", "podman", "--lock", str(lock), "--state",
                      str(w.tmp / "st12"), "frank-large"], says="needs a CDI spec")  # fmt: skip


def case_13(w: World) -> Case:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    _HELD.append(held)
    port = held.getsockname()[1]
    return Case(argv=["deploy", "--wait-port", str(port), "--port-timeout", "0.5"])


_HELD: list[socket.socket] = []
_IMAGES: list[str] = []  # made in podman's storage by a case; removed after the module


def case_15(w: World) -> Case:
    return Case(argv=["smoke", "--engine", "buildah", "--state", str(w.tmp / "st15"),
                      "--expect", str(w.tmp / "absent-smoke.json"), "llama-cpu"],
                says="no baselines file")  # fmt: skip


def case_16(w: World) -> Case:  # a fifth full-window slot does not fit the 3090
    return Case(argv=["preflight", "--gpu", "rtx3090", "--parallel", "5", "--ctx-size",
                      str(5 * 262144), "llama-cuda-slots"], says="fails")  # fmt: skip


def case_17(w: World) -> Case:
    return Case(
        argv=["smoke", "--engine", "buildah", "--state", str(w.tmp / "st17")],
        says="no target was built",
    )


def case_18(w: World) -> Case:  # a base on a registry port nothing listens on
    lock = _repo(w, "r18", base=("127.0.0.1:9/lockpipe-test/busybox:1", "sha256:" + "ab" * 32))
    return Case(argv=["refresh-digests", "--lock", str(lock), "--kind", "bases", "--dry-run"],
                says="could not be resolved")  # fmt: skip


def case_19(w: World) -> Case:
    return Case(argv=["deploy", "--state", str(w.tmp / "st19"), "--no-verify", "llama-cpu"])


def case_64(w: World) -> Case:
    return Case(
        argv=["deploy", "--podman-version", "five", "llama-cpu"],
        says="--podman-version 'five': not a podman version",
    )


CASES: dict[int, Callable[[World], Case]] = {
    int(name.removeprefix("case_")): f for name, f in globals().items() if name.startswith("case_")
}


def test_every_row_of_the_table_has_a_case() -> None:
    """130 and 141 have their own tests below; every other row a case here."""
    rows = set(_readme_codes())
    assert rows - {INTERRUPTED, BROKEN_PIPE} == set(CASES), "a README row without a CLI case"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    with scratch(tmp_path_factory, "srv-root") as root:
        (root / "srv").mkdir()
        handler = partial(SimpleHTTPRequestHandler, directory=str(root / "srv"))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()
    for image in _IMAGES:
        subprocess.run(["podman", "rmi", "-f", image], capture_output=True, check=False)
    for held in _HELD:
        held.close()


def _run(case: Case, home: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "LOCKPIPE_CACHE": str(home / "cache"),
           "XDG_CACHE_HOME": str(home / "xdg"), **case.env}  # fmt: skip
    env.pop("LOCKPIPE_LOCK", None)
    return subprocess.run([sys.executable, "-m", case.module, *case.argv], cwd=case.cwd,
                          env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


@pytest.mark.parametrize("code", sorted(CASES))
def test_the_case_exits_with_the_rows_code(
    code: int, files: tuple[Path, str], request: pytest.FixtureRequest
) -> None:
    root, url = files
    tmp = root / f"code-{code}"
    tmp.mkdir()
    (tmp / "srv").symlink_to(root / "srv")

    def busybox() -> tuple[str, str]:
        base: tuple[str, str] = request.getfixturevalue("busybox_base")
        return base

    case = CASES[code](World(tmp=tmp, busybox=busybox, files=url))
    done = _run(case, tmp)
    assert done.returncode == code, f"{case.argv}: exit {done.returncode}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr
    if code not in (1, 16):  # vllm-parser's own line, or a failed check's report
        assert any(x.startswith("error: ") for x in done.stderr.splitlines()), done.stderr
    assert case.says in done.stderr, done.stderr[-2000:]


def test_sigterm_exits_130(tmp_path: Path) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lockpipe", "deploy", "--wait-port", str(port),
                             "--port-timeout", "120"], cwd=REPO, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    time.sleep(3)  # it is waiting on the held port
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    held.close()
    assert proc.returncode == INTERRUPTED, err
    assert "interrupted" in err


def test_a_reader_that_leaves_gives_141() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "lockpipe", "plan"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.close()  # before it prints a line (Python starts in far more than this takes)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == BROKEN_PIPE, err
    assert b"Traceback" not in err
