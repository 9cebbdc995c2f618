"""A podman service whose socket accepts but never answers fails lockpipe's call after
sdk.API_TIMEOUT with one EngineError naming the socket and the fix; before, podman-py had
no timeout and ``lockpipe doctor`` or ``smoke --engine podman`` hung for ever (issue 18).
Builds, pulls and pushes wait on their answer's reads without end, as a quiet RUN step needs.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.engines import sdk
from lockpipe.engines.podman import PodmanEngine
from lockpipe.errors import EngineError

VERSION = b'{"Version": "5.0.0", "ApiVersion": "1.41"}'


def _serve(sock: socket.socket, answers: int, held: list[socket.socket]) -> None:
    """Accept each connection; answer its first ``answers`` requests in all, then go silent."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        held.append(conn)  # never closed: the client waits on it
        while answers > 0:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(VERSION), VERSION))  # fmt: skip
            answers -= 1


def _silent(answers: int) -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="lp-sock-", dir="/tmp"))  # a socket path is short
    path = folder / "podman.sock"
    held: list[socket.socket] = []
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen(16)
    threading.Thread(target=_serve, args=(sock, answers, held), daemon=True).start()
    yield f"unix://{path}"
    sock.close()
    for conn in held:
        conn.close()
    path.unlink()
    folder.rmdir()


@pytest.fixture
def mute() -> Iterator[str]:
    """A podman service URL whose socket accepts and never answers."""
    yield from _silent(0)


@pytest.fixture
def stalls() -> Iterator[str]:
    """A podman service URL that answers its version, then nothing more."""
    yield from _silent(1)


class Hung(BaseException):  # not Exception: no `except Exception` in lockpipe takes it
    pass


def _hung(signum: int, frame: object) -> None:
    raise Hung


def test_doctor_says_a_mute_podman_service_does_not_answer_and_does_not_hang(
    mute: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("podman") is None:  # doctor asks the service only of an installed podman
        pytest.skip("podman is not installed")
    monkeypatch.setenv("LOCKPIPE_PODMAN_URL", mute)
    monkeypatch.setattr(sdk, "API_TIMEOUT", 0.5, raising=False)  # before: no timeout at all
    out = tmp_path / "doctor.json"
    old = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(60)  # before the fix, doctor waited on the socket for ever
    try:
        assert main(["doctor", "--json", str(out)]) == 0
    except Hung:
        pytest.fail("lockpipe doctor still waits on podman's mute socket after 60 s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    found = {f["name"]: f for f in json.loads(out.read_text())["findings"]
             if f["area"] == "services"}  # fmt: skip
    fix = found["podman"]["fix"]
    assert f"podman did not answer at {mute} within 0.5 s" in fix
    assert "systemctl" in fix and "restart podman.socket podman.service" in fix


def test_a_call_the_service_leaves_unanswered_is_one_engine_error(stalls: str) -> None:
    engine = PodmanEngine(stalls, timeout=0.5)  # it answered its version
    with pytest.raises(EngineError) as caught:
        engine.image_id("localhost/app:1")
    said = str(caught.value)
    assert said.startswith(f"podman inspect image localhost/app:1: podman did not answer at "
                           f"{stalls} within 0.5 s (its socket is there")  # fmt: skip
    assert "podman system service --time=0" in said and "\n" not in said


def test_pulls_and_pushes_wait_on_their_reads_without_end(stalls: str) -> None:
    engine, asked = PodmanEngine(stalls, timeout=0.5), []

    def post(path: str, **kwargs: Any) -> None:
        asked.append((path, kwargs["timeout"]))
        raise RuntimeError("recorded")

    engine.client.api.post = post
    for call in (lambda: engine.pull("busybox:1", "linux/amd64"),
                 lambda: engine.push("localhost/app:1", "localhost/app:1")):  # fmt: skip
        with pytest.raises(RuntimeError, match="recorded"):
            call()
    assert asked == [("/images/pull", (0.5, None)), ("/images/localhost/app:1/push", (0.5, None))]
