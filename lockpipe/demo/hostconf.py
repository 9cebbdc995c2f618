"""Podman's defaults on a host that refuses them: found by running a container, then met.

Two defaults of podman fail on some machines, and a new user meets them first in the
demo's smoke test (the container does not start):

- its rlimits: root without CAP_SYS_RESOURCE cannot raise ``RLIMIT_NOFILE`` to podman's
  default (runc: ``error setting rlimit type 7: operation not permitted``);
- its runtime: crun refuses hybrid cgroups (``cgroups in hybrid mode not supported``),
  where runc, when installed, runs.

:func:`adapt` runs the demo's runtime base once (``podman run --rm IMAGE true``). When
that fails for one of these reasons, it writes a ``containers.conf`` of the demo's own
(beside the run-local lock) that sets what the host needs, points ``CONTAINERS_CONF`` at
it for the demo's stages, and says so with the lines to put in
``/etc/containers/containers.conf`` to make it permanent. Nothing outside the demo's
work folder is changed. Any other failure is left to the smoke test to report.

:func:`loopback_registry` does the same for the demo's registry: it speaks plain HTTP on
127.0.0.1, which buildah's ``FROM`` refuses unless registries.conf marks it insecure
(`.ci/start-services` does so on CI machines; a new user's machine has no such entry).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from lockpipe import cmd
from lockpipe.errors import EngineError, SmokeError
from lockpipe.fs import write_atomic
from lockpipe.log import echo

RLIMIT = "error setting rlimit"
HYBRID = "cgroups in hybrid mode not supported"
ULIMITS = '["nofile=1024:1024", "nproc=1024:1024"]'


def settings_for(error: str, runc: bool) -> dict[str, dict[str, str]]:
    """containers.conf settings that meet the failure ``error`` names; {} when none does."""
    out: dict[str, dict[str, str]] = {}
    if RLIMIT in error:
        out.setdefault("containers", {})["default_ulimits"] = ULIMITS
    if HYBRID in error and runc:
        out.setdefault("engine", {})["runtime"] = '"runc"'
    return out


def render(settings: dict[str, dict[str, str]]) -> str:
    lines = ["# written by lockpipe demo (lockpipe/demo/hostconf.py) for this host's podman"]
    for table, keys in settings.items():
        lines += ["", f"[{table}]", *(f"{k} = {v}" for k, v in keys.items())]
    return "\n".join(lines) + "\n"


def _probe(image: str) -> str | None:
    """None when podman runs ``image``; else what it said."""
    try:
        cmd.call(["podman", "run", "--rm", "--pull=missing", "--tls-verify=false", image,
                  "true"], quiet=True)  # fmt: skip
    except EngineError as exc:
        return str(exc)
    return None


def adapt(image: str, work: Path) -> None:
    """Make podman run containers for the demo's stages where its defaults fail here."""
    error = _probe(image)
    if error is None:
        return
    settings = settings_for(error, runc=shutil.which("runc") is not None)
    if not settings:
        echo(f"demo: podman could not run {image} here; the smoke test will say why:\n{error}")
        return
    conf = work / "containers.conf"
    write_atomic(conf, render(settings))
    os.environ["CONTAINERS_CONF"] = str(conf)
    why = "; ".join(
        w for w, hit in (("root may not raise RLIMIT_NOFILE to podman's default", RLIMIT),
                         ("crun refuses this host's hybrid cgroups", HYBRID)) if hit in error
    )  # fmt: skip
    echo(f"demo: podman's defaults fail on this host ({why}); the demo's containers run with "
         f"CONTAINERS_CONF={conf}. To make it permanent, put its settings in "
         f"/etc/containers/containers.conf:\n{render(settings)}", style="yellow")  # fmt: skip
    again = _probe(image)
    if again is not None:
        raise SmokeError(f"podman still cannot run {image} with {conf}: {again}")


def loopback_registry(registry: str, work: Path) -> None:
    """Let the demo's stages pull from its plain-HTTP loopback ``registry``: a registries.conf
    of the demo's own (``CONTAINERS_REGISTRIES_CONF``) that marks only it insecure. The demo's
    lock names every image fully and its other inputs come through its HTTP mirror, so the
    host's own registries.conf has nothing the demo needs."""
    conf = work / "registries.conf"
    write_atomic(conf, "# written by lockpipe demo: its loopback registry speaks plain HTTP\n"
                       f'[[registry]]\nlocation = "{registry}"\ninsecure = true\n')  # fmt: skip
    os.environ["CONTAINERS_REGISTRIES_CONF"] = str(conf)
    echo(f"demo: {registry} is pulled from over plain HTTP (CONTAINERS_REGISTRIES_CONF={conf})")
