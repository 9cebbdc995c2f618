"""The one place that runs external programs.

Each call prints ``+ cmd`` shell-quoted, finds the tool with ``shutil.which``
(a missing tool is an EngineMissing naming the package), and turns a failure
into an error carrying the command's last lines of output. What it shows (the
command line, each output line, an error's tail) goes through
:func:`lockpipe.urls.redact` first: a build argument or a build step's output
that holds a URL with a user and password, or a signed URL, is printed without
them. What it returns is the output as it came, for callers that parse it.

Each child runs in its own process group (session). When anything interrupts
the call while the child runs (Ctrl-C, SIGTERM turned into KeyboardInterrupt by
the CLI, or any exception), the whole group gets SIGINT, then SIGTERM, then
SIGKILL, with short waits between: a cancelled pipeline leaves no ``buildah``
(or its helpers) running.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lockpipe.errors import EngineError, EngineMissing
from lockpipe.log import echo
from lockpipe.urls import redact

PACKAGES = {
    "buildah": "buildah",
    "podman": "podman",
    "docker": "docker.io",
    "skopeo": "skopeo",
}
# Seconds the child's group gets after each signal before the next, stronger one.
TAIL = 15  # lines of a failed command's output its error shows
# Seconds a query that answers at once on a well host (a version, an inspect, systemctl
# show, nvidia-smi) may take: one that hangs (a stuck daemon or driver) is stopped.
QUERY_TIMEOUT = 120.0
SHUTDOWN_STEPS: tuple[tuple[signal.Signals, float], ...] = (
    (signal.SIGINT, 0.5),
    (signal.SIGTERM, 0.5),
    (signal.SIGKILL, 2.0),
)


def which(tool: str) -> str:
    """Absolute path of ``tool``, or EngineMissing saying what to install."""
    found = shutil.which(tool)
    if found is None:
        pkg = PACKAGES.get(tool, tool)
        raise EngineMissing(f"{tool} is not installed; install it with: apt-get install {pkg}")
    return found


def call(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    error: type[EngineError] = EngineError,
    quiet: bool = False,
    stdout_only: bool = False,
    keep: Callable[[str], bool] | None = None,
    timeout: float | None = None,
) -> str:
    """Run ``args`` and return its stdout+stderr; raise ``error`` with the tail on failure.

    ``on_line`` receives each output line as it arrives (for build logs); the call then
    keeps and returns only the last :data:`TAIL` lines (a build's log may run to GBs).
    ``keep`` sees each line first; one it refuses (a tool's debug chatter, read for
    what it reports) reaches neither ``on_line`` nor the output nor an error's tail.
    ``stdout_only``: return stdout alone, for answers that are parsed (JSON, an ID):
    podman 5 on a cgroups-v1 host warns on stderr ahead of its JSON. stderr still
    goes into the error's tail.
    ``timeout``: seconds the command may run; past them its group is killed and ``error``
    says so (a query that answers at once on a well host: :data:`QUERY_TIMEOUT`).
    """
    argv = [which(args[0]), *args[1:]]
    shown = redact(shlex.join(args))
    if not quiet:
        echo(f"+ {shown}", style="dim")
    if stdout_only:
        return _call_stdout(shown, argv, env=env, cwd=cwd, error=error, timeout=timeout)
    proc = _start(
        shown,
        error,
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,  # its own process group: it and its children end together
    )
    try:
        with _deadline(proc, timeout) as expired:
            lines = _read_lines(proc, on_line, keep)
            rc = proc.wait()
    except BaseException:
        kill_group(proc)
        raise
    out = "".join(lines)
    if expired.is_set() and rc == -signal.SIGKILL:  # not one that ended as the timer fired
        raise error(_too_long(shown, timeout, lines))
    if rc != 0:
        tail = redact("".join(list(lines)[-TAIL:]).rstrip())
        raise error(f"`{shown}` exited with {rc}:\n{tail}")
    return out


def _call_stdout(
    shown: str, argv: list[str], *, env: Mapping[str, str] | None, cwd: Path | None,
    error: type[EngineError], timeout: float | None,
) -> str:  # fmt: skip
    proc = _start(
        shown, error, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True, errors="replace",
        env=None if env is None else dict(env), cwd=cwd, start_new_session=True,
    )  # fmt: skip
    try:
        with _deadline(proc, timeout) as expired:
            out, err = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    if expired.is_set() and proc.returncode == -signal.SIGKILL:
        raise error(_too_long(shown, timeout, (out + err).splitlines(keepends=True)))
    if proc.returncode != 0:
        tail = redact("".join((out + err).splitlines(keepends=True)[-TAIL:]).rstrip())
        raise error(f"`{shown}` exited with {proc.returncode}:\n{tail}")
    return out


@contextlib.contextmanager
def _deadline(proc: subprocess.Popen[str], timeout: float | None) -> Iterator[threading.Event]:
    """Kill ``proc``'s group once ``timeout`` seconds pass (the event says it did): its
    output then ends, and the read of it with it."""
    expired = threading.Event()
    if timeout is None:
        yield expired
        return

    def expire() -> None:
        if proc.poll() is not None:  # it ended as the timer fired: nothing to stop
            return
        expired.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        yield expired
    finally:
        timer.cancel()


def _too_long(shown: str, timeout: float | None, lines: Sequence[str]) -> str:
    tail = redact("".join(list(lines)[-TAIL:]).rstrip())
    return (
        f"`{shown}` did not finish within {timeout:g} s and was stopped; is the tool stuck "
        f"(a hung daemon, driver or lock)? run it by hand to see" + (f":\n{tail}" if tail else "")
    )


SHOWN_ARGV = 200  # characters of a command line, in the error when it cannot start


def _start(
    shown: str, error: type[EngineError], argv: list[str], **kw: Any
) -> subprocess.Popen[str]:
    """``subprocess.Popen(argv, **kw)``; ``error`` naming the command (shortened) when the
    kernel cannot take it: a NUL in an argument or the environment is Python's ValueError
    ("embedded null byte"), an argv past ARG_MAX is E2BIG."""
    try:
        return subprocess.Popen(argv, **kw)
    except (ValueError, OSError) as exc:
        cut = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown[:SHOWN_ARGV])
        cut += "…" if len(shown) > SHOWN_ARGV else ""
        if isinstance(exc, ValueError):  # Python's own check, before any fork
            why = f"{exc} (a NUL in an argument or the environment; no program can be given one)"
        else:
            why = exc.strerror or type(exc).__name__
        raise error(f"cannot run `{cut}`: {why}") from None


def _read_lines(
    proc: subprocess.Popen[str],
    on_line: Callable[[str], None] | None,
    keep: Callable[[str], bool] | None = None,
) -> Sequence[str]:
    lines: list[str] | deque[str] = [] if on_line is None else deque(maxlen=TAIL)
    assert proc.stdout is not None
    for line in proc.stdout:
        if keep is not None and not keep(line.rstrip("\n")):
            continue
        lines.append(line)
        if on_line is not None:
            on_line(redact(line.rstrip("\n")))
    return lines


def kill_group(proc: subprocess.Popen[str]) -> None:
    """End ``proc``'s process group: SIGINT, then SIGTERM, then SIGKILL, each with a short wait.

    ``proc`` leads its group (``start_new_session``), so the group ID is its PID;
    the group outlives it while a grandchild still runs.
    """
    for sig, wait in SHUTDOWN_STEPS:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # nothing of the group is left
        if _group_gone(proc, wait):
            break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)  # reap the child; a stuck one is the kernel's now
    if proc.stdout is not None:
        proc.stdout.close()


def _group_gone(proc: subprocess.Popen[str], seconds: float) -> bool:
    """Whether every process of ``proc``'s group ended within ``seconds``.

    Zombies do not count: a grandchild that ended waits for init to reap it, which
    some container inits do only every second or so, and the next, stronger signal
    would then cut short a child still cleaning up after itself.
    """
    deadline = time.monotonic() + seconds
    while True:
        proc.poll()  # reap the leader, or it stays in the group as a zombie
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        if proc.returncode is not None and not _running_in_group(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _running_in_group(pgid: int) -> bool:
    """Whether a process of group ``pgid`` runs, zombies aside (True where /proc cannot tell)."""
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return True
    for entry in entries:
        try:
            # bytes: the name in (…) is the executable's file name, UTF-8 or not
            fields = Path(f"/proc/{entry}/stat").read_bytes().rpartition(b")")[2].split()
        except OSError:
            continue  # it ended meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False
