"""Where a reference really lives, and where a pull reads it: hosts, scheme, mirrors.

Pure apart from reading ``registries.conf`` (containers-registries.conf(5), the
files podman, buildah and skopeo read), so lockpipe asks the same hosts over
the same scheme as the engines that later pull the pinned digest. Checked
against podman 4.3 and skopeo 1.9 (containers/image ``sysregistriesv2``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import RegistryError
from lockpipe.fs import read_utf8
from lockpipe.lock.refs import ImageRef, ReferenceError, parse_ref

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pip (a dependency) vendors the same parser
    from pip._vendor import tomli as tomllib

HUB = "docker.io"
HUB_API = "registry-1.docker.io"
LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "::1")
SYSTEM_DIR = Path("/etc/containers")
PULL_FROM = ("all", "digest-only", "tag-only")


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """Where a reference itself lives, as a push writes it (registries.conf: insecure only)."""

    registry: str  # as written: docker.io, ghcr.io, nvcr.io, quay.io, host:port
    host: str  # API host: registry-1.docker.io for docker.io
    repository: str  # library/ubuntu for one-part docker.io names
    scheme: str  # "http" for loopback or registries.conf insecure=true, else "https"


@dataclass(frozen=True, kw_only=True)
class Source:
    """One place a pull reads a reference from: a mirror, or the table's (rewritten) location."""

    registry: str  # host[:port] as written, the key credentials are looked up by
    host: str
    repository: str
    scheme: str
    mirror: bool

    @property
    def location(self) -> str:
        return f"{self.registry}/{self.repository}"


@dataclass(frozen=True, kw_only=True)
class Mirror:
    location: str
    insecure: bool = False
    pull_from: str = "all"  # "digest-only": never asked for a tag; "tag-only": never for a digest


@dataclass(frozen=True, kw_only=True)
class RegistryConf:
    """One ``[[registry]]`` table: the names it matches (prefix) and where they are read."""

    prefix: str  # matched against registry/repository; defaults to location
    location: str  # replaces the matched prefix when pulling ("" only for a *.domain prefix)
    insecure: bool = False
    blocked: bool = False
    mirror_by_digest_only: bool = False
    mirrors: tuple[Mirror, ...] = ()
    source: str = ""  # the file it came from, for messages


def is_loopback(host: str) -> bool:
    """``127.0.0.1:5000``, ``localhost``, ``[::1]:5000``: hosts engines speak plain HTTP to."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]" in LOOPBACK
    return host.rsplit(":", 1)[0] in LOOPBACK or host in LOOPBACK


def _location(value: Any, where: str, key: str) -> str:
    text = str(value or "").rstrip("/")
    if text.startswith(("http://", "https://")):
        raise RegistryError(f"{where}: {key} {text!r} has a URL scheme; write host[:port][/path], "
                            "as podman refuses it too")  # fmt: skip
    return text


def parse_registries_conf(text: str, where: str) -> list[RegistryConf]:
    """The ``[[registry]]`` tables of one file (v2 format); of two with one prefix, the first."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(
            f"{where}: not valid TOML ({exc}); fix it, as podman and skopeo refuse it too"
        ) from None
    out: dict[str, RegistryConf] = {}
    for table in doc.get("registry", []):
        if isinstance(table, dict):
            conf = _table(table, where)
            out.setdefault(conf.prefix, conf)
    return list(out.values())


def _table(table: Mapping[str, Any], where: str) -> RegistryConf:
    location = _location(table.get("location"), where, "location")
    prefix = _location(table.get("prefix"), where, "prefix") or location
    if not prefix:
        raise RegistryError(f"{where}: a [[registry]] table has neither prefix nor location; "
                            "give it one, as podman refuses it too")  # fmt: skip
    if not location and not prefix.startswith("*."):
        raise RegistryError(f"{where}: [[registry]] {prefix!r} has no location; add one (only a "
                            "*.domain prefix may omit it)")  # fmt: skip
    if table.get("pull-from-mirror"):
        raise RegistryError(f"{where}: [[registry]] {prefix!r}: pull-from-mirror belongs in its "
                            "[[registry.mirror]] tables; move it there")  # fmt: skip
    by_digest = bool(table.get("mirror-by-digest-only", False))
    mirrors = []
    for item in table.get("mirror", []):
        if not isinstance(item, dict):
            continue
        loc = _location(item.get("location"), where, "mirror location")
        if not loc:
            raise RegistryError(f"{where}: a mirror of {prefix!r} has no location; add one")
        pull_from = str(item.get("pull-from-mirror") or "all")
        if pull_from not in PULL_FROM:
            raise RegistryError(f"{where}: mirror {loc!r}: pull-from-mirror {pull_from!r} is not "
                                f"one of {', '.join(PULL_FROM)}")  # fmt: skip
        if by_digest and item.get("pull-from-mirror"):
            raise RegistryError(f"{where}: {prefix!r} sets mirror-by-digest-only and mirror "
                                f"{loc!r} sets pull-from-mirror; keep one, as podman refuses "
                                "both")  # fmt: skip
        mirrors.append(Mirror(location=loc, insecure=bool(item.get("insecure", False)),
                              pull_from=pull_from))  # fmt: skip
    return RegistryConf(prefix=prefix, location=location,
                        insecure=bool(table.get("insecure", False)),
                        blocked=bool(table.get("blocked", False)), mirror_by_digest_only=by_digest,
                        mirrors=tuple(mirrors), source=where)  # fmt: skip


