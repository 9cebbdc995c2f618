"""``lockpipe doctor``: what works on this host and what does not, each with its fix.

Read-only: it runs ``--version`` commands, ``nvidia-smi``, opens TCP connections (3 s
each) and reads the file system; it builds, pulls and writes nothing. Every finding is
``ok``, ``warn`` (a verb that needs it will not work; others will) or ``fail`` (nothing
builds: no engine). The exit code is 0 whatever it finds (it is a report; a bad option
is still 64), so that ``doctor`` can run first on any machine and say what to fix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from rich.table import Table
from rich.text import Text

from lockpipe import cmd
from lockpipe.cli import jsonout
from lockpipe.engines import ENGINES
from lockpipe.errors import LockpipeError
from lockpipe.lock.model import Lock, load_lock
from lockpipe.lock.refs import parse_ref
from lockpipe.log import show
from lockpipe.payloads.store import default_store
from lockpipe.urls import redact

Status = Literal["ok", "warn", "fail"]
CONNECT_SECONDS = 3.0
DOCKER_HUB = ("docker.io", "registry-1.docker.io")  # where docker.io's API answers
INSTALL = {"buildah": "apt-get install buildah", "podman": "apt-get install podman",
           "docker": "apt-get install docker.io"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Finding:
    area: str  # engines, services, network, gpu, quadlet, store
    name: str
    status: Status
    detail: str
    fix: str = ""


def _version(argv: list[str]) -> str | None:
    """The first line a ``--version`` command prints, or None when it cannot run."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = cmd.call(argv, quiet=True, stdout_only=True, timeout=cmd.QUERY_TIMEOUT)
    except LockpipeError:
        return None
    return out.strip().splitlines()[0] if out.strip() else "?"


def engines() -> Iterator[Finding]:
    """Each engine's CLI and version, then whether lockpipe can use it (its service)."""
    usable = 0
    for name, factory in ENGINES.items():
        version = _version([name, "--version"])
        if version is None:
            yield Finding(area="engines", name=name, status="warn", detail="not installed",
                          fix=INSTALL[name])  # fmt: skip
            continue
        try:
            engine = factory()
            usable += 1
            reaches = f"{version}; lockpipe reaches it ({engine.version()})"
            yield Finding(area="services", name=name, status="ok", detail=reaches)
        except LockpipeError as exc:
            yield Finding(area="services", name=name, status="warn", detail=version,
                          fix=str(exc).splitlines()[0])  # fmt: skip
    if not usable:
        yield Finding(area="engines", name="any", status="fail",
                      detail="no engine lockpipe can use: nothing builds",
                      fix="apt-get install buildah (needs no service)")  # fmt: skip


def _host_port(url_or_host: str, default: int) -> tuple[str, int]:
    parts = urlsplit(url_or_host if "//" in url_or_host else f"//{url_or_host}")
    port = parts.port or (80 if parts.scheme == "http" else default)
    if not parts.hostname:  # 'https://user:token@': no host to ask (never the URL itself)
        raise ValueError("no host")
    return parts.hostname, port


def reachable(host: str, port: int, timeout: float = CONNECT_SECONDS) -> str | None:
    """None when a TCP connection to ``host:port`` opens in ``timeout``; else why not."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def network(lock: Lock | None, hub: str, mirror: str | None) -> Iterator[Finding]:
    """The lock's registries, the Hugging Face Hub and the mirror: can each be reached?"""
    registries = set()
    for base in lock.bases.values() if lock else ():
        registry = parse_ref(base.ref).registry
        registries.add(DOCKER_HUB[1] if registry == DOCKER_HUB[0] else registry)
    places = [(f"registry {r}", r, 443) for r in sorted(registries)]
    places.append(("the Hub", hub, 443))
    if mirror:
        places.append(("the mirror", mirror, 443))
    for what, where, default in places:
        try:
            host, port = _host_port(where, default)
        except ValueError:  # no host, a port that is no number, "Invalid IPv6 URL"
            # urllib's words may quote the URL (its password: "as 's3cr'"): never shown
            option = "--mirror (LOCKPIPE_MIRROR)" if what == "the mirror" else "HF_ENDPOINT"
            yield Finding(area="network", name=what, status="warn",
                          detail=f"{redact(where)} is not a URL (no host, or a port or "
                          "IPv6 address that cannot be read)",
                          fix=f"fix {option}: scheme://host[:port]/…")  # fmt: skip
            continue
        why = reachable(host, port)
        fix = ("pass --mirror URL (LOCKPIPE_MIRROR) or a registries.conf mirror; "
               "`nox -s demo` needs only Debian's archive and PyPI") if why else ""  # fmt: skip
        # host:port is read from the URL as given; where it held a password, the redacted URL
        shown = f"{host}:{port}" if redact(where) == where else redact(where)
        yield Finding(area="network", name=what, status="warn" if why else "ok",
                      detail=f"{shown} " + (f"cannot be reached ({why})" if why
                                                  else "answers"), fix=fix)  # fmt: skip


