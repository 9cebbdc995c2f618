"""Put a rendered quadlet where podman's generator reads it; start it only when asked.

Installing first waits for the serve port to clear (every socket on it: listener,
accepted connection, TIME_WAIT), as the fleet's 2026-09-16 restore needed, and fails with
the socket table if it never does. The file is written atomically, so the generator never
reads half a unit. A unit that asks for a CDI device (``--gpu-mode cdi``) is refused
before any of this when no CDI spec on this host provides it: podman would fail at start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from lockpipe import cmd
from lockpipe.deploy.cdi import require_specs
from lockpipe.errors import DeployError, EngineError
from lockpipe.fs import write_atomic
from lockpipe.log import echo
from lockpipe.smoke.ports import wait_port_clear

SYSTEM_DIR = Path("/etc/containers/systemd")


def default_dir(env: Mapping[str, str], *, root: bool | None = None) -> Path:
    """/etc/containers/systemd for root, else $XDG_CONFIG_HOME/containers/systemd."""
    if os.geteuid() == 0 if root is None else root:
        return SYSTEM_DIR
    home = env.get("HOME") or "~"
    config = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return Path(config).expanduser() / "containers" / "systemd"


def install(
    text: str, name: str, directory: Path, *, port: int, port_timeout: float,
    proc: Path = Path("/proc"), cdi_dirs: Sequence[Path] | None = None,
) -> Path:  # fmt: skip
    """Wait for ``port`` to clear, then write ``directory/name.container``; its path.

    DeployError first if the unit names a CDI device whose kind no spec in ``cdi_dirs``
    (default :data:`lockpipe.deploy.cdi.CDI_DIRS`) provides."""
    require_specs(text, name, cdi_dirs)
    waited = wait_port_clear(port, port_timeout, proc=proc)
    if waited > 0.5:
        echo(f"port {port} cleared after {waited:.1f} s")
    path = directory / f"{name}.container"
    write_atomic(path, text)
    echo(f"installed {path}")
    return path


def start(name: str, *, user: bool) -> None:
    """``systemctl [--user] daemon-reload`` (runs the generator), then start the unit."""
    scope = ["--user"] if user else []
    try:
        cmd.call(["systemctl", *scope, "daemon-reload"])
        cmd.call(["systemctl", *scope, "start", f"{name}.service"])
    except EngineError as exc:
        hint = f"journalctl {'--user ' if user else ''}-u {name}.service"
        raise DeployError(
            f'{name}.service did not start: {exc}\nfix: read `{hint}`; "Unit {name}.service '
            'not found" means the generator rejected the .container (run '
            f"`/usr/libexec/podman/quadlet -dryrun{' -user' if user else ''}`)"
        ) from None