def conf_files(env: Mapping[str, str], system: Path = SYSTEM_DIR) -> list[Path]:
    """The files that apply, in the order containers/image reads them (a later one wins).

    The main file is ``$CONTAINERS_REGISTRIES_CONF``, else the user's
    ``$HOME/.config/containers/registries.conf`` if it exists, else the
    system's. Drop-ins follow: only the user's ``registries.conf.d`` beside a
    user file; otherwise the system's, then the user's. containers/image
    takes ``$HOME`` here, not ``$XDG_CONFIG_HOME`` (skopeo 1.9 ignores it).
    """
    home = Path(env.get("HOME") or os.path.expanduser("~")) / ".config" / "containers"
    user_file, user_dir = home / "registries.conf", home / "registries.conf.d"
    dirs = [system / "registries.conf.d", user_dir]
    if env.get("CONTAINERS_REGISTRIES_CONF"):
        main = Path(env["CONTAINERS_REGISTRIES_CONF"])
    elif user_file.is_file():
        main, dirs = user_file, [user_dir]
    else:
        main = system / "registries.conf"
    files = [main]
    for folder in dirs:
        if folder.is_dir():
            files += sorted(p for p in folder.glob("*.conf") if p.is_file())
    return files


def load_confs(files: Sequence[Path]) -> list[RegistryConf]:
    """Every ``[[registry]]`` table of ``files``; a later file's table for a prefix wins."""
    tables: dict[str, RegistryConf] = {}
    for path in files:
        try:
            text = read_utf8(path, RegistryError)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RegistryError(
                f"{path}: cannot be read ({exc.strerror}); fix its permissions"
            ) from None
        for conf in parse_registries_conf(text, str(path)):
            tables[conf.prefix] = conf
    return list(tables.values())


def host_confs() -> tuple[RegistryConf, ...]:
    """This host's tables, parsed once per set of file versions (resolve_many asks per ref)."""
    override = os.environ.get("CONTAINERS_REGISTRIES_CONF")
    if override and not Path(override).is_file():
        raise RegistryError(f"CONTAINERS_REGISTRIES_CONF={override}: no such file; point it at a "
                            "registries.conf, or unset it")  # fmt: skip
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


def _matched(name: str, prefix: str) -> int:
    """How much of ``name`` (registry/repository) ``prefix`` matches; -1 when it does not."""
    if prefix.startswith("*."):  # any subdomain: the host only
        hostname = name.split("/", 1)[0].split(":", 1)[0]
        return len(hostname) if hostname.endswith(prefix[1:]) else -1
    if name == prefix or name.startswith(prefix + "/"):
        return len(prefix)
    return -1


def find(confs: Sequence[RegistryConf], name: str) -> tuple[RegistryConf, int] | None:
    """The table with the longest matching prefix, and how much of ``name`` it matched."""
    best: tuple[RegistryConf, int] | None = None
    for conf in confs:
        end = _matched(name, conf.prefix)
        if end >= 0 and (best is None or len(conf.prefix) > len(best[0].prefix)):
            best = (conf, end)
    return best


def _parse(ref: str) -> ImageRef:
    try:
        return parse_ref(ref)
    except ReferenceError as exc:
        raise RegistryError(f"{exc}; write it as registry/repository:tag") from None


def _api_host(registry: str) -> str:
    return HUB_API if registry in (HUB, "index.docker.io", HUB_API) else registry


def endpoint(ref: str, *, confs: Sequence[RegistryConf] | None = None) -> Endpoint:
    """Where ``ref`` itself lives; ``confs`` (default: this host's) only says if it is insecure."""
    image = _parse(ref)
    hit = find(host_confs() if confs is None else confs, image.name)
    insecure = hit is not None and hit[0].insecure
    plain = insecure or is_loopback(image.registry)
    return Endpoint(registry=image.registry, host=_api_host(image.registry),
                    repository=image.repository, scheme="http" if plain else "https")  # fmt: skip


def pull_sources(ref: str, *, confs: Sequence[RegistryConf] | None = None) -> tuple[Source, ...]:
    """Where a pull of ``ref`` reads, in order: the mirrors that apply, then the location.

    As containers/image: the longest matching ``prefix`` picks the table; its
    ``location`` replaces that prefix; ``mirror-by-digest-only`` or a mirror's
    ``pull-from-mirror = "digest-only"`` keeps that mirror out of a tag's
    resolution (a stale mirror tag must not become the pin), ``"tag-only"``
    out of a digest's; ``blocked = true`` is an error naming the file.
    """
    image = _parse(ref)
    hit = find(host_confs() if confs is None else confs, image.name)
    if hit is None:
        return (_source(ref, image.name, insecure=False, mirror=False),)
    conf, end = hit
    if conf.blocked:
        raise RegistryError(
            f"{ref}: {conf.prefix} is blocked in {conf.source} (blocked = true); "
            "pin the base from another registry, or lift the block there"
        )
    rest = image.name[end:]
    by_digest = image.digest is not None
    skip = "tag-only" if by_digest else "digest-only"
    mirrors = [m for m in conf.mirrors if m.pull_from != skip]
    if conf.mirror_by_digest_only and not by_digest:
        mirrors = []
    out = [_source(ref, m.location + rest, insecure=m.insecure, mirror=True) for m in mirrors]
    primary = conf.location + rest if conf.location else image.name
    out.append(_source(ref, primary, insecure=conf.insecure, mirror=False))
    return tuple(out)


def _source(ref: str, name: str, *, insecure: bool, mirror: bool) -> Source:
    registry, _, repository = name.partition("/")
    if not repository:
        raise RegistryError(f"{ref}: registries.conf rewrites it to {name!r}, which names no "
                            "repository; end that location with a path")  # fmt: skip
    if registry in ("index.docker.io", HUB_API):
        registry = HUB
    return Source(registry=registry, host=_api_host(registry), repository=repository,
                  scheme="http" if insecure or is_loopback(registry) else "https",
                  mirror=mirror)  # fmt: skip