def gpu() -> Iterator[Finding]:
    """nvidia-smi's card and driver, and the CDI spec --gpu-mode cdi needs."""
    from lockpipe.deploy.cdi import NVIDIA_KIND, find_specs
    from lockpipe.preflight.host import query_host

    try:
        card = query_host()
        found = f"{card.name}, {card.memory_mib:,} MiB, compute {card.cc}, driver {card.driver}"
        yield Finding(area="gpu", name="card", status="ok", detail=found)
    except LockpipeError as exc:
        yield Finding(area="gpu", name="card", status="warn", detail=str(exc).splitlines()[0],
                      fix="GPU targets need an NVIDIA driver (nvidia-smi); CPU targets "
                      "(llama-cpu, the demo) run without one")  # fmt: skip
    specs = find_specs(NVIDIA_KIND)
    yield Finding(area="gpu", name="CDI spec", status="ok" if specs else "warn",
                  detail=", ".join(map(str, specs)) or f"none for {NVIDIA_KIND} in /etc/cdi "
                  "or /var/run/cdi",
                  fix="" if specs else "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, "
                  "or use --gpu-mode manual")  # fmt: skip


def quadlet() -> Iterator[Finding]:
    """podman's quadlet generator (deploy's dry run) and the podman it comes with."""
    from lockpipe.deploy.verify import find_generator

    generator = find_generator()
    version = _version(["podman", "--version"])
    if generator is None:
        yield Finding(area="quadlet", name="generator", status="warn",
                      detail=f"not installed ({version or 'no podman'})",
                      fix="podman 4.4 or later ships it (Debian 13: apt-get install podman); "
                      "without it deploy checks keys against lockpipe's table only")  # fmt: skip
    else:
        yield Finding(area="quadlet", name="generator", status="ok",
                      detail=f"{generator} ({version})")  # fmt: skip


def store(path: Path, lock: Lock | None) -> Iterator[Finding]:
    """Free space where the payload store is (or would be), against the lock's payloads;
    first, that it is (or can be made) a folder payloads can be written into."""
    there = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    unusable = _unwritable(path, there)
    if unusable:
        yield Finding(area="store", name=str(path), status="warn", detail=unusable,
                      fix="pass --store DIR (LOCKPIPE_STORE): a folder you can write, or "
                      "one to be made under one")  # fmt: skip
        return
    free = shutil.disk_usage(there).free
    need = sum(f.size or 0 for p in (lock.payloads.values() if lock else ()) for f in p.files)
    low = need > free
    yield Finding(area="store", name=str(path), status="warn" if low else "ok",
                  detail=f"{free / 2**30:,.1f} GiB free on {there}; the lock's payloads take "
                  f"{need / 2**30:,.1f} GiB",
                  fix="pass --store DIR (LOCKPIPE_STORE) on a larger file system" if low
                  else "")  # fmt: skip


def _unwritable(path: Path, there: Path) -> str:
    """Why payloads cannot be written at ``path`` (``there``: it, or its nearest existing
    folder above), or "" when they can."""
    if not there.is_dir():
        made = "" if there == path else f", so {path} cannot be made"
        return f"{there} is a file, not a folder{made}"
    if not os.access(there, os.W_OK | os.X_OK):
        made = "" if there == path else f", so {path} cannot be made in it"
        return f"{there} is not writable by this user{made}"
    return ""


def table(findings: list[Finding]) -> Table:
    t = Table(title="lockpipe doctor", title_justify="left")
    for column in ("area", "check", "status", "found", "fix"):
        t.add_column(column, overflow="fold")
    style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
    for f in findings:
        # as Text: a path or an engine's answer holding "[/x]" is no rich markup
        t.add_row(Text(f.area), Text(f.name), Text(f.status, style=style[f.status]),
                  Text(f.detail), Text(f.fix))  # fmt: skip
    return t


def do_doctor(args: argparse.Namespace) -> int:
    jsonout.begin(args.json)
    try:
        lock: Lock | None = load_lock(args.lock)
        found = [Finding(area="lock", name=str(args.lock), status="ok", detail="valid")]
    except LockpipeError as exc:
        lock = None
        found = [Finding(area="lock", name=str(args.lock), status="warn",
                         detail=str(exc).splitlines()[0], fix="pass --lock PATH")]  # fmt: skip
    hub = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    checks: list[Callable[[], Iterator[Finding]]] = [
        engines, lambda: network(lock, hub, args.mirror), gpu, quadlet,
        lambda: store((args.store or default_store(dict(os.environ))).expanduser(), lock),
    ]  # fmt: skip
    for check in checks:
        found += list(check())
    show(table(found))
    jsonout.emit(args.json, "doctor", {"findings": [asdict(f) for f in found]})
    return 0
