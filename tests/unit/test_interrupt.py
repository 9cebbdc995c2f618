"""Ctrl-C's message and the cleanups it names, without engines (tests/integration has them).

The resume line belongs to the verbs that download; every cleanup on the way out adds
what it removed to the Interrupted that reaches the command line.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe import cmd
from lockpipe.cli import main as cli
from lockpipe.engines.base import BuildRequest
from lockpipe.engines.buildah import WorkingContainers
from lockpipe.engines.docker import DockerStop
from lockpipe.engines.podman import PodmanStop, marks_builds
from lockpipe.engines.stop import BuildStop, BuildStream, stopped_by
from lockpipe.errors import INTERRUPTED, EngineError, Interrupted, interrupted
from lockpipe.imagebuild.run import build_folder
from lockpipe.jsonshape import Reader

RESUME = "run again to resume (downloads keep what was written)"


@pytest.mark.parametrize("verb", sorted(cli.VERBS))
def test_only_the_verbs_that_download_offer_to_resume(verb: str) -> None:
    message = cli.interrupt_message(verb, KeyboardInterrupt())
    if verb in ("payloads", "smoke"):  # payloads fetches; smoke fetches each target's first
        assert message == f"interrupted; {RESUME}"
    else:
        assert message == "interrupted"


def test_the_download_verbs_are_verbs() -> None:
    assert {"payloads", "smoke"} == cli.DOWNLOAD_VERBS
    assert set(cli.VERBS) >= cli.DOWNLOAD_VERBS


def test_a_build_cut_while_fetching_its_source_offers_to_resume() -> None:
    message = cli.interrupt_message("build", Interrupted(resumable=True))
    assert message.splitlines()[0] == f"interrupted; {RESUME}"


def test_the_message_names_each_thing_cleaned_up_on_a_line() -> None:
    exc = Interrupted(["removed buildah working container x (0123456789ab)", "removed y"])
    assert cli.interrupt_message("build", exc) == (
        "interrupted\n  removed buildah working container x (0123456789ab)\n  removed y"
    )


def test_interrupted_adds_to_what_an_inner_cleanup_said() -> None:
    inner = interrupted(KeyboardInterrupt(), "the engine's", resumable=True)
    outer = interrupted(inner, "the folder")
    assert isinstance(outer, KeyboardInterrupt)
    assert outer.removed == ["the engine's", "the folder"] and outer.resumable
    assert interrupted(KeyboardInterrupt()).removed == []


@pytest.mark.parametrize(
    ("argv", "raised", "expected"),
    [
        (["build"], Interrupted(["removed it"]), "interrupted\n  removed it\n"),
        (["payloads"], KeyboardInterrupt(), f"interrupted; {RESUME}\n"),
        (["lint"], KeyboardInterrupt(), "interrupted\n"),
    ],
)
def test_main_prints_the_message_and_exits_interrupted(
    argv: list[str], raised: KeyboardInterrupt, expected: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    def dispatch(args: object) -> int:
        raise raised

    monkeypatch.setattr(cli, "dispatch", dispatch)
    assert cli.main(argv) == INTERRUPTED
    assert capsys.readouterr().err == expected


def test_call_keeps_refused_lines_out_of_the_log_the_output_and_the_tail() -> None:
    seen: list[str] = []
    script = "echo one; echo noise 1; echo two; echo noise 2; exit 3"
    with pytest.raises(EngineError) as info:
        cmd.call(["sh", "-c", script], on_line=seen.append, quiet=True,
                 keep=lambda line: not line.startswith("noise"))  # fmt: skip
    assert seen == ["one", "two"]
    assert str(info.value).endswith("exited with 3:\none\ntwo")


CREATED = 'time="2026-12-01T22:49:56Z" level=debug msg="Container ID: {}"'


def test_working_containers_are_read_from_buildahs_debug_lines() -> None:
    made = WorkingContainers()
    assert made.argv(["buildah", "bud", "-t", "x:1", "ctx"]) == [
        "buildah", "--log-level", "debug", "bud", "--force-rm", "-t", "x:1", "ctx",
    ]  # fmt: skip
    lines = [
        "STEP 1/2: FROM base",
        CREATED.format("a" * 64),
        'time="2026-12-01T22:49:56Z" level=info msg="anything"',
        CREATED.format("a" * 64),
        'time="2026-12-01T22:49:57Z" level=warning msg="a warning stays in the log"',
        "Container ID: " + "c" * 64,  # a RUN step's own output: not buildah's word
        CREATED.format("b" * 64),
    ]
    kept = [line for line in lines if made.keep(line)]
    assert kept == [lines[0], lines[4], lines[5]]
    assert made.created == ["a" * 64, "b" * 64]


def test_only_this_builds_working_containers_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    ours_left, ours_gone, theirs = "a" * 64, "b" * 64, "c" * 64
    calls: list[list[str]] = []

    def call(args: list[str], **kwargs: Any) -> str:
        calls.append(list(args))
        listing = [{"id": ours_left, "containername": "base-working-container"},
                   {"id": theirs, "containername": "base-working-container-1"}]  # fmt: skip
        return json.dumps(listing) if args[1] == "containers" else ""

    monkeypatch.setattr(cmd, "call", call)
    made = WorkingContainers()
    assert made.remove() == [] and calls == []  # nothing created: nothing asked
    made.created = [ours_left, ours_gone]
    said = made.remove()
    assert calls[-1] == ["buildah", "rm", ours_left]
    assert said == [
        f"buildah removed its working container {ours_gone[:12]}",
        f"removed buildah working container base-working-container ({ours_left[:12]})",
    ]


class FakeAnswer:
    """A streamed /build answer whose lines the test feeds; None ends it."""

    def __init__(self) -> None:
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.closed = threading.Event()

    def iter_lines(self) -> Iterator[bytes]:
        while (line := self.lines.get()) is not None:
            yield line

    def close(self) -> None:
        self.closed.set()
        self.lines.put(None)


LINES = Reader(where="FAKE daemon build", root="a line", error=EngineError)


def test_a_stream_is_read_on_until_the_daemon_reports_the_end() -> None:
    answer = FakeAnswer()
    stream = BuildStream(answer, LINES)
    answer.lines.put(b'{"stream": "STEP 1/2"}')
    answer.lines.put(b"")  # keep-alive
    items = stream.items()
    assert next(items) == {"stream": "STEP 1/2"}
    polls: list[int] = []
    answer.lines.put(b'{"stream": "container exited on killed"}')
    answer.lines.put(b'{"error": "building at STEP 2: exit status 1"}')
    assert stream.wait(10, lambda: polls.append(1)) and stream.failed and polls
    stream.close()
    assert answer.closed.is_set()


def test_a_stream_that_does_not_end_is_given_up_after_the_wait() -> None:
    answer = FakeAnswer()
    stream = BuildStream(answer, LINES)
    assert not stream.wait(0.3, lambda: None) and not stream.failed
    stream.close()


class Recording(BuildStop):
    engine = "fake"

    def ask(self) -> None:
        self.asked = True

    def ended(self) -> str:
        return f"stopped the build of {self.tag}"

    def left(self) -> str:
        return f"left the build of {self.tag}"


class FakeEngine:
    client: object = None
    url = "unix:///nowhere"
    stopping: BuildStop | None = None

    @stopped_by(Recording)
    def build(self, req: BuildRequest, log: object) -> str:
        assert self.stopping is not None
        answer = FakeAnswer()
        self.stopping.stream = BuildStream(answer, LINES)
        answer.lines.put(b'{"error": "cancelled"}')
        raise KeyboardInterrupt


def test_an_interrupted_sdk_build_says_what_its_stop_did() -> None:
    engine = FakeEngine()
    req = BuildRequest(context=Path("."), dockerfile="Dockerfile", tag="x:1", build_args={},
                       timestamp=0, platform="linux/amd64")  # fmt: skip
    with pytest.raises(Interrupted) as info:
        engine.build(req, print)
    assert info.value.removed == ["stopped the build of x:1"]
    assert engine.stopping is None


class FakeClient:
    def __init__(self, host: dict[str, Any] | None) -> None:
        self.host = host

    def info(self) -> dict[str, Any]:
        if self.host is None:
            raise ConnectionError("no service")
        return {"host": self.host}


def _host(manager: str, rootless: bool) -> dict[str, Any]:
    return {"cgroupManager": manager, "security": {"rootless": rootless}}


@pytest.mark.parametrize(
    ("url", "host", "marks"),
    [
        ("unix:///run/a.sock", _host("cgroupfs", False), True),
        ("unix:///run/b.sock", _host("systemd", False), False),  # it takes slices only
        ("unix:///run/c.sock", _host("cgroupfs", True), False),
        ("tcp://10.0.0.1:8888", _host("cgroupfs", False), False),  # not this host's /proc
        ("unix:///run/d.sock", None, False),  # no answer to /info
    ],
)
def test_podman_builds_are_marked_only_where_their_cgroup_can_be_found(
    url: str, host: dict[str, Any] | None, marks: bool
) -> None:
    client = FakeClient(host)
    assert marks_builds(client, url) is marks
    stop = PodmanStop(client, url, "x:1")
    assert stop.params["forcerm"] == "true"
    assert ("cgroupparent" in stop.params) is marks
    assert stop.wait_seconds() == (30.0 if marks else 0.0)  # unmarked: nothing to wait for


def test_a_docker_build_that_cannot_be_cancelled_is_left_to_the_disconnect() -> None:
    class Api:
        def _url(self, path: str) -> str:
            return path

        def _post(self, url: str, **kwargs: Any) -> Any:
            raise ConnectionError("refused")

    class Client:
        api = Api()

    stop = DockerStop(Client(), "unix:///nowhere", "x:1")
    assert len(stop.params["buildid"]) == 32
    stop.ask()
    assert stop.wait_seconds() == 0.0
    assert "cancels it as we disconnect" in stop.left()


def test_the_build_folder_is_gone_and_named_when_interrupted() -> None:
    with pytest.raises(Interrupted) as info, build_folder("app") as folder:
        (Path(folder) / "context").mkdir()
        raise Interrupted(["the engine's"], resumable=True)
    assert not Path(folder).exists()
    assert info.value.removed == ["the engine's", f"removed the build's temporary folder {folder}"]
    assert info.value.resumable
