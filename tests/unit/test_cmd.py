"""cmd.call with real processes: a cancelled call leaves no process of its tree behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockpipe import cmd
from lockpipe.errors import EngineError

REPO = Path(__file__).resolve().parents[2]

# The shell starts a grandchild, prints both PIDs and becomes a sleep itself: a child
# and a grandchild, every PID known. Both ignore SIGINT (the trap is inherited), so
# only the escalation past SIGINT ends them.
TREE = ["sh", "-c", "trap '' INT; sleep 300 & echo $$ $!; exec sleep 300"]

# A pipeline-like parent: SIGTERM raises KeyboardInterrupt, as lockpipe.cli.main does.
PARENT = """
import signal, sys
from lockpipe import cmd
from lockpipe.cli.main import _interrupt

signal.signal(signal.SIGTERM, _interrupt)
try:
    cmd.call(sys.argv[1:], on_line=lambda line: print(line, flush=True), quiet=True)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    """The PIDs still alive after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(map(_alive, pids)):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _reap(pids: list[int]) -> None:
    """Kill what a failing test left behind, so one failure does not leak sleeps."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_to_the_pipeline_kills_the_whole_child_tree() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *TREE],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2, "the shell did not report its PIDs"
    try:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=10) == 130
        survivors = _gone_within(pids, 5)
        assert survivors == [], f"processes {survivors} of the cancelled call still run"
    finally:
        _reap(pids)
        parent.stdout.close()


def test_any_exception_while_the_child_runs_kills_its_tree() -> None:
    pids: list[int] = []

    def on_line(line: str) -> None:
        pids.extend(int(p) for p in line.split())
        raise ValueError("a log handler failed")

    try:
        with pytest.raises(ValueError, match="a log handler failed"):
            cmd.call(TREE, on_line=on_line, quiet=True)
        assert len(pids) == 2
        survivors = _gone_within(pids, 5)
        assert survivors == [], f"processes {survivors} outlived the failed call"
    finally:
        _reap(pids)


def test_a_failing_command_names_its_exit_code_and_output_tail() -> None:
    with pytest.raises(EngineError, match=r"exited with 3:\nlast words"):
        cmd.call(["sh", "-c", "echo last words; exit 3"], quiet=True)


def test_a_missing_tool_names_the_package() -> None:
    with pytest.raises(EngineError, match="apt-get install"):
        cmd.call(["lockpipe-no-such-tool"], quiet=True)


def test_stdout_only_returns_the_answer_without_the_warnings_before_it() -> None:
    """podman 5 on a cgroups-v1 host warns on stderr ahead of its JSON (Debian 13 rehearsal)."""
    script = 'echo "WARN Using cgroups-v1 which is deprecated" >&2; echo \'{"ok": 1}\''
    assert cmd.call(["sh", "-c", script], quiet=True, stdout_only=True) == '{"ok": 1}\n'
    assert "WARN" in cmd.call(["sh", "-c", script], quiet=True)  # the default keeps both


def test_stdout_only_still_shows_stderr_when_the_command_fails() -> None:
    with pytest.raises(EngineError, match=r"exited with 3:\n(.|\n)*no such image"):
        cmd.call(["sh", "-c", "echo 'no such image' >&2; exit 3"], quiet=True, stdout_only=True)


def test_what_a_call_shows_carries_no_credentials_and_what_it_returns_is_as_it_came(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A build argument with a mirror's user and password, a step printing a signed URL:
    the ``+ cmd`` line, each line a build log gets and an error's tail hide them."""
    script = ('echo "fetching https://ci:s3cret@mirror/x.tar?X-Amz-Signature=f00d"; '
              "echo $0; exit ${1:-0}")  # fmt: skip
    seen: list[str] = []
    args = ["sh", "-c", script, "--build-arg=M=http://ci:s3cret@mirror/"]
    out = cmd.call(args, on_line=seen.append)
    assert "s3cret" in out and "f00d" in out  # returned as it came: callers parse output
    shown = capsys.readouterr().out + "\n".join(seen)
    assert "s3cret" not in shown and "f00d" not in shown
    assert "http://***@mirror/" in shown and "X-Amz-Signature=***" in shown
    with pytest.raises(EngineError) as failed:
        cmd.call([*args, "3"], quiet=True)
    assert "s3cret" not in str(failed.value) and "f00d" not in str(failed.value)
    assert "exited with 3" in str(failed.value) and "https://***@mirror/x.tar" in str(failed.value)


@pytest.mark.parametrize("stdout_only", [False, True])
def test_a_nul_in_an_argument_is_the_callers_error_naming_the_command(stdout_only: bool) -> None:
    class Mine(EngineError):
        pass

    with pytest.raises(Mine) as caught:
        cmd.call(["echo", "a\x00b", "x" * 500], error=Mine, quiet=True, stdout_only=stdout_only)
    msg = str(caught.value)
    assert "`echo " in msg and r"a\x00b" in msg and "embedded null byte" in msg
    assert "\x00" not in msg and len(msg) < 400  # shown escaped and shortened


@pytest.mark.parametrize("stdout_only", [False, True])
def test_a_command_past_its_timeout_is_stopped_and_named(stdout_only: bool) -> None:
    """A query with no timeout (nvidia-smi on a wedged driver, podman on a stuck lock) held
    lockpipe forever; with one, its group is killed and the error names it."""
    script = "import sys, time; print('started', flush=True); time.sleep(60)"
    start = time.monotonic()
    with pytest.raises(EngineError) as caught:
        cmd.call([sys.executable, "-c", script], quiet=True, stdout_only=stdout_only, timeout=0.5)
    assert time.monotonic() - start < 30  # not the child's 60 s
    said = str(caught.value)
    assert "did not finish within 0.5 s and was stopped" in said and "started" in said


def test_a_command_within_its_timeout_answers_as_before() -> None:
    assert cmd.call([sys.executable, "-c", "print('ok')"], quiet=True, timeout=30) == "ok\n"


def test_a_streamed_call_keeps_only_the_tail_of_its_output() -> None:
    """A build's log goes to on_line line by line; kept whole as well, 200 MB of RUN output
    took 679 MiB (issue 18). The error's tail is all the call needs of it."""
    seen: list[str] = []
    script = "for i in range(100000): print(i)"
    out = cmd.call([sys.executable, "-c", script], quiet=True, on_line=seen.append)
    assert len(seen) == 100000 and seen[-1] == "99999"
    assert out.splitlines() == [str(i) for i in range(100000 - cmd.TAIL, 100000)]
