"""The one place that runs external programs.

Each call prints ``+ cmd`` shell-quoted, finds the tool with ``shutil.which``
(a missing tool is an EngineMissing naming the package), and turns a failure
into an error carrying the command's last lines of output.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pipeline.errors import EngineError, EngineMissing
from pipeline.log import echo

PACKAGES = {
    "buildah": "buildah",
    "podman": "podman",
    "docker": "docker.io",
    "skopeo": "skopeo",
}


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
) -> str:
    """Run ``args`` and return its stdout+stderr; raise ``error`` with the tail on failure.

    ``on_line`` receives each output line as it arrives (for build logs).
    """
    argv = [which(args[0]), *args[1:]]
    if not quiet:
        echo(f"+ {shlex.join(args)}", style="dim")
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=None if env is None else dict(env),
        cwd=cwd,
    )
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if on_line is not None:
            on_line(line.rstrip("\n"))
    rc = proc.wait()
    out = "".join(lines)
    if rc != 0:
        tail = "".join(lines[-15:]).rstrip()
        raise error(f"`{shlex.join(args)}` exited with {rc}:\n{tail}")
    return out
