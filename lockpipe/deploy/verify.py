"""Check a rendered quadlet the way the host will read it: podman's generator, then systemd.

Where podman's quadlet generator is installed (podman >= 4.4), its ``-dryrun`` turns the
``.container`` into the ``.service`` systemd will run, or names what it rejects. Where it
is not (Debian 12's podman 4.3), :func:`plain_service` renders the equivalent
``podman run`` service, so ``systemd-analyze verify`` still checks the [Unit], [Service]
and [Install] sections and every program they start. It reads each [Container] value
and writes each word as quadlet does (pkg/systemd/parser: ``Lookup``, ``splitString``,
``escapeWords``), which leaves ``%`` and ``$`` to systemd: a specifier the unit failed to
escape reaches ``systemd-analyze`` as it would reach systemd.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lockpipe import cmd
from lockpipe.deploy.unit import Entry, Unit, quote_word, sections, split_words
from lockpipe.errors import DeployError, EngineError

GENERATORS = (
    "/usr/libexec/podman/quadlet",
    "/usr/lib/podman/quadlet",
    "/usr/lib/systemd/system-generators/podman-system-generator",
    "/usr/lib/systemd/user-generators/podman-user-generator",
)
# [Container] key -> podman run flag, for the keys this renderer writes.
FLAGS = {
    "ContainerName": "--name", "Entrypoint": "--entrypoint", "PublishPort": "--publish",
    "Volume": "--volume", "AddDevice": "--device", "HealthCmd": "--health-cmd",
    "HealthInterval": "--health-interval", "HealthTimeout": "--health-timeout",
    "HealthRetries": "--health-retries", "HealthStartPeriod": "--health-start-period",
}  # fmt: skip
CIDFILE = "--cidfile=%t/%N.cid"  # systemd specifiers: written as they are
_SECTION = re.compile(r"^---(\S+)---$", re.M)


def find_generator(candidates: Sequence[str] = GENERATORS) -> Path | None:
    return next((Path(p) for p in candidates if os.access(p, os.X_OK)), None)


def generator_dryrun(generator: Path, unit_dir: Path, *, user: bool, expect: str) -> str:
    """The ``expect`` unit (``NAME.service``) podman's generator makes from ``unit_dir``."""
    env = {**os.environ, "QUADLET_UNIT_DIRS": str(unit_dir)}
    argv = [str(generator), "-dryrun", *(["-user"] if user else [])]
    try:
        out = cmd.call(argv, env=env, quiet=True, timeout=cmd.QUERY_TIMEOUT)
    except EngineError as exc:
        raise DeployError(f"podman's quadlet generator rejected the unit: {exc}") from None
    parts = _SECTION.split(out)
    units = {parts[i]: parts[i + 1].strip() + "\n" for i in range(1, len(parts) - 1, 2)}
    if expect not in units:
        # quadlet before 5.0 logs a rejected unit and still exits 0
        raise DeployError(f"podman's quadlet generator made no {expect} from {unit_dir}:\n{out}")
    return units[expect]


def lookup(value: str) -> str:
    """A value as quadlet's ``Lookup`` reads it: trailing whitespace and every double quote
    at either end dropped (strings.Trim), nothing unescaped."""
    return value.rstrip().strip('"')


def podman_run_args(container: Sequence[Entry]) -> list[str]:
    """The ``podman run`` arguments quadlet would make from these [Container] entries, after
    its fixed ``podman run --cidfile=%t/%N.cid --replace --rm --cgroups=split -d``, with
    ``%%`` and ``$$`` still in them for systemd (as in the ExecStart quadlet writes)."""
    args: list[str] = []
    notify = "conmon"
    image, exec_args, extra = "", [], []
    for key, value in container:
        if key == "Image":
            image = lookup(value)
        elif key == "Exec":
            exec_args = split_words(value)
        elif key == "Environment":
            args += [w for kv in split_words(value) for w in ("--env", kv)]
        elif key == "PodmanArgs":
            extra += split_words(value)
        elif key == "Notify":
            notify = "healthy" if value == "healthy" else "container"
        elif key in FLAGS:
            args += [FLAGS[key], lookup(value)]
        else:
            raise DeployError(f"no podman run flag known for [Container] {key}= here")
    return [*args, f"--sdnotify={notify}", *extra, image, *exec_args]


def plain_service(unit: Unit, podman: str = "/usr/bin/podman") -> Unit:
    """A ``.service`` equivalent to the quadlet, for ``systemd-analyze verify`` without it."""
    run = f"{podman} run {CIDFILE} --replace --rm --cgroups=split -d " + " ".join(
        quote_word(w) for w in podman_run_args(unit.section("Container"))
    )
    stop = f"{podman} rm -v -f -i {CIDFILE}"
    service: list[Entry] = [
        ("Environment", "PODMAN_SYSTEMD_UNIT=%n"), ("KillMode", "mixed"),
        ("ExecStop", stop), ("ExecStopPost", "-" + stop),
        ("Delegate", "yes"), ("Type", "notify"), ("NotifyAccess", "all"),
        ("SyslogIdentifier", "%N"), *unit.section("Service"),
        ("ExecStart", run),
    ]  # fmt: skip
    return Unit(
        header=(*unit.header, "Verification stand-in for the quadlet: the podman run it makes."),
        sections=sections(
            ("Unit", unit.section("Unit")),
            ("Service", service),
            ("Install", unit.section("Install")),
        ),
    )


def systemd_verify(service_text: str, name: str, *, user: bool) -> str:
    """Run ``systemd-analyze verify`` on ``name``.service; DeployError with its complaints."""
    if shutil.which("systemd-analyze") is None:
        raise DeployError("systemd-analyze is not installed (apt-get install systemd); "
                          "pass --no-verify to skip the check")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="lockpipe-verify-") as tmp:
        path = Path(tmp) / f"{name}.service"
        path.write_text(service_text, encoding="utf-8")
        argv = ["systemd-analyze", *(["--user"] if user else []), "verify", str(path)]
        try:
            out = cmd.call(argv, quiet=True, timeout=cmd.QUERY_TIMEOUT)
        except EngineError as exc:
            raise DeployError(f"systemd-analyze verify rejected {name}.service: {exc}") from None
    # It exits 0 on a line it cannot parse ("PATH:LINE: Failed to parse …, ignoring"): the
    # unit systemd would run lacks it, so each such complaint is a rejection too.
    # A notice it still honours (a deprecated key) names the file too, without "ignoring".
    ignored = [ln for ln in out.splitlines() if ln.startswith(f"{path}:") and "ignoring" in ln]
    if ignored:
        raise DeployError(f"systemd-analyze verify rejected {name}.service: "
                          + "; ".join(ignored) + "; correct the option that gave that key "
                          "(or pass --no-verify to install it as it is)")  # fmt: skip
    return out
