"""Put a rendered quadlet where podman's generator reads it; start it only when asked.

A unit that asks for a CDI device (``--gpu-mode cdi``) is refused first when no CDI spec
on this host provides it: podman would fail at start. Then, when ``NAME.service`` is
running (an in-place upgrade), it is stopped: its container holds the serve port the new
one needs. Installing then waits for the port to clear (every socket on it: listener,
accepted connection, TIME_WAIT), as the fleet's 2026-09-16 restore needed, and fails with
the socket table if it never does. The file is written atomically, so the generator never
reads half a unit; an instance the install stopped is started again on the new unit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lockpipe import cmd
from lockpipe.deploy.cdi import require_specs
from lockpipe.errors import DeployError, EngineError
from lockpipe.fs import write_atomic
from lockpipe.log import echo, result
from lockpipe.smoke.ports import PortBusy, wait_port_clear

SYSTEM_DIR = Path("/etc/containers/systemd")
# systemctl show's ActiveState values of a unit whose container may hold the port.
RUNNING = frozenset({"active", "activating", "deactivating", "reloading", "refreshing"})


@dataclass(frozen=True, kw_only=True)
class Installed:
    path: Path
    stopped: bool  # the old instance was running and the install stopped it


def default_dir(env: Mapping[str, str], *, root: bool | None = None) -> Path:
    """/etc/containers/systemd for root, else $XDG_CONFIG_HOME/containers/systemd."""
    if os.geteuid() == 0 if root is None else root:
        return SYSTEM_DIR
    home = env.get("HOME") or "~"
    config = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return Path(config).expanduser() / "containers" / "systemd"


def _systemctl(user: bool, *args: str) -> list[str]:
    return ["systemctl", *(["--user"] if user else []), *args]


def stop_running(name: str, *, user: bool, replacing: Path | None) -> bool:
    """Stop ``name``.service if it runs; True when it did.

    Where systemd cannot be asked (no systemctl, no bus), nothing is stopped; but when
    ``replacing`` (the installed unit file) exists, that is a DeployError: the old
    instance may hold the port, and the install would only time out waiting for it."""
    service = f"{name}.service"
    try:
        argv = _systemctl(user, "show", "--property=ActiveState", "--value", service)
        state = cmd.call(argv, quiet=True, stdout_only=True, timeout=cmd.QUERY_TIMEOUT).strip()
    except EngineError as exc:
        if replacing is None:
            return False
        raise DeployError(
            f"{replacing} is installed, but systemd cannot say whether {service} runs "
            f"({exc}); stop it first (`{' '.join(_systemctl(user, 'stop', service))}`) and "
            "rerun, so the new unit can have its port"
        ) from None
    if state not in RUNNING:
        return False
    echo(f"{service} is {state}: stopping it, so its container frees the port")
    try:
        cmd.call(_systemctl(user, "stop", service))
    except EngineError as exc:
        raise DeployError(f"could not stop {service} before replacing it: {exc}") from None
    return True


def install(
    text: str, name: str, directory: Path, *, port: int, port_timeout: float,
    user: bool | None = None, proc: Path = Path("/proc"), cdi_dirs: Sequence[Path] | None = None,
    companions: Mapping[str, str] | None = None,
) -> Installed:  # fmt: skip
    """Stop a running ``name``.service, wait for ``port`` to clear, then write
    ``directory/name.container``, after ``companions`` (file name -> text: the
    ``.artifact`` units it mounts), which no refusal before it leaves behind.

    DeployError first if the unit names a CDI device whose kind no spec in ``cdi_dirs``
    (default :data:`lockpipe.deploy.cdi.CDI_DIRS`) provides. ``user``: systemd's user
    instance (default: unless root)."""
    require_specs(text, name, cdi_dirs)
    user = os.geteuid() != 0 if user is None else user
    path = directory / f"{name}.container"
    stopped = stop_running(name, user=user, replacing=path if path.exists() else None)
    try:
        waited = wait_port_clear(port, port_timeout, proc=proc)
    except PortBusy:
        if stopped:
            echo(f"{name}.service was stopped and {path} left as it was: "
                 f"`{' '.join(_systemctl(user, 'start', f'{name}.service'))}` brings the old "
                 "unit back", style="yellow")  # fmt: skip
        raise
    if waited > 0.5:
        echo(f"port {port} cleared after {waited:.1f} s")
    files = [*((directory / f, body) for f, body in (companions or {}).items()), (path, text)]
    for where, body in files:  # the units it mounts first: the generator reads them together
        try:
            write_atomic(where, body)
        except OSError as exc:  # /proc/self/fdinfo, a read-only folder
            again = " ".join(_systemctl(user, "start", f"{name}.service"))
            back = f"; {name}.service was stopped: `{again}` brings it back" if stopped else ""
            raise DeployError(f"--install {directory}: cannot write {where} "
                              f"({exc.strerror or exc}); give a folder that exists and is "
                              f"writable{back}") from None  # fmt: skip
        result(f"installed {where}")
    return Installed(path=path, stopped=stopped)


def start(name: str, *, user: bool) -> None:
    """``systemctl [--user] daemon-reload`` (runs the generator), then start the unit."""
    try:
        cmd.call(_systemctl(user, "daemon-reload"))
        cmd.call(_systemctl(user, "start", f"{name}.service"))
    except EngineError as exc:
        hint = f"journalctl {'--user ' if user else ''}-u {name}.service"
        raise DeployError(
            f'{name}.service did not start: {exc}\nfix: read `{hint}`; "Unit {name}.service '
            'not found" means the generator rejected the .container (run '
            f"`/usr/libexec/podman/quadlet -dryrun{' -user' if user else ''}`)"
        ) from None
