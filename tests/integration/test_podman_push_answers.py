"""podman's push answer, line by line, against a FAKE podman service (a real HTTP server
on 127.0.0.1, ``PodmanEngine(url=tcp://…)``): a line of another shape is one EngineError
naming it, as docker's push reads its lines. podman-py decodes each line and yields it;
lockpipe passed over any line that was not an object, so an error said in another shape
went unseen and the push was taken for done (issue 18)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from lockpipe.engines import get_engine
from lockpipe.engines.podman import PodmanEngine
from lockpipe.errors import EngineError
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration


class FakePodmanPush(FakeServer):
    """FAKE podman service: /version, and a push answering ``lines``."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self.lines: list[object] = []


class _Handler(FakeHandler):
    server: FakePodmanPush

    def do_GET(self) -> None:
        self.send_json(200, {"Version": "4.3.1", "ApiVersion": "4.3.1"})

    def do_POST(self) -> None:
        self.read_body()
        path = self.path.partition("?")[0]
        if path.endswith("/tag"):
            return self.send_bytes(201, b"", {})
        body = b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n"
                        for x in self.server.lines)  # fmt: skip
        self.send_bytes(200, body, {"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def podman() -> Iterator[FakePodmanPush]:
    server = FakePodmanPush()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("lines", "words"),
    [([b"not json"], "a line of its answer is not JSON"),
     ([["error", "denied"]], "a line of its answer is a list, not an object"),
     (["unauthorized"], "a line of its answer is a string, not an object"),
     ([{"error": 5}], "error is an integer, not a string"),
     ([{"stream": "Copying"}, {"error": "denied: requested access"}],
      "podman push 127.0.0.1:1/x/app:1 failed: denied: requested access")],
)  # fmt: skip
def test_a_push_answer_of_another_shape_is_one_error(
    lines: list[object], words: str, podman: FakePodmanPush
) -> None:
    podman.lines = lines
    engine = PodmanEngine(url=f"tcp://{podman.host}")
    with pytest.raises(EngineError, match=None) as caught:
        engine.push("127.0.0.1:1/x/app:1", "127.0.0.1:1/x/app:1", tls_verify=False)
    assert words in str(caught.value), caught.value


@pytest.mark.podman
def test_a_push_the_real_service_fails_names_its_reason(busybox_base: tuple[str, str]) -> None:
    """podman 4.3's service answers a failed push with 200 and {"error": …} in the stream
    (measured); lockpipe read podman-py's own two lines instead, and learnt of the failure
    only from the registry's HEAD afterwards, five tries later, without podman's reason."""
    engine = get_engine("podman")
    assert isinstance(engine, PodmanEngine)
    engine.pull(f"{busybox_base[0]}@{busybox_base[1]}", "linux/amd64")
    with socket.socket() as held:  # bound, never listening: connection refused
        held.bind(("127.0.0.1", 0))
        dest = f"127.0.0.1:{held.getsockname()[1]}/lockpipe-test/push-refused:1"
        with pytest.raises(EngineError, match=f"podman push {dest} failed: .*connection refused"):
            engine.push(f"{busybox_base[0]}@{busybox_base[1]}", dest, tls_verify=False)
