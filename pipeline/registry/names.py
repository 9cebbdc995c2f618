"""Where a reference really lives: API host, repository, scheme and mirrors.

Pure apart from reading ``registries.conf`` (the containers-registries.conf(5)
files podman, buildah and skopeo read), so lockpipe asks the same hosts over
the same scheme as the engines that later pull the pinned digest.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import RegistryError
from pipeline.lock.refs import ReferenceError, parse_ref

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pip (a dependency) vendors the same parser
    from pip._vendor import tomli as tomllib

HUB = "docker.io"
HUB_API = "registry-1.docker.io"
LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "::1")
SYSTEM_CONF = Path("/etc/containers/registries.conf")


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where a reference really lives."""

    registry: str  # as written: docker.io, ghcr.io, nvcr.io, quay.io, host:port
    host: str  # API host: registry-1.docker.io for docker.io
    repository: str  # library/ubuntu for one-part docker.io names
    scheme: str  # "http" for loopback or registries.conf insecure=true, else "https"
    mirrors: tuple[str, ...]  # host[/prefix] locations tried first, then the host


@dataclass(frozen=True, kw_only=True)
class RegistryConf:
    """One ``[[registry]]`` table: its location, whether it is plain HTTP, its mirrors."""

    location: str
    insecure: bool
    mirrors: tuple[str, ...]
    insecure_mirrors: tuple[str, ...] = ()


def is_loopback(host: str) -> bool:
    """``127.0.0.1:5000``, ``localhost``, ``[::1]:5000``: hosts engines speak plain HTTP to."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]" in LOOPBACK
    return host.rsplit(":", 1)[0] in LOOPBACK or host in LOOPBACK


def parse_registries_conf(text: str, where: str) -> list[RegistryConf]:
    """The ``[[registry]]`` tables of one registries.conf file (v2 format)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(
            f"{where}: not valid TOML ({exc}); fix it, as podman and skopeo refuse it too"
        ) from None
    out = []
    for table in doc.get("registry", []):
        if not isinstance(table, dict):
            continue
        location = str(table.get("location") or table.get("prefix") or "")
        if not location:
            continue
        mirrors = [m for m in table.get("mirror", []) if isinstance(m, dict) and m.get("location")]
        out.append(
            RegistryConf(
                location=location,
                insecure=bool(table.get("insecure", False)),
                mirrors=tuple(str(m["location"]) for m in mirrors),
                insecure_mirrors=tuple(str(m["location"]) for m in mirrors if m.get("insecure")),
            )
        )
    return out


def conf_files(env: Mapping[str, str]) -> list[Path]:
    """The files that apply, in the order containers/image reads them."""
    if env.get("CONTAINERS_REGISTRIES_CONF"):
        return [Path(env["CONTAINERS_REGISTRIES_CONF"])]
    dropins = SYSTEM_CONF.parent / "registries.conf.d"
    files = [SYSTEM_CONF] if SYSTEM_CONF.is_file() else []
    if dropins.is_dir():
        files += sorted(dropins.glob("*.conf"))
    return files


def load_confs(files: Sequence[Path]) -> list[RegistryConf]:
    """Every ``[[registry]]`` table of ``files``; a later table for a location wins."""
    tables: dict[str, RegistryConf] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RegistryError(
                f"{path}: cannot be read ({exc.strerror}); fix its permissions"
            ) from None
        for conf in parse_registries_conf(text, str(path)):
            tables[conf.location] = conf
    return list(tables.values())


def host_confs() -> tuple[RegistryConf, ...]:
    """This host's tables, parsed once per set of file versions (resolve_many asks per ref)."""
    stamps = []
    for path in conf_files(os.environ):
        try:
            stamps.append((path, path.stat().st_mtime_ns))
        except OSError:
            continue
    return _parsed(tuple(stamps))


@functools.lru_cache(maxsize=8)
def _parsed(stamps: tuple[tuple[Path, int], ...]) -> tuple[RegistryConf, ...]:
    return tuple(load_confs([path for path, _ in stamps]))


def _match(confs: Sequence[RegistryConf], name: str) -> RegistryConf | None:
    """The table whose location is the longest prefix of ``registry/repository``."""
    best: RegistryConf | None = None
    for conf in confs:
        loc = conf.location.rstrip("/")
        if (name == loc or name.startswith(loc + "/")) and (
            best is None or len(loc) > len(best.location)
        ):
            best = conf
    return best


def endpoint(ref: str, *, confs: Sequence[RegistryConf] | None = None) -> Endpoint:
    """Where ``ref`` lives; ``confs`` defaults to this host's registries.conf files."""
    try:
        image = parse_ref(ref)
    except ReferenceError as exc:
        raise RegistryError(f"{exc}; write it as registry/repository:tag") from None
    if confs is None:
        confs = host_confs()
    conf = _match(confs, image.name)
    mirrors: tuple[str, ...] = ()
    if conf is not None:
        rest = image.name[len(conf.location.rstrip("/")) :]  # "" or "/sub/path"
        mirrors = tuple(m.rstrip("/") + rest for m in conf.mirrors)
    insecure = conf is not None and conf.insecure
    return Endpoint(
        registry=image.registry,
        host=HUB_API if image.registry == HUB else image.registry,
        repository=image.repository,
        scheme="http" if insecure or is_loopback(image.registry) else "https",
        mirrors=mirrors,
    )


def mirror_insecure(location: str, confs: Sequence[RegistryConf]) -> bool:
    """Whether a mirror location is plain HTTP: loopback, or marked insecure in its table."""
    host = location.split("/", 1)[0]
    if is_loopback(host):
        return True
    return any(location.startswith(m.rstrip("/")) for conf in confs for m in conf.insecure_mirrors)


def split_location(location: str) -> tuple[str, str]:
    """``host[:port]/a/b`` → (``host[:port]``, ``a/b``)."""
    host, _, path = location.partition("/")
    return host, path
