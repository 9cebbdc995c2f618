"""Which ``[Container]`` keys each podman's quadlet accepts, and a check of a unit against them.

The table is derived from podman's own source, ``pkg/systemd/quadlet/quadlet.go`` at each
release tag (``supportedContainerKeys``, from 5.6 ``groupsInfo[ContainerGroup].SupportedKeys``):
the keys each minor release added. Quadlet first shipped in 4.4; ``Entrypoint=`` came in 5.0
(before it: ``PodmanArgs=--entrypoint=…``), the ``Health*`` keys in 4.5, ``Notify=healthy``
in 5.0. A key the host's podman lacks makes its generator drop the whole unit ("unsupported
key … in group Container"), and systemd then says only "Unit … not found" at start: the
fleet's frank-small deploy died that way on ``ContainerEntrypoint=``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from lockpipe.errors import DeployError
from lockpipe.urls import shown

Version = tuple[int, int]

QUADLET_SINCE: Version = (4, 4)


def _keys(*lines: str) -> frozenset[str]:
    return frozenset(" ".join(lines).split())


# podman minor release -> the [Container] keys it added (none were ever removed).
ADDED: Mapping[Version, frozenset[str]] = {
    (4, 4): _keys(
        "AddCapability AddDevice Annotation ContainerName DropCapability Environment",
        "EnvironmentFile EnvironmentHost Exec ExposeHostPort Group Image Label Network",
        "NoNewPrivileges Notify PodmanArgs PublishPort ReadOnly RemapGid RemapUid",
        "RemapUidSize RemapUsers RunInit SeccompProfile Timezone User VolatileTmp",
        "Volume",
    ),
    (4, 5): _keys(
        "HealthCmd HealthInterval HealthOnFailure HealthRetries HealthStartPeriod",
        "HealthStartupCmd HealthStartupInterval HealthStartupRetries",
        "HealthStartupSuccess HealthStartupTimeout HealthTimeout IP IP6 LogDriver Mount",
        "Rootfs Secret SecurityLabelDisable SecurityLabelFileType SecurityLabelLevel",
        "SecurityLabelType Tmpfs UserNS",
    ),
    (4, 6): _keys(
        "AutoUpdate HostName Mask Pull SecurityLabelNested Sysctl Unmask WorkingDir",
    ),
    (4, 7): _keys("DNS DNSOption DNSSearch PidsLimit ShmSize Ulimit"),
    (4, 8): _keys(
        "ContainersConfModule GIDMap GlobalArgs ReadOnlyTmpfs SubGIDMap SubUIDMap",
        "UIDMap",
    ),
    (5, 0): _keys("Entrypoint Pod StopTimeout"),
    (5, 1): _keys("GroupAdd"),
    (5, 2): _keys("LogOpt NetworkAlias StopSignal"),
    (5, 3): _keys(
        "AddHost CgroupsMode HealthLogDestination HealthMaxLogCount HealthMaxLogSize",
        "ServiceName StartWithPod",
    ),
    (5, 5): _keys("Memory ReloadCmd ReloadSignal Retry RetryDelay"),
    (5, 7): _keys("HttpProxy"),
    (5, 8): _keys("AppArmor"),
}  # fmt: skip
NEWEST_KNOWN: Version = max(ADDED)
# Keys that were never quadlet's, and the one meant: the fleet's seeds tried these.
MISSPELLED = {
    "ContainerEntrypoint": "Entrypoint",
    "Entry": "Entrypoint",
    "EntryPoint": "Entrypoint",
    "Command": "Exec",
    "Cmd": "Exec",
    "Port": "PublishPort",
    "Publish": "PublishPort",
    "Device": "AddDevice",
    "Env": "Environment",
    "Name": "ContainerName",
    "Healthcheck": "HealthCmd",
}
# (key, value) pairs that need a newer podman than the key itself.
VALUE_SINCE: Mapping[tuple[str, str], Version] = {("Notify", "healthy"): (5, 0)}
# whole numbers of at most 6 digits: int() refuses more than 4,300, and no podman has more
_VERSION = re.compile(r"(?<!\d)(\d{1,6})\.(\d{1,6})(?!\d)", re.ASCII)


def parse_version(text: str) -> Version:
    """``(major, minor)`` from ``podman --version`` output or a bare ``5.4`` / ``5.4.2``."""
    m = _VERSION.search(text)
    if m is None:
        raise DeployError(
            f"cannot read a podman version from {shown(text.strip(), 60)}; "
            "pass --podman-version X.Y"
        )
    return int(m.group(1)), int(m.group(2))


def show(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def since(key: str) -> Version | None:
    """The first podman minor release whose quadlet accepts ``key``; None if none does."""
    return next((v for v, keys in sorted(ADDED.items()) if key in keys), None)


def supported_keys(version: Version) -> frozenset[str]:
    """Every [Container] key the quadlet of podman ``version`` accepts."""
    if version < QUADLET_SINCE:
        return frozenset()
    return frozenset().union(*(keys for v, keys in ADDED.items() if v <= version))


def has_quadlet(version: Version) -> bool:
    return version >= QUADLET_SINCE


def problems(entries: Iterable[tuple[str, str]], version: Version) -> list[str]:
    """What podman ``version``'s quadlet would reject in these [Container] (key, value) lines."""
    out: list[str] = []
    for key, value in entries:
        first = since(key)
        if first is None:
            meant = MISSPELLED.get(key) or next(
                (k for keys in ADDED.values() for k in keys if k.lower() == key.lower()), None
            )
            hint = f"; the key is {meant}=" if meant else " (see man 5 podman-systemd.unit)"
            out.append(f"[Container] {key}=: unsupported key in any podman quadlet{hint}")
        elif first > version:
            out.append(
                f"[Container] {key}=: unsupported key for podman {show(version)} "
                f"(quadlet added it in {show(first)})"
                + ("; use PodmanArgs=--entrypoint=PROGRAM" if key == "Entrypoint" else "")
            )
        elif (need := VALUE_SINCE.get((key, value.strip().lower()))) and need > version:
            out.append(f"[Container] {key}={value}: needs podman {show(need)}, the host has "
                       f"{show(version)}")  # fmt: skip
    return out


def check(entries: Iterable[tuple[str, str]], version: Version, where: str) -> None:
    """DeployError listing every key podman ``version``'s quadlet would reject."""
    if not has_quadlet(version):
        raise DeployError(
            f"podman {show(version)} has no quadlet (it came in {show(QUADLET_SINCE)}): "
            "install podman >= 4.4 (Debian 13 ships 5.4), or render for another host with "
            "--podman-version X.Y"
        )
    found = problems(entries, version)
    if found:
        raise DeployError(f"{where}: the quadlet would be rejected:\n  " + "\n  ".join(found))
